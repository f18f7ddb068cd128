package sqlpolicy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// The size rules: what a query may build before DuckDB's memory limit and
// the timeout can stop it.
//
// DuckDB evaluates expressions on constants while it prepares a statement
// (constant folding, and the arguments of table functions), outside its
// memory_limit and without looking for interrupts:
// SELECT length(repeat('x', 1500000000)) allocated 5.8-19.4 GB and ran on
// after its timeout. While it executes, it looks for interrupts between
// chunks of 2048 rows, and the strings a function returns are not counted
// against memory_limit either: length(repeat(i::VARCHAR, 1000000)) FROM
// range(3000) peaked at 7 GB. No DuckDB setting bounds either, so the
// query's parse tree (json_serialize_sql, which only parses) is checked
// before anything is prepared:
//
//   - Every expression gets an upper bound of its value's size in bytes,
//     data*D + fixed, D being one stored value (unknown): a literal is its
//     length, a column D, repeat(s, n) n times s, concat the sum, and so on.
//     fixed may be at most maxConstBytes and data at most maxDataCopies.
//     Functions that only transform their input are taken to return about
//     its size; the limits catch amplification, not exact sizes.
//   - The functions whose result grows with a number (repeat, lpad, rpad,
//     range and generate_series as values, list_resize, array_resize, bar,
//     bitstring, equi_width_bins, to_base, printf and format widths) need
//     that number as a literal, so that the bound is known.
//   - Functions whose work grows with the product of their arguments'
//     lengths (levenshtein and its kin) take constants of at most
//     maxPairwiseConst bytes.
//   - query('...') is checked as a query of its own; list_reduce may not
//     use its accumulator twice (acc || acc doubles it per element);
//     sleep_ms is refused (it cannot be interrupted).
//
// What remains is documented in docs/SERVE.md: work proportional to the
// stored values themselves (upper(body) over 2048 rows of 1 MB bodies, a
// quadratic function over two long columns) is DuckDB's, and is only
// interrupted between chunks.

const (
	maxConstBytes    = 1 << 20 // a value computed from the query's literals
	maxDataCopies    = 64      // copies of stored values in one value
	maxPairwiseConst = 4 << 10 // a constant argument of a quadratic function
	maxFormatWidth   = 10000   // a width or precision in printf and format
	maxNestedQueries = 4       // query('SELECT ... query(...)')
)

// sizeBound bounds a value's size: data stored values plus fixed bytes.
// float64: products of large counts saturate instead of wrapping.
type sizeBound struct{ data, fixed float64 }

func (a sizeBound) plus(b sizeBound) sizeBound { return sizeBound{a.data + b.data, a.fixed + b.fixed} }

func (a sizeBound) times(n float64) sizeBound { return sizeBound{a.data * n, a.fixed * n} }

// product bounds a value that can hold b for every byte of a (replace):
// data times data is counted as data, the unknown being one value.
func (a sizeBound) product(b sizeBound) sizeBound {
	return sizeBound{a.data*b.fixed + b.data*a.fixed + a.data*b.data, a.fixed * b.fixed}
}

// ruleError is a query the size rules refuse.
type ruleError struct{ msg string }

func (e *ruleError) Error() string { return e.msg }

func refuseRule(format string, a ...any) error {
	return &ruleError{fmt.Sprintf(format, a...)}
}

// sqlRules checks queries against the size rules. serialize returns
// json_serialize_sql of a query, as JSON text.
type sqlRules struct {
	serialize func(sql string) (string, error)
}

// check checks query. It returns a *ruleError for a query the rules
// refuse, and another error when the query cannot be checked.
func (r *sqlRules) check(query string) error { return r.checkDepth(query, 0) }

