package serve

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/shredduck/shredduck/serve/internal/httpbody"
)

// slowBody starts a POST of a traces body of size bytes that sends sent
// bytes and then waits; release ends it (the request then fails). It
// returns once the sent bytes were written.
func (ts *testServer) slowBody(size, sent int) (release func()) {
	ts.t.Helper()
	pr, pw := io.Pipe()
	req, err := http.NewRequest(http.MethodPost, ts.url+"/v1/traces", pr)
	if err != nil {
		ts.t.Fatal(err)
	}
	req.ContentLength = int64(size)
	req.Header.Set("Content-Type", "application/x-protobuf")
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultTransport.RoundTrip(req); err == nil {
			resp.Body.Close()
		}
	}()
	if _, err := pw.Write(make([]byte, sent)); err != nil {
		ts.t.Fatal(err)
	}
	return func() {
		pw.CloseWithError(io.ErrUnexpectedEOF)
		<-done
	}
}

// metricValue returns the value of a sample line of /metrics, or -1.
func (ts *testServer) metricValue(sample string) float64 {
	ts.t.Helper()
	r := ts.do(http.MethodGet, "/metrics", "", "", nil)
	for _, line := range strings.Split(string(r.body), "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				ts.t.Fatal(err)
			}
			return f
		}
	}
	return -1
}

// waitInflight waits until the budget holds at least n bytes.
func (ts *testServer) waitInflight(n int64) {
	ts.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for ts.srv.mem.used.Load() < n {
		if time.Now().After(deadline) {
			ts.t.Fatalf("the budget holds %d bytes, want %d", ts.srv.mem.used.Load(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitIdle waits until the budget holds nothing: the handlers of the
// requests that ended have returned.
func (ts *testServer) waitIdle() {
	ts.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for ts.srv.mem.used.Load() != 0 {
		if time.Now().After(deadline) {
			ts.t.Fatalf("the budget still holds %d bytes", ts.srv.mem.used.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestMemoryBudget: while bodies that arrive slowly hold the budget, a
// further request is refused with 503, Retry-After and Status code 14,
// and is counted; once they end, requests pass again and the budget is
// given back whole.
func TestMemoryBudget(t *testing.T) {
	ts := startServer(t, Config{MaxBody: 1 << 20, Limits: Limits{MaxInflightBytes: 2 << 20}})
	var releases []func()
	for range 2 {
		releases = append(releases, ts.slowBody(1<<20, 1<<20-1)) // each holds 1 MiB, whatever buffer it was handed
	}
	ts.waitInflight(2 << 20)
	r := ts.post("/v1/traces", "application/x-protobuf", "", tracesProto(t, "refused"))
	st := wantStatus(t, r, http.StatusServiceUnavailable, formatProto, codeUnavailable)
	if r.header.Get("Retry-After") != "1" || !strings.Contains(st.GetMessage(), "--max-inflight-bytes") {
		t.Errorf("refusal: Retry-After %q, message %q", r.header.Get("Retry-After"), st.GetMessage())
	}
	if v := ts.metricValue(`shredduck_rejected_requests_total{endpoint="/v1/traces",reason="memory_budget"}`); v != 1 {
		t.Errorf("memory_budget refusals counted: %v", v)
	}
	for _, release := range releases {
		release()
	}
	ts.waitIdle()
	ts.good()
	if v := ts.metricValue("shredduck_inflight_bytes"); v != 0 {
		t.Errorf("shredduck_inflight_bytes after the requests: %v", v)
	}
	if v := ts.metricValue("shredduck_inflight_max_bytes"); v != 2<<20 {
		t.Errorf("shredduck_inflight_max_bytes: %v", v)
	}
}

// TestLyingContentLength: connections that declare the largest body and
// send one byte hold a small buffer each, not the declared size.
func TestLyingContentLength(t *testing.T) {
	const conns, declared = 16, 16 << 20
	ts := startServer(t, Config{MaxBody: declared})
	addr := strings.TrimPrefix(ts.url, "http://")
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	for range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: %d\r\n\r\nx", declared)
	}
	ts.waitInflight(conns * httpbody.MinBuf) // every handler reading, into its first buffer
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grown := int64(after.HeapAlloc) - int64(before.HeapAlloc); grown > 32<<20 {
		t.Errorf("%d connections declaring %d MiB grew the heap by %d MiB", conns, declared>>20, grown>>20)
	}
	if held := ts.srv.mem.used.Load(); held > conns*(httpbody.MinBuf+httpbody.ReadChunk) {
		t.Errorf("the budget holds %d bytes for %d one-byte bodies", held, conns)
	}
}

// TestGzipBombsShareTheBudget: gzip bombs sent at once inflate only as far
// as the budget lets them; the others are refused with 503, not inflated
// each up to the body limit.
func TestGzipBombsShareTheBudget(t *testing.T) {
	ts := startServer(t, Config{MaxBody: 4 << 20, Limits: Limits{MaxInflightBytes: 8 << 20}})
	bomb := gzipBomb(t, 64)
	const n = 12
	codes := make([]int, n)
	retry := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r := ts.post("/v1/traces", "application/x-protobuf", "gzip", bomb)
			codes[i], retry[i] = r.status, r.header.Get("Retry-After")
		})
	}
	wg.Wait()
	refused := 0
	for i, c := range codes {
		switch {
		case c == http.StatusServiceUnavailable && retry[i] != "":
			refused++
		case c != http.StatusRequestEntityTooLarge:
			t.Errorf("bomb %d: status %d (Retry-After %q)", i, c, retry[i])
		}
	}
	if refused == 0 {
		t.Errorf("%d bombs of 64 MiB under an 8 MiB budget: none refused (%v)", n, codes)
	}
	ts.waitIdle()
	ts.good()
}

// emptySpans is an ExportTraceServiceRequest of n empty spans, two bytes
// each.
func emptySpans(n int) []byte {
	empty := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), nil)
	rs := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), bytes.Repeat(empty, n))
	return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), rs)
}

