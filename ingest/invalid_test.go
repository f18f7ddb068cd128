package ingest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/shredduck/shredduck/transforms"
)

// TestInvalidatedDatabase: a commit failing with an internal error of
// DuckDB's closes Invalidated once a query confirms that DuckDB
// invalidated the database; a failure that leaves the database usable
// (out of memory, or internal while queries still run) does not.
func TestInvalidatedDatabase(t *testing.T) {
	db, c := openCommitter(t, nil)
	fail := func(e error) error {
		f := func() error { return e }
		commitFault.Store(&f)
		defer commitFault.Store(nil)
		return c.Submit(context.Background(), "otel_traces", transforms.Traces, spanBatch(t, 1, 3), 1)
	}
	internal := &duckdb.Error{Type: duckdb.ErrorTypeInternal, Msg: "INTERNAL Error: Could not find node in column segment tree!"}
	closed := func() bool {
		select {
		case <-db.Invalidated():
			return true
		default:
			return false
		}
	}

	// The database still answers queries (the real probe): not invalidated.
	for _, e := range []error{internal, &duckdb.Error{Type: duckdb.ErrorTypeOutOfMemory, Msg: "Out of Memory Error: could not allocate block"}} {
		if err := fail(e); err == nil {
			t.Fatalf("%v: the submission succeeded", e)
		}
		if closed() || db.InvalidatedErr() != nil {
			t.Fatalf("%v: invalidated while queries still run", e)
		}
	}

	// DuckDB refuses every statement now, as after it invalidated a
	// database: the probe gives its message.
	probed := 0
	db.invalid.test = func() error {
		probed++
		return &duckdb.Error{Type: duckdb.ErrorTypeFatal, Msg: "FATAL Error: Failed: database has been invalidated because of a previous fatal error. The database must be restarted prior to being used again."}
	}
	if err := fail(&duckdb.Error{Type: duckdb.ErrorTypeOutOfMemory, Msg: "Out of Memory Error"}); err == nil || probed != 0 {
		t.Fatalf("out of memory: err %v, %d probes (want none)", err, probed)
	}
	if err := fail(internal); err == nil {
		t.Fatal("the submission succeeded")
	}
	select {
	case <-db.Invalidated():
	case <-time.After(10 * time.Second):
		t.Fatal("Invalidated not closed after an internal error and a refused probe")
	}
	if err := db.InvalidatedErr(); !errors.Is(err, ErrInvalidated) {
		t.Fatalf("InvalidatedErr: %v", err)
	}
	if got := db.InvalidatedErr().Error(); !strings.Contains(got, "segment tree") || !strings.Contains(got, "restart") {
		t.Errorf("InvalidatedErr says %q: want the cause and what to do", got)
	}
	// Once is enough: no more probes.
	n := probed
	fail(internal)
	if probed != n {
		t.Errorf("%d more probes after the database was known invalidated", probed-n)
	}
}
