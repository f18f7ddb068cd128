package transforms

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/shredduck/shredduck/shred"
)

// timeCase is one OTLP time field: a request of three records whose second
// has the field set to ns (the others have ordinary times), and where the
// value lands.
type timeCase struct {
	name   string
	tr     Transform
	field  string // as the rejection names it
	noun   string
	column string // the core column holding the value
	nested bool   // in a list of structs, as their "time" field
	build  func(t *testing.T, ns uint64, withBad bool) (js, pb []byte)
}

const someTime = 1_700_000_000_000_000_000

func timeCases() []timeCase {
	traces := func(set func(ptrace.Span, pcommon.Timestamp)) func(*testing.T, uint64, bool) ([]byte, []byte) {
		return func(t *testing.T, ns uint64, withBad bool) ([]byte, []byte) {
			td := ptrace.NewTraces()
			spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
			add := func(name string) ptrace.Span {
				s := spans.AppendEmpty()
				s.SetName(name)
				s.SetStartTimestamp(someTime)
				s.SetEndTimestamp(someTime + 1000)
				s.Events().AppendEmpty().SetTimestamp(someTime + 500)
				s.Attributes().PutInt("n", 1)
				return s
			}
			add("fine")
			if withBad {
				s := add("late")
				s.Attributes().PutStr("n", "widens n to VARCHAR")
				s.Attributes().PutBool("only.late", true)
				set(s, pcommon.Timestamp(ns))
			}
			add("fine too")
			return marshalTraces(t, td)
		}
	}
	logs := func(set func(plog.LogRecord, pcommon.Timestamp)) func(*testing.T, uint64, bool) ([]byte, []byte) {
		return func(t *testing.T, ns uint64, withBad bool) ([]byte, []byte) {
			ld := plog.NewLogs()
			recs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
			add := func(body string) plog.LogRecord {
				r := recs.AppendEmpty()
				r.Body().SetStr(body)
				r.SetTimestamp(someTime)
				r.SetObservedTimestamp(someTime + 1)
				r.Attributes().PutInt("n", 1)
				return r
			}
			add("fine")
			if withBad {
				r := add("late")
				r.Attributes().PutStr("n", "widens n to VARCHAR")
				r.Attributes().PutBool("only.late", true)
				set(r, pcommon.Timestamp(ns))
			}
			add("fine too")
			return marshalLogsBoth(t, ld)
		}
	}
	// metrics: one metric of the kind with three data points.
	metrics := func(kind pmetric.MetricType, set func(point, pcommon.Timestamp)) func(*testing.T, uint64, bool) ([]byte, []byte) {
		return func(t *testing.T, ns uint64, withBad bool) ([]byte, []byte) {
			md := pmetric.NewMetrics()
			m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
			m.SetName("m")
			add := func() point {
				var p point
				var ex pmetric.ExemplarSlice
				switch kind {
				case pmetric.MetricTypeGauge:
					if m.Type() != kind {
						m.SetEmptyGauge()
					}
					n := m.Gauge().DataPoints().AppendEmpty()
					n.SetIntValue(1)
					p, ex = n, n.Exemplars()
				case pmetric.MetricTypeSum:
					n := sumPoints(m).AppendEmpty()
					n.SetDoubleValue(1.5)
					p, ex = n, n.Exemplars()
				case pmetric.MetricTypeHistogram:
					h := histPoints(m).AppendEmpty()
					h.SetCount(1)
					p, ex = h, h.Exemplars()
				case pmetric.MetricTypeExponentialHistogram:
					h := expHistPoints(m).AppendEmpty()
					h.SetCount(1)
					p, ex = h, h.Exemplars()
				case pmetric.MetricTypeSummary:
					s := summaryPoints(m).AppendEmpty()
					s.SetCount(1)
					p = s
				}
				p.SetTimestamp(someTime)
				p.SetStartTimestamp(someTime - 1000)
				if kind != pmetric.MetricTypeSummary {
					e := ex.AppendEmpty()
					e.SetTimestamp(someTime - 10)
					e.SetIntValue(7)
				}
				p.Attributes().PutInt("n", 1)
				return p
			}
			add()
			if withBad {
				p := add()
				p.Attributes().PutStr("n", "widens n to VARCHAR")
				p.Attributes().PutBool("only.late", true)
				set(p, pcommon.Timestamp(ns))
			}
			add()
			return marshalMetricsBoth(t, md)
		}
	}
	cases := []timeCase{
		{"span start", Traces, "startTimeUnixNano", "span", "start_time", false,
			traces(func(s ptrace.Span, ts pcommon.Timestamp) { s.SetStartTimestamp(ts) })},
		{"span end", Traces, "endTimeUnixNano", "span", "end_time", false,
			traces(func(s ptrace.Span, ts pcommon.Timestamp) { s.SetEndTimestamp(ts) })},
		{"span event", Traces, "events.timeUnixNano", "span", "events", true,
			traces(func(s ptrace.Span, ts pcommon.Timestamp) { s.Events().At(0).SetTimestamp(ts) })},
		{"log time", Logs, "timeUnixNano", "log record", "time", false,
			logs(func(r plog.LogRecord, ts pcommon.Timestamp) { r.SetTimestamp(ts) })},
		{"log observed time", Logs, "observedTimeUnixNano", "log record", "observed_time", false,
			logs(func(r plog.LogRecord, ts pcommon.Timestamp) { r.SetObservedTimestamp(ts) })},
	}
	for _, k := range []pmetric.MetricType{pmetric.MetricTypeGauge, pmetric.MetricTypeSum, pmetric.MetricTypeHistogram,
		pmetric.MetricTypeExponentialHistogram, pmetric.MetricTypeSummary} {
		cases = append(cases,
			timeCase{k.String() + " point time", Metrics, "timeUnixNano", "data point", "time", false,
				metrics(k, func(p point, ts pcommon.Timestamp) { p.SetTimestamp(ts) })},
			timeCase{k.String() + " point start time", Metrics, "startTimeUnixNano", "data point", "start_time", false,
				metrics(k, func(p point, ts pcommon.Timestamp) { p.SetStartTimestamp(ts) })})
		if k != pmetric.MetricTypeSummary {
			cases = append(cases, timeCase{k.String() + " exemplar time", Metrics, "exemplars.timeUnixNano", "data point", "exemplars", true,
				metrics(k, func(p point, ts pcommon.Timestamp) { pointExemplars(p).At(0).SetTimestamp(ts) })})
		}
	}
	return cases
}