// TestMemoryNeverFits: a small body whose batch alone would not fit the
// budget is refused with 413, not with a 503 its client would retry.
func TestMemoryNeverFits(t *testing.T) {
	ts := startServer(t, Config{MaxBody: 1 << 20, Limits: Limits{MaxInflightBytes: 2 << 20}})
	r := ts.post("/v1/traces", "application/x-protobuf", "gzip", gzipBytes(t, emptySpans(50_000)))
	st := wantStatus(t, r, http.StatusRequestEntityTooLarge, formatProto, codeResourceExhausted)
	if !strings.Contains(st.GetMessage(), "--max-inflight-bytes") {
		t.Errorf("message %q", st.GetMessage())
	}
	if ts.count("otel_traces") != 0 {
		t.Error("rows were committed")
	}
	ts.good()
}

// TestMaxRecords: a request of more records than MaxRecords is 413 with
// the reason, on every endpoint; one at the limit is stored.
func TestMaxRecords(t *testing.T) {
	ts := startServer(t, Config{Limits: Limits{MaxRecords: 10}})
	ids := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("id%d", i)
		}
		return out
	}
	wantMsg := func(what, msg string) {
		t.Helper()
		if !strings.Contains(msg, "more than 10 records") || !strings.Contains(msg, "--max-records") {
			t.Errorf("%s: message %q", what, msg)
		}
	}
	if r := ts.post("/v1/traces", "application/x-protobuf", "", tracesProto(t, ids(10)...)); r.status != http.StatusOK {
		t.Fatalf("10 spans: %d %q", r.status, r.body)
	}
	r := ts.post("/v1/traces", "application/x-protobuf", "", tracesProto(t, ids(11)...))
	wantMsg("11 spans, protobuf", wantStatus(t, r, http.StatusRequestEntityTooLarge, formatProto, codeResourceExhausted).GetMessage())
	js, err := tracesRequest(ids(11)...).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	r = ts.post("/v1/traces", "application/json", "", js)
	wantMsg("11 spans, JSON", wantStatus(t, r, http.StatusRequestEntityTooLarge, formatJSON, codeResourceExhausted).GetMessage())
	r = ts.post("/v1/ndjson/limited", "application/x-ndjson", "", []byte(strings.Repeat(`{"a":1}`+"\n", 11)))
	wantMsg("11 NDJSON rows", wantStatus(t, r, http.StatusRequestEntityTooLarge, formatJSON, codeResourceExhausted).GetMessage())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = ptraceotlp.NewGRPCClient(dialGRPC(t, ts.grpcAddr)).Export(ctx, tracesRequest(ids(11)...))
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("11 spans over gRPC: %v", err)
	}
	wantMsg("11 spans, gRPC", status.Convert(err).Message())
	if got := ts.count("otel_traces"); got != 10 {
		t.Errorf("otel_traces has %d rows, want the 10 of the request at the limit", got)
	}
	if v := ts.metricValue(`shredduck_rejected_requests_total{endpoint="/v1/traces",reason="too_many_records"}`); v != 2 {
		t.Errorf("too_many_records refusals of /v1/traces counted: %v", v)
	}
}

// TestGRPCGzipBombs: compressed gRPC messages are inflated under the
// budget: bombs sent at once on one connection are refused UNAVAILABLE
// (with RetryInfo) beyond it, and one alone stops at the body limit.
func TestGRPCGzipBombs(t *testing.T) {
	ts := startServer(t, Config{MaxBody: 4 << 20, Limits: Limits{MaxInflightBytes: 8 << 20}})
	conn := dialGRPC(t, ts.grpcAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// 16 MiB inflate past --max-body; no larger, as the client's gzip of
	// each is slow under the race detector.
	zeros := make([]byte, 16<<20)
	const method = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
	const n = 12
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var reply []byte
			errs[i] = conn.Invoke(ctx, method, zeros, &reply, grpc.ForceCodec(bytesCodec{}), grpc.UseCompressor(gzip.Name))
		})
	}
	wg.Wait()
	unavailable := 0
	for i, err := range errs {
		switch status.Code(err) {
		case codes.Unavailable:
			unavailable++
			var retry bool
			for _, d := range status.Convert(err).Details() {
				_, retry = d.(*errdetails.RetryInfo)
			}
			if !retry {
				t.Errorf("bomb %d: UNAVAILABLE without RetryInfo: %v", i, err)
			}
		case codes.ResourceExhausted:
		default:
			t.Errorf("bomb %d: %v", i, err)
		}
	}
	if unavailable == 0 {
		t.Errorf("%d gRPC bombs of 16 MiB under an 8 MiB budget: none refused", n)
	}
	ts.waitIdle()
	var reply []byte
	ctx, cancel = context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := conn.Invoke(ctx, method, zeros, &reply, grpc.ForceCodec(bytesCodec{}), grpc.UseCompressor(gzip.Name))
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(status.Convert(err).Message(), "after decompression") {
		t.Errorf("one bomb alone: %v", err)
	}
	ts.good()
}
