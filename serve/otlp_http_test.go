package serve

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/shredduck/shredduck/shred"
	"github.com/shredduck/shredduck/source"
	"github.com/shredduck/shredduck/transforms"
)

// responseParser decodes an Export*ServiceResponse of one signal.
type responseParser struct {
	proto func([]byte) error
	json  func([]byte) error
	// partial reports whether partial_success is set.
	partial func() bool
}

func parserFor(signal string) responseParser {
	switch signal {
	case "traces":
		r := ptraceotlp.NewExportResponse()
		return responseParser{r.UnmarshalProto, r.UnmarshalJSON, func() bool {
			return r.PartialSuccess().RejectedSpans() != 0 || r.PartialSuccess().ErrorMessage() != ""
		}}
	case "logs":
		r := plogotlp.NewExportResponse()
		return responseParser{r.UnmarshalProto, r.UnmarshalJSON, func() bool {
			return r.PartialSuccess().RejectedLogRecords() != 0 || r.PartialSuccess().ErrorMessage() != ""
		}}
	}
	r := pmetricotlp.NewExportResponse()
	return responseParser{r.UnmarshalProto, r.UnmarshalJSON, func() bool {
		return r.PartialSuccess().RejectedDataPoints() != 0 || r.PartialSuccess().ErrorMessage() != ""
	}}
}

