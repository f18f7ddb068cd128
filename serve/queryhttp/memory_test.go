package queryhttp

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Queries that would hold more than their share of DuckDB's memory are
// stopped with 503; the rest is left to commits.
func TestQueryMemoryGuard(t *testing.T) {
	db := queryDB(t)
	h := NewHandler(db, Config{MaxMemory: 32 << 20, Timeout: time.Minute})
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
	if !strings.Contains(r.body, "this query alone held") || !strings.Contains(r.body, "raise --query-max-memory") {
		t.Errorf("the answer does not say that the query alone outgrew the limit and how to raise it: %s", r.body)
	}
	// A small query right after is not touched.
	small := "SELECT count(*), max(name) FROM otel_traces, range(1000)"
	if r := postQuery(t, h, "/v1/query", "text/plain", small); r.status != http.StatusOK {
		t.Errorf("a small query right after: %d %s", r.status, r.body)
	}
}

// Fair queries: while two clients loop a query that outgrows the memory
// share, a dashboard query beside them keeps being answered: the guard
// stops the heavy ones, one at a time, and lets everything else run.
func TestQueryMemoryFair(t *testing.T) {
	db := queryDB(t)
	h := NewHandler(db, Config{MaxMemory: 32 << 20, Timeout: time.Minute})
	heavy := "SELECT count(*) FROM (SELECT DISTINCT i::VARCHAR || repeat('x', 20) FROM range(3000000) t(i))"
	dashboard := "SELECT name, count(*) AS c FROM otel_traces GROUP BY ALL ORDER BY c DESC LIMIT 5"
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var heavyStopped, heavyOther atomic.Int64
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				r := postQuery(t, h, "/v1/query", "text/plain", heavy)
				if r.status == http.StatusServiceUnavailable && strings.Contains(r.body, "--query-max-memory") {
					heavyStopped.Add(1)
				} else {
					heavyOther.Add(1)
					t.Logf("heavy: %d %.200s", r.status, r.body)
				}
			}
		}()
	}
	ok, tries := 0, 0
	var first string
	// At least 3 s and 40 tries (a loaded machine answers few in 3 s,
	// and one failure in 9 is already below 90%), at most 20 s.
	start := time.Now()
	for time.Since(start) < 3*time.Second || (tries < 40 && time.Since(start) < 20*time.Second) {
		r := postQuery(t, h, "/v1/query", "text/plain", dashboard)
		tries++
		if r.status == http.StatusOK {
			ok++
		} else if first == "" {
			first = fmt.Sprintf("%d %s", r.status, r.body)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("dashboard %d of %d answered; heavy queries stopped %d, other %d", ok, tries, heavyStopped.Load(), heavyOther.Load())
	if heavyStopped.Load() == 0 {
		t.Error("no heavy query was stopped: the test checked nothing")
	}
	if ok*10 < tries*9 {
		t.Errorf("dashboard %d of %d answered beside the heavy queries, want 90%%; e.g. %s", ok, tries, first)
	}
}
