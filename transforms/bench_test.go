package transforms

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/shredduck/shredduck/shred"
)

// Benchmark data: OTLP/JSON traces requests in the shape bench/gen writes
// (80 spans per request, hex ids, 64-bit integers as strings, enums as
// integers), generated here with a fixed seed.

const (
	benchSpansPerRequest = 80
	benchRequests        = 32 // per op: 2560 spans
	benchBatchRows       = 122880
	benchBaseTime        = 1767225600000000000 // 2026-01-01T00:00:00Z
)

var (
	benchServices     = []string{"checkout", "cart", "payments", "search", "auth", "inventory", "shipping", "frontend"}
	benchEnvironments = []string{"production", "staging"}
	benchRegions      = []string{"us-east-1", "us-west-2", "eu-west-1", "ap-south-1"}
	benchRoutes       = []string{"/api/v1/orders", "/api/v1/cart", "/api/v1/pay", "/api/v1/search", "/login", "/health"}
	benchMethods      = []string{"GET", "POST", "PUT", "DELETE"}
	benchStatusCodes  = []int64{200, 200, 200, 201, 400, 404, 500}
)

// benchTraceLines returns requests OTLP/JSON export requests of 80 spans
// each; the same seed gives the same bytes.
func benchTraceLines(requests int, seed uint64) [][]byte {
	r := rand.New(rand.NewPCG(seed, 0x5348524544445543))
	pick := func(l []string) string { return l[r.IntN(len(l))] }
	hex64 := func(b []byte, v uint64) []byte {
		const digits = "0123456789abcdef"
		for i := 60; i >= 0; i -= 4 {
			b = append(b, digits[(v>>uint(i))&0xf])
		}
		return b
	}
	strAttr := func(b []byte, k, v string) []byte {
		return append(append(append(append(b, `{"key":"`...), k...), `","value":{"stringValue":"`...), v+`"}}`...)
	}
	lines := make([][]byte, requests)
	for q := range lines {
		b := []byte(`{"resourceSpans":[{"resource":{"attributes":[`)
		b = strAttr(b, "service.name", pick(benchServices))
		b = append(b, ',')
		b = strAttr(b, "deployment.environment", pick(benchEnvironments))
		b = append(b, ',')
		b = strAttr(b, "cloud.region", pick(benchRegions))
		b = append(b, ',')
		b = strAttr(b, "host.name", "pod-"+strconv.Itoa(r.IntN(400)+1))
		b = append(b, `]},"scopeSpans":[{"scope":{"name":"shredduck-gen","version":"1.0.0"},"spans":[`...)
		for i := 0; i < benchSpansPerRequest; i++ {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"traceId":"`...)
			b = hex64(hex64(b, r.Uint64()), r.Uint64())
			b = append(b, `","spanId":"`...)
			b = append(hex64(b, r.Uint64()), '"')
			if r.IntN(5) != 0 {
				b = append(b, `,"parentSpanId":"`...)
				b = append(hex64(b, r.Uint64()), '"')
			}
			route := pick(benchRoutes)
			b = append(append(append(b, `,"name":"`...), route...), `","kind":`...)
			b = strconv.AppendInt(b, int64(r.IntN(5)+1), 10)
			start := benchBaseTime + int64(q*benchSpansPerRequest+i)*1_000_000 + r.Int64N(1_000_000)
			b = append(b, `,"startTimeUnixNano":"`...)
			b = strconv.AppendInt(b, start, 10)
			b = append(b, `","endTimeUnixNano":"`...)
			b = strconv.AppendInt(b, start+200_000+r.Int64N(800_000_000), 10)
			b = append(b, `","attributes":[`...)
			b = strAttr(b, "http.method", pick(benchMethods))
			b = append(b, ',')
			b = strAttr(b, "http.route", route)
			code := benchStatusCodes[r.IntN(len(benchStatusCodes))]
			b = append(b, `,{"key":"http.status_code","value":{"intValue":"`...)
			b = strconv.AppendInt(b, code, 10)
			b = append(b, `"}},{"key":"retry","value":{"boolValue":`...)
			b = strconv.AppendBool(b, r.IntN(10) == 0)
			b = append(b, `}}],"status":{"code":`...)
			if code >= 500 {
				b = append(b, '2')
			} else {
				b = append(b, '1')
			}
			b = append(b, `}}`...)
		}
		lines[q] = append(b, `]}]}]}`...)
	}
	return lines
}

