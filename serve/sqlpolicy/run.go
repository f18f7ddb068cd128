package sqlpolicy

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	duckdb "github.com/duckdb/duckdb-go/v2"
	"github.com/duckdb/duckdb-go/v2/mapping"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/internal/keyview"
)

// CastKind says how a column is selected around the user's query, and so
// what its values are when a Sink gets them.
type CastKind int

const (
	CastNone       CastKind = iota // as the driver scans the type (Column.Info)
	CastRawJSON                    // JSON: as text (the driver would parse it into float64s)
	CastVariant                    // VARIANT: the driver cannot scan it; as JSON text
	CastText                       // TIME_NS, GEOMETRY: the driver cannot scan them; as text
	CastNestedJSON                 // nested values as JSON text (Query.NestedJSON)
)

// Column is a result column.
type Column struct {
	Name string
	// Type is DuckDB's name of the type ("BIGINT", "TIMESTAMP_NS", ...);
	// Run sets it, Describe only for cast columns.
	Type string
	// Info is the type as the driver knows it: nil for cast columns and
	// for types the driver does not know.
	Info duckdb.TypeInfo
	Cast CastKind
}

// ParamType is the type DuckDB expects for a parameter; TYPE_INVALID
// when the statement does not tell (SELECT $1).
type ParamType = duckdb.Type

// limits bound a result.
type limits struct {
	rows  int
	bytes int64
	// local: shredduck query --db (RunLocal), on the user's own
	// read-only file: no size rules or denied functions.
	local bool
	// built: a statement built by Go code (RunBuilt): no parse-first
	// rules or plan check, the limits as for a client.
	built bool
}

// checked reports whether a query is a client's text, which passes the
// parse-first rules and the plan check.
func (l limits) checked() bool { return !l.local && !l.built }

// ErrNotOneSelect is RunLocal's answer to a statement that is not one
// SELECT (or does not prepare): the caller runs it otherwise.
var ErrNotOneSelect = errors.New("not one SELECT statement")

// RunLocal runs one SELECT on db as Run does, every attribute key reading
// as its column (keyview), without limits, size rules, denied functions,
// slots or timeout: shredduck query --db renders it as it renders a
// server's answer, so that both show every value alike.
func RunLocal(ctx context.Context, db *ingest.DB, query string, sink Sink) (Result, error) {
	return runOnConn(ctx, db, nil, Query{SQL: query}, limits{rows: math.MaxInt32, bytes: math.MaxInt64 / 2, local: true}, sink)
}

// onConn runs f on a connection of its own, in the read-only transaction
// with the key views that inQueryTx makes (through keys, when not nil).
func onConn(ctx context.Context, db *ingest.DB, keys *keyview.Cache, q Query, f func(c *duckdb.Conn) error) error {
	conn, err := db.SQL.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return inQueryTx(ctx, conn, keys, q.SQL, q.Temps, func() error { return withDriverConn(conn, f) })
}

// onPlainConn calls f with a connection of its own, outside any
// transaction: a statement of RunBuilt that names only stored columns
// (Query.Stored) needs neither the views nor the snapshot they share.
func onPlainConn(ctx context.Context, db *ingest.DB, f func(c *duckdb.Conn) error) error {
	conn, err := db.SQL.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return withDriverConn(conn, f)
}

// withDriverConn calls f with conn's driver connection.
func withDriverConn(conn *sql.Conn, f func(c *duckdb.Conn) error) error {
	return conn.Raw(func(dc any) error {
		c, ok := dc.(*duckdb.Conn)
		if !ok {
			return fmt.Errorf("unexpected driver connection %T", dc)
		}
		return f(c)
	})
}

// runOnConn runs q with runQuery on a connection of its own.
func runOnConn(ctx context.Context, db *ingest.DB, keys *keyview.Cache, q Query, lim limits, sink Sink) (Result, error) {
	var res Result
	ran := false
	run := func(c *duckdb.Conn) error {
		var err error
		if lim.built {
			res, err = runBuilt(ctx, c, q, lim, sink)
		} else {
			res, err = runQuery(ctx, c, q, lim, sink)
		}
		ran = err == nil
		return err
	}
	var err error
	if lim.built && q.Stored {
		err = onPlainConn(ctx, db, run)
	} else {
		err = onConn(ctx, db, keys, q, run)
	}
	if errors.Is(err, driver.ErrBadConn) && ran {
		err = nil // ROLLBACK failed after a good result: the pool drops the connection
	}
	return res, err
}