// point is what the data point types of pdata share.
type point interface {
	SetTimestamp(pcommon.Timestamp)
	SetStartTimestamp(pcommon.Timestamp)
	Attributes() pcommon.Map
}

func pointExemplars(p point) pmetric.ExemplarSlice {
	switch p := p.(type) {
	case pmetric.NumberDataPoint:
		return p.Exemplars()
	case pmetric.HistogramDataPoint:
		return p.Exemplars()
	case pmetric.ExponentialHistogramDataPoint:
		return p.Exemplars()
	}
	panic("no exemplars")
}

func sumPoints(m pmetric.Metric) pmetric.NumberDataPointSlice {
	if m.Type() != pmetric.MetricTypeSum {
		m.SetEmptySum().SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	}
	return m.Sum().DataPoints()
}

func histPoints(m pmetric.Metric) pmetric.HistogramDataPointSlice {
	if m.Type() != pmetric.MetricTypeHistogram {
		m.SetEmptyHistogram().SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	}
	return m.Histogram().DataPoints()
}

func expHistPoints(m pmetric.Metric) pmetric.ExponentialHistogramDataPointSlice {
	if m.Type() != pmetric.MetricTypeExponentialHistogram {
		m.SetEmptyExponentialHistogram().SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	}
	return m.ExponentialHistogram().DataPoints()
}

func summaryPoints(m pmetric.Metric) pmetric.SummaryDataPointSlice {
	if m.Type() != pmetric.MetricTypeSummary {
		m.SetEmptySummary()
	}
	return m.Summary().DataPoints()
}

func marshalLogsBoth(t *testing.T, ld plog.Logs) (js, pb []byte) {
	t.Helper()
	js, err := (&plog.JSONMarshaler{}).MarshalLogs(ld)
	if err != nil {
		t.Fatal(err)
	}
	if pb, err = (&plog.ProtoMarshaler{}).MarshalLogs(ld); err != nil {
		t.Fatal(err)
	}
	return js, pb
}

func marshalMetricsBoth(t *testing.T, md pmetric.Metrics) (js, pb []byte) {
	t.Helper()
	js, err := (&pmetric.JSONMarshaler{}).MarshalMetrics(md)
	if err != nil {
		t.Fatal(err)
	}
	if pb, err = (&pmetric.ProtoMarshaler{}).MarshalMetrics(md); err != nil {
		t.Fatal(err)
	}
	return js, pb
}

func appendEither(tr Transform, b *shred.Batch, data []byte, proto bool) (int, error) {
	if proto {
		return tr.AppendProto(b, data)
	}
	return tr.AppendJSON(b, data)
}

