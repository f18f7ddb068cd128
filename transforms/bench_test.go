package transforms

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/shredduck/shredduck/internal/benchtraces"
	"github.com/shredduck/shredduck/shred"
)

// Benchmark data: benchtraces' OTLP/JSON requests of 80 spans.
const (
	benchRequests  = 32 // per op: 2560 spans
	benchBatchRows = 122880
)

// benchTraceLines returns requests OTLP/JSON export requests of 80 spans
// each; the same seed gives the same bytes.
func benchTraceLines(requests int, seed uint64) [][]byte {
	return benchtraces.Lines(requests*benchtraces.SpansPerRequest, seed)
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

// BenchmarkTracesProtoRequest shreds each request into a batch of its
// own, finished and reset after it, as the server's door does.
func BenchmarkTracesProtoRequest(b *testing.B) {
	benchShredEach(b, benchTraceProtos(b), Traces.AppendProto, true)
}

func benchShredEach(b *testing.B, reqs [][]byte, appendFn func(*shred.Batch, []byte) (int, error), finish bool) {
	batch := shred.NewBatch(Traces.Core())
	spans := 0
	b.ReportAllocs()
	for b.Loop() {
		for _, req := range reqs {
			n, err := appendFn(batch, req)
			if err != nil {
				b.Fatal(err)
			}
			if finish {
				if err := batch.Finish(); err != nil {
					b.Fatal(err)
				}
			}
			batch.Reset()
			spans += n
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(spans), "ns/span")
}

// BenchmarkTracesProtoStreaming decodes the requests of
// bench/run_streaming.sh's light sender (80 spans each) as the server's
// door does: a batch each, not finished (the loader appends it sparse).
func BenchmarkTracesProtoStreaming(b *testing.B) {
	var reqs [][]byte
	for i := range 32 {
		td := benchtraces.StreamingRequest(int64(i*80), 80, i%16, 1_700_000_000_000_000_000)
		req, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
		if err != nil {
			b.Fatal(err)
		}
		reqs = append(reqs, req)
	}
	benchShredEach(b, reqs, Traces.AppendProto, false)
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
		if td.SpanCount() != benchtraces.SpansPerRequest {
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