// TestOTLPHTTPSignals posts every fixture of every signal as protobuf and
// JSON (plain and gzip) and checks the answer and the rows committed.
func TestOTLPHTTPSignals(t *testing.T) {
	ts := startServer(t, Config{})
	cases := []struct {
		file, signal, table, ctype, enc string
	}{
		{"traces.pb", "traces", "otel_traces", "application/x-protobuf", ""},
		{"trace.pb", "traces", "otel_traces", "application/x-protobuf", "gzip"},
		{"trace.json", "traces", "otel_traces", "application/json", ""},
		{"trace.json", "traces", "otel_traces", "application/json; charset=utf-8", "gzip"},
		{"logs.pb", "logs", "otel_logs", "application/x-protobuf", ""},
		{"logs.pb", "logs", "otel_logs", "application/x-protobuf", "zstd"},
		{"log.json", "logs", "otel_logs", "application/json", ""},
		{"metrics_gauge.pb", "metrics", "otel_metrics", "application/x-protobuf", ""},
		{"metrics_sum.pb", "metrics", "otel_metrics", "application/x-protobuf", "gzip"},
		{"metrics_histogram.pb", "metrics", "otel_metrics", "application/x-protobuf", ""},
		{"metrics_exponential_histogram.pb", "metrics", "otel_metrics", "application/x-protobuf", ""},
		{"metrics_summary.pb", "metrics", "otel_metrics", "application/x-protobuf", ""},
		{"metrics_mixed.json", "metrics", "otel_metrics", "application/json", ""},
		{"metrics_histogram.json", "metrics", "otel_metrics", "application/json", "gzip"},
	}
	for _, c := range cases {
		t.Run(c.file+"/"+c.enc, func(t *testing.T) {
			data := readTestdata(t, c.file)
			f, _ := requestFormat(c.ctype)
			tr, _ := transforms.Lookup("otlp-" + c.signal)
			want, err := source.AppendOTLP(tr, f, data, shred.NewBatch(tr.Core()))
			if err != nil || want == 0 {
				t.Fatalf("fixture decodes to %d records, %v", want, err)
			}
			body := data
			switch c.enc {
			case "gzip":
				body = gzipBytes(t, data)
			case "zstd":
				enc, _ := zstd.NewWriter(nil)
				body = enc.EncodeAll(data, nil)
			}
			before := ts.count(c.table)
			r := ts.post("/v1/"+c.signal, c.ctype, c.enc, body)
			if r.status != http.StatusOK {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			if got := r.header.Get("Content-Type"); got != f.ContentType() {
				t.Errorf("Content-Type %q, want %q", got, f.ContentType())
			}
			p := parserFor(c.signal)
			if f == formatProto {
				if len(r.body) != 0 {
					t.Errorf("protobuf response %q, want the empty message", r.body)
				}
				err = p.proto(r.body)
			} else {
				if string(r.body) != "{}" {
					t.Errorf("JSON response %q, want {}", r.body)
				}
				err = p.json(r.body)
			}
			if err != nil {
				t.Fatalf("response does not parse as an Export%sServiceResponse: %v", c.signal, err)
			}
			if p.partial() {
				t.Error("partial_success is set")
			}
			if got := ts.count(c.table) - before; got != want {
				t.Errorf("%d rows committed, want %d", got, want)
			}
		})
	}
	// Empty requests: 200, nothing written.
	for _, c := range []struct{ ctype, body string }{{"application/x-protobuf", ""}, {"application/json", "{}"}, {"application/json", ""}} {
		r := ts.post("/v1/logs", c.ctype, "", []byte(c.body))
		if r.status != http.StatusOK {
			t.Errorf("empty %s request: %d %s", c.ctype, r.status, r.body)
		}
	}
}

// TestOTLPHTTPErrors sends a bad request of every kind: each gets its
// status and a well-formed Status body in the request's format, and the
// server keeps serving.
func TestOTLPHTTPErrors(t *testing.T) {
	ts := startServer(t, Config{MaxBody: 64 << 10})
	big := tracesProto(t, strings.Repeat("x", 70<<10))
	logsPB := readTestdata(t, "logs.pb")
	logJSON := readTestdata(t, "log.json")
	const J, P = formatJSON, formatProto
	cases := []struct {
		name, method, path, ctype, enc string
		body                           []byte
		status                         int
		f                              format
		code                           int32
		msg                            string // in the Status message
	}{
		{"GET", "GET", "/v1/traces", "", "", nil, 405, J, codeUnimplemented, "POST"},
		{"PUT protobuf", "PUT", "/v1/logs", "application/x-protobuf", "", logsPB, 405, P, codeUnimplemented, "POST"},
		{"text/plain", "POST", "/v1/traces", "text/plain", "", []byte("hello"), 415, J, codeInvalidArgument, "Content-Type"},
		{"no content type", "POST", "/v1/traces", "", "", []byte("{}"), 415, J, codeInvalidArgument, "Content-Type"},
		{"bad media type", "POST", "/v1/traces", "application/json; ===", "", []byte("{}"), 415, J, codeInvalidArgument, "Content-Type"},
		{"brotli", "POST", "/v1/traces", "application/json", "br", []byte("{}"), 415, J, codeInvalidArgument, "Content-Encoding"},
		{"malformed protobuf", "POST", "/v1/traces", "application/x-protobuf", "", []byte("\xff\xff\xff\xff"), 400, P, codeInvalidArgument, "decode"},
		{"malformed JSON", "POST", "/v1/traces", "application/json", "", []byte(`{"resourceSpans":[{`), 400, J, codeInvalidArgument, "decode"},
		{"not JSON", "POST", "/v1/metrics", "application/json", "", []byte(`<xml/>`), 400, J, codeInvalidArgument, "decode"},
		{"wrong signal JSON", "POST", "/v1/traces", "application/json", "", logJSON, 400, J, codeInvalidArgument, "signal"},
		{"wrong signal protobuf", "POST", "/v1/traces", "application/x-protobuf", "", logsPB, 400, P, codeInvalidArgument, "otlp-logs"},
		{"invalid UTF-8", "POST", "/v1/traces", "application/json", "",
			[]byte("{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"name\":\"a\xff\"}]}]}]}"), 400, J, codeInvalidArgument, "UTF-8"},
		{"unknown enum name", "POST", "/v1/traces", "application/json", "",
			[]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"a","kind":"SPAN_KIND_LOUD"}]}]}]}`), 400, J, codeInvalidArgument, "enum"},
		{"over the limit", "POST", "/v1/traces", "application/x-protobuf", "", big, 413, P, codeResourceExhausted, "limit"},
		{"over the limit gzip", "POST", "/v1/traces", "application/x-protobuf", "gzip", gzipBytes(t, big), 413, P, codeResourceExhausted, "limit"},
		{"bad gzip", "POST", "/v1/traces", "application/x-protobuf", "gzip", []byte("not gzip at all"), 400, P, codeInvalidArgument, "gzip"},
		{"cut gzip", "POST", "/v1/logs", "application/json", "gzip", gzipBytes(t, logJSON)[:100], 400, J, codeInvalidArgument, "gzip"},
		{"unknown path", "POST", "/v2/traces", "application/json", "", []byte("{}"), 404, J, codeNotFound, "endpoint"},
		{"bad NDJSON table", "POST", "/v1/ndjson/1table", "", "", []byte("{}"), 400, J, codeInvalidArgument, "identifier"},
		{"NDJSON table with a slash", "POST", "/v1/ndjson/a/b", "", "", []byte("{}"), 400, J, codeInvalidArgument, "identifier"},
		{"NDJSON catalog table", "POST", "/v1/ndjson/shredduck_tables", "", "", []byte("{}"), 400, J, codeInvalidArgument, "reserved"},
		{"NDJSON GET", "GET", "/v1/ndjson/t", "", "", nil, 405, J, codeUnimplemented, "POST"},
		{"NDJSON unknown transform", "POST", "/v1/ndjson/t?transform=xml", "", "", []byte("{}"), 400, J, codeInvalidArgument, "transform"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := ts.do(c.method, c.path, c.ctype, c.enc, c.body)
			st := wantStatus(t, r, c.status, c.f, c.code)
			if !strings.Contains(st.Message, c.msg) {
				t.Errorf("message %q does not mention %q", st.Message, c.msg)
			}
			if c.status == 405 && r.header.Get("Allow") != "POST" {
				t.Errorf("Allow %q, want POST", r.header.Get("Allow"))
			}
			ts.good()
		})
	}
	if n := ts.count("otel_logs"); n != 0 {
		t.Errorf("otel_logs has %d rows after only bad requests", n)
	}
}

// gzipBomb returns n MiB of zeros as a gzip body of concatenated members
// (which gzip readers decode as one stream): about 1 KiB per MiB.
func gzipBomb(t *testing.T, mib int) []byte {
	var member bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&member, gzip.BestCompression)
	zw.Write(make([]byte, 1<<20))
	zw.Close()
	return bytes.Repeat(member.Bytes(), mib)
}

// TestGzipBomb sends 1 GiB of zeros compressed to a server with a 1 MiB
// limit: it must answer 413 at once, having decompressed about 1 MiB.
func TestGzipBomb(t *testing.T) {
	ts := startServer(t, Config{MaxBody: 1 << 20})
	bomb := gzipBomb(t, 1024)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	r := ts.post("/v1/traces", "application/x-protobuf", "gzip", bomb)
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	wantStatus(t, r, http.StatusRequestEntityTooLarge, formatProto, codeResourceExhausted)
	if elapsed > 5*time.Second {
		t.Errorf("413 took %v", elapsed)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Errorf("the server allocated %d MiB for a 1 MiB limit", alloc>>20)
	}
	// The NDJSON endpoint has the same limit.
	r = ts.post("/v1/ndjson/bomb", "application/x-ndjson", "gzip", bomb)
	wantStatus(t, r, http.StatusRequestEntityTooLarge, formatJSON, codeResourceExhausted)
	ts.good()
}

// TestOTLPHTTPPartialSuccess sends requests in which some spans hold data
// no column can take (a kind outside the enum; in protobuf, a name that is
// not UTF-8): the others are committed and the answer is 200 with
// partial_success counting the rejected ones, in the request's encoding.
// A request whose every span is rejected commits nothing and says so.
func TestOTLPHTTPPartialSuccess(t *testing.T) {
	ts := startServer(t, Config{})
	req := tracesRequest("kept-1", "bad-kind", "kept-2", "bad-utf8")
	spans := req.Traces().ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	spans.At(1).SetKind(ptrace.SpanKind(42))
	spans.At(3).SetName("not \xff UTF-8")
	pb, err := req.MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	onlyKind := tracesRequest("json-kept", "json-bad")
	onlyKind.Traces().ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(1).SetKind(ptrace.SpanKind(42))
	js, err := onlyKind.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	allBad := tracesRequest("all-bad")
	allBad.Traces().ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Status().SetCode(ptrace.StatusCode(7))
	allBadPB, err := allBad.MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, ctype string
		body        []byte
		rejected    int64
		msg         string
		kept        []string
	}{
		{"protobuf", "application/x-protobuf", pb, 2, "span 2 of the request: field kind: 42 is not a valid value", []string{"kept-1", "kept-2"}},
		{"json", "application/json", js, 1, "span 2 of the request: field kind: 42 is not a valid value", []string{"json-kept"}},
		{"all rejected", "application/x-protobuf", allBadPB, 1, "span 1 of the request: field status.code: 7", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := ts.count("otel_traces")
			r := ts.post("/v1/traces", c.ctype, "", c.body)
			if r.status != http.StatusOK {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			resp := ptraceotlp.NewExportResponse()
			if c.ctype == "application/json" {
				err = resp.UnmarshalJSON(r.body)
			} else {
				err = resp.UnmarshalProto(r.body)
			}
			if err != nil {
				t.Fatalf("response %q: %v", r.body, err)
			}
			ps := resp.PartialSuccess()
			if ps.RejectedSpans() != c.rejected || !contains(ps.ErrorMessage(), c.msg) {
				t.Errorf("partial_success: %d rejected, %q; want %d, %q", ps.RejectedSpans(), ps.ErrorMessage(), c.rejected, c.msg)
			}
			if got := ts.count("otel_traces") - before; got != len(c.kept) {
				t.Errorf("%d spans committed, want %d", got, len(c.kept))
			}
			ids := ts.ids("otel_traces")
			for _, id := range c.kept {
				if ids[id] != 1 {
					t.Errorf("span %s stored %d times", id, ids[id])
				}
			}
		})
	}
	if ids := ts.ids("otel_traces"); ids["bad-kind"]+ids["bad-utf8"]+ids["json-bad"]+ids["all-bad"] != 0 {
		t.Errorf("rejected spans stored: %v", ids)
	}
	// Metrics: a data point whose attribute is not UTF-8.
	md := pmetric.NewMetrics()
	pts := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty().SetEmptyGauge().DataPoints()
	pts.AppendEmpty().SetIntValue(1)
	pts.AppendEmpty().Attributes().PutStr("k", "\xff")
	pts.AppendEmpty().SetIntValue(3)
	mpb, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	before := ts.count("otel_metrics")
	r := ts.post("/v1/metrics", "application/x-protobuf", "", mpb)
	mresp := pmetricotlp.NewExportResponse()
	if r.status != http.StatusOK || mresp.UnmarshalProto(r.body) != nil {
		t.Fatalf("metrics: status %d, body %q", r.status, r.body)
	}
	if ps := mresp.PartialSuccess(); ps.RejectedDataPoints() != 1 || !contains(ps.ErrorMessage(), "data point 2 of the request: record attribute \"k\": invalid UTF-8") {
		t.Errorf("metrics partial_success: %d, %q", ps.RejectedDataPoints(), ps.ErrorMessage())
	}
	if got := ts.count("otel_metrics") - before; got != 2 {
		t.Errorf("%d data points committed, want 2", got)
	}
	m := ts.do(http.MethodGet, "/metrics", "", "", nil)
	for _, want := range []string{
		`shredduck_rejected_records_total{endpoint="/v1/traces",reason="invalid_record"} 4`,
		`shredduck_rejected_records_total{endpoint="/v1/metrics",reason="invalid_record"} 1`,
	} {
		if !contains(string(m.body), want) {
			t.Errorf("/metrics lacks %s:\n%s", want, m.body)
		}
	}
	ts.good()
}