// benchShred appends every request to a batch that is finished and reset
// every benchBatchRows rows, as the loader does; no DuckDB.
func benchShred(b *testing.B, reqs [][]byte, appendFn func(*shred.Batch, []byte) (int, error)) {
	size := 0
	for _, r := range reqs {
		size += len(r)
	}
	batch := shred.NewBatch(Traces.Core())
	spans := 0
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		for _, req := range reqs {
			if batch.Rows >= benchBatchRows {
				if err := batch.Finish(); err != nil {
					b.Fatal(err)
				}
				batch.Reset()
			}
			n, err := appendFn(batch, req)
			if err != nil {
				b.Fatal(err)
			}
			spans += n
		}
	}
	b.ReportMetric(float64(spans)/b.Elapsed().Seconds(), "spans/s")
}

func BenchmarkTracesJSON(b *testing.B) {
	benchShred(b, benchTraceLines(benchRequests, 1), Traces.AppendJSON)
}

// benchTraceProtos is the benchmark's spans encoded as protobuf by pdata.
func benchTraceProtos(b *testing.B) [][]byte {
	lines := benchTraceLines(benchRequests, 1)
	reqs := make([][]byte, len(lines))
	for i, l := range lines {
		td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(l)
		if err != nil {
			b.Fatal(err)
		}
		if reqs[i], err = (&ptrace.ProtoMarshaler{}).MarshalTraces(td); err != nil {
			b.Fatal(err)
		}
	}
	return reqs
}

// BenchmarkTracesProto shreds the same spans from protobuf.
func BenchmarkTracesProto(b *testing.B) {
	benchShred(b, benchTraceProtos(b), Traces.AppendProto)
}

// BenchmarkTracesProtoPdata is the same through pdata (the decoder that
// AppendProto replaced).
func BenchmarkTracesProtoPdata(b *testing.B) {
	benchShred(b, benchTraceProtos(b), appendTracesPdata)
}

// BenchmarkDetectJSON picks the transform of each request; with the signal
// key first (as exporters write it) it reads a few bytes of each.
func BenchmarkDetectJSON(b *testing.B) {
	lines := benchTraceLines(benchRequests, 1)
	late := make([][]byte, len(lines))
	for i, l := range lines {
		// the same request with a large unknown member before the signal key
		late[i] = append(append([]byte(`{"x":`), l...), `,"resourceSpans":[]}`...)
	}
	for _, bc := range []struct {
		name string
		reqs [][]byte
	}{{"key-first", lines}, {"key-last", late}} {
		b.Run(bc.name, func(b *testing.B) {
			size := 0
			for _, r := range bc.reqs {
				size += len(r)
			}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				for _, req := range bc.reqs {
					if tr, err := DetectJSON(req); err != nil || tr != Traces {
						b.Fatal(tr, err)
					}
				}
			}
		})
	}
}

// The benchmark data must be what the benchmark claims: valid requests of
// 80 spans with the attributes bench/gen writes, the same for the same seed.
func TestBenchTraceLines(t *testing.T) {
	lines := benchTraceLines(3, 1)
	again := benchTraceLines(3, 1)
	for i := range lines {
		if string(lines[i]) != string(again[i]) {
			t.Fatal("not deterministic")
		}
		td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(lines[i])
		if err != nil {
			t.Fatal(err)
		}
		if td.SpanCount() != benchSpansPerRequest {
			t.Fatalf("%d spans", td.SpanCount())
		}
	}
	b := decodeRequests(t, Traces, lines, false)
	for key, kind := range map[string]shred.Kind{
		"http.method": shred.String, "http.route": shred.String, "http.status_code": shred.Int64, "retry": shred.Bool,
	} {
		if c := dynCol(b, shred.Record, key); c == nil || c.Type.Kind != kind || c.Nulls != 0 {
			t.Errorf("record %q: want a full %s column", key, kind)
		}
	}
	for _, key := range []string{"service.name", "deployment.environment", "cloud.region", "host.name"} {
		if c := dynCol(b, shred.Resource, key); c == nil || c.Nulls != 0 {
			t.Errorf("resource %q missing", key)
		}
	}
	expectCells(t, Traces, b, 0, map[string]string{"scope_name": "shredduck-gen", "scope_version": "1.0.0"})
	if c := coreCol(t, Traces, b, "duration_ns"); c.Nulls != 0 {
		t.Error("spans without duration")
	}
}
