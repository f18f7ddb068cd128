package sqlpolicy

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/shredduck/shredduck/ingest"
)

func policyDB(t *testing.T, cfg Config) *Policy {
	t.Helper()
	db, err := ingest.Open(filepath.Join(t.TempDir(), "p.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.SQL.Exec(`CREATE TABLE t AS SELECT i, 'n' || i AS name, {'a': i} AS s FROM range(5) r(i)`); err != nil {
		t.Fatal(err)
	}
	if err := LockDown(db); err != nil {
		t.Fatal(err)
	}
	return New(db, cfg)
}

// rowsSink keeps what it gets.
type rowsSink struct {
	cols []Column
	rows [][]any
}

func (s *rowsSink) Columns(cols []Column) error { s.cols = cols; return nil }

func (s *rowsSink) Row(vals []any) (bool, error) {
	s.rows = append(s.rows, append([]any(nil), vals...))
	return true, nil
}

// Describe gives the columns and DuckDB's parameter types without
// running the query; Run binds the arguments; NestedJSON selects nested
// values as JSON text.
func TestDescribeAndRun(t *testing.T) {
	p := policyDB(t, Config{})
	ctx := context.Background()
	q := Query{SQL: "SELECT name, s FROM t WHERE i >= $1 AND name <> $2 ORDER BY i", NestedJSON: true}
	d, err := p.Describe(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Params) != 2 || d.Params[0] != duckdb.TYPE_BIGINT || d.Params[1] != duckdb.TYPE_VARCHAR {
		t.Errorf("params %v", d.Params)
	}
	if len(d.Columns) != 2 || d.Columns[0].Name != "name" || d.Columns[1].Cast != CastNestedJSON {
		t.Errorf("columns %+v", d.Columns)
	}
	q.Args = []any{int64(3), "n4"}
	var sink rowsSink
	res, err := p.Run(ctx, q, &sink)
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 1 || sink.rows[0][0] != "n3" || sink.rows[0][1] != `{"a":3}` {
		t.Errorf("%+v %v", res, sink.rows)
	}
	if _, err := p.Describe(ctx, Query{SQL: "DELETE FROM t"}); !isKind(err, KindRefused) {
		t.Errorf("DELETE: %v", err)
	}
}

// A query's temporary objects exist for it alone: the pooled connections
// hold none afterwards.
func TestTempsDropped(t *testing.T) {
	p := policyDB(t, Config{})
	ctx := context.Background()
	q := Query{SQL: "SELECT shredduck_answer() + 0", Temps: []Temp{
		{Kind: "MACRO", Name: "shredduck_answer", Def: "() AS 42"},
		{Kind: "VIEW", Name: "shredduck_view", Def: " AS SELECT 1 AS x"},
	}}
	for range 8 {
		var sink rowsSink
		if _, err := p.Run(ctx, q, &sink); err != nil || sink.rows[0][0] != int32(42) {
			t.Fatalf("%v %v", sink.rows, err)
		}
	}
	for range 8 {
		var sink rowsSink
		_, err := p.Run(ctx, Query{SQL: "SELECT shredduck_answer()"}, &sink)
		if !isKind(err, KindInvalid) {
			t.Fatalf("the macro outlived its query: %v %v", sink.rows, err)
		}
		if _, err := p.Run(ctx, Query{SQL: "SELECT * FROM shredduck_view"}, &sink); !isKind(err, KindInvalid) {
			t.Fatalf("the view outlived its query: %v", err)
		}
	}
}

func isKind(err error, k Kind) bool {
	var pe *Error
	return errors.As(err, &pe) && pe.Kind == k
}

// DuckDB running out of memory is KindMemory (503, 53200) wherever in a
// query's run it happens: in the key views, a prepare or the plan check
// as much as while rows are read (CI's e2e run answered 500 and 400).
func TestOutOfMemoryAnywhereIsMemory(t *testing.T) {
	p := policyDB(t, Config{})
	oom := &duckdb.Error{Type: duckdb.ErrorTypeOutOfMemory, Msg: "Out of Memory Error: failed to allocate data of size 4.0 KiB"}
	for _, e := range []error{
		oom,
		fmt.Errorf("cannot read the catalog's keys: %w", oom),
		errors.Join(errors.New("could not prepare query"), oom),
		failure(KindInternal, "", fmt.Errorf("cannot parse the query: %w", oom), "cannot parse the query"),
		failure(KindInvalid, "", oom, "this query cannot run as a subquery"),
		failure(KindUnavailable, "", oom, "cannot begin the query's transaction"),
	} {
		_, err := admit(context.Background(), p, "SELECT 1", func(context.Context) (int, error) { return 0, e })
		var pe *Error
		if !errors.As(err, &pe) || pe.Kind != KindMemory || pe.Code != "53200" {
			t.Errorf("%v: got %#v, want KindMemory 53200", e, err)
		}
	}
	other := &duckdb.Error{Type: duckdb.ErrorTypeBinder, Msg: "Binder Error: no such column"}
	if err := failure(KindInvalid, "42703", other, other.Msg); err.Kind != KindInvalid {
		t.Errorf("a binder error became %v", err.Kind)
	}
	_, err := admit(context.Background(), p, "SELECT 1", func(context.Context) (int, error) { return 0, errors.New("boom") })
	if !isKind(err, KindInternal) {
		t.Errorf("a plain error: %v", err)
	}
}
