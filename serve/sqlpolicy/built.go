package sqlpolicy

import (
	"context"
	"database/sql/driver"
	"fmt"
	"io"
	"slices"
	"strings"

	duckdb "github.com/duckdb/duckdb-go/v2"
)

// KeysGen is the generation of the key catalog of the policy's database
// (ingest.DB.KeysGen): a caller that reads it before and after a query
// learns whether the catalog could have changed in between.
func (p *Policy) KeysGen() int64 { return p.db.KeysGen() }

// RunBuilt runs q as Run does, in a slot, under the timeout, the memory
// guard (MaxMemory), MaxRows and MaxBytes, in a READ ONLY transaction
// with the attribute keys it names as columns (keyview), but without the
// checks of a client's text: the parse-first rules (one SELECT, the size
// rules, denied table functions) and the plan check. It saves their
// fixed cost (several parses and prepares, an EXPLAIN) for the
// statements that shredduck's own code builds from constants, binding
// every value that came from a request as a parameter (q.Args), such as
// serve/jaegerapi's. Never pass it text that came from a client, in
// whole or in part: the network surfaces that take SQL (/v1/query,
// serve/pgwire) call Run and Describe; RunBuilt is reachable only from
// Go code that hands it its own SQL.
func (p *Policy) RunBuilt(ctx context.Context, q Query, sink Sink) (Result, error) {
	lim := p.limits()
	lim.built = true
	return admit(ctx, p, q.SQL, func(qctx context.Context) (Result, error) {
		return runOnConn(qctx, p.db, p.keys, q, lim, sink)
	})
}

// runBuilt runs a statement of RunBuilt on c, in one prepare: the
// statement under a LIMIT, its bytes counted as its rows are read
// (valueSize). A statement with a column to cast (Column.Cast) is
// prepared again wrapped as a client's is (wrapQuery); one DuckDB cannot
// describe before binding goes the way of a client's (runQuery), without
// its checks.
func runBuilt(ctx context.Context, c *duckdb.Conn, q Query, lim limits, sink Sink) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	st, err := prepareOne(c, limitQuery(q.SQL, lim.rows+1))
	if err != nil {
		return Result{}, failure(KindInvalid, duckdbCode(err), err, err.Error())
	}
	defer st.Close()
	if t, _ := st.StatementType(); t != duckdb.STATEMENT_TYPE_SELECT {
		return Result{}, fmt.Errorf("built statement is a %s statement", stmtTypeName(t))
	}
	cols, err := describeColumns(st, q.NestedJSON)
	if err != nil {
		return Result{}, err
	}
	if !described(cols) {
		return runQuery(ctx, c, q, lim, sink)
	}
	if slices.ContainsFunc(cols, func(col Column) bool { return col.Cast != CastNone }) {
		// Cast as a client's query is, by wrapQuery (one more prepare).
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		wrapped, err := prepareOne(c, wrapQuery(q.SQL, cols, lim.rows+1, lim.bytes))
		if err != nil {
			return Result{}, failure(KindInvalid, duckdbCode(err), err, err.Error())
		}
		defer wrapped.Close()
		return readResult(ctx, wrapped, namedArgs(q.Args), cols, lim, sink, nil)
	}
	return readResult(ctx, st, namedArgs(q.Args), cols, lim, sink, valueSize)
}

// invalidType is Column.Type of a column DuckDB did not describe.
const invalidType = "INVALID"

// described reports whether DuckDB described every column of cols at
// prepare.
func described(cols []Column) bool {
	for _, col := range cols {
		if col.Type == invalidType {
			return false
		}
	}
	return true
}

