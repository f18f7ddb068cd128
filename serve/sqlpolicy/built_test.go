package sqlpolicy

import (
	"context"
	"errors"
	"reflect"
	"testing"
)

// A statement DuckDB cannot describe at prepare (a parameter selected as
// a column: it describes one column, "unknown") still returns all its
// columns, by Run as by RunBuilt; so does a search joined to the rows it
// found, as serve/jaegerapi writes one.
func TestUndescribedColumns(t *testing.T) {
	p := policyDB(t, Config{})
	ctx := context.Background()
	f := func(sql string, args []any, wantCols []string, wantRows [][]any) {
		t.Helper()
		for name, run := range map[string]func(context.Context, Query, Sink) (Result, error){"Run": p.Run, "RunBuilt": p.RunBuilt} {
			var s rowsSink
			if _, err := run(ctx, Query{SQL: sql, Args: args}, &s); err != nil {
				t.Fatalf("%s %q: %v", name, sql, err)
			}
			var cols []string
			for _, c := range s.cols {
				cols = append(cols, c.Name)
			}
			if !reflect.DeepEqual(cols, wantCols) || !reflect.DeepEqual(s.rows, wantRows) {
				t.Errorf("%s %q: columns %v rows %v, want %v %v", name, sql, cols, s.rows, wantCols, wantRows)
			}
		}
	}
	f("SELECT i, name, $1 AS x FROM t WHERE i < 2 ORDER BY i", []any{"a"},
		[]string{"i", "name", "x"}, [][]any{{int64(0), "n0", "a"}, {int64(1), "n1", "a"}})
	f("SELECT t.i, t.name, s.x FROM t JOIN (SELECT i, $1 AS x FROM t WHERE i >= $2 ORDER BY i DESC LIMIT 2) s USING (i) ORDER BY t.i", []any{int64(7), int64(1)},
		[]string{"i", "name", "x"}, [][]any{{int64(3), "n3", int64(7)}, {int64(4), "n4", int64(7)}})
}

// RunBuilt keeps the policy's row and byte limits, also for a statement
// of stored columns alone, which runs outside a transaction.
func TestRunBuiltLimits(t *testing.T) {
	ctx := context.Background()
	p := policyDB(t, Config{MaxRows: 2})
	for _, stored := range []bool{false, true} {
		var s rowsSink
		res, err := p.RunBuilt(ctx, Query{SQL: "SELECT i FROM t ORDER BY i", Stored: stored}, &s)
		if err != nil || !res.Truncated || res.Rows != 2 || len(s.rows) != 2 || s.rows[1][0] != int64(1) {
			t.Errorf("MaxRows 2, Stored %v: %+v %v, rows %v", stored, res, err, s.rows)
		}
	}
	p = policyDB(t, Config{MaxBytes: 100})
	s := rowsSink{}
	res, err := p.RunBuilt(ctx, Query{SQL: "SELECT repeat('x', 30) AS x FROM t"}, &s)
	if err != nil || !res.Truncated || res.Rows != 3 {
		t.Errorf("MaxBytes 100, rows of 30 bytes: %+v %v", res, err)
	}
	_, err = p.RunBuilt(ctx, Query{SQL: "SELECT repeat('x', 300) AS x FROM t"}, &rowsSink{})
	var pe *Error
	if !errors.As(err, &pe) || pe.Kind != KindTooLarge {
		t.Errorf("a first row over MaxBytes: %v", err)
	}
	// A column the driver cannot scan as it is is cast, as for Run.
	s = rowsSink{}
	if _, err := p.RunBuilt(ctx, Query{SQL: `SELECT CAST('{"a": 1}' AS JSON) AS j`}, &s); err != nil || len(s.rows) != 1 || s.rows[0][0] != `{"a": 1}` {
		t.Errorf("JSON column: %v %v", s.rows, err)
	}
}
