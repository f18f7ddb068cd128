package logload

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/shredduck/shredduck/shred"
	"github.com/shredduck/shredduck/source"
	"github.com/shredduck/shredduck/transforms"
)

// BenchmarkDoorToRun decodes OTLP requests of 80 spans, each with 10
// string attributes drawn from 20 keys (dense) or 5,000 (sparse, as
// bench/run_sparse.sh sends them), into the door's pooled batches and
// merges them into runs of ItemRows rows, as the server does before its
// loader: the Go work per span of streaming ingest besides DuckDB.
func BenchmarkDoorToRun(b *testing.B) {
	for _, keys := range []int{20, 5000} {
		b.Run("keys="+strconv.Itoa(keys), func(b *testing.B) {
			benchDoorToRun(b, keys)
		})
	}
}

func benchDoorToRun(b *testing.B, keys int) {
	const spansPerRequest, requests = 80, 64
	r := rand.New(rand.NewPCG(1, 2))
	bodies := make([][]byte, requests)
	for i := range bodies {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "bench")
		ss := rs.ScopeSpans().AppendEmpty()
		for j := range spansPerRequest {
			s := ss.Spans().AppendEmpty()
			s.SetName("op")
			s.SetTraceID([16]byte{1, byte(i), byte(j)})
			s.SetSpanID([8]byte{2, byte(i), byte(j)})
			s.SetStartTimestamp(1_700_000_000_000_000_000)
			s.SetEndTimestamp(1_700_000_000_001_000_000)
			for s.Attributes().Len() < 10 {
				s.Attributes().PutStr("app.header.x-"+strconv.Itoa(r.IntN(keys)), "v"+strconv.Itoa(r.IntN(100)))
			}
		}
		body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
		if err != nil {
			b.Fatal(err)
		}
		bodies[i] = body
	}
	door, items := source.NewBatchPool(source.DoorKeptBytes), source.NewBatchPool(source.ItemsKeptBytes)
	tr := transforms.Traces
	var run *shred.Batch
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		db := door.Get(tr)
		if _, err := source.AppendOTLP(tr, source.FormatProto, bodies[i%requests], db); err != nil {
			b.Fatal(err)
		}
		if run != nil && run.Rows+db.Rows > ItemRows {
			items.Put(tr, run)
			run = nil
		}
		if run == nil {
			run = items.Get(tr)
		}
		if err := run.Append(db); err != nil {
			b.Fatal(err)
		}
		door.Put(tr, db)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*spansPerRequest), "ns/span")
}
