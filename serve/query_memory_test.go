package serve

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shredduck/shredduck/serve/sqlpolicy"
)

// Queries that would hold more than their share of DuckDB's memory are
// stopped with 503; the rest is left to commits.
func TestQueryMemoryGuard(t *testing.T) {
	db := queryDB(t)
	h := NewQueryHandler(db, QueryConfig{MaxMemory: 32 << 20, Timeout: time.Minute})
	start := time.Now()
	r := postQuery(t, h, "/v1/query", "text/plain", "SELECT count(DISTINCT i) FROM range(30000000) t(i)")
	if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" || !strings.Contains(r.body, "kept for ingest") {
		t.Fatalf("%d %v %s", r.status, r.header, r.body)
	}
	t.Logf("stopped after %v: %s", time.Since(start), r.body)
	peak := h.(*queryHandler).policy.PeakMemory()
	if peak > 96<<20 {
		t.Errorf("queries held %d MiB before they were stopped", peak>>20)
	}
	// Then new queries wait a moment, so that commits get the memory
	// before clients retrying at once take it back.
	small := "SELECT count(*), max(name) FROM otel_traces, range(1000)"
	if r := postQuery(t, h, "/v1/query", "text/plain", small); r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
		t.Errorf("right after: %d %s", r.status, r.body)
	}
	// Small queries are not touched once the pause is over. It counts from
	// when DuckDB really stopped the big one, which may be after its
	// answer (under the race detector, hundreds of milliseconds).
	time.Sleep(sqlpolicy.MemoryPause)
	deadline := time.Now().Add(5 * sqlpolicy.MemoryPause)
	for {
		r := postQuery(t, h, "/v1/query", "text/plain", small)
		if r.status == http.StatusOK {
			break
		}
		if r.status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("a small query after the pause: %d %s", r.status, r.body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Group commits and heavy queries share DuckDB's memory limit: no ingest
// request fails while queries run. Before the guard, commits failed with
// "Out of Memory" at the default 256MB.
func TestQueriesDoNotFailIngest(t *testing.T) {
	ts := startServer(t, Config{MemoryLimit: "128MB"})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var queries, stopped atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				r := ts.post("/v1/query", "application/sql", "", []byte("SELECT count(DISTINCT i) FROM range(20000000) t(i)"))
				queries.Add(1)
				switch r.status {
				case http.StatusOK:
				case http.StatusServiceUnavailable:
					stopped.Add(1)
				default:
					t.Errorf("query: %d %s", r.status, r.body)
				}
			}
		}()
	}
	failed := 0
	var first string
	for i := range 150 {
		ids := make([]string, 25)
		for k := range ids {
			ids[k] = fmt.Sprintf("%d-%d-%s", i, k, strings.Repeat("x", 200))
		}
		r := ts.post("/v1/traces", "application/x-protobuf", "", tracesProto(t, ids...))
		if r.status != http.StatusOK {
			failed++
			first = fmt.Sprintf("%d %s", r.status, r.body)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d queries, %d stopped", queries.Load(), stopped.Load())
	if failed > 0 {
		t.Errorf("%d of 150 ingest requests failed while queries ran, e.g. %s", failed, first)
	}
	if n := ts.count("otel_traces"); n != (150-failed)*25 {
		t.Errorf("%d spans", n)
	}
}
