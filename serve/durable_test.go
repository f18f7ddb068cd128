package serve

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/ingestlog"
	"github.com/shredduck/shredduck/source/logload"
)

// send posts an OTLP/HTTP protobuf body without waiting for its load.
func (ts *testServer) send(body []byte) response {
	ts.t.Helper()
	resp, err := ts.client.Post(ts.url+"/v1/traces", "application/x-protobuf", bytes.NewReader(body))
	if err != nil {
		ts.t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: b.Bytes()}
}

// stallLoader holds the loader before each record it reads while the
// returned flag is set (set at first); the test's cleanup lets it go.
func (ts *testServer) stallLoader() *atomic.Bool {
	var stalled atomic.Bool
	stalled.Store(true)
	stall := func() {
		for stalled.Load() {
			time.Sleep(time.Millisecond)
		}
	}
	ts.srv.beforeLoad.Store(&stall)
	ts.t.Cleanup(func() { ts.srv.beforeLoad.Store(nil); stalled.Store(false) })
	return &stalled
}

// fillLog sends request(i) for i = 0, 1, ... until one gets 503, which
// must have Retry-After and reason in its message; it returns the ids of
// the acknowledged ones.
func (ts *testServer) fillLog(max int, reason string, request func(i int) (string, []byte)) map[string]bool {
	ts.t.Helper()
	acked := map[string]bool{}
	for i := range max {
		id, body := request(i)
		switch r := ts.send(body); r.status {
		case http.StatusOK:
			acked[id] = true
		case http.StatusServiceUnavailable:
			if r.header.Get("Retry-After") == "" || !strings.Contains(string(r.body), reason) {
				ts.t.Fatalf("503 without Retry-After or %q: %v %s", reason, r.header, r.body)
			}
			return acked
		default:
			ts.t.Fatalf("%d %s", r.status, r.body)
		}
	}
	ts.t.Fatalf("%d requests taken, none refused", max)
	return nil
}

// With --ack log, 200 comes before the rows are visible and they become
// visible within the lag; a restart neither loses nor repeats a request,
// and loaded segments are removed.
func TestAckLogVisibleOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ack.duckdb")
	cfg := Config{Ack: AckLog, MaxVisibilityLag: 200 * time.Millisecond}
	ts := startServerAt(t, path, cfg)
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Go(func() {
			for i := range 10 {
				if r := ts.send(tracesProto(t, fmt.Sprintf("a%d-%d", c, i))); r.status != http.StatusOK {
					t.Errorf("%d %s", r.status, r.body)
				}
			}
		})
	}
	wg.Wait()
	deadline := time.Now().Add(5 * time.Second)
	// The gauge is set just after the commit that makes the rows visible.
	for (countRows(t, ts.db, "otel_traces") < 80 || ts.metricValue("shredduck_visibility_lag_seconds") == 0) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if lag := ts.metricValue("shredduck_visibility_lag_seconds"); lag <= 0 || lag > 2 {
		t.Errorf("visibility lag %gs, want a positive figure within the bound", lag)
	}
	// Every request's decoded rows reached the loader in memory: none was
	// decoded again from the log.
	if n := ts.metricValue("shredduck_ingest_log_decoded_again_total"); n != 0 {
		t.Errorf("the loader decoded %g logged requests again, want 0", n)
	}
	r := ts.post("/v1/ndjson/nd_traces", "application/x-ndjson", "", readTestdata(t, "traces.jsonl"))
	if r.status != http.StatusOK {
		t.Fatalf("NDJSON: %d %s", r.status, r.body)
	}
	before, nd := ts.count("otel_traces"), ts.count("nd_traces")
	if nd == 0 {
		t.Fatal("the NDJSON request stored nothing")
	}
	ts = ts.restart(cfg)
	ts.good()
	got := ts.ids("otel_traces")
	for c := range 8 {
		for i := range 10 {
			if id := fmt.Sprintf("a%d-%d", c, i); got[id] != 1 {
				t.Errorf("span %s is in the table %d times", id, got[id])
			}
		}
	}
	if n := ts.count("otel_traces"); n != before+1 {
		t.Errorf("%d rows after the restart and one request, want %d", n, before+1)
	}
	if n := ts.count("nd_traces"); n != nd {
		t.Errorf("NDJSON table: %d rows after the restart, want %d", n, nd)
	}
	if segs, _ := filepath.Glob(filepath.Join(path+".ingestlog", "*.seg")); len(segs) != 1 {
		t.Errorf("%d ingest log segments after the loads, want 1", len(segs))
	}
}

