package logload

import (
	"fmt"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/shredduck/shredduck/ingestlog"
	"github.com/shredduck/shredduck/shred"
	"github.com/shredduck/shredduck/source"
	"github.com/shredduck/shredduck/transforms"
)

// TestHandoffRuns: consecutive handed requests of one table are merged
// into a run as they are synced; the loader takes a run whole at its first
// record and then nothing of it again (a load read again after a failure,
// or a reader inside the run, decodes from the log); a table change, a
// gap or an item's rows end a run; the byte bound and late puts hold.
func TestHandoffRuns(t *testing.T) {
	door, runs := source.NewBatchPool(0), source.NewBatchPool(0)
	h := &handoff{items: map[ingestlog.Position]handed{}, max: 1000, runs: runs, door: door}
	batch := func(ids ...string) *shred.Batch {
		b := shred.NewBatch(transforms.Traces.Core())
		if _, err := source.AppendOTLP(transforms.Traces, source.FormatProto, tracesProto(t, ids...), b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	put := func(pos, next ingestlog.Position, table string, ids ...string) bool {
		return h.put(pos, next, handed{table: table, tr: transforms.Traces, b: batch(ids...), bytes: 10})
	}
	check := func(what string, got handed, ok bool, rows int, bytes int64) {
		t.Helper()
		switch {
		case !ok && rows > 0:
			t.Fatalf("%s: not handed, want %d rows", what, rows)
		case ok && rows == 0:
			t.Fatalf("%s: handed %d rows, want none", what, got.b.Rows)
		case ok && (got.b.Rows != rows || got.bytes != bytes):
			t.Fatalf("%s: %d rows of %d bytes, want %d of %d", what, got.b.Rows, got.bytes, rows, bytes)
		}
	}

	for i, pos := range []ingestlog.Position{0, 10, 20} {
		if !put(pos, pos+10, "otel_traces", fmt.Sprint("a", i), fmt.Sprint("b", i)) {
			t.Fatalf("put %d refused", pos)
		}
	}
	got, ok := h.take(0, 10)
	check("a run of three", got, ok, 6, 30)
	if got.run == nil || h.next != 30 || len(h.items) != 0 || h.bytes != 0 {
		t.Fatalf("after the run: run %v, next %d, %d items, %d bytes", got.run, h.next, len(h.items), h.bytes)
	}
	if put(20, 30, "otel_traces", "late") {
		t.Fatal("a put the loader has read past was taken")
	}

	// The run's records read again (a failed load) are not handed again.
	put(30, 40, "otel_traces", "c0")
	put(40, 50, "otel_traces", "c1")
	got, ok = h.take(30, 40)
	check("the second run", got, ok, 2, 20)
	got, ok = h.take(30, 40)
	check("the second run again", got, ok, 0, 0)

	// A reader inside a run (after a seek) decodes from the log, and the
	// run is given up.
	put(50, 60, "otel_traces", "d0")
	put(60, 70, "otel_traces", "d1")
	got, ok = h.take(60, 70)
	check("inside a run", got, ok, 0, 0)
	got, ok = h.take(50, 60)
	check("a given-up run's first", got, ok, 0, 0)

	// Another table, a gap, a large request: separate.
	put(70, 80, "otel_traces", "e0")
	put(80, 90, "other", "e1")
	put(95, 100, "other", "e2")
	big := make([]string, ItemRows)
	for i := range big {
		big[i] = fmt.Sprint("big", i)
	}
	put(100, 110, "other", big...)
	for _, want := range []struct {
		pos, next ingestlog.Position
		rows      int
	}{{70, 80, 1}, {80, 90, 1}, {95, 100, 1}, {100, 110, ItemRows}} {
		got, ok = h.take(want.pos, want.next)
		check(fmt.Sprint("record ", want.pos), got, ok, want.rows, 10)
	}
	if h.bytes != 0 || len(h.items) != 0 {
		t.Fatalf("%d bytes, %d items left", h.bytes, len(h.items))
	}

	// The bound counts merged records too; drain empties everything.
	for pos := ingestlog.Position(110); pos < 300; pos += 10 {
		put(pos, pos+10, "otel_traces", fmt.Sprint("f", pos))
	}
	if h.bytes != 190 {
		t.Fatalf("%d bytes held, want 190", h.bytes)
	}
	h.max = 195
	if put(300, 310, "otel_traces", "over") {
		t.Fatal("a put beyond the bound was taken")
	}
	h.drain()
	if h.bytes != 0 || len(h.items) != 0 || h.open != nil {
		t.Fatalf("after drain: %d bytes, %d items, open run %v", h.bytes, len(h.items), h.open)
	}
}

// tracesRequest returns a traces export request with one span per id,
// each carrying its id in the attribute test.id.
func tracesRequest(ids ...string) ptraceotlp.ExportRequest {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "logloadtest")
	ss := rs.ScopeSpans().AppendEmpty()
	for i, id := range ids {
		s := ss.Spans().AppendEmpty()
		s.SetName("op")
		s.SetTraceID(pcommon.TraceID{1, 2, 3, byte(i)})
		s.SetSpanID(pcommon.SpanID{4, 5, byte(i >> 8), byte(i)})
		s.SetKind(ptrace.SpanKindServer)
		s.SetStartTimestamp(1_700_000_000_000_000_000)
		s.SetEndTimestamp(1_700_000_000_001_000_000)
		s.Attributes().PutStr("test.id", id)
	}
	return ptraceotlp.NewExportRequestFromTraces(td)
}

func tracesProto(t testing.TB, ids ...string) []byte {
	t.Helper()
	b, err := tracesRequest(ids...).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
