package ingest

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/duckdb/duckdb-go/v2"
	"github.com/duckdb/duckdb-go/v2/mapping"
)

// failingReader yields its records, then fails with err.
type failingReader struct {
	schema *arrow.Schema
	recs   []arrow.RecordBatch
	cur    arrow.RecordBatch
	err    error
	refs   atomic.Int64
}

func (r *failingReader) Retain()                        { r.refs.Add(1) }
func (r *failingReader) Release()                       { r.refs.Add(-1) }
func (r *failingReader) Schema() *arrow.Schema          { return r.schema }
func (r *failingReader) RecordBatch() arrow.RecordBatch { return r.cur }
func (r *failingReader) Record() arrow.RecordBatch      { return r.cur }
func (r *failingReader) Err() error                     { return r.err }
func (r *failingReader) Next() bool {
	if len(r.recs) == 0 {
		r.cur = nil
		return false
	}
	r.cur, r.recs = r.recs[0], r.recs[1:]
	return true
}

// newFailingReader returns a reader of one BIGINT column i that yields
// rows 0..n-1 and then fails.
func newFailingReader(n int) *failingReader {
	schema := arrow.NewSchema([]arrow.Field{{Name: "i", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	for i := range n {
		b.Append(int64(i))
	}
	col := b.NewArray()
	defer col.Release()
	r := &failingReader{schema: schema, err: errors.New("the reader broke")}
	r.recs = []arrow.RecordBatch{array.NewRecordBatch(schema, []arrow.Array{col}, int64(n))}
	r.refs.Store(1)
	return r
}

// rawTestConn returns a connection to a new in-memory database and its C
// handle.
func rawTestConn(t *testing.T) (*sql.Conn, mapping.Connection) {
	t.Helper()
	db, err := Open("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.SQL.Close() })
	conn, err := db.SQL.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	var raw mapping.Connection
	if err := conn.Raw(func(dc any) error {
		var err error
		raw, err = RawConn(dc.(*duckdb.Conn))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return conn, raw
}

// TestRegisterViewReaderFails: a stream whose reader fails after some
// records makes the INSERT ... SELECT from its view fail with the
// reader's error, and none of its rows is committed, even by a COMMIT;
// the released stream lets go of the reader.
func TestRegisterViewReaderFails(t *testing.T) {
	ctx := context.Background()
	conn, raw := rawTestConn(t)
	for _, q := range []string{"CREATE TABLE t (i BIGINT)", "BEGIN TRANSACTION"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatal(q, err)
		}
	}
	r := newFailingReader(5000)
	release, err := registerView(raw, r, "failing_view")
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.ExecContext(ctx, "INSERT INTO t SELECT i FROM failing_view")
	release()
	if err == nil || !strings.Contains(err.Error(), "the reader broke") {
		t.Fatalf("INSERT from a failing stream: err = %v, want the reader's error", err)
	}
	if n := r.refs.Load(); n != 1 {
		t.Errorf("after release the reader has %d references, want 1 (its own)", n)
	}
	// Whether or not DuckDB aborted the transaction, the failed
	// statement's rows are gone.
	conn.ExecContext(ctx, "COMMIT")
	var n int
	if err := conn.QueryRowContext(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d rows committed from the failed INSERT", n)
	}
}

// TestRegisterViewRefused: when DuckDB refuses the scan (here in an
// aborted transaction), registerView says so and frees the stream.
func TestRegisterViewRefused(t *testing.T) {
	ctx := context.Background()
	conn, raw := rawTestConn(t)
	if _, err := conn.ExecContext(ctx, "BEGIN TRANSACTION"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "SELECT error('abort the transaction')"); err == nil {
		t.Fatal("error() did not fail")
	}
	r := newFailingReader(10)
	release, err := registerView(raw, r, "refused_view")
	if err == nil {
		release()
		t.Fatal("arrow scan in an aborted transaction succeeded")
	}
	if !strings.Contains(err.Error(), "refused_view") {
		t.Errorf("err = %v, want it to name the view", err)
	}
	if n := r.refs.Load(); n != 1 {
		t.Errorf("after the refused scan the reader has %d references, want 1 (its own)", n)
	}
}
