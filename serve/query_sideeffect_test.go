//go:build unix

package serve

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A statement the query policy refuses has no side effect, even in the
// export directory, the one directory DuckDB may write to and read from:
// it is refused from its parse, before DuckDB prepares it (preparing
// EXPORT DATABASE creates its directory, preparing COPY ... FROM reads the
// file, and CREATE SECRET registers its storage). The same statements over
// PostgreSQL: serve/pgwire's TestPGRefusedHasNoSideEffect.
func TestQueryRefusedHasNoSideEffect(t *testing.T) {
	exp := t.TempDir()
	ts := startServer(t, Config{Export: Export{Dir: exp, Delay: time.Hour, Interval: time.Hour}})
	ts.good()
	fifo := filepath.Join(exp, "otel_traces", "date=2026-01-01", "hour=00", "data.parquet")
	if err := os.MkdirAll(filepath.Dir(fifo), 0o755); err != nil {
		t.Fatal(err)
	}
	// A FIFO: a read of it (DuckDB opening the file while preparing)
	// would block the request, and a reader holding it open is seen.
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	planted := filepath.Join(exp, "otel_traces", "date=2026-01-02", "hour=05")
	for _, c := range []struct{ sql, why string }{
		{"EXPORT DATABASE '" + planted + "'", "got EXPORT"},
		{"EXPORT DATABASE '" + planted + "' (FORMAT parquet)", "got EXPORT"},
		{"COPY otel_traces FROM '" + fifo + "'", "got COPY"},
		{"COPY otel_traces FROM '" + fifo + "' (FORMAT parquet)", "got COPY"},
		{"CREATE SECRET s (TYPE s3, KEY_ID 'k', SECRET 'v')", "got CREATE"},
		{"CREATE SECRET s (TYPE s3, KEY_ID 'k', SECRET 'v')", "got CREATE"}, // the same answer again: nothing was registered
		{"CREATE PERSISTENT SECRET p (TYPE s3, KEY_ID 'k', SECRET 'v')", "got CREATE"},
		{"COPY (SELECT 1) TO '" + filepath.Join(exp, "x.csv") + "'", "got COPY"},
	} {
		r := ts.post("/v1/query", "text/plain", "", []byte(c.sql))
		var e struct{ Error string }
		json.Unmarshal(r.body, &e)
		if r.status != http.StatusBadRequest || !strings.Contains(e.Error, "only SELECT statements are allowed ("+c.why+")") {
			t.Errorf("%s: %d %s, want 400 %q", c.sql, r.status, r.body, c.why)
		}
	}
	if _, err := os.Stat(filepath.Join(exp, "otel_traces", "date=2026-01-02")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused EXPORT DATABASE left %s: %v", planted, err)
	}
	if _, err := os.Stat(filepath.Join(exp, "x.csv")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused COPY TO wrote a file: %v", err)
	}
	// Opening a FIFO to write without blocking fails while no reader has
	// it open.
	if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); !errors.Is(err, syscall.ENXIO) {
		if f != nil {
			f.Close()
		}
		t.Errorf("a refused COPY FROM left the file open for reading: %v", err)
	}
	if r := ts.post("/v1/query", "text/plain", "", []byte("SELECT count(*) AS n FROM otel_traces")); r.status != http.StatusOK || !strings.Contains(string(r.body), `[1]`) {
		t.Errorf("a query after the refusals: %d %s", r.status, r.body)
	}
}
