package transforms

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/shredduck/shredduck/shred"
)

// appendMetricsPdata is the pdata-based decoder that AppendProto replaced,
// kept as the reference FuzzMetricsProtoDirect compares it with.
func appendMetricsPdata(b *shred.Batch, data []byte) (int, error) {
	md, err := (&pmetric.ProtoUnmarshaler{}).UnmarshalMetrics(data)
	if err != nil {
		return 0, protoError(len(data), err)
	}
	return refPasses(b, metricsCore, "data point", func(r *rejects) {
		var res, scope scopeInfo
		var scratch []byte
		var mi metricInfo
		var meta []byte
		for _, rm := range md.ResourceMetrics().All() {
			pdataResource(&res, rm.Resource(), rm.SchemaUrl())
			resStart := b.Rows
			for _, sm := range rm.ScopeMetrics().All() {
				pdataScope(&scope, sm.Scope(), sm.SchemaUrl())
				scopeStart := b.Rows
				for _, m := range sm.Metrics().All() {
					metricStart := b.Rows
					scratch = appendPdataMetric(b, m, scratch, r)
					mi = metricInfo{name: []byte(m.Name()), description: []byte(m.Description()), unit: []byte(m.Unit())}
					if m.Metadata().Len() > 0 {
						meta = appendPdataMapJSON(meta[:0], m.Metadata())
						mi.metadata = meta
					}
					fillMetric(b, &mi, metricStart)
				}
				metricsBlock.fillScope(b, &scope, scopeStart)
			}
			metricsBlock.fillResource(b, &res, resStart)
		}
	})
}

// appendPdataMetric appends the rows of one metric's data points (each a
// record of r, skipped if r says so) and fills their data-object columns.
func appendPdataMetric(b *shred.Batch, m pmetric.Metric, scratch []byte, r *rejects) []byte {
	start := b.Rows
	var p dataPoint
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		for _, dp := range m.Gauge().DataPoints().All() {
			if r.begin() {
				continue
			}
			row := b.Rows
			scratch = appendPdataNumberPoint(b, kindGauge, dp, scratch)
			if refRejectLate(b, r, row, append(refExemplarTimes(dp.Exemplars()), uint64(dp.Timestamp()), uint64(dp.StartTimestamp()))...) {
				continue
			}
			r.rows(1)
		}
		fillData(b, kindGauge, 0, false, start)
	case pmetric.MetricTypeSum:
		s := m.Sum()
		for _, dp := range s.DataPoints().All() {
			if r.begin() {
				continue
			}
			row := b.Rows
			scratch = appendPdataNumberPoint(b, kindSum, dp, scratch)
			if refRejectLate(b, r, row, append(refExemplarTimes(dp.Exemplars()), uint64(dp.Timestamp()), uint64(dp.StartTimestamp()))...) {
				continue
			}
			r.rows(1)
		}
		fillData(b, kindSum, int64(s.AggregationTemporality()), s.IsMonotonic(), start)
	case pmetric.MetricTypeHistogram:
		h := m.Histogram()
		for _, dp := range h.DataPoints().All() {
			if r.begin() {
				continue
			}
			row := b.Rows
			p = pdataHistPoint(dp)
			appendPointCore(b, kindHistogram, &p)
			appendUint64List(b.Core[mBucketCounts], dp.BucketCounts())
			appendFloat64List(b.Core[mExplicitBounds], dp.ExplicitBounds())
			b.Core[mPositiveBucketCounts].AppendNull()
			b.Core[mNegativeBucketCounts].AppendNull()
			b.Core[mQuantiles].AppendNull()
			scratch = endPdataPoint(b, dp.Exemplars(), dp.Attributes(), scratch)
			if refRejectLate(b, r, row, append(refExemplarTimes(dp.Exemplars()), uint64(dp.Timestamp()), uint64(dp.StartTimestamp()))...) {
				continue
			}
			r.rows(1)
		}
		fillData(b, kindHistogram, int64(h.AggregationTemporality()), false, start)
	case pmetric.MetricTypeExponentialHistogram:
		h := m.ExponentialHistogram()
		for _, dp := range h.DataPoints().All() {
			if r.begin() {
				continue
			}
			row := b.Rows
			p = pdataHistPoint(dp)
			p.scale, p.zeroCount, p.zeroThreshold = dp.Scale(), dp.ZeroCount(), dp.ZeroThreshold()
			p.posOffset, p.negOffset = dp.Positive().Offset(), dp.Negative().Offset()
			appendPointCore(b, kindExpHistogram, &p)
			b.Core[mBucketCounts].AppendNull()
			b.Core[mExplicitBounds].AppendNull()
			appendUint64List(b.Core[mPositiveBucketCounts], dp.Positive().BucketCounts())
			appendUint64List(b.Core[mNegativeBucketCounts], dp.Negative().BucketCounts())
			b.Core[mQuantiles].AppendNull()
			scratch = endPdataPoint(b, dp.Exemplars(), dp.Attributes(), scratch)
			if refRejectLate(b, r, row, append(refExemplarTimes(dp.Exemplars()), uint64(dp.Timestamp()), uint64(dp.StartTimestamp()))...) {
				continue
			}
			r.rows(1)
		}
		fillData(b, kindExpHistogram, int64(h.AggregationTemporality()), false, start)
	case pmetric.MetricTypeSummary:
		for _, dp := range m.Summary().DataPoints().All() {
			if r.begin() {
				continue
			}
			row := b.Rows
			p = dataPoint{
				time: uint64(dp.Timestamp()), start: uint64(dp.StartTimestamp()), flags: uint32(dp.Flags()),
				count: dp.Count(), hasSum: true, sum: dp.Sum(),
			}
			appendPointCore(b, kindSummary, &p)
			b.Core[mBucketCounts].AppendNull()
			b.Core[mExplicitBounds].AppendNull()
			b.Core[mPositiveBucketCounts].AppendNull()
			b.Core[mNegativeBucketCounts].AppendNull()
			appendPdataQuantiles(b.Core[mQuantiles], dp.QuantileValues())
			b.Core[mExemplars].AppendNull()
			scratch = setPdataAttrs(b, b.Rows, dp.Attributes(), scratch)
			b.EndRow()
			if refRejectLate(b, r, row, append([]uint64(nil), uint64(dp.Timestamp()), uint64(dp.StartTimestamp()))...) {
				continue
			}
			r.rows(1)
		}
		fillData(b, kindSummary, 0, false, start)
	}
	return scratch
}