// describeOnConn checks query and describes it without running it.
func describeOnConn(ctx context.Context, db *ingest.DB, keys *keyview.Cache, q Query) (Description, error) {
	var d Description
	err := onConn(ctx, db, keys, q, func(c *duckdb.Conn) error {
		if err := checkRules(ctx, c, q.SQL); err != nil {
			return err
		}
		st, cols, err := checkStatement(c, q.SQL, q.NestedJSON)
		if err != nil {
			return err
		}
		defer st.Close()
		d.Columns = cols
		for i := range st.NumInput() {
			t, err := st.ParamType(i + 1)
			if err != nil {
				return err
			}
			d.Params = append(d.Params, t)
		}
		return nil
	})
	return d, err
}

// checkRules decides from the parse alone, before DuckDB prepares
// anything, that query is one SELECT statement within the size rules
// (rules.go) that calls no denied table function: preparing binds, and
// binding some statements and functions already has effects.
func checkRules(ctx context.Context, c *duckdb.Conn, query string) error {
	if err := checkOneStatement(c, query); err != nil {
		return err
	}
	rules := &sqlRules{serialize: func(sql string) (string, error) { return serializeSQL(ctx, c, sql) }}
	if err := rules.check(query); err != nil {
		var re *ruleError
		var ns *notSelectError
		var de *deniedError
		switch {
		case errors.As(err, &re):
			return &Error{Kind: KindRefused, Code: CodeLimits, Msg: re.msg}
		case errors.As(err, &ns), errors.As(err, &de):
			return &Error{Kind: KindRefused, Code: CodeRefused, Msg: err.Error()}
		}
		return err
	}
	return nil
}

// checkOneStatement parses query (DuckDB's extract_statements, which
// neither binds nor runs) and refuses anything but one statement.
func checkOneStatement(c *duckdb.Conn, query string) error {
	raw, err := ingest.RawConn(c)
	if err != nil {
		return err
	}
	var stmts mapping.ExtractedStatements
	n := mapping.ExtractStatements(raw, query, &stmts)
	defer mapping.DestroyExtracted(&stmts)
	switch {
	case n == 0:
		msg := mapping.ExtractStatementsError(stmts)
		if msg == "" {
			msg = "the query is empty"
		}
		return &Error{Kind: KindInvalid, Code: CodeSyntax, Msg: msg}
	case n > 1:
		return &Error{Kind: KindRefused, Code: CodeRefused, Msg: "only one statement is allowed"}
	}
	return nil
}

// runQuery checks and runs one query on c and hands its result to sink,
// in the READ ONLY transaction that inQueryTx began on c. It never hands
// the raw text to the driver's QueryContext or PrepareContext, which
// execute every statement before the last; Prepare refuses more than one
// statement. Nothing is prepared before the size rules (rules.go) have
// passed the text: preparing folds constants.
func runQuery(ctx context.Context, c *duckdb.Conn, q Query, lim limits, sink Sink) (Result, error) {
	query := q.SQL
	if lim.checked() {
		if err := checkRules(ctx, c, query); err != nil {
			return Result{}, err
		}
	}
	args := namedArgs(q.Args)
	cols, err := resultColumns(ctx, c, query, args, q.NestedJSON, lim)
	if err != nil {
		if lim.local {
			return Result{}, fmt.Errorf("%w: %v", ErrNotOneSelect, err)
		}
		return Result{}, err
	}

	// The limits go into the query, so that DuckDB (whose results the
	// driver materializes) stops at them; the wrapper also casts the
	// columns the driver cannot scan or would scan lossily. The column
	// names come from the query itself (the subquery renames duplicates).
	wrapped := wrapQuery(query, cols, lim.rows+1, lim.bytes)
	// Preparing is not interrupted (the driver's Prepare takes no
	// context): the context is checked before each one instead.
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	st, err := prepareOne(c, wrapped)
	if err != nil && lim.local {
		return Result{}, fmt.Errorf("%w: %v", ErrNotOneSelect, err)
	}
	if err != nil {
		return Result{}, failure(KindInvalid, "", err, "this query cannot run as a subquery (PRAGMA statements cannot; use SELECT * FROM pragma_...() instead): "+err.Error())
	}
	defer st.Close()
	if t, _ := st.StatementType(); t != duckdb.STATEMENT_TYPE_SELECT {
		return Result{}, fmt.Errorf("wrapped query is a %s statement", stmtTypeName(t))
	}
	if lim.checked() { // locally every function works, as in the user's own DuckDB
		if err := checkPlan(ctx, c, wrapped, args); err != nil {
			return Result{}, err
		}
	}
	return readResult(ctx, st, args, cols, lim, sink, nil)
}