func (r *sqlRules) checkDepth(query string, depth int) error {
	if depth > maxNestedQueries {
		return refuseRule("query() is nested more than %d deep", maxNestedQueries)
	}
	text, err := r.serialize(query)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var tree struct {
		Error      bool            `json:"error"`
		Message    string          `json:"error_message"`
		Statements json.RawMessage `json:"statements"`
	}
	if err := dec.Decode(&tree); err != nil {
		return fmt.Errorf("cannot read the parse tree: %w", err)
	}
	if tree.Error {
		// Only SELECT statements serialize: anything else is refused here,
		// before DuckDB prepares it (preparing binds, and binding COPY,
		// EXPORT or CREATE SECRET already reads, writes or registers).
		if strings.Contains(tree.Message, "Only SELECT statements") {
			return &notSelectError{kind: firstKeyword(query)}
		}
		// Not valid SQL: preparing it only parses it again and says why,
		// but it folds constants first. Text that names no function the
		// rules watch cannot build much.
		if name := watchedName(query); name != "" {
			return refuseRule("%s() is allowed only in SELECT statements (%s)", name, tree.Message)
		}
		return nil
	}
	var stmts any
	dec = json.NewDecoder(bytes.NewReader(tree.Statements))
	dec.UseNumber()
	if err := dec.Decode(&stmts); err != nil {
		return fmt.Errorf("cannot read the parse tree: %w", err)
	}
	return r.walk(stmts, depth)
}

// walk checks every expression under node.
func (r *sqlRules) walk(node any, depth int) error {
	switch n := node.(type) {
	case []any:
		for _, c := range n {
			if err := r.walk(c, depth); err != nil {
				return err
			}
		}
	case map[string]any:
		if _, ok := n["class"]; ok {
			_, err := r.expr(n, depth)
			return err
		}
		if n["type"] == "TABLE_FUNCTION" {
			return r.tableFunction(n, depth)
		}
		for _, v := range n {
			if err := r.walk(v, depth); err != nil {
				return err
			}
		}
	}
	return nil
}

// tableFunction checks a table function's arguments; the rows it returns
// are streamed and counted by the row and byte limits, not here.
func (r *sqlRules) tableFunction(n map[string]any, depth int) error {
	fn, _ := n["function"].(map[string]any)
	for k, v := range n {
		if k != "function" {
			if err := r.walk(v, depth); err != nil {
				return err
			}
		}
	}
	if fn == nil {
		return nil
	}
	args := children(fn)
	for _, a := range args {
		if _, err := r.expr(a, depth); err != nil {
			return err
		}
	}
	// Refused by name before prepare: DuckDB binds a table function while
	// preparing, and enable_logging's binding already changes settings.
	name := funcName(fn)
	if deniedFunction(name) {
		return &deniedError{name: name}
	}
	if name == "query" && len(args) > 0 {
		s, ok := stringConstant(args[0])
		if !ok {
			return refuseRule("query() takes a string literal here")
		}
		return r.checkDepth(s, depth+1)
	}
	return nil
}