// histPoint is what pdata's histogram and exponential histogram data
// points have in common.
type histPoint interface {
	Timestamp() pcommon.Timestamp
	StartTimestamp() pcommon.Timestamp
	Flags() pmetric.DataPointFlags
	Count() uint64
	HasSum() bool
	Sum() float64
	HasMin() bool
	Min() float64
	HasMax() bool
	Max() float64
}

func pdataHistPoint(dp histPoint) dataPoint {
	return dataPoint{
		time: uint64(dp.Timestamp()), start: uint64(dp.StartTimestamp()), flags: uint32(dp.Flags()),
		count: dp.Count(), hasSum: dp.HasSum(), sum: dp.Sum(),
		hasMin: dp.HasMin(), min: dp.Min(), hasMax: dp.HasMax(), max: dp.Max(),
	}
}

func appendPdataNumberPoint(b *shred.Batch, kind int, dp pmetric.NumberDataPoint, scratch []byte) []byte {
	p := dataPoint{time: uint64(dp.Timestamp()), start: uint64(dp.StartTimestamp()), flags: uint32(dp.Flags())}
	switch dp.ValueType() {
	case pmetric.NumberDataPointValueTypeDouble:
		p.hasDouble, p.dval = true, dp.DoubleValue()
	case pmetric.NumberDataPointValueTypeInt:
		p.hasInt, p.ival = true, dp.IntValue()
	}
	appendPointCore(b, kind, &p)
	c := b.Core
	c[mBucketCounts].AppendNull()
	c[mExplicitBounds].AppendNull()
	c[mPositiveBucketCounts].AppendNull()
	c[mNegativeBucketCounts].AppendNull()
	c[mQuantiles].AppendNull()
	return endPdataPoint(b, dp.Exemplars(), dp.Attributes(), scratch)
}

// endPdataPoint appends a data point's exemplars and attributes and ends
// its row.
func endPdataPoint(b *shred.Batch, es pmetric.ExemplarSlice, attrs pcommon.Map, scratch []byte) []byte {
	scratch = appendPdataExemplars(b.Core[mExemplars], es, scratch)
	scratch = setPdataAttrs(b, b.Rows, attrs, scratch)
	b.EndRow()
	return scratch
}