// While the loader is stalled the log fills to --log-max-bytes; then
// requests get 503 with Retry-After, a request larger than the log gets
// 413, and once the loader goes on every acknowledged request is stored
// once.
func TestAckLogFull(t *testing.T) {
	// A lag longer than filling the log takes, so that pacing does not
	// hold the requests first (TestAckLogPaces).
	ts := startServer(t, Config{Ack: AckLog, LogMaxBytes: 64 << 10, MaxVisibilityLag: 3 * time.Second})
	stalled := ts.stallLoader()
	acked := ts.fillLog(500, "full", func(i int) (string, []byte) {
		id := fmt.Sprintf("f%d", i)
		return id, tracesProto(t, id, id+"b", id+"c")
	})
	if len(acked) < 10 {
		t.Fatalf("the log took %d requests before it was full", len(acked))
	}
	big := make([]string, 2000)
	for i := range big {
		big[i] = fmt.Sprintf("big-%d-%s", i, strings.Repeat("x", 40))
	}
	if r := ts.send(tracesProto(t, big...)); r.status != http.StatusRequestEntityTooLarge {
		t.Errorf("a request larger than the log: %d %s", r.status, r.body)
	}
	stalled.Store(false)
	got := ts.ids("otel_traces")
	for id := range acked {
		if got[id] != 1 {
			t.Errorf("acknowledged %s is stored %d times", id, got[id])
		}
	}
	if len(got) != 3*len(acked) {
		t.Errorf("%d spans stored, %d acknowledged", len(got), 3*len(acked))
	}
	if r := ts.send(tracesProto(t, "after")); r.status != http.StatusOK {
		t.Errorf("after the loader caught up: %d %s", r.status, r.body)
	}
}

// A log left by a crash is loaded at start: whole requests once, a
// request whose body no longer decodes skipped and counted, and a corrupt
// sealed segment skipped with its bytes counted, the segments after it
// loaded.
func TestAckLogReplay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "replay.duckdb")
	dir := path + ".ingestlog"
	startServerAt(t, path, Config{Ack: AckLog}).close() // the log and the database know each other
	l, _, err := ingestlog.Open(ingestlog.Options{Dir: dir, SegmentBytes: 1500})
	if err != nil {
		t.Fatal(err)
	}
	body := func(id string) []byte {
		return logload.AppendRecord(nil, "otel_traces", logload.Body{Kind: logload.KindOTLP, Format: formatProto, Fixed: "otlp-traces", Data: tracesProto(t, id)}, time.Now())
	}
	var want []string
	for i := range 30 {
		id := fmt.Sprintf("r%d", i)
		if _, err := l.Append(context.Background(), body(id)); err != nil {
			t.Fatal(err)
		}
		want = append(want, id)
	}
	l.Append(context.Background(), []byte{1, logload.KindOTLP, byte(formatProto), 0, 0, 0, 0, 0, 0, 0, 0, 5, 't'}) // a bad header
	l.Close()
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	if len(segs) < 4 {
		t.Fatalf("%d segments, want at least 4", len(segs))
	}
	// Corrupt the second segment's first record.
	b, _ := os.ReadFile(segs[1])
	b[16+8+3] ^= 0xff
	os.WriteFile(segs[1], b, 0o644)

	ts := startServerAt(t, path, Config{Ack: AckLog})
	ts.good()
	got := ts.ids("otel_traces")
	lostIDs := 0
	for _, id := range want {
		switch got[id] {
		case 1:
		case 0:
			lostIDs++
		default:
			t.Errorf("%s stored %d times", id, got[id])
		}
	}
	if lostIDs == 0 || lostIDs > 15 {
		t.Errorf("%d of 30 requests lost to one corrupt segment", lostIDs)
	}
	if v := ts.metricValue("shredduck_ingest_log_corrupt_bytes_total"); v <= 0 {
		t.Errorf("corrupt bytes %g, want them counted", v)
	}
	if v := ts.metricValue("shredduck_ingest_log_dropped_total"); v != 1 {
		t.Errorf("dropped records %g, want 1 (the bad header)", v)
	}
}