// expr returns the size bound of an expression and checks it, and
// everything under it.
func (r *sqlRules) expr(e map[string]any, depth int) (sizeBound, error) {
	var b sizeBound
	var err error
	switch e["class"] {
	case "CONSTANT":
		b = constantSize(e)
	case "COLUMN_REF", "PARAMETER", "POSITIONAL_REFERENCE", "LAMBDA_REF", "DEFAULT":
		b = sizeBound{data: 1}
	case "STAR": // * REPLACE (...), COLUMNS(...) hold expressions
		if err := r.walk(mapWithout(e, ""), depth); err != nil {
			return b, err
		}
		b = sizeBound{data: 1}
	case "SUBQUERY":
		// The subquery's own expressions are checked; its value is one
		// value of whatever it selects.
		if err := r.walk(e["subquery"], depth); err != nil {
			return b, err
		}
		if c, ok := e["child"].(map[string]any); ok {
			if _, err := r.expr(c, depth); err != nil {
				return b, err
			}
		}
		b = sizeBound{data: 1}
	case "COMPARISON", "CONJUNCTION", "BETWEEN":
		if _, err := r.sumChildren(e, depth); err != nil {
			return b, err
		}
		b = sizeBound{fixed: 8}
	case "FUNCTION":
		b, err = r.function(e, depth)
	case "WINDOW":
		if err := r.walk(mapWithout(e, "arguments"), depth); err != nil {
			return b, err
		}
		b, err = r.sumChildren(e, depth)
		b = b.plus(sizeBound{data: 1})
	case "LAMBDA":
		// The body runs once per element: a column-like value.
		if body, ok := e["expr"].(map[string]any); ok {
			if b, err = r.expr(body, depth); err != nil {
				return b, err
			}
		}
	default:
		// CAST, CASE, OPERATOR (IN, COALESCE, [] and the like), COLLATE:
		// at most their parts.
		b, err = r.sumChildren(e, depth)
	}
	if err != nil {
		return b, err
	}
	if b.fixed > maxConstBytes {
		return b, refuseRule("the query builds a value of up to %s from its constants (%s); the limit is %s",
			bytesText(b.fixed), exprText(e), bytesText(maxConstBytes))
	}
	if b.data > maxDataCopies {
		return b, refuseRule("the query builds a value of up to %.0f copies of a stored value (%s); the limit is %d",
			b.data, exprText(e), maxDataCopies)
	}
	return b, nil
}