func appendUint64List(c *shred.Column, s pcommon.UInt64Slice) {
	if s.Len() == 0 {
		c.AppendNull()
		return
	}
	for _, v := range s.All() {
		c.Child.AppendInt(int64(v))
	}
	c.EndList()
}

func appendFloat64List(c *shred.Column, s pcommon.Float64Slice) {
	if s.Len() == 0 {
		c.AppendNull()
		return
	}
	for _, v := range s.All() {
		c.Child.AppendFloat(v)
	}
	c.EndList()
}

func appendPdataQuantiles(c *shred.Column, qs pmetric.SummaryDataPointValueAtQuantileSlice) {
	if qs.Len() == 0 {
		c.AppendNull()
		return
	}
	f := c.Child.Fields
	for _, q := range qs.All() {
		f[0].AppendFloat(q.Quantile())
		f[1].AppendFloat(q.Value())
		c.Child.EndStruct()
	}
	c.EndList()
}

func appendPdataExemplars(c *shred.Column, es pmetric.ExemplarSlice, scratch []byte) []byte {
	if es.Len() == 0 {
		c.AppendNull()
		return scratch
	}
	f := c.Child.Fields
	for _, e := range es.All() {
		f[0].AppendTime(uint64(e.Timestamp()))
		switch e.ValueType() {
		case pmetric.ExemplarValueTypeDouble:
			f[1].AppendFloat(e.DoubleValue())
			f[2].AppendNull()
		case pmetric.ExemplarValueTypeInt:
			f[1].AppendFloat(float64(e.IntValue()))
			f[2].AppendInt(e.IntValue())
		default:
			f[1].AppendNull()
			f[2].AppendNull()
		}
		tid, sid := e.TraceID(), e.SpanID()
		appendID(f[3], tid[:])
		appendID(f[4], sid[:])
		scratch = appendAttrsJSON(f[5], e.FilteredAttributes(), scratch)
		c.Child.EndStruct()
	}
	c.EndList()
	return scratch
}

// FuzzMetricsProtoDirect checks the direct protobuf decoder of metrics
// against the pdata-based one it replaced.
func FuzzMetricsProtoDirect(f *testing.F) {
	fuzzProtoDirect(f, Metrics, appendMetricsPdata, metricsPBCases())
}