// serializeSQL returns json_serialize_sql(sql) as JSON text. It parses sql
// and nothing more: sql is a bound value, not a statement.
func serializeSQL(ctx context.Context, c *duckdb.Conn, sql string) (string, error) {
	rows, err := c.QueryContext(ctx, "SELECT CAST(json_serialize_sql(CAST($1 AS VARCHAR)) AS VARCHAR)", []driver.NamedValue{{Ordinal: 1, Value: sql}})
	if err != nil {
		return "", sqlError(ctx, err)
	}
	defer rows.Close()
	dest := make([]driver.Value, 1)
	if err := rows.Next(dest); err != nil {
		return "", sqlError(ctx, err)
	}
	text, ok := dest[0].(string)
	if !ok {
		return "", fmt.Errorf("json_serialize_sql returned %T", dest[0])
	}
	return text, nil
}

// prepareOne prepares exactly one statement without executing anything.
func prepareOne(c *duckdb.Conn, query string) (*duckdb.Stmt, error) {
	st, err := c.Prepare(query)
	if err != nil {
		return nil, err
	}
	s, ok := st.(*duckdb.Stmt)
	if !ok {
		st.Close()
		return nil, fmt.Errorf("unexpected driver statement %T", st)
	}
	return s, nil
}

// checkStatement prepares the user's text alone and accepts it only as one
// SELECT statement; it returns the statement, which the caller closes,
// and the result's columns.
func checkStatement(c *duckdb.Conn, query string, nestedJSON bool) (st *duckdb.Stmt, cols []Column, err error) {
	prepared, err := prepareOne(c, query)
	if err != nil {
		if strings.Contains(err.Error(), "multi-statement") {
			return nil, nil, &Error{Kind: KindRefused, Code: CodeRefused, Msg: "only one statement is allowed"}
		}
		return nil, nil, failure(KindInvalid, duckdbCode(err), err, fmt.Sprintf("%v%s", err, timeHint(err)))
	}
	defer func() {
		if err != nil {
			prepared.Close()
		}
	}()
	st = prepared
	t, err := st.StatementType()
	if err != nil {
		return nil, nil, err
	}
	if t != duckdb.STATEMENT_TYPE_SELECT {
		return nil, nil, &Error{Kind: KindRefused, Code: CodeRefused, Msg: fmt.Sprintf("only SELECT statements are allowed (got %s)", stmtTypeName(t))}
	}
	cols, err = describeColumns(st, nestedJSON)
	return st, cols, err
}

// describeColumns returns the columns of prepared statement st. When
// DuckDB cannot tell them before the parameters' values are known (a
// parameter selected as a column), it describes one column of type
// TYPE_INVALID, named "unknown": see described.
func describeColumns(st *duckdb.Stmt, nestedJSON bool) ([]Column, error) {
	n, err := st.ColumnCount()
	if err != nil {
		return nil, err
	}
	cols := make([]Column, n)
	for i := range cols {
		if cols[i].Name, err = st.ColumnName(i); err != nil {
			return nil, err
		}
		switch t, _ := st.ColumnType(i); t {
		case duckdb.TYPE_INVALID:
			cols[i].Type = invalidType
		case duckdb.TYPE_VARIANT:
			cols[i].Cast, cols[i].Type = CastVariant, "VARIANT"
		case mapping.TypeTimeNS: // the driver has no TYPE_TIME_NS yet
			cols[i].Cast, cols[i].Type = CastText, "TIME_NS"
		case duckdb.TYPE_GEOMETRY:
			cols[i].Cast, cols[i].Type = CastText, "GEOMETRY"
		default:
			// A type the driver does not know leaves Info nil; scanning
			// then reports it.
			cols[i].Info, _ = st.ColumnTypeInfo(i)
			if cols[i].Info != nil && cols[i].Info.Alias() == "JSON" {
				cols[i].Cast, cols[i].Type = CastRawJSON, "JSON"
			} else if nestedJSON && nested(cols[i].Info) {
				cols[i].Cast, cols[i].Type, cols[i].Info = CastNestedJSON, "JSON", nil
			}
		}
	}
	return cols, nil
}

// deniedFunctions are table functions that change the database's or the
// process's state. lock_configuration does not stop them:
// enable_logging(storage_path=...) makes every later query fail, for one.
var deniedFunctions = map[string]bool{
	"checkpoint": true, "force_checkpoint": true,
	"truncate_duckdb_logs":        true,
	"add_parquet_key":             true,
	"copy_database":               true,
	"import_database":             true,
	"json_execute_serialized_sql": true, // runs a plan we did not check
	"arrow_scan":                  true, "arrow_scan_dumb": true,
	"check_peg_parser": true,
}

