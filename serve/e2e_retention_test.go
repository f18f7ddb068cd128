//go:build e2e

package serve

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/shredduck/shredduck/ingest"
)

// retentionRequest is request seq: spans started now, or (old) three
// hours ago, past a one-hour retention.
func retentionRequest(seq int, old bool, payload int) []byte {
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	start := time.Now()
	if old {
		start = start.Add(-3 * time.Hour)
	}
	for i := range crashSpansPerRequest {
		s := ss.Spans().AppendEmpty()
		s.SetName("op")
		s.SetTraceID(pcommon.TraceID{0xd0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, byte(seq >> 24), byte(seq >> 16), byte(seq >> 8), byte(seq), 1})
		s.SetSpanID(pcommon.SpanID{0xd1, 0, byte(seq >> 24), byte(seq >> 16), byte(seq >> 8), byte(seq), 0, byte(i + 1)})
		s.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
		s.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(time.Millisecond)))
		s.Attributes().PutStr("crash.id", fmt.Sprintf("r%06d-%02d", seq, i))
		s.Attributes().PutInt("crash.seq", int64(seq))
		s.Attributes().PutBool("crash.old", old)
		s.Attributes().PutStr("crash.payload", strings.Repeat("x", payload+i))
	}
	b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		panic(err)
	}
	return b
}

// e2eQueryInt runs a one-number query through the child's /v1/query.
func e2eQueryInt(t *testing.T, c *e2eChild, q string) int64 {
	t.Helper()
	resp, err := http.Post(c.url+"/v1/query", "application/sql", strings.NewReader(q))
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer resp.Body.Close()
	var out struct{ Rows [][]json.Number }
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil || len(out.Rows) != 1 || len(out.Rows[0]) != 1 {
		t.Fatalf("%s: %s %v %v", q, resp.Status, out, err)
	}
	n, _ := out.Rows[0][0].Int64()
	return n
}