// A server started with --ack commit on a file an --ack log run left
// loads that run's log first: what it acknowledged is not stranded.
func TestAckCommitLoadsLeftLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "left.duckdb")
	dir := path + ".ingestlog"
	startServerAt(t, path, Config{Ack: AckLog}).close()
	l, _, err := ingestlog.Open(ingestlog.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		rec := logload.AppendRecord(nil, "otel_traces", logload.Body{Kind: logload.KindOTLP, Format: formatProto, Fixed: "otlp-traces", Data: tracesProto(t, fmt.Sprintf("left%d", i))}, time.Now())
		if _, err := l.Append(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	ts := startServerAt(t, path, Config{Ack: AckCommit, LogDir: dir})
	got := ts.ids("otel_traces")
	for i := range 5 {
		if id := fmt.Sprintf("left%d", i); got[id] != 1 {
			t.Errorf("%s stored %d times", id, got[id])
		}
	}
}

// A database switches between the ack modes across restarts with no step
// of its own: each start takes what the last one acknowledged (a log
// mode run stops with requests it has not loaded yet), and every request
// is stored once.
func TestAckModeSwitch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "switch.duckdb")
	var sent []string
	for i, ack := range []string{AckCommit, AckLog, AckCommit, AckLog, AckLog, AckCommit} {
		ts := startServerAt(t, path, Config{Ack: ack, LogDir: path + ".ingestlog", MaxVisibilityLag: 2 * time.Second})
		for j := range 3 {
			id := fmt.Sprintf("run%d-%s-%d", i, ack, j)
			if r := ts.send(tracesProto(t, id)); r.status != http.StatusOK {
				t.Fatalf("--ack %s: %s got %d: %s", ack, id, r.status, r.body)
			}
			sent = append(sent, id)
		}
		ts.close() // without waiting for the loader
	}
	ts := startServerAt(t, path, Config{Ack: AckLog, LogDir: path + ".ingestlog"})
	got := ts.ids("otel_traces")
	for _, id := range sent {
		if got[id] != 1 {
			t.Errorf("%s stored %d times, want once", id, got[id])
		}
	}
	if len(got) != len(sent) {
		t.Errorf("%d ids stored, %d sent", len(got), len(sent))
	}
}

// A log directory is bound to its database: another database (or this
// one's file replaced) refuses it rather than take its records, and so
// does a log without the binding.
func TestAckLogOwner(t *testing.T) {
	tmp := t.TempDir()
	a, b := filepath.Join(tmp, "a.duckdb"), filepath.Join(tmp, "b.duckdb")
	dir := filepath.Join(tmp, "shared.ingestlog")
	ts := startServerAt(t, a, Config{Ack: AckLog, LogDir: dir})
	ts.good()
	ts.close()
	for _, ack := range []string{AckLog, AckCommit} {
		db, err := ingest.Open(b)
		if err != nil {
			t.Fatal(err)
		}
		_, err = New(db, Config{Ack: ack, LogDir: dir, MemoryLimit: "256MB"})
		db.Close()
		if err == nil || !strings.Contains(err.Error(), "belongs to another database") {
			t.Errorf("--ack %s: another database's log: %v", ack, err)
		}
	}
	os.Remove(filepath.Join(dir, logload.OwnerFile))
	db, err := ingest.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := New(db, Config{Ack: AckLog, LogDir: dir, MemoryLimit: "256MB"}); err == nil || !strings.Contains(err.Error(), logload.OwnerFile) {
		t.Errorf("a log without its owner file: %v", err)
	}
}