// deniedPrefixes cover enable_logging, disable_profiling, verify_external
// and their kin.
var deniedPrefixes = []string{"enable_", "disable_", "verify_", "truncate_"}

func deniedFunction(name string) bool {
	name = strings.ToLower(name)
	if deniedFunctions[name] {
		return true
	}
	for _, p := range deniedPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// checkPlan explains query and rejects it if its physical plan calls a
// denied table function, also through query() or a view. It fails closed:
// a plan it cannot read is an error.
func checkPlan(ctx context.Context, c *duckdb.Conn, query string, args []driver.NamedValue) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	st, err := prepareOne(c, "EXPLAIN (FORMAT json) "+query)
	if err != nil {
		return failure(KindInvalid, "", err, err.Error())
	}
	defer st.Close()
	if t, _ := st.StatementType(); t != duckdb.STATEMENT_TYPE_EXPLAIN {
		return fmt.Errorf("plan check: EXPLAIN is a %s statement", stmtTypeName(t))
	}
	rows, err := st.QueryContext(ctx, args)
	if err != nil {
		return sqlError(ctx, err)
	}
	defer rows.Close()
	dest := make([]driver.Value, len(rows.Columns()))
	plans := 0
	for {
		if err := rows.Next(dest); err == io.EOF {
			break
		} else if err != nil {
			return sqlError(ctx, err)
		}
		if len(dest) != 2 {
			return fmt.Errorf("plan check: EXPLAIN returned %d columns", len(dest))
		}
		text, ok := dest[1].(string)
		if !ok {
			return fmt.Errorf("plan check: EXPLAIN returned %T", dest[1])
		}
		var plan any
		if err := json.Unmarshal([]byte(text), &plan); err != nil {
			return fmt.Errorf("plan check: %w", err)
		}
		if name := findDenied(plan); name != "" {
			return &Error{Kind: KindRefused, Code: CodeRefused, Msg: fmt.Sprintf("%s() is not allowed in queries", strings.ToLower(name))}
		}
		plans++
	}
	if plans == 0 {
		return errors.New("plan check: EXPLAIN returned no plan")
	}
	return nil
}

// findDenied returns the first operator or function in a JSON plan whose
// name is denied.
func findDenied(node any) string {
	switch n := node.(type) {
	case []any:
		for _, c := range n {
			if d := findDenied(c); d != "" {
				return d
			}
		}
	case map[string]any:
		for k, v := range n {
			if s, ok := v.(string); ok && (k == "name" || k == "Function") && deniedFunction(s) {
				return s
			}
			if d := findDenied(v); d != "" {
				return d
			}
		}
	}
	return ""
}

// timeHint says what to do about DuckDB's refusal to compare a time
// column (TIMESTAMP_NS, UTC) with a TIMESTAMPTZ value.
func timeHint(err error) string {
	if m := err.Error(); strings.Contains(m, "TIMESTAMP_NS") && strings.Contains(m, "TIMESTAMP WITH TIME ZONE") {
		return "\n(the time columns are UTC TIMESTAMP_NS: now() and current_timestamp compare with them as they are; write another TIMESTAMPTZ value x as x AT TIME ZONE 'UTC', or as a string literal)"
	}
	return ""
}

// sqlError makes a DuckDB error KindInvalid, and running out of memory
// KindMemory (the memory is shared with ingest and other queries); a
// timeout stays a context error.
func sqlError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var de *duckdb.Error
	if errors.As(err, &de) {
		return failure(KindInvalid, duckdbCode(err), err, de.Msg)
	}
	return errorf(KindInvalid, "%v", err)
}

// failure is an *Error of kind k, or of KindMemory (53200) when err is
// DuckDB running out of memory, wherever in a query's run: that memory is
// shared with ingest and the other queries, so a retry may pass (503).
func failure(k Kind, code string, err error, msg string) *Error {
	var de *duckdb.Error
	if errors.As(err, &de) && de.Type == duckdb.ErrorTypeOutOfMemory {
		return &Error{Kind: KindMemory, Code: CodeMemory, Msg: msg}
	}
	return &Error{Kind: k, Code: code, Msg: msg}
}