// sumChildren checks every expression under e and returns the sum of the
// size bounds of those directly under it.
func (r *sqlRules) sumChildren(e map[string]any, depth int) (sizeBound, error) {
	var sum sizeBound
	var visit func(v any) error
	visit = func(v any) error {
		switch x := v.(type) {
		case []any:
			for _, c := range x {
				if err := visit(c); err != nil {
					return err
				}
			}
		case map[string]any:
			if _, ok := x["class"]; ok {
				b, err := r.expr(x, depth)
				sum = sum.plus(b)
				return err
			}
			if x["type"] == "SELECT_NODE" || x["type"] == "SET_OPERATION_NODE" {
				return r.walk(x, depth)
			}
			for _, c := range x {
				if err := visit(c); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for k, v := range e {
		if k != "class" && k != "type" {
			if err := visit(v); err != nil {
				return sum, err
			}
		}
	}
	return sum, nil
}

// Functions the rules watch, by what bounds them.
var (
	// amplifiers: the result's size follows a number argument.
	amplifiers = map[string]bool{
		"repeat": true, "lpad": true, "rpad": true, "range": true, "generate_series": true,
		"list_resize": true, "array_resize": true, "bar": true, "bitstring": true,
		"equi_width_bins": true, "to_base": true, "printf": true, "format": true,
	}
	// pairwise: the work grows with the product of the arguments' lengths.
	pairwise = map[string]bool{
		"levenshtein": true, "damerau_levenshtein": true, "editdist3": true,
		"jaro_similarity": true, "jaro_winkler_similarity": true,
	}
	// reducers fold a list through a lambda whose first argument is the
	// accumulator.
	reducers = map[string]bool{"list_reduce": true, "array_reduce": true, "reduce": true}
	// products hold up to their third argument for every byte of the
	// first (replace each 'a' with 'aaaa').
	products = map[string]bool{"replace": true, "regexp_replace": true}
	// joiners put their other arguments (a separator) between the
	// elements of their first (a list): array_to_string(range(60000),
	// repeat('x', 60000)) is 3.6 GB.
	joiners = map[string]bool{
		"array_to_string": true, "list_aggregate": true, "list_aggr": true, "array_aggregate": true,
		"array_aggr": true, "aggregate": true,
	}
	// appliers run a lambda for every element of their first argument.
	appliers = map[string]bool{
		"list_transform": true, "list_apply": true, "array_transform": true, "array_apply": true, "apply": true,
	}
	refused = map[string]string{"sleep_ms": "it cannot be interrupted"}
)

// watchedPattern finds watched function names in text that could not be
// parsed into a tree.
var watchedPattern = func() *regexp.Regexp {
	var names []string
	for _, m := range []map[string]bool{amplifiers, pairwise, reducers, products, joiners, appliers} {
		for n := range m {
			names = append(names, regexp.QuoteMeta(n))
		}
	}
	for n := range refused {
		names = append(names, regexp.QuoteMeta(n))
	}
	return regexp.MustCompile(`(?i)\b(` + strings.Join(names, "|") + `)\s*\(`)
}()

func watchedName(text string) string {
	if m := watchedPattern.FindStringSubmatch(text); m != nil {
		return strings.ToLower(m[1])
	}
	return ""
}

func (r *sqlRules) function(e map[string]any, depth int) (sizeBound, error) {
	name := funcName(e)
	args := children(e)
	sizes := make([]sizeBound, len(args))
	for i, a := range args {
		var err error
		if sizes[i], err = r.expr(a, depth); err != nil {
			return sizeBound{}, err
		}
	}
	// ORDER BY and FILTER of aggregates.
	if err := r.walk(mapWithout(e, "arguments"), depth); err != nil {
		return sizeBound{}, err
	}
	var sum sizeBound
	for _, s := range sizes {
		sum = sum.plus(s)
	}
	if why, ok := refused[name]; ok {
		return sum, refuseRule("%s() is not allowed in queries: %s", name, why)
	}
	count := func(i int) (float64, error) {
		if i >= len(args) {
			return 0, refuseRule("%s() needs argument %d", name, i+1)
		}
		n, ok := numberConstant(args[i])
		if !ok {
			return 0, refuseRule("%s(): argument %d must be a number literal, so that the size of its result is known", name, i+1)
		}
		return math.Max(n, 0), nil
	}
	arg := func(i int) sizeBound {
		if i < len(sizes) {
			return sizes[i]
		}
		return sizeBound{}
	}
	switch {
	case pairwise[name]:
		for i, s := range sizes {
			if s.fixed > maxPairwiseConst {
				return sum, refuseRule("%s(): argument %d may be built from at most %s of constants (it takes time in the product of the lengths)",
					name, i+1, bytesText(maxPairwiseConst))
			}
		}
		return sizeBound{fixed: 8}, nil
	case reducers[name]:
		if err := checkReducer(e, name); err != nil {
			return sum, err
		}
		return sum, nil
	case products[name] && len(args) >= 3:
		return arg(0).product(arg(2)).plus(arg(1)), nil
	case joiners[name] && len(args) >= 2:
		var sep sizeBound
		for _, s := range sizes[1:] {
			sep = sep.plus(s)
		}
		return arg(0).times(1 + sep.data + sep.fixed), nil
	case name == "concat_ws" && len(args) >= 2: // the separator between every two
		return sum.plus(arg(0).times(float64(len(args) - 2))), nil
	case appliers[name] && len(args) >= 2:
		// Every element becomes the lambda's value.
		body := arg(1)
		if n, ok := elementCount(args[0]); ok {
			return sizeBound{fixed: n * (body.fixed + 16), data: n * body.data}, nil
		}
		return arg(0).times(math.Max(1, body.data) + body.fixed), nil
	case !amplifiers[name]:
		// Other functions are taken to return about what they take:
		// escaping or hex at most multiplies by a small factor, which
		// the limits leave room for.
		return sum, nil
	}
	switch name {
	case "repeat": // repeat(s, n): strings, blobs and lists
		n, err := count(1)
		return arg(0).times(n), err
	case "lpad", "rpad": // lpad(s, n, pad): n characters of up to 4 bytes
		n, err := count(1)
		return sizeBound{fixed: 4*n + arg(2).fixed}, err
	case "list_resize", "array_resize": // (list, n[, value])
		n, err := count(1)
		elem := arg(2).plus(sizeBound{fixed: 16})
		return arg(0).plus(elem.times(n)), err
	case "bar": // bar(x, min, max[, width])
		if len(args) < 4 {
			return sizeBound{fixed: 80 * 4}, nil
		}
		n, err := count(3)
		return sizeBound{fixed: 4 * n}, err
	case "bitstring": // bitstring(s, length)
		n, err := count(1)
		return sizeBound{fixed: n/8 + 8}, err
	case "to_base": // to_base(n, radix[, min_length])
		if len(args) < 3 {
			return sizeBound{fixed: 64}, nil
		}
		n, err := count(2)
		return sizeBound{fixed: n + 64}, err
	case "equi_width_bins": // (min, max, bin_count, nice)
		n, err := count(2)
		return sizeBound{fixed: 16 * n}, err
	case "range", "generate_series": // as values: a list of every number
		return seriesSize(name, args)
	case "printf", "format":
		if len(args) == 0 {
			return sum, nil
		}
		f, ok := stringConstant(args[0])
		if !ok {
			return sum, refuseRule("%s(): the format must be a string literal, so that the size of its result is known", name)
		}
		w, err := formatWidths(name, f)
		return sum.plus(sizeBound{fixed: w}), err
	}
	return sum, nil
}

// seriesSize bounds range(stop), range(start, stop[, step]) and
// generate_series as scalar functions (in FROM they are table functions).
func seriesSize(name string, args []map[string]any) (sizeBound, error) {
	nums := make([]float64, len(args))
	for i, a := range args {
		n, ok := numberConstant(a)
		if !ok {
			return sizeBound{}, refuseRule("%s() as a value needs number literals, so that the list's size is known (as a table, FROM %s(...), it streams)", name, name)
		}
		nums[i] = n
	}
	start, stop, step := 0.0, 0.0, 1.0
	switch len(nums) {
	case 1:
		stop = nums[0]
	case 2:
		start, stop = nums[0], nums[1]
	case 3:
		start, stop, step = nums[0], nums[1], nums[2]
	default:
		return sizeBound{}, refuseRule("%s() takes 1 to 3 arguments", name)
	}
	if step == 0 {
		return sizeBound{fixed: 16}, nil
	}
	n := math.Max(0, (stop-start)/step) + 1
	return sizeBound{fixed: 16 * n}, nil
}

// elementCount returns the number of elements of a list literal or of a
// range of number literals; otherwise every byte of a list may be one.
func elementCount(e map[string]any) (float64, bool) {
	switch funcName(e) {
	case "list_value", "array_value":
		return float64(len(children(e))), true
	case "range", "generate_series":
		if b, err := seriesSize(funcName(e), children(e)); err == nil {
			return b.fixed / 16, true
		}
	}
	return 0, false
}

// formatWidths returns the sum of the widths and precisions of a printf or
// format (fmt) string, refusing those given by arguments and those over
// maxFormatWidth.
func formatWidths(name, f string) (float64, error) {
	var sum float64
	num := func(s string) error {
		if s == "" {
			return nil
		}
		n, err := strconv.ParseFloat(s, 64)
		if err != nil || n > maxFormatWidth {
			return refuseRule("%s(): a width or precision of %s; the limit is %d", name, s, maxFormatWidth)
		}
		sum += n
		return nil
	}
	digits := func(s string, i int) (string, int) {
		j := i
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		return s[i:j], j
	}
	if name == "printf" {
		for i := 0; i < len(f); i++ {
			if f[i] != '%' {
				continue
			}
			i++
			if i < len(f) && f[i] == '%' {
				continue
			}
			for i < len(f) && strings.IndexByte("-+ #0'", f[i]) >= 0 {
				i++
			}
			if i < len(f) && f[i] == '*' {
				return 0, refuseRule("printf(): a width given by an argument (*)")
			}
			w, j := digits(f, i)
			if err := num(w); err != nil {
				return 0, err
			}
			i = j
			if i < len(f) && f[i] == '.' {
				i++
				if i < len(f) && f[i] == '*' {
					return 0, refuseRule("printf(): a precision given by an argument (*)")
				}
				p, j := digits(f, i)
				if err := num(p); err != nil {
					return 0, err
				}
				i = j
			}
		}
		return sum, nil
	}
	// format: {[arg][:spec]}, {{ is a brace; a { inside a spec is a width
	// or precision given by an argument.
	for i := 0; i < len(f); i++ {
		if f[i] != '{' {
			continue
		}
		if i+1 < len(f) && f[i+1] == '{' {
			i++
			continue
		}
		end := strings.IndexByte(f[i+1:], '}')
		if end < 0 {
			break
		}
		field := f[i+1 : i+1+end]
		if strings.IndexByte(field, '{') >= 0 {
			return 0, refuseRule("format(): a width or precision given by an argument")
		}
		if c := strings.IndexByte(field, ':'); c >= 0 {
			spec := field[c+1:]
			for k := 0; k < len(spec); k++ {
				if spec[k] >= '0' && spec[k] <= '9' {
					d, j := digits(spec, k)
					if err := num(d); err != nil {
						return 0, err
					}
					k = j - 1
				}
			}
		}
		i += end + 1
	}
	return sum, nil
}

// checkReducer refuses a reduce lambda that uses its accumulator more
// than once: the value then grows exponentially with the list.
func checkReducer(e map[string]any, name string) error {
	for _, a := range children(e) {
		if a["class"] != "LAMBDA" {
			continue
		}
		params := lambdaParams(a)
		if len(params) == 0 {
			continue
		}
		if n := countRefs(a["expr"], params[0]); n > 1 {
			return refuseRule("%s(): the lambda uses its accumulator %s %d times (its value can double with every element)", name, params[0], n)
		}
	}
	return nil
}

// lambdaParams returns a lambda's parameter names: its lhs is a column
// reference, or a row() of them, in the parse tree.
func lambdaParams(l map[string]any) []string {
	var names []string
	var visit func(v any)
	visit = func(v any) {
		switch x := v.(type) {
		case []any:
			for _, c := range x {
				visit(c)
			}
		case map[string]any:
			if x["class"] == "COLUMN_REF" {
				if cn, ok := x["column_names"].([]any); ok && len(cn) > 0 {
					if s, ok := cn[len(cn)-1].(string); ok {
						names = append(names, strings.ToLower(s))
					}
				}
				return
			}
			// row(a, x): its arguments, each {"name", "expression"}
			for _, c := range children(x) {
				visit(c)
			}
		}
	}
	visit(l["lhs"])
	if p, ok := l["parameters"].([]any); ok { // newer trees list them
		for _, s := range p {
			if str, ok := s.(string); ok {
				names = append(names, strings.ToLower(str))
			}
		}
	}
	return names
}

func countRefs(node any, name string) int {
	n := 0
	switch x := node.(type) {
	case []any:
		for _, c := range x {
			n += countRefs(c, name)
		}
	case map[string]any:
		if x["class"] == "COLUMN_REF" || x["class"] == "LAMBDA_REF" {
			if cn, ok := x["column_names"].([]any); ok && len(cn) > 0 {
				if s, ok := cn[len(cn)-1].(string); ok && strings.EqualFold(s, name) {
					return 1
				}
			}
		}
		for _, c := range x {
			n += countRefs(c, name)
		}
	}
	return n
}

// Parse tree accessors.

func funcName(e map[string]any) string {
	s, _ := e["function_name"].(string)
	return strings.ToLower(s)
}

// children returns a function's arguments (each {"name", "expression"})
// or, for operators, their "children".
func children(e map[string]any) []map[string]any {
	if list, ok := e["arguments"].([]any); ok {
		out := make([]map[string]any, 0, len(list))
		for _, a := range list {
			if m, ok := a.(map[string]any); ok {
				if x, ok := m["expression"].(map[string]any); ok {
					out = append(out, x)
				}
			}
		}
		return out
	}
	list, _ := e["children"].([]any)
	out := make([]map[string]any, 0, len(list))
	for _, c := range list {
		if m, ok := c.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// literal returns a constant's kind (INTEGER, NUMERIC, STRING,
// NULL_LITERAL, ...) and its text as written.
func literal(e map[string]any) (kind, text string, ok bool) {
	if e["class"] != "CONSTANT" {
		return "", "", false
	}
	l, _ := e["literal"].(map[string]any)
	if l == nil {
		return "", "", false
	}
	kind, _ = l["kind"].(string)
	text, _ = l["text"].(string)
	return kind, text, true
}

// mapWithout returns m without key and its class.
func mapWithout(m map[string]any, key string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if k != key && k != "class" {
			out[k] = v
		}
	}
	return out
}

// constantSize is a literal's size: its text, and for values other than
// strings and blobs a little more (a number's binary form).
func constantSize(e map[string]any) sizeBound {
	kind, text, ok := literal(e)
	switch {
	case !ok:
		// A literal of another form (a typed nested value): its JSON.
		b, _ := json.Marshal(e)
		return sizeBound{fixed: float64(len(b))}
	case kind == "NULL_LITERAL":
		return sizeBound{}
	case kind == "STRING" || kind == "BLOB":
		return sizeBound{fixed: float64(len(text))}
	}
	return sizeBound{fixed: float64(len(text)) + 16}
}

// numberConstant returns the value of a number literal, also negated or
// cast (-5, 5::BIGINT, '5'::INT); NULL counts as 0.
func numberConstant(e map[string]any) (float64, bool) {
	switch e["class"] {
	case "CONSTANT":
		kind, text, ok := literal(e)
		if !ok {
			return 0, false
		}
		if kind == "NULL_LITERAL" {
			return 0, true
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
		return f, err == nil
	case "CAST":
		if c, ok := e["child"].(map[string]any); ok {
			return numberConstant(c)
		}
	case "FUNCTION":
		if funcName(e) == "-" && len(children(e)) == 1 {
			n, ok := numberConstant(children(e)[0])
			return -n, ok
		}
	}
	return 0, false
}

func stringConstant(e map[string]any) (string, bool) {
	kind, text, ok := literal(e)
	if !ok || kind != "STRING" {
		return "", false
	}
	return text, true
}

// exprText names an expression in an error: a function's name.
func exprText(e map[string]any) string {
	if n := funcName(e); n != "" {
		return n + "()"
	}
	s, _ := e["class"].(string)
	return strings.ToLower(s)
}

func bytesText(n float64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", n/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", n/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", n/(1<<10))
	}
	return fmt.Sprintf("%.0f bytes", n)
}

// notSelectError is a statement that is not a SELECT; kind is its first
// keyword (INSERT, COPY, ...).
type notSelectError struct{ kind string }

func (e *notSelectError) Error() string {
	if e.kind == "PRAGMA" { // most pragmas have a table function
		return "only SELECT statements are allowed (got PRAGMA; use SELECT * FROM pragma_...() instead)"
	}
	return fmt.Sprintf("only SELECT statements are allowed (got %s)", e.kind)
}

// deniedError is a query that calls a denied table function.
type deniedError struct{ name string }

func (e *deniedError) Error() string { return fmt.Sprintf("%s() is not allowed in queries", e.name) }

// firstKeyword returns the first word of a statement, upper-cased, after
// comments and opening parentheses.
func firstKeyword(q string) string {
	for {
		q = strings.TrimLeft(q, " \t\r\n(")
		switch {
		case strings.HasPrefix(q, "--"):
			if i := strings.IndexByte(q, '\n'); i >= 0 {
				q = q[i+1:]
				continue
			}
			return "a comment"
		case strings.HasPrefix(q, "/*"):
			if i := strings.Index(q, "*/"); i >= 0 {
				q = q[i+2:]
				continue
			}
			return "a comment"
		}
		break
	}
	end := strings.IndexFunc(q, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '_')
	})
	if end < 0 {
		end = len(q)
	}
	if end == 0 {
		return "a statement"
	}
	return strings.ToUpper(q[:end])
}