// While the loader is behind by more than --max-visibility-lag, requests
// are held before decoding and go on once it catches up; a loader that
// stays stalled gets them 503 with Retry-After, and nothing of theirs is
// stored.
func TestAckLogPaces(t *testing.T) {
	ts := startServer(t, Config{Ack: AckLog, MaxVisibilityLag: 100 * time.Millisecond, RetryAfter: 200 * time.Millisecond})
	stalled := ts.stallLoader()

	behind := func() {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for ts.metricValue("shredduck_ingest_log_backlog_seconds") <= 0.1 {
			if time.Now().After(deadline) {
				t.Fatal("the backlog did not grow past the lag")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	paced := func(n float64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for ts.metricValue("shredduck_ingest_log_paced_total") < n {
			if time.Now().After(deadline) {
				t.Fatalf("%g requests paced, want %g", ts.metricValue("shredduck_ingest_log_paced_total"), n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	if r := ts.send(tracesProto(t, "a")); r.status != http.StatusOK {
		t.Fatalf("the first request: %d %s", r.status, r.body)
	}
	behind()
	held := make(chan response, 1)
	go func() { held <- ts.send(tracesProto(t, "b")) }()
	paced(1)
	select {
	case r := <-held:
		t.Fatalf("a request behind a stalled loader was answered at once: %d %s", r.status, r.body)
	case <-time.After(50 * time.Millisecond):
	}
	stalled.Store(false)
	if r := <-held; r.status != http.StatusOK {
		t.Fatalf("the held request after the loader caught up: %d %s", r.status, r.body)
	}

	ts.waitLoaded()
	stalled.Store(true)
	if r := ts.send(tracesProto(t, "c")); r.status != http.StatusOK {
		t.Fatalf("after catching up: %d %s", r.status, r.body)
	}
	behind()
	r := ts.send(tracesProto(t, "d")) // held until it gives up: the loader stays stalled
	if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" || !strings.Contains(string(r.body), "behind") {
		t.Fatalf("a request held behind a stalled loader: %d %v %s", r.status, r.header, r.body)
	}
	stalled.Store(false)
	got := ts.ids("otel_traces")
	for id, want := range map[string]int{"a": 1, "b": 1, "c": 1, "d": 0} {
		if got[id] != want {
			t.Errorf("span %s stored %d times, want %d", id, got[id], want)
		}
	}
}

// Requests waiting in the log are loaded several to an item (one DuckDB
// append each cost more than their rows); a request of another table, or
// one of an item's rows, starts an item of its own; every span is stored
// once.
func TestAckLogMergesSmallRequests(t *testing.T) {
	ts := startServer(t, Config{Ack: AckLog, MaxVisibilityLag: 5 * time.Second})
	stalled := ts.stallLoader()
	var want []string
	for i := range 300 {
		id := fmt.Sprintf("m%d", i)
		body := tracesProto(t, id)
		if i != 100 && i != 250 {
			want = append(want, id)
		}
		if i == 100 || i == 250 {
			ids := make([]string, map[int]int{100: 400, 250: logload.ItemRows}[i])
			for k := range ids {
				ids[k] = fmt.Sprintf("big%d-%d", i, k)
			}
			want = append(want, ids...)
			body = tracesProto(t, ids...)
		}
		if i == 200 {
			resp, err := ts.client.Post(ts.url+"/v1/logs", "application/x-protobuf", bytes.NewReader(agedLogs(t, time.Now(), []aged{{"log", 0}})))
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("logs: %v %v", resp, err)
			}
			resp.Body.Close()
		}
		if r := ts.send(body); r.status != http.StatusOK {
			t.Fatalf("%d %s", r.status, r.body)
		}
	}
	stalled.Store(false)
	got := ts.ids("otel_traces")
	for _, id := range want {
		if got[id] != 1 {
			t.Errorf("span %s is stored %d times", id, got[id])
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d spans stored, want %d", len(got), len(want))
	}
	if n := ts.count("otel_logs"); n != 1 {
		t.Errorf("%d log records, want 1", n)
	}
	// 301 requests, in 5 items: m0-m199 with the 400 spans of request 100,
	// the log record, m200-m249, request 250 (an item's rows), m251-m299;
	// and m0 may be one of its own, read by a loader already waiting when
	// the stall began.
	if items := ts.metricValue("shredduck_commit_requests_sum"); items != 5 && items != 6 {
		t.Errorf("%g items loaded for 301 requests, want 5 (or 6)", items)
	}
	if n := ts.metricValue("shredduck_ingest_log_decoded_again_total"); n != 0 {
		t.Errorf("%g requests decoded again: the door's batches were not appended", n)
	}
}
