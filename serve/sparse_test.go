package serve

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/shredduck/shredduck/shred"
)

// TestSparseKeysServer: concurrent requests whose spans carry 10 of 2,000
// keys each (each key on ~0.5% of the spans) under the default density
// rule and memory limit are all taken; the table stores a handful of
// columns, and every key reads its exact count through /v1/query.
func TestSparseKeysServer(t *testing.T) {
	ts := startServerDensity(t, filepath.Join(t.TempDir(), "s.duckdb"), Config{}, 0.01)
	const senders, each, spans, keys, perSpan = 4, 10, 40, 2000, 10
	var (
		mu    sync.Mutex
		count = map[string]int{}
		wg    sync.WaitGroup
		fails []string
	)
	start := time.Now()
	for w := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for r := range each {
				td := ptrace.NewTraces()
				rs := td.ResourceSpans().AppendEmpty()
				rs.Resource().Attributes().PutStr("service.name", "sparse")
				ss := rs.ScopeSpans().AppendEmpty()
				local := map[string]int{}
				for s := range spans {
					sp := ss.Spans().AppendEmpty()
					var tid pcommon.TraceID
					copy(tid[:], fmt.Sprintf("%02d%04d%04d", w, r, s))
					sp.SetTraceID(tid)
					sp.SetName("op")
					sp.Attributes().PutStr("http.route", "/r")
					for _, k := range rng.Perm(keys)[:perSpan] {
						key := fmt.Sprintf("hdr.%d", k)
						sp.Attributes().PutStr(key, "v")
						local[key]++
					}
				}
				body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
				if err != nil {
					t.Error(err)
					return
				}
				resp := ts.post("/v1/traces", "application/x-protobuf", "", body)
				mu.Lock()
				if resp.status != http.StatusOK {
					fails = append(fails, fmt.Sprintf("%d %s", resp.status, resp.body))
				} else {
					for k, n := range local {
						count[k] += n
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("sent in %v", time.Since(start))
	if len(fails) > 0 {
		t.Fatalf("%d of %d requests refused, e.g. %s", len(fails), senders*each, fails[0])
	}
	// The core columns, the young table's budget (the first keys seen)
	// and a handful that passed the density rule by chance.
	if n := storedColumns(t, ts.db, "otel_traces"); n > 60+shred.DefaultYoung {
		t.Errorf("otel_traces has %d columns for 1 dense key and %d sparse ones", n, len(count))
	}
	// 200 keys' counts, 50 at a time, through the query endpoint (a query
	// naming hundreds of overflowed keys takes DuckDB seconds to prepare).
	var ks []string
	for k := range count {
		ks = append(ks, k)
	}
	ks = ks[:200]
	for len(ks) > 0 {
		chunk := ks[:min(50, len(ks))]
		ks = ks[len(chunk):]
		var sel, want []string
		for _, k := range chunk {
			sel = append(sel, `count("`+k+`")`)
			want = append(want, fmt.Sprint(count[k]))
		}
		r := ts.post("/v1/query", "text/plain", "", []byte("SELECT "+strings.Join(sel, ", ")+" FROM otel_traces"))
		if r.status != http.StatusOK || !strings.Contains(string(r.body), "[["+strings.Join(want, ",")+"]]") {
			t.Fatalf("key counts through /v1/query: %d %.300s\nwant [[%.200s...]]", r.status, r.body, strings.Join(want, ","))
		}
	}
}
