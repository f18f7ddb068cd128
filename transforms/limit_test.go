package transforms

import (
	"errors"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/shredduck/shredduck/shred"
)

// limitRequests returns a request of n records of tr's signal, as
// protobuf and as OTLP/JSON; service names the resource.
func limitRequests(t *testing.T, tr Transform, n int, service string) (pb, js []byte) {
	t.Helper()
	var err error
	switch tr {
	case Traces:
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", service)
		ss := rs.ScopeSpans().AppendEmpty()
		for range n {
			ss.Spans().AppendEmpty().SetName("s")
		}
		req := ptraceotlp.NewExportRequestFromTraces(td)
		pb, err = req.MarshalProto()
		if err == nil {
			js, err = req.MarshalJSON()
		}
	case Logs:
		ld := plog.NewLogs()
		rl := ld.ResourceLogs().AppendEmpty()
		rl.Resource().Attributes().PutStr("service.name", service)
		sl := rl.ScopeLogs().AppendEmpty()
		for range n {
			sl.LogRecords().AppendEmpty().Body().SetStr("l")
		}
		req := plogotlp.NewExportRequestFromLogs(ld)
		pb, err = req.MarshalProto()
		if err == nil {
			js, err = req.MarshalJSON()
		}
	case Metrics:
		md := pmetric.NewMetrics()
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutStr("service.name", service)
		g := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
		g.SetName("m")
		pts := g.SetEmptyGauge().DataPoints()
		for i := range n {
			pts.AppendEmpty().SetIntValue(int64(i))
		}
		req := pmetricotlp.NewExportRequestFromMetrics(md)
		pb, err = req.MarshalProto()
		if err == nil {
			js, err = req.MarshalJSON()
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	return pb, js
}

// TestRecordLimit: every decoder stops at the batch's row limit with
// ErrTooManyRows and appends nothing; at the limit it appends all.
func TestRecordLimit(t *testing.T) {
	const limit = 50
	for _, tr := range All() {
		for _, n := range []int{limit, limit + 1, 10 * limit} {
			pb, js := limitRequests(t, tr, n, "svc")
			for _, proto := range []bool{true, false} {
				b := shred.NewBatch(tr.Core())
				b.SetLimits(shred.Limits{MaxRows: limit})
				var got int
				var err error
				if proto {
					got, err = tr.AppendProto(b, pb)
				} else {
					got, err = tr.AppendJSON(b, js)
				}
				switch {
				case n <= limit && (err != nil || got != n || b.Rows != n):
					t.Errorf("%s proto=%v, %d records: %d rows, %v", tr.Name(), proto, n, got, err)
				case n > limit && (!errors.Is(err, shred.ErrTooManyRows) || got != 0 || b.Rows != 0):
					t.Errorf("%s proto=%v, %d records over a limit of %d: %d rows (batch %d), %v", tr.Name(), proto, n, limit, got, b.Rows, err)
				}
			}
		}
	}
}

// TestRecordLimitStopsEarly: a small body of a million empty spans stops
// decoding at the limit, not after a million rows.
func TestRecordLimitStopsEarly(t *testing.T) {
	empty := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), nil)
	scope := strings.Repeat(string(empty), 1<<20)
	rs := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), []byte(scope))
	req := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), rs)
	b := shred.NewBatch(Traces.Core())
	b.SetLimits(shred.Limits{MaxRows: 1000})
	if _, err := Traces.AppendProto(b, req); !errors.Is(err, shred.ErrTooManyRows) {
		t.Fatalf("a million empty spans: %v", err)
	}
	if c := b.Capacity(); c > 4<<20 {
		t.Errorf("the batch grew to %d bytes before it stopped", c)
	}
}

// TestFillLimit: a resource's service name is copied into each of its
// rows; the copies are charged first, and the charge can refuse them.
func TestFillLimit(t *testing.T) {
	for _, tr := range All() {
		pb, js := limitRequests(t, tr, 2000, strings.Repeat("s", 64<<10)) // 128 MiB of copies
		for _, proto := range []bool{true, false} {
			var granted int64
			b := shred.NewBatch(tr.Core())
			b.SetLimits(shred.Limits{Charge: func(n int64) bool {
				if granted+n > 16<<20 {
					return false
				}
				granted += n
				return true
			}})
			var got int
			var err error
			if proto {
				got, err = tr.AppendProto(b, pb)
			} else {
				got, err = tr.AppendJSON(b, js)
			}
			if !errors.Is(err, shred.ErrMemory) || got != 0 || b.Rows != 0 {
				t.Errorf("%s proto=%v: %d rows, %v", tr.Name(), proto, got, err)
			}
			if c := b.Capacity(); c > 32<<20 {
				t.Errorf("%s proto=%v: the batch grew to %d bytes", tr.Name(), proto, c)
			}
		}
	}
}

func TestNDJSONRecordLimit(t *testing.T) {
	tr := NewNDJSON(DefaultMaxDepth)
	b := shred.NewBatch(tr.Core())
	b.SetLimits(shred.Limits{MaxRows: 2})
	for i, line := range []string{`{"a":1}`, `{"b":2}`, `{"c":3}`} {
		n, err := tr.AppendJSON(b, []byte(line))
		if i < 2 && (err != nil || n != 1) {
			t.Fatalf("line %d: %d, %v", i+1, n, err)
		}
		if i == 2 && (!errors.Is(err, shred.ErrTooManyRows) || n != 0 || b.Rows != 2) {
			t.Fatalf("line 3 over a limit of 2: %d rows (batch %d), %v", n, b.Rows, err)
		}
	}
}