// An OTLP time of 2^63-1 ns or later (year 2262 on), which TIMESTAMP_NS
// cannot hold (2^63-1 is its infinity), rejects its record in both
// encodings, naming the field, instead of infinity or a value wrapped to
// 1677 or 1754: the request's other records are appended, and the
// rejected one leaves no column and no widening behind. The latest time
// TIMESTAMP_NS holds is stored as it is, and 0 (OTLP's "unset") as NULL.
func TestTimesPastTimestampNS(t *testing.T) {
	for _, tc := range timeCases() {
		t.Run(tc.name, func(t *testing.T) {
			_, wantPB := tc.build(t, 0, false)
			want := decodeRequests(t, tc.tr, [][]byte{wantPB}, true)
			for _, ns := range []uint64{math.MaxInt64, 1 << 63, math.MaxUint64} {
				js, pb := tc.build(t, ns, true)
				for _, proto := range []bool{false, true} {
					b := shred.NewBatch(tc.tr.Core())
					n, err := appendEither(tc.tr, b, map[bool][]byte{false: js, true: pb}[proto], proto)
					var rej *RejectedError
					if !errors.As(err, &rej) {
						t.Fatalf("%d, proto=%v: %v, want a RejectedError", ns, proto, err)
					}
					if prefix := "1 " + tc.noun + " rejected; first: " + tc.noun + " 2 of the request: field " + tc.field + ": " + strconv.FormatUint(ns, 10) + " ns"; rej.Records != 1 || !strings.HasPrefix(rej.Error(), prefix) {
						t.Errorf("%d, proto=%v: %q (%d records), want %q…", ns, proto, rej.Error(), rej.Records, prefix)
					}
					if n != 2 || b.Rows != 2 {
						t.Fatalf("%d, proto=%v: n=%d rows=%d, want 2", ns, proto, n, b.Rows)
					}
					if err := finishPadded(b); err != nil {
						t.Fatal(err)
					}
					checkBatch(t, b)
					sameRows(t, tc.tr, b, want)
					if c := dynCol(b, shred.Record, "n"); c == nil || c.Type.Kind != shred.Int64 {
						t.Errorf("%d, proto=%v: column n is %v, want BIGINT (the rejected record's string must not widen it)", ns, proto, c)
					}
				}
			}
			for _, ns := range []uint64{math.MaxInt64 - 1, 0} {
				js, pb := tc.build(t, ns, true)
				for _, proto := range []bool{false, true} {
					b := decodeRequests(t, tc.tr, [][]byte{map[bool][]byte{false: js, true: pb}[proto]}, proto)
					if b.Rows != 3 {
						t.Fatalf("%d, proto=%v: %d rows, want 3", ns, proto, b.Rows)
					}
					w := "NULL"
					if ns != 0 {
						w = strconv.FormatUint(ns, 10)
					}
					got := cell(coreCol(t, tc.tr, b, tc.column), 1)
					if tc.nested {
						w = "time:" + w
						if !strings.Contains(got, w) {
							t.Errorf("%d, proto=%v: %s is %s, want %s in it", ns, proto, tc.column, got, w)
						}
					} else if got != w {
						t.Errorf("%d, proto=%v: %s is %s, want %s", ns, proto, tc.column, got, w)
					}
				}
			}
		})
	}
}

// In OTLP/JSON, the data points of a metric's data that a later data field
// replaces (the oneof's last one wins, as in protobuf) are not records: a
// late time among them rejects nothing, and the data points of the data
// that stays are numbered from the metric's first.
func TestMetricsReplacedDataTimes(t *testing.T) {
	late := `"18446744073709551615"`
	f := func(req string, rows int, rejected string) {
		t.Helper()
		b := shred.NewBatch(Metrics.Core())
		n, err := Metrics.AppendJSON(b, []byte(`{"resourceMetrics":[{"scopeMetrics":[{"metrics":[`+req+`]}]}]}`))
		var rej *RejectedError
		switch {
		case rejected == "" && err != nil:
			t.Errorf("%s: %v", req, err)
		case rejected != "" && (!errors.As(err, &rej) || !strings.HasPrefix(rej.Error(), rejected)):
			t.Errorf("%s: %v, want %q…", req, err, rejected)
		}
		if n != rows {
			t.Errorf("%s: %d rows, want %d", req, n, rows)
		}
	}
	f(`{"name":"m","gauge":{"dataPoints":[{"timeUnixNano":`+late+`,"asInt":"1"},{"asInt":"2"}]},"sum":{"dataPoints":[{"asInt":"3"}]}}`, 1, "")
	f(`{"name":"m","gauge":{"dataPoints":[{"asInt":"1"},{"timeUnixNano":`+late+`,"asInt":"2"}]},"sum":{"dataPoints":[{"asInt":"3"},{"timeUnixNano":`+late+`}]}}`, 1,
		"1 data point rejected; first: data point 2 of the request: field timeUnixNano")
	f(`{"name":"m","gauge":{"dataPoints":[{"timeUnixNano":`+late+`}]},"sum":{"dataPoints":[{"asInt":"3"}]}},`+
		`{"name":"n","gauge":{"dataPoints":[{"asInt":"4"},{"startTimeUnixNano":`+late+`}]}}`, 2,
		"1 data point rejected; first: data point 3 of the request: field startTimeUnixNano")
}
