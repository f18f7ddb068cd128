package serve

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/shredduck/shredduck/ingest"
)

// TestOverload sends from many goroutines to a server with a tiny queue:
// some requests get 503 with Retry-After, and the spans of exactly the
// acknowledged requests are in the table, each once.
func TestOverload(t *testing.T) {
	ts := startServer(t, Config{QueueRequests: 1, QueueBytes: 1 << 20, Ack: AckCommit}) // the commit queue; --ack log: TestAckLogFull
	const senders, perSender = 16, 12
	var (
		mu       sync.Mutex
		acked    = make(map[string]bool)
		refused  atomic.Int64
		failures []string
	)
	var wg sync.WaitGroup
	for g := 0; g < senders; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perSender; i++ {
				ids := []string{fmt.Sprintf("%d-%d-a", g, i), fmt.Sprintf("%d-%d-b", g, i)}
				req, _ := http.NewRequest("POST", ts.url+"/v1/traces", bytes.NewReader(tracesProto(t, ids...)))
				req.Header.Set("Content-Type", "application/x-protobuf")
				resp, err := ts.client.Do(req)
				if err != nil {
					mu.Lock()
					failures = append(failures, err.Error())
					mu.Unlock()
					return
				}
				var body bytes.Buffer
				body.ReadFrom(resp.Body)
				resp.Body.Close()
				r := response{status: resp.StatusCode, header: resp.Header, body: body.Bytes()}
				mu.Lock()
				switch r.status {
				case http.StatusOK:
					for _, id := range ids {
						acked[id] = true
					}
				case http.StatusServiceUnavailable:
					refused.Add(1)
					if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 {
						failures = append(failures, fmt.Sprintf("503 with Retry-After %q", r.header.Get("Retry-After")))
					}
					if st, err := parseStatus(formatProto, r.body); err != nil || st.Code != codeUnavailable {
						failures = append(failures, fmt.Sprintf("503 with body %q", r.body))
					}
				default:
					failures = append(failures, fmt.Sprintf("status %d: %s", r.status, r.body))
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	if refused.Load() == 0 {
		t.Error("no request was refused with 503: the queue bound did not bite")
	}
	if len(acked) == 0 {
		t.Fatal("no request was acknowledged")
	}
	got := ts.ids("otel_traces")
	for id := range acked {
		if got[id] != 1 {
			t.Errorf("acknowledged span %s is in the table %d times", id, got[id])
		}
	}
	for id, n := range got {
		if !acked[id] {
			t.Errorf("span %s was refused but is in the table (%d times)", id, n)
		}
	}
	t.Logf("%d spans acknowledged, %d requests refused", len(acked), refused.Load())
	// The overload shows in the metrics.
	r := ts.do("GET", "/metrics", "", "", nil)
	if !bytes.Contains(r.body, []byte(`shredduck_rejected_requests_total{endpoint="/v1/traces",reason="overloaded"}`)) {
		t.Error("/metrics does not count the overloaded requests")
	}
}

// TestGracefulShutdown cancels Serve's context while requests (OTLP/HTTP
// and OTLP/gRPC) are in flight: they complete with 200 (OK) and their rows
// are committed; new connections are refused.
func TestGracefulShutdown(t *testing.T) {
	ts := startServer(t, Config{})
	const nHTTP, nGRPC = 4, 2
	var started sync.WaitGroup
	started.Add(nHTTP + nGRPC)
	release := make(chan struct{})
	hook := func(context.Context) {
		started.Done()
		<-release
	}
	ts.srv.beforeSubmit.Store(&hook)
	results := make(chan string, nHTTP+nGRPC)
	for i := 0; i < nHTTP; i++ {
		go func() {
			req, _ := http.NewRequest("POST", ts.url+"/v1/traces", bytes.NewReader(tracesProto(t, fmt.Sprint("http-", i))))
			req.Header.Set("Content-Type", "application/x-protobuf")
			resp, err := ts.client.Do(req)
			if err != nil {
				results <- err.Error()
				return
			}
			resp.Body.Close()
			results <- fmt.Sprint(resp.StatusCode)
		}()
	}
	conn := dialGRPC(t, ts.grpcAddr)
	for i := 0; i < nGRPC; i++ {
		go func() {
			_, err := ptraceotlp.NewGRPCClient(conn).Export(context.Background(), tracesRequest(fmt.Sprint("grpc-", i)))
			if err != nil {
				results <- err.Error()
				return
			}
			results <- "200"
		}()
	}
	started.Wait() // every request is decoded and about to be submitted
	ts.cancel()
	// Wait until the listeners are closed: the shutdown has begun.
	for _, addr := range []string{ts.url[len("http://"):], ts.grpcAddr} {
		deadline := time.Now().Add(10 * time.Second)
		for {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err != nil {
				break
			}
			c.Close()
			if time.Now().After(deadline) {
				t.Fatal("the server still accepts connections after its context ended")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	close(release)
	for i := 0; i < nHTTP+nGRPC; i++ {
		if r := <-results; r != "200" {
			t.Errorf("a request in flight got %s", r)
		}
	}
	ts.stop()
	if got := ts.ids("otel_traces"); len(got) != nHTTP+nGRPC {
		t.Errorf("%d spans committed, want %d: %v", len(got), nHTTP+nGRPC, got)
	}
}

// TestAuth checks the bearer token on HTTP: 401 with a Status body and
// WWW-Authenticate when missing or wrong, except on the health endpoints.
func TestAuth(t *testing.T) {
	ts := startServer(t, Config{Token: "s3cret"})
	body := tracesProto(t, "a")
	for _, h := range [][]string{nil, {"Authorization", "Bearer wrong"}, {"Authorization", "s3cret"}, {"Authorization", "Basic czNjcmV0"}} {
		r := ts.post("/v1/traces", "application/x-protobuf", "", body, h...)
		wantStatus(t, r, http.StatusUnauthorized, formatProto, codeUnauthenticated)
		if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("WWW-Authenticate %q", r.header.Get("WWW-Authenticate"))
		}
	}
	r := ts.post("/v1/ndjson/t", "", "", []byte("{}"))
	wantStatus(t, r, http.StatusUnauthorized, formatJSON, codeUnauthenticated)
	r = ts.do("GET", "/metrics", "", "", nil)
	wantStatus(t, r, http.StatusUnauthorized, formatJSON, codeUnauthenticated)
	for _, path := range []string{"/healthz", "/readyz"} {
		if r := ts.do("GET", path, "", "", nil); r.status != http.StatusOK {
			t.Errorf("%s without a token: %d", path, r.status)
		}
	}
	if n := ts.count("otel_traces"); n != 0 {
		t.Errorf("%d rows committed without the token", n)
	}
	ts.good("Authorization", "Bearer s3cret")
	ts.good("Authorization", "bearer s3cret")
}

func TestHealthReadyMetrics(t *testing.T) {
	ts := startServer(t, Config{})
	if r := ts.do("GET", "/healthz", "", "", nil); r.status != 200 {
		t.Errorf("/healthz: %d", r.status)
	}
	if r := ts.do("GET", "/readyz", "", "", nil); r.status != 200 {
		t.Errorf("/readyz: %d %s", r.status, r.body)
	}
	ts.good()
	ts.post("/v1/traces", "application/json", "", []byte("{"))
	r := ts.do("GET", "/metrics", "", "", nil)
	if r.status != 200 {
		t.Fatalf("/metrics: %d", r.status)
	}
	for _, want := range []string{
		`shredduck_requests_total{code="200",endpoint="/v1/traces"} 1`,
		`shredduck_requests_total{code="400",endpoint="/v1/traces"} 1`,
		`shredduck_rejected_requests_total{endpoint="/v1/traces",reason="bad_data"} 1`,
		`shredduck_records_total{table="otel_traces"} 1`,
		`shredduck_columns_added_total{table="otel_traces"}`,
		`shredduck_commit_rows_count 1`,
		`shredduck_commit_duration_seconds_bucket`,
		`shredduck_queue_requests 0`,
		`shredduck_queue_bytes 0`,
	} {
		if !bytes.Contains(r.body, []byte(want)) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// Readiness fails once the server shuts down.
	ts.srv.closing.Store(true)
	rec := &statusRecorder{ResponseWriter: newDiscardWriter()}
	ts.srv.handleReady(rec, httpRequest("GET", "/readyz"))
	if rec.status != http.StatusServiceUnavailable {
		t.Errorf("/readyz while shutting down: %d", rec.status)
	}
}

// TestServerCheckpoints: the committer, not DuckDB's COMMIT, checkpoints at
// --checkpoint-threshold (DuckDB's own is four times it, TestCheckpointSettings);
// the checkpoints are in /metrics and lose nothing.
func TestServerCheckpoints(t *testing.T) {
	ts := startServer(t, Config{CheckpointThreshold: "64KiB"})
	const requests, spans = 40, 100
	for i := range requests {
		ids := make([]string, spans)
		for j := range ids {
			ids[j] = fmt.Sprintf("r%d-s%d", i, j)
		}
		if r := ts.post("/v1/traces", "application/x-protobuf", "", tracesProto(t, ids...)); r.status != http.StatusOK {
			t.Fatalf("request %d: %d %s", i, r.status, r.body)
		}
	}
	if n := ts.count("otel_traces"); n != requests*spans {
		t.Errorf("%d rows, want %d", n, requests*spans)
	}
	r := ts.do("GET", "/metrics", "", "", nil)
	m := regexp.MustCompile(`shredduck_checkpoint_duration_seconds_count\{result="ok"\} (\d+)`).FindSubmatch(r.body)
	if m == nil || string(m[1]) == "0" {
		t.Errorf("/metrics shows no checkpoint: %s", m)
	}
	if bytes.Contains(r.body, []byte(`shredduck_checkpoint_duration_seconds_count{result="error"}`)) {
		t.Error("/metrics shows a failed checkpoint")
	}
	if wal, err := ts.db.WALSize(); err != nil || wal >= 256<<10 {
		t.Errorf("WAL %d bytes (%v): the committer did not keep it near 64 KiB", wal, err)
	}
}

func httpRequest(method, path string) *http.Request {
	r, _ := http.NewRequest(method, "http://x"+path, nil)
	return r
}

type discardWriter struct{ h http.Header }

func newDiscardWriter() *discardWriter               { return &discardWriter{h: make(http.Header)} }
func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardWriter) WriteHeader(int)             {}

// A client that stops sending its body gets 408 once the read timeout
// passes, instead of holding a handler for ever; the server keeps serving.
func TestSlowBodyTimesOut(t *testing.T) {
	ts := startServer(t, Config{ReadTimeout: 300 * time.Millisecond})
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := tracesProto(t, "slow")
	fmt.Fprintf(conn, "POST /v1/traces HTTP/1.1\r\nHost: test\r\nContent-Type: application/x-protobuf\r\nContent-Length: %d\r\n\r\n", len(body))
	conn.Write(body[:len(body)/2])
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	start := time.Now()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no response to a stalled body: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	wantStatus(t, response{status: resp.StatusCode, header: resp.Header, body: b}, http.StatusRequestTimeout, formatProto, codeDeadlineExceeded)
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("answered after %v, before the read timeout", d)
	}
	if n := ts.count("otel_traces"); n != 0 {
		t.Errorf("%d rows from a request that never arrived whole", n)
	}
	ts.good()
}

// The server's DuckDB settings for streaming: a larger checkpoint
// threshold, no checkpoint vacuum (docs/SERVE.md, Durability), and string
// segments weighed for DICT_FSST only.
func TestCheckpointSettings(t *testing.T) {
	// DuckDB's own threshold is four times the committer's (128 MB by
	// default).
	for _, c := range []struct{ set, want string }{{"", "488.0 MiB"}, {"64MiB", "256.0 MiB"}} {
		ts := startServer(t, Config{CheckpointThreshold: c.set})
		var threshold, disabled string
		var vacuum int
		if err := ts.db.SQL.QueryRow(`SELECT current_setting('checkpoint_threshold'), current_setting('max_vacuum_tasks'),
			current_setting('disabled_compression_methods')`).Scan(&threshold, &vacuum, &disabled); err != nil {
			t.Fatal(err)
		}
		if threshold != c.want || vacuum != 0 || disabled != "Dictionary,FSST" {
			t.Errorf("CheckpointThreshold %q: checkpoint_threshold %q, max_vacuum_tasks %d, disabled_compression_methods %q; want %q, 0, Dictionary,FSST",
				c.set, threshold, vacuum, disabled, c.want)
		}
		ts.good()
		ts.stop()
	}
}

// A fresh server answers queries on its three OTLP tables before any data
// has come (0 rows, not a catalog error), and OTLP/HTTP sent to the
// gRPC-only port is told where the HTTP port is.
func TestFreshServer(t *testing.T) {
	ts := startServer(t, Config{})
	for _, table := range []string{"otel_traces", "otel_logs", "otel_metrics"} {
		r := ts.post("/v1/query", "text/plain", "", []byte("SELECT count(*) AS n FROM "+table+" WHERE time_or_start_is_unused IS NULL OR true"))
		if r.status == http.StatusOK {
			t.Fatalf("a query naming a missing column answered 200: %s", r.body)
		}
		r = ts.post("/v1/query", "text/plain", "", []byte("SELECT count(*) AS n FROM "+table))
		if r.status != http.StatusOK || !contains(string(r.body), `[[0]]`) {
			t.Errorf("%s on a fresh server: %d %s", table, r.status, r.body)
		}
	}
	resp, err := ts.client.Post("http://"+ts.grpcAddr+"/v1/traces", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || !contains(string(body), "OTLP/gRPC port") || !contains(string(body), ts.url) {
		t.Errorf("OTLP/HTTP on the gRPC port: %d %s (want 404 naming %s)", resp.StatusCode, body, ts.url)
	}
}

// TestServeStopsWhenInvalidated: once DuckDB has invalidated the database
// (nothing commits until it is opened again), Serve stops and returns why,
// so that the process exits for its supervisor to restart it.
func TestServeStopsWhenInvalidated(t *testing.T) {
	ts := startServer(t, Config{})
	ts.good()
	ts.db.MarkInvalidated(errors.New("INTERNAL Error: Could not find node in column segment tree"))
	select {
	case err := <-ts.done:
		ts.stopped = true
		if !errors.Is(err, ingest.ErrInvalidated) || !strings.Contains(err.Error(), "segment tree") {
			t.Fatalf("Serve returned %v, want the invalidation and its cause", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Serve still runs on an invalidated database")
	}
}

// A stray value (docs/SCHEMA.md 5.6: a string under a BIGINT key) is
// counted in /metrics by table, once committed.
func TestStraysMetric(t *testing.T) {
	ts := startServer(t, Config{})
	span := func(id int, value string) []byte {
		return fmt.Appendf(nil, `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"%032x","spanId":"%016x","name":"s","attributes":[{"key":"http.status_code","value":%s}]}]}]}]}`, id, id, value)
	}
	for i, v := range []string{`{"intValue":"200"}`, `{"intValue":"503"}`, `{"stringValue":"notanint"}`} {
		if r := ts.post("/v1/traces", "application/json", "", span(i+1, v)); r.status != http.StatusOK {
			t.Fatalf("request %d: %d %s", i, r.status, r.body)
		}
	}
	r := ts.do("GET", "/metrics", "", "", nil)
	if want := `shredduck_stray_values_total{table="otel_traces"} 1`; !bytes.Contains(r.body, []byte(want)) {
		t.Errorf("/metrics lacks %s", want)
	}
}