var stmtTypeNames = map[duckdb.StmtType]string{
	duckdb.STATEMENT_TYPE_INVALID:      "INVALID",
	duckdb.STATEMENT_TYPE_SELECT:       "SELECT",
	duckdb.STATEMENT_TYPE_INSERT:       "INSERT",
	duckdb.STATEMENT_TYPE_UPDATE:       "UPDATE",
	duckdb.STATEMENT_TYPE_EXPLAIN:      "EXPLAIN",
	duckdb.STATEMENT_TYPE_DELETE:       "DELETE",
	duckdb.STATEMENT_TYPE_PREPARE:      "PREPARE",
	duckdb.STATEMENT_TYPE_CREATE:       "CREATE",
	duckdb.STATEMENT_TYPE_EXECUTE:      "EXECUTE",
	duckdb.STATEMENT_TYPE_ALTER:        "ALTER",
	duckdb.STATEMENT_TYPE_TRANSACTION:  "TRANSACTION",
	duckdb.STATEMENT_TYPE_COPY:         "COPY",
	duckdb.STATEMENT_TYPE_ANALYZE:      "ANALYZE",
	duckdb.STATEMENT_TYPE_VARIABLE_SET: "SET VARIABLE",
	duckdb.STATEMENT_TYPE_CREATE_FUNC:  "CREATE FUNCTION",
	duckdb.STATEMENT_TYPE_DROP:         "DROP",
	duckdb.STATEMENT_TYPE_EXPORT:       "EXPORT",
	duckdb.STATEMENT_TYPE_PRAGMA:       "PRAGMA",
	duckdb.STATEMENT_TYPE_VACUUM:       "VACUUM",
	duckdb.STATEMENT_TYPE_CALL:         "CALL",
	duckdb.STATEMENT_TYPE_SET:          "SET",
	duckdb.STATEMENT_TYPE_LOAD:         "LOAD",
	duckdb.STATEMENT_TYPE_RELATION:     "RELATION",
	duckdb.STATEMENT_TYPE_EXTENSION:    "EXTENSION",
	duckdb.STATEMENT_TYPE_LOGICAL_PLAN: "LOGICAL PLAN",
	duckdb.STATEMENT_TYPE_ATTACH:       "ATTACH",
	duckdb.STATEMENT_TYPE_DETACH:       "DETACH",
	duckdb.STATEMENT_TYPE_MULTI:        "MULTI",
}

func stmtTypeName(t duckdb.StmtType) string {
	if s, ok := stmtTypeNames[t]; ok {
		return s
	}
	return fmt.Sprintf("statement type %d", t)
}

// duckdbCode is the SQLSTATE of a DuckDB error, where one fits.
func duckdbCode(err error) string {
	var de *duckdb.Error
	if !errors.As(err, &de) {
		return ""
	}
	switch de.Type {
	case duckdb.ErrorTypeParser, duckdb.ErrorTypeSyntax:
		return CodeSyntax
	case duckdb.ErrorTypeCatalog:
		return "42P01" // undefined_table (or another catalog entry)
	case duckdb.ErrorTypeBinder:
		return "42703" // undefined_column, the common binder error
	case duckdb.ErrorTypeConversion, duckdb.ErrorTypeInvalidInput:
		return "22P02" // invalid_text_representation
	case duckdb.ErrorTypeOutOfRange:
		return "22003" // numeric_value_out_of_range
	case duckdb.ErrorTypeDivideByZero:
		return "22012"
	case duckdb.ErrorTypePermission:
		return CodeRefused
	case duckdb.ErrorTypeOutOfMemory:
		return CodeMemory
	case duckdb.ErrorTypeInterrupt:
		return "57014"
	}
	return ""
}

// nested reports whether info is a STRUCT, MAP or UNION, or a list of
// anything but numbers, booleans and text.
func nested(info duckdb.TypeInfo) bool {
	if info == nil {
		return false
	}
	switch info.InternalType() {
	case duckdb.TYPE_STRUCT, duckdb.TYPE_MAP, duckdb.TYPE_UNION:
		return true
	case duckdb.TYPE_LIST, duckdb.TYPE_ARRAY:
		var child duckdb.TypeInfo
		switch d := info.Details().(type) {
		case *duckdb.ListDetails:
			child = d.Child
		case *duckdb.ArrayDetails:
			child = d.Child
		}
		if child == nil || child.Alias() == "JSON" {
			return true
		}
		switch child.InternalType() {
		case duckdb.TYPE_BOOLEAN, duckdb.TYPE_TINYINT, duckdb.TYPE_SMALLINT, duckdb.TYPE_INTEGER, duckdb.TYPE_BIGINT,
			duckdb.TYPE_FLOAT, duckdb.TYPE_DOUBLE, duckdb.TYPE_VARCHAR:
			return false
		}
		return true
	}
	return false
}