// metricsPBCases are protobuf metrics requests for pdata's rules that an
// encoder does not produce: packed and unpacked repeated fields mixed, a
// oneof given twice, buckets given twice, fields with a wrong wire type,
// exemplars with every value kind.
func metricsPBCases() [][]byte {
	packed64 := func(vs ...uint64) []byte {
		var b []byte
		for _, v := range vs {
			b = protowire.AppendFixed64(b, v)
		}
		return b
	}
	kv := func(k, v string) []byte { return bytesF(bytesF(nil, 1, []byte(k)), 2, bytesF(nil, 1, []byte(v))) }
	request := func(metrics ...[]byte) []byte {
		var sm []byte
		for _, m := range metrics {
			sm = bytesF(sm, 2, m)
		}
		rm := bytesF(bytesF(nil, 1, bytesF(nil, 1, kv("service.name", "svc"))), 2, sm)
		return bytesF(nil, 1, rm)
	}
	metric := func(name string, fields ...[]byte) []byte {
		m := bytesF(nil, 1, []byte(name))
		for _, f := range fields {
			m = append(m, f...)
		}
		return m
	}
	exemplars := bytesF(nil, 5, fixed64F(fixed64F(bytesF(bytesF(bytesF(nil, 7, kv("e", "x")), 4, bytes.Repeat([]byte{1}, 8)), 5, bytes.Repeat([]byte{2}, 16)), 2, 7), 3, math.Float64bits(2.5)))
	exemplars = bytesF(exemplars, 5, fixed64F(nil, 6, uint64(1<<63)))
	exemplars = bytesF(exemplars, 5, nil)
	number := fixed64F(fixed64F(bytesF(varintF(nil, 8, 1), 7, kv("a", "1")), 3, 100), 4, math.Float64bits(1.5))
	number = fixed64F(number, 6, 42) // as_int after as_double: the int wins
	number = append(number, exemplars...)
	hist := fixed64F(fixed64F(nil, 4, 3), 5, math.Float64bits(9))
	hist = bytesF(hist, 6, packed64(1, 2))
	hist = fixed64F(hist, 6, 3) // unpacked: appends
	hist = bytesF(hist, 7, packed64(math.Float64bits(0.5), math.Float64bits(1)))
	hist = bytesF(hist, 7, packed64(math.Float64bits(5))) // packed again: replaces
	hist = fixed64F(fixed64F(hist, 11, math.Float64bits(-1)), 12, math.Float64bits(8))
	hist = bytesF(hist, 9, kv("h", "y"))
	buckets := func(offset uint64, counts ...uint64) []byte {
		var packed []byte
		for _, c := range counts {
			packed = protowire.AppendVarint(packed, c)
		}
		return bytesF(varintF(nil, 1, offset), 2, packed)
	}
	exp := fixed64F(varintF(fixed64F(nil, 4, 5), 6, protowire.EncodeZigZag(-3)), 7, 1)
	exp = bytesF(exp, 8, buckets(protowire.EncodeZigZag(-2), 1, 2))
	exp = bytesF(exp, 8, varintF(buckets(3, 4), 2, 5)) // merges: the offset becomes -2 (zigzag 3), counts 1 2 4 5
	exp = bytesF(exp, 9, buckets(2, 7))
	exp = fixed64F(exp, 14, math.Float64bits(0.001))
	summary := fixed64F(fixed64F(nil, 4, 2), 5, math.Float64bits(3))
	summary = bytesF(summary, 6, fixed64F(fixed64F(nil, 1, math.Float64bits(0.5)), 2, math.Float64bits(1.5)))
	summary = bytesF(summary, 6, nil)
	return [][]byte{
		request(
			metric("gauge", bytesF(nil, 5, bytesF(bytesF(nil, 1, number), 1, nil))),
			metric("sum", bytesF(nil, 7, varintF(varintF(bytesF(nil, 1, number), 2, 2), 3, 5))),
			metric("hist", bytesF(nil, 9, varintF(bytesF(nil, 1, hist), 2, 1<<33|1))),
			metric("exp", bytesF(nil, 10, bytesF(nil, 1, exp))),
			metric("summary", bytesF(nil, 11, bytesF(nil, 1, summary))),
			metric("meta", bytesF(nil, 12, kv("m", "v")), bytesF(nil, 5, bytesF(nil, 1, number))),
		),
		// the oneof twice: the last wins, the first is still checked
		request(metric("twice", bytesF(nil, 5, bytesF(nil, 1, number)), bytesF(nil, 7, bytesF(nil, 1, number)))),
		request(metric("twice-bad", bytesF(nil, 5, bytesF(nil, 1, fixed64F(nil, 7, 1))), bytesF(nil, 7, bytesF(nil, 1, number)))),
		// wrong wire types, a packed field of the wrong length
		request(metric("bad-bounds", bytesF(nil, 9, bytesF(nil, 1, bytesF(nil, 7, []byte{1, 2, 3}))))),
		request(metric("bad-scale", bytesF(nil, 10, bytesF(nil, 1, fixed64F(nil, 6, 1))))),
		request(metric("bad-name", varintF(nil, 1, 1))),
		request(metric("no data", bytesF(nil, 12, kv("m", "v")))),
	}
}

// benchMetricsProto decodes the protobuf metrics fixtures of every kind.
func benchMetricsProto(b *testing.B, appendFn func(*shred.Batch, []byte) (int, error)) {
	var reqs [][]byte
	for _, k := range metricsKinds {
		data, err := os.ReadFile(filepath.Join(otlpDataDir, "otlp2parquet", "metrics_"+k+".pb"))
		if err != nil {
			b.Fatal(err)
		}
		reqs = append(reqs, data)
	}
	batch := shred.NewBatch(Metrics.Core())
	points := 0
	b.ReportAllocs()
	for b.Loop() {
		for _, req := range reqs {
			n, err := appendFn(batch, req)
			if err != nil {
				b.Fatal(err)
			}
			points += n
		}
		batch.Truncate(0)
	}
	b.ReportMetric(float64(points)/b.Elapsed().Seconds(), "points/s")
}

func BenchmarkMetricsProto(b *testing.B)      { benchMetricsProto(b, Metrics.AppendProto) }
func BenchmarkMetricsProtoPdata(b *testing.B) { benchMetricsProto(b, appendMetricsPdata) }