// resultColumns prepares query alone, accepts it only as one SELECT
// (checkStatement), and returns its columns. DuckDB cannot tell them at
// prepare when they depend on the parameters' types (SELECT $1 AS x, ...):
// it then describes one column of type INVALID, which stands for all of
// them; they are then read from the result of the query run with args
// under LIMIT 0 (after the plan check, for a client's query).
func resultColumns(ctx context.Context, c *duckdb.Conn, query string, args []driver.NamedValue, nestedJSON bool, lim limits) ([]Column, error) {
	st, cols, err := checkStatement(c, query, nestedJSON)
	if err != nil {
		return nil, err
	}
	st.Close()
	if described(cols) {
		return cols, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	empty := limitQuery(query, 0)
	st, err = prepareOne(c, empty)
	if err != nil {
		return nil, failure(KindInvalid, "", err, "this query cannot run as a subquery (PRAGMA statements cannot; use SELECT * FROM pragma_...() instead): "+err.Error())
	}
	defer st.Close()
	if lim.checked() {
		if err := checkPlan(ctx, c, empty, args); err != nil {
			return nil, err
		}
	}
	rows, err := st.QueryContext(ctx, args)
	if err != nil {
		return nil, sqlError(ctx, err)
	}
	defer rows.Close()
	names := rows.Columns()
	dbt, ok := rows.(driver.RowsColumnTypeDatabaseTypeName)
	if !ok {
		return nil, fmt.Errorf("the driver's rows %T have no type names", rows)
	}
	cols = make([]Column, len(names))
	for i, name := range names {
		cols[i] = Column{Name: name, Type: dbt.ColumnTypeDatabaseTypeName(i)}
		cols[i].Cast = castOfType(cols[i].Type, nestedJSON)
		if cols[i].Cast == CastRawJSON || cols[i].Cast == CastNestedJSON {
			cols[i].Type = "JSON"
		}
	}
	return cols, nil
}

// castOfType is describeColumns' Cast for a column known by its type's
// name alone (Info nil).
func castOfType(name string, nestedJSON bool) CastKind {
	switch name {
	case "JSON":
		return CastRawJSON
	case "VARIANT":
		return CastVariant
	case "TIME_NS", "GEOMETRY":
		return CastText
	}
	if !nestedJSON {
		return CastNone
	}
	if strings.HasPrefix(name, "STRUCT") || strings.HasPrefix(name, "MAP") || strings.HasPrefix(name, "UNION") {
		return CastNestedJSON
	}
	if i := strings.IndexByte(name, '['); i > 0 {
		switch name[:i] {
		case "BOOLEAN", "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "FLOAT", "DOUBLE", "VARCHAR":
			if !strings.Contains(name[i+1:], "[") { // one level of list or array
				return CastNone
			}
		}
		return CastNestedJSON
	}
	return CastNone
}

// namedArgs are a query's parameter values as the driver takes them.
func namedArgs(vals []any) []driver.NamedValue {
	args := make([]driver.NamedValue, len(vals))
	for i, a := range vals {
		args[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
	}
	return args
}

// valueSize is the size of a scanned value as sizeSQL counts it in SQL:
// the bytes of text and blobs, about the length of their text for nested
// values, 40 for the rest.
func valueSize(v any) int64 {
	switch v := v.(type) {
	case nil:
		return 0
	case string:
		return int64(len(v))
	case []byte:
		return int64(len(v))
	case []any:
		n := int64(2)
		for _, e := range v {
			n += valueSize(e) + 2
		}
		return n
	case map[string]any:
		n := int64(2)
		for k, e := range v {
			n += int64(len(k)) + valueSize(e) + 4
		}
		return n
	case duckdb.Map:
		n := int64(2)
		for k, e := range v {
			n += valueSize(k) + valueSize(e) + 4
		}
		return n
	}
	return 40
}

// readResult runs st with args and hands its rows to sink, up to
// lim.rows. With size nil st is wrapQuery's, whose last column,
// shredduck_over, says where the rows pass lim.bytes; else size counts
// the bytes of each value and st has only cols.
func readResult(ctx context.Context, st *duckdb.Stmt, args []driver.NamedValue, cols []Column, lim limits, sink Sink, size func(any) int64) (Result, error) {
	rows, err := st.QueryContext(ctx, args)
	if err != nil {
		return Result{}, sqlError(ctx, err)
	}
	defer rows.Close()

	dbt, _ := rows.(driver.RowsColumnTypeDatabaseTypeName)
	for i := range cols {
		if cols[i].Type == "" && dbt != nil {
			cols[i].Type = dbt.ColumnTypeDatabaseTypeName(i)
		}
	}
	if err := sink.Columns(cols); err != nil {
		return Result{}, err
	}
	var res Result
	dest := make([]driver.Value, len(cols), len(cols)+1)
	if size == nil {
		dest = dest[:len(cols)+1] // and shredduck_over
	}
	row := make([]any, len(cols))
	var bytes int64
	for {
		if err := rows.Next(dest); err == io.EOF {
			break
		} else if err != nil {
			return Result{}, sqlError(ctx, err)
		}
		over := false
		if size == nil {
			over, _ = dest[len(cols)].(bool)
		} else {
			for _, v := range dest {
				bytes += size(v)
			}
			over = bytes > lim.bytes
		}
		if over || res.Rows == lim.rows {
			res.Truncated = true
			break
		}
		for i, v := range dest[:len(cols)] {
			row[i] = v
		}
		if ok, err := sink.Row(row); err != nil {
			return Result{}, err
		} else if !ok {
			res.Truncated = true
			break
		}
		res.Rows++
		if res.Rows%1024 == 0 && ctx.Err() != nil {
			return Result{}, ctx.Err()
		}
	}
	if res.Truncated && res.Rows == 0 && lim.rows > 0 {
		return Result{}, &Error{Kind: KindTooLarge, Code: CodeLimits,
			Msg: fmt.Sprintf("the first row of the result is larger than the response limit of %d bytes", lim.bytes)}
	}
	return res, nil
}