// e2eMetric returns a sample of the child's /metrics (0 if absent).
func e2eMetric(c *e2eChild, name string) float64 {
	resp, err := http.Get(c.url + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindSubmatch(b)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

// TestCrashRetention kills shredduck serve with SIGKILL while its
// retention deletes expired spans in small steps and clients send both
// expired and current spans; after each restart the file opens, every
// acknowledged current span is there exactly once, every request of
// current spans is whole or absent, and in the end every expired span is
// gone.
func TestCrashRetention(t *testing.T) { crashRetention(t, "") }

// TestCrashRetentionAckLog is TestCrashRetention with --ack log: the
// expiry steps take turns with the loader.
func TestCrashRetentionAckLog(t *testing.T) {
	crashRetention(t, "", "--ack", "log", "--max-visibility-lag", "100ms")
}

// TestCrashRetentionExport is TestCrashRetention with --export-dir: the
// kills also land between an hour's (or a late file's) Parquet and the
// COMMIT of its DELETE; in the end every acknowledged expired request is
// in the export exactly once, whole.
func TestCrashRetentionExport(t *testing.T) {
	dir := t.TempDir()
	crashRetention(t, dir, "--export-dir", dir, "--export-delay", "1ms")
}

func crashRetention(t *testing.T, exportDir string, extra ...string) {
	bin := e2eBuildShredduck(t)
	db := filepath.Join(t.TempDir(), "retention.duckdb")
	flags := append([]string{"--retention-traces", "1h", "--retention-interval", "20ms", "--retention-step-rows", "500", "--checkpoint-threshold", "2MB"}, extra...)
	const rounds, workers = 4, 4
	var (
		mu       sync.Mutex
		outcomes = map[int]crashOutcome{}
		seq      atomic.Int64
	)
	isOld := func(n int) bool { return n%2 == 0 }
	client := &http.Client{Timeout: 30 * time.Second}
	for round := range rounds {
		child := e2eStartChild(t, bin, db, flags...)
		var acked atomic.Int64
		killAt := int64(150 + 60*round)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		var wg sync.WaitGroup
		var killed, checking atomic.Bool
		var expiredBefore float64
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					n := int(seq.Add(1))
					out := crashPost(ctx, client, child.url, retentionRequest(n, isOld(n), 200))
					mu.Lock()
					outcomes[n] = out
					mu.Unlock()
					// Kill once past killAt and once something expired: with
					// --ack log the first expiry waits for the loader.
					if out == crashAcked && acked.Add(1) >= killAt && !killed.Load() && checking.CompareAndSwap(false, true) {
						if v := e2eMetric(child, `shredduck_retention_rows_expired_total{table="otel_traces"}`); v > 0 {
							expiredBefore = v
							killed.Store(true)
							child.cmd.Process.Signal(syscall.SIGKILL)
						}
						checking.Store(false)
					}
					if out == crashFailed {
						select {
						case <-child.exited:
							return
						case <-time.After(10 * time.Millisecond):
						}
					}
				}
			}()
		}
		select {
		case <-child.exited:
		case <-ctx.Done():
			t.Fatalf("round %d: %d acknowledged in 60s\n%s", round, acked.Load(), child.log())
		}
		cancel()
		wg.Wait()
		child.kill()
		if ws, ok := child.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("round %d: the child did not die of SIGKILL: %v\n%s", round, child.cmd.ProcessState, child.log())
		}
		if !killed.Load() {
			t.Fatalf("round %d: the child died before anything expired\n%s", round, child.log())
		}
		t.Logf("round %d: killed after %d acknowledged requests, %.0f spans expired in the round", round, acked.Load(), expiredBefore)
	}

	// The last start: retention finishes, then a clean stop.
	child := e2eStartChild(t, bin, db, flags...)
	deadline := time.Now().Add(60 * time.Second)
	expired := fmt.Sprintf(`SELECT count(*) FROM otel_traces WHERE start_time < make_timestamp_ns(%d)`, time.Now().Add(-2*time.Hour).UnixNano())
	for e2eQueryInt(t, child, expired) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("expired spans still there after 60s\n%s", child.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	child.stop()

	d, err := ingest.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	present := map[int]bool{}
	keyQuery(t, d, `SELECT "crash.seq", count(*), count(DISTINCT "crash.id") FROM otel_traces GROUP BY 1`, nil, func(rows *sql.Rows) error {
		var s, cnt, ids int
		if err := rows.Scan(&s, &cnt, &ids); err != nil {
			return err
		}
		present[s] = true
		switch {
		case isOld(s):
			t.Errorf("request %d of expired spans is still there (%d rows)", s, cnt)
		case cnt != crashSpansPerRequest || ids != cnt:
			t.Errorf("request %d: %d rows, %d distinct; want %d, once each", s, cnt, ids, crashSpansPerRequest)
		}
		return nil
	})
	if exportDir != "" {
		exported := map[int]bool{}
		q := `SELECT "crash.seq", count(*), count(DISTINCT "crash.id") FROM read_parquet('` + exportDir +
			`/otel_traces/**/*.parquet', hive_partitioning = true, union_by_name = true) GROUP BY 1`
		rows, err := d.SQL.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var s, cnt, ids int
			if err := rows.Scan(&s, &cnt, &ids); err != nil {
				t.Fatal(err)
			}
			exported[s] = true
			if isOld(s) && (cnt != crashSpansPerRequest || ids != cnt) {
				t.Errorf("expired request %d in the export: %d rows, %d distinct; want %d, once each", s, cnt, ids, crashSpansPerRequest)
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
		var ackedOld int
		for s, out := range outcomes {
			if out == crashAcked && isOld(s) {
				ackedOld++
				if !exported[s] {
					t.Errorf("acknowledged request %d of expired spans is not in the export", s)
				}
			}
		}
		late, _ := filepath.Glob(filepath.Join(exportDir, "otel_traces", "*", "*", "late-*.parquet"))
		t.Logf("%d acknowledged requests of expired spans, all in the export once (%d late files)", ackedOld, len(late))
	}
	var ackedCurrent int
	for s, out := range outcomes {
		if out == crashAcked && !isOld(s) {
			ackedCurrent++
			if !present[s] {
				t.Errorf("acknowledged request %d of current spans is missing", s)
			}
		}
	}
	t.Logf("%d requests sent, %d acknowledged with current spans (all present)", len(outcomes), ackedCurrent)
	if st, err := os.Stat(db); err == nil {
		t.Logf("file: %d bytes", st.Size())
	}
}
