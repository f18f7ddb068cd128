package transforms

import (
	"encoding/binary"
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/shredduck/shredduck/shred"
)

// OTLP/protobuf metrics, decoded by otlp_pb.go's wire reader, with pdata's
// rules (FuzzMetricsProtoDirect checks them against the pdata-based
// decoder): a metric's data is a oneof, so the last of gauge, sum,
// histogram, exponential_histogram and summary wins, though each is
// decoded and checked; a packed histogram bucket_counts or explicit_bounds
// field replaces the values before it, an unpacked one appends; the
// positive and negative buckets of an exponential histogram merge.
// Each data point is a record of its own: one that is rejected
// (rejects.checkUTF8) leaves its metric's other points alone.

var metricsPB = pbSignal{block: &metricsBlock, core: metricsCore, noun: "data point", record: (*pbDecoder).metric, pointRecords: true}

func (metricsTransform) AppendProto(b *shred.Batch, data []byte) (int, error) {
	return appendPB(b, data, &metricsPB)
}

// metricData is one occurrence of a Metric's data oneof.
type metricData struct {
	kind int
	msg  []byte
}

// Metric, opentelemetry/proto/metrics/v1/metrics.proto.
const (
	metricName         = 1  // Metric: string name = 1;
	metricDescription  = 2  // Metric: string description = 2;
	metricUnit         = 3  // Metric: string unit = 3;
	metricGauge        = 5  // Metric: Gauge gauge = 5;
	metricSum          = 7  // Metric: Sum sum = 7;
	metricHistogram    = 9  // Metric: Histogram histogram = 9;
	metricExpHistogram = 10 // Metric: ExponentialHistogram exponential_histogram = 10;
	metricSummary      = 11 // Metric: Summary summary = 11;
	metricMetadata     = 12 // Metric: repeated opentelemetry.proto.common.v1.KeyValue metadata = 12;
)

// metric reads one Metric: its data points become rows, then its name,
// description, unit and metadata fill them.
func (d *pbDecoder) metric(b *shred.Batch, msg []byte) error {
	var mi metricInfo
	d.datas, d.meta = d.datas[:0], d.meta[:0]
	err := pbEach(msg, func(f pbField) error {
		kind := -1
		switch f.num {
		case metricName, metricDescription, metricUnit:
			if err := f.want(protowire.BytesType, "Metric", "string"); err != nil {
				return err
			}
			switch f.num {
			case metricName:
				mi.name = f.b
			case metricDescription:
				mi.description = f.b
			case metricUnit:
				mi.unit = f.b
			}
		case metricGauge:
			kind = kindGauge
		case metricSum:
			kind = kindSum
		case metricHistogram:
			kind = kindHistogram
		case metricExpHistogram:
			kind = kindExpHistogram
		case metricSummary:
			kind = kindSummary
		case metricMetadata:
			if err := f.want(protowire.BytesType, "Metric", "metadata"); err != nil {
				return err
			}
			d.meta = append(d.meta, f.b)
		}
		if kind >= 0 {
			if err := f.want(protowire.BytesType, "Metric", metricTypes[kind]); err != nil {
				return err
			}
			d.datas = append(d.datas, metricData{kind, f.b})
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(d.meta) > 0 {
		if d.metaJSON, err = d.kvsJSON(d.metaJSON[:0], d.meta); err != nil {
			return err
		}
		mi.metadata = d.metaJSON
	}
	if len(d.datas) == 0 {
		return nil
	}
	// The data that a later one replaces is decoded too (pdata fails on
	// its errors), into a batch that is thrown away.
	if last := len(d.datas) - 1; last > 0 {
		scratch := shred.NewBatch(metricsCore)
		off := d.rej.off
		d.rej.off = true
		for _, md := range d.datas[:last] {
			if err := d.metricData(scratch, md); err != nil {
				return err
			}
		}
		d.rej.off = off
		d.datas[0] = d.datas[last]
	}
	start := b.Rows
	if err := d.metricData(b, d.datas[0]); err != nil {
		return err
	}
	fillMetric(b, &mi, start)
	if err := b.Err(); err != nil {
		return err
	}
	return nil
}

// Gauge, opentelemetry/proto/metrics/v1/metrics.proto.
const (
	gaugeDataPoints = 1 // Gauge: repeated NumberDataPoint data_points = 1;
)

// Sum, opentelemetry/proto/metrics/v1/metrics.proto.
const (
	sumDataPoints             = 1 // Sum: repeated NumberDataPoint data_points = 1;
	sumAggregationTemporality = 2 // Sum: AggregationTemporality aggregation_temporality = 2;
	sumIsMonotonic            = 3 // Sum: bool is_monotonic = 3;
)

// Histogram, opentelemetry/proto/metrics/v1/metrics.proto.
const (
	histogramDataPoints             = 1 // Histogram: repeated HistogramDataPoint data_points = 1;
	histogramAggregationTemporality = 2 // Histogram: AggregationTemporality aggregation_temporality = 2;
)

// ExponentialHistogram, opentelemetry/proto/metrics/v1/metrics.proto.
const (
	expHistogramDataPoints             = 1 // ExponentialHistogram: repeated ExponentialHistogramDataPoint data_points = 1;
	expHistogramAggregationTemporality = 2 // ExponentialHistogram: AggregationTemporality aggregation_temporality = 2;
)

// Summary, opentelemetry/proto/metrics/v1/metrics.proto.
const (
	summaryDataPoints = 1 // Summary: repeated SummaryDataPoint data_points = 1;
)

// Field numbers of the data messages, by kind: data_points,
// aggregation_temporality, is_monotonic; 0 where the message has none
// (pbNext refuses field number 0).
var dataFields = [...]struct{ points, temporality, monotonic protowire.Number }{
	kindGauge:        {gaugeDataPoints, 0, 0},
	kindSum:          {sumDataPoints, sumAggregationTemporality, sumIsMonotonic},
	kindHistogram:    {histogramDataPoints, histogramAggregationTemporality, 0},
	kindExpHistogram: {expHistogramDataPoints, expHistogramAggregationTemporality, 0},
	kindSummary:      {summaryDataPoints, 0, 0},
}

// metricData appends the data points of a Gauge, Sum, Histogram,
// ExponentialHistogram or Summary message and fills their data-object
// columns.
func (d *pbDecoder) metricData(b *shred.Batch, md metricData) error {
	start := b.Rows
	var temporality int64
	var monotonic bool
	msgName := metricTypes[md.kind]
	fields := dataFields[md.kind]
	err := pbEach(md.msg, func(f pbField) error {
		switch f.num {
		case fields.points:
			if err := f.want(protowire.BytesType, msgName, "data_points"); err != nil {
				return err
			}
			if err := b.Err(); err != nil {
				return err
			}
			if d.rej.begin() {
				return nil
			}
			rows := b.Rows
			if err := d.dataPoint(b, md.kind, f.b); err != nil {
				return err
			}
			d.rej.rows(b.Rows - rows) // 0 when rejected
		case fields.temporality:
			if err := f.want(protowire.VarintType, msgName, "aggregation_temporality"); err != nil {
				return err
			}
			temporality = int64(int32(f.u))
		case fields.monotonic:
			if err := f.want(protowire.VarintType, msgName, "is_monotonic"); err != nil {
				return err
			}
			monotonic = f.u != 0
		}
		return nil
	})
	if err != nil {
		return err
	}
	fillData(b, md.kind, temporality, monotonic, start)
	if err := b.Err(); err != nil {
		return err
	}
	return nil
}

// NumberDataPoint, opentelemetry/proto/metrics/v1/metrics.proto.
const (
	numberPointStartTime  = 2 // NumberDataPoint: fixed64 start_time_unix_nano = 2;
	numberPointTime       = 3 // NumberDataPoint: fixed64 time_unix_nano = 3;
	numberPointAsDouble   = 4 // NumberDataPoint: double as_double = 4;
	numberPointExemplars  = 5 // NumberDataPoint: repeated Exemplar exemplars = 5;
	numberPointAsInt      = 6 // NumberDataPoint: sfixed64 as_int = 6;
	numberPointAttributes = 7 // NumberDataPoint: repeated opentelemetry.proto.common.v1.KeyValue attributes = 7;
	numberPointFlags      = 8 // NumberDataPoint: uint32 flags = 8;
)

// HistogramDataPoint, opentelemetry/proto/metrics/v1/metrics.proto.
const (
	histogramPointStartTime      = 2  // HistogramDataPoint: fixed64 start_time_unix_nano = 2;
	histogramPointTime           = 3  // HistogramDataPoint: fixed64 time_unix_nano = 3;
	histogramPointCount          = 4  // HistogramDataPoint: fixed64 count = 4;
	histogramPointSum            = 5  // HistogramDataPoint: optional double sum = 5;
	histogramPointBucketCounts   = 6  // HistogramDataPoint: repeated fixed64 bucket_counts = 6;
	histogramPointExplicitBounds = 7  // HistogramDataPoint: repeated double explicit_bounds = 7;
	histogramPointExemplars      = 8  // HistogramDataPoint: repeated Exemplar exemplars = 8;
	histogramPointAttributes     = 9  // HistogramDataPoint: repeated opentelemetry.proto.common.v1.KeyValue attributes = 9;
	histogramPointFlags          = 10 // HistogramDataPoint: uint32 flags = 10;
	histogramPointMin            = 11 // HistogramDataPoint: optional double min = 11;
	histogramPointMax            = 12 // HistogramDataPoint: optional double max = 12;
)

// ExponentialHistogramDataPoint, opentelemetry/proto/metrics/v1/metrics.proto.
const (
	expHistogramPointAttributes    = 1  // ExponentialHistogramDataPoint: repeated opentelemetry.proto.common.v1.KeyValue attributes = 1;
	expHistogramPointStartTime     = 2  // ExponentialHistogramDataPoint: fixed64 start_time_unix_nano = 2;
	expHistogramPointTime          = 3  // ExponentialHistogramDataPoint: fixed64 time_unix_nano = 3;
	expHistogramPointCount         = 4  // ExponentialHistogramDataPoint: fixed64 count = 4;
	expHistogramPointSum           = 5  // ExponentialHistogramDataPoint: optional double sum = 5;
	expHistogramPointScale         = 6  // ExponentialHistogramDataPoint: sint32 scale = 6;
	expHistogramPointZeroCount     = 7  // ExponentialHistogramDataPoint: fixed64 zero_count = 7;
	expHistogramPointPositive      = 8  // ExponentialHistogramDataPoint: Buckets positive = 8;
	expHistogramPointNegative      = 9  // ExponentialHistogramDataPoint: Buckets negative = 9;
	expHistogramPointFlags         = 10 // ExponentialHistogramDataPoint: uint32 flags = 10;
	expHistogramPointExemplars     = 11 // ExponentialHistogramDataPoint: repeated Exemplar exemplars = 11;
	expHistogramPointMin           = 12 // ExponentialHistogramDataPoint: optional double min = 12;
	expHistogramPointMax           = 13 // ExponentialHistogramDataPoint: optional double max = 13;
	expHistogramPointZeroThreshold = 14 // ExponentialHistogramDataPoint: double zero_threshold = 14;
)

// SummaryDataPoint, opentelemetry/proto/metrics/v1/metrics.proto.
const (
	summaryPointStartTime      = 2 // SummaryDataPoint: fixed64 start_time_unix_nano = 2;
	summaryPointTime           = 3 // SummaryDataPoint: fixed64 time_unix_nano = 3;
	summaryPointCount          = 4 // SummaryDataPoint: fixed64 count = 4;
	summaryPointSum            = 5 // SummaryDataPoint: double sum = 5;
	summaryPointQuantileValues = 6 // SummaryDataPoint: repeated ValueAtQuantile quantile_values = 6;
	summaryPointAttributes     = 7 // SummaryDataPoint: repeated opentelemetry.proto.common.v1.KeyValue attributes = 7;
	summaryPointFlags          = 8 // SummaryDataPoint: uint32 flags = 8;
)

// Field numbers of the data point messages, by kind, for the fields all
// kinds have; exemplars is 0 for SummaryDataPoint, which has none (pbNext
// refuses field number 0).
var pointFields = [...]struct{ attrs, start, time, exemplars, flags protowire.Number }{
	kindGauge:        {numberPointAttributes, numberPointStartTime, numberPointTime, numberPointExemplars, numberPointFlags},
	kindSum:          {numberPointAttributes, numberPointStartTime, numberPointTime, numberPointExemplars, numberPointFlags},
	kindHistogram:    {histogramPointAttributes, histogramPointStartTime, histogramPointTime, histogramPointExemplars, histogramPointFlags},
	kindExpHistogram: {expHistogramPointAttributes, expHistogramPointStartTime, expHistogramPointTime, expHistogramPointExemplars, expHistogramPointFlags},
	kindSummary:      {summaryPointAttributes, summaryPointStartTime, summaryPointTime, 0, summaryPointFlags},
}

// dataPoint reads one data point of the given kind and appends its row.
func (d *pbDecoder) dataPoint(b *shred.Batch, kind int, msg []byte) error {
	var p dataPoint
	fields := pointFields[kind]
	number := kind == kindGauge || kind == kindSum
	d.attrs, d.exemplars, d.quantiles = d.attrs[:0], d.exemplars[:0], d.quantiles[:0]
	d.bounds, d.counts, d.posCounts, d.negCounts = d.bounds[:0], d.counts[:0], d.posCounts[:0], d.negCounts[:0]
	const name = "DataPoint"
	err := pbEach(msg, func(f pbField) error {
		switch {
		case f.num == fields.attrs:
			if err := f.want(protowire.BytesType, name, "attributes"); err != nil {
				return err
			}
			d.attrs = append(d.attrs, f.b)
			return nil
		case f.num == fields.exemplars:
			if err := f.want(protowire.BytesType, name, "exemplars"); err != nil {
				return err
			}
			d.exemplars = append(d.exemplars, f.b)
			return nil
		case f.num == fields.flags:
			if err := f.want(protowire.VarintType, name, "flags"); err != nil {
				return err
			}
			p.flags = uint32(f.u)
			return nil
		case f.num == fields.start || f.num == fields.time:
			if err := f.want(protowire.Fixed64Type, name, "time"); err != nil {
				return err
			}
			if f.num == fields.start {
				p.start = f.u
			} else {
				p.time = f.u
			}
			return nil
		}
		if number {
			switch f.num {
			case numberPointAsDouble, numberPointAsInt:
				if err := f.want(protowire.Fixed64Type, name, "value"); err != nil {
					return err
				}
				if f.num == numberPointAsDouble {
					p.dval, p.hasDouble, p.hasInt = math.Float64frombits(f.u), true, false
				} else {
					p.ival, p.hasInt, p.hasDouble = int64(f.u), true, false
				}
			}
			return nil
		}
		return d.pointField(&p, kind, f)
	})
	if err != nil {
		return err
	}
	if kind == kindSummary {
		p.hasSum = true // a plain double in SummaryDataPoint
	}
	row := b.Rows
	d.times.reset()
	appendPointCore(b, kind, &p)
	c := b.Core
	switch kind {
	case kindHistogram:
		appendU64s(c[mBucketCounts], d.counts)
		appendF64s(c[mExplicitBounds], d.bounds)
	default:
		c[mBucketCounts].AppendNull()
		c[mExplicitBounds].AppendNull()
	}
	if kind == kindExpHistogram {
		appendU64s(c[mPositiveBucketCounts], d.posCounts)
		appendU64s(c[mNegativeBucketCounts], d.negCounts)
	} else {
		c[mPositiveBucketCounts].AppendNull()
		c[mNegativeBucketCounts].AppendNull()
	}
	if kind == kindSummary {
		if err := d.appendQuantiles(c[mQuantiles]); err != nil {
			return err
		}
		c[mExemplars].AppendNull()
	} else {
		c[mQuantiles].AppendNull()
		if err := d.appendExemplars(c[mExemplars]); err != nil {
			return err
		}
	}
	if err := d.endRecord(b, row); err != nil {
		return err
	}
	if err := p.checkTimes(&d.times); err != nil {
		b.Truncate(row)
		d.rej.reject(err)
	}
	return nil
}

// pointField reads a field of a histogram, exponential histogram or summary
// data point beyond those all kinds share.
func (d *pbDecoder) pointField(p *dataPoint, kind int, f pbField) error {
	const name = "DataPoint"
	double := func(field string, dst *float64, has *bool) error {
		if err := f.want(protowire.Fixed64Type, name, field); err != nil {
			return err
		}
		*dst = math.Float64frombits(f.u)
		if has != nil {
			*has = true
		}
		return nil
	}
	count := func() error {
		if err := f.want(protowire.Fixed64Type, name, "count"); err != nil {
			return err
		}
		p.count = f.u
		return nil
	}
	switch kind {
	case kindHistogram:
		switch f.num {
		case histogramPointCount:
			return count()
		case histogramPointSum:
			return double("sum", &p.sum, &p.hasSum)
		case histogramPointBucketCounts:
			var err error
			d.counts, err = pbFixed64s(d.counts, f, "bucket_counts")
			return err
		case histogramPointExplicitBounds:
			var err error
			d.bounds, err = pbFixed64s(d.bounds, f, "explicit_bounds")
			return err
		case histogramPointMin:
			return double("min", &p.min, &p.hasMin)
		case histogramPointMax:
			return double("max", &p.max, &p.hasMax)
		}
	case kindExpHistogram:
		switch f.num {
		case expHistogramPointCount:
			return count()
		case expHistogramPointSum:
			return double("sum", &p.sum, &p.hasSum)
		case expHistogramPointScale:
			if err := f.want(protowire.VarintType, name, "scale"); err != nil {
				return err
			}
			p.scale = zigzag32(f.u)
		case expHistogramPointZeroCount:
			if err := f.want(protowire.Fixed64Type, name, "zero_count"); err != nil {
				return err
			}
			p.zeroCount = f.u
		case expHistogramPointPositive, expHistogramPointNegative:
			if err := f.want(protowire.BytesType, name, "buckets"); err != nil {
				return err
			}
			var err error
			if f.num == expHistogramPointPositive {
				d.posCounts, err = pbBuckets(d.posCounts, &p.posOffset, f.b)
			} else {
				d.negCounts, err = pbBuckets(d.negCounts, &p.negOffset, f.b)
			}
			return err
		case expHistogramPointMin:
			return double("min", &p.min, &p.hasMin)
		case expHistogramPointMax:
			return double("max", &p.max, &p.hasMax)
		case expHistogramPointZeroThreshold:
			return double("zero_threshold", &p.zeroThreshold, nil)
		}
	case kindSummary:
		switch f.num {
		case summaryPointCount:
			return count()
		case summaryPointSum:
			return double("sum", &p.sum, &p.hasSum)
		case summaryPointQuantileValues:
			if err := f.want(protowire.BytesType, name, "quantile_values"); err != nil {
				return err
			}
			d.quantiles = append(d.quantiles, f.b)
		}
	}
	return nil
}

// zigzag32 decodes a sint32 as pdata does: from the varint's low 32 bits.
func zigzag32(u uint64) int32 {
	return int32(uint32(u>>1) ^ uint32(int32((u&1)<<31)>>31))
}

// pbFixed64s reads a repeated fixed64 or double field: packed, it replaces
// what came before (as pdata does); unpacked, it appends one value.
func pbFixed64s(dst []uint64, f pbField, field string) ([]uint64, error) {
	switch f.typ {
	case protowire.Fixed64Type:
		return append(dst, f.u), nil
	case protowire.BytesType:
		if len(f.b)%8 != 0 {
			return dst, fmt.Errorf("proto: invalid field len = %d for field %s", len(f.b)%8, field)
		}
		dst = dst[:0]
		for b := f.b; len(b) > 0; b = b[8:] {
			dst = append(dst, binary.LittleEndian.Uint64(b))
		}
		return dst, nil
	}
	return dst, fmt.Errorf("proto: wrong wire type %d for field DataPoint.%s", f.typ, field)
}

// ExponentialHistogramDataPoint.Buckets, opentelemetry/proto/metrics/v1/metrics.proto.
const (
	bucketsOffset       = 1 // ExponentialHistogramDataPoint.Buckets: sint32 offset = 1;
	bucketsBucketCounts = 2 // ExponentialHistogramDataPoint.Buckets: repeated uint64 bucket_counts = 2;
)

// pbBuckets reads an ExponentialHistogramDataPoint.Buckets message into the
// counts and offset so far (a message given twice merges).
func pbBuckets(counts []uint64, offset *int32, msg []byte) ([]uint64, error) {
	err := pbEach(msg, func(f pbField) error {
		switch f.num {
		case bucketsOffset:
			if err := f.want(protowire.VarintType, "Buckets", "offset"); err != nil {
				return err
			}
			*offset = zigzag32(f.u)
		case bucketsBucketCounts:
			switch f.typ {
			case protowire.VarintType:
				counts = append(counts, f.u)
			case protowire.BytesType:
				for b := f.b; len(b) > 0; {
					v, n := pbVarint(b)
					if n < 0 {
						return protowire.ParseError(n)
					}
					counts, b = append(counts, v), b[n:]
				}
			default:
				return fmt.Errorf("proto: wrong wire type %d for field Buckets.bucket_counts", f.typ)
			}
		}
		return nil
	})
	return counts, err
}

// appendU64s appends a list of counts, NULL when empty.
func appendU64s(c *shred.Column, vs []uint64) {
	for _, v := range vs {
		c.Child.AppendInt(int64(v))
	}
	endList(c, len(vs))
}

// appendF64s appends a list of doubles given as their bits, NULL when empty.
func appendF64s(c *shred.Column, vs []uint64) {
	for _, v := range vs {
		c.Child.AppendFloat(math.Float64frombits(v))
	}
	endList(c, len(vs))
}

// SummaryDataPoint.ValueAtQuantile, opentelemetry/proto/metrics/v1/metrics.proto.
const (
	quantileQuantile = 1 // SummaryDataPoint.ValueAtQuantile: double quantile = 1;
	quantileValue    = 2 // SummaryDataPoint.ValueAtQuantile: double value = 2;
)

func (d *pbDecoder) appendQuantiles(c *shred.Column) error {
	f := c.Child.Fields
	for _, q := range d.quantiles {
		var quantile, value float64
		err := pbEach(q, func(fd pbField) error {
			switch fd.num {
			case quantileQuantile, quantileValue:
				if err := fd.want(protowire.Fixed64Type, "ValueAtQuantile", "double"); err != nil {
					return err
				}
				if fd.num == quantileQuantile {
					quantile = math.Float64frombits(fd.u)
				} else {
					value = math.Float64frombits(fd.u)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		f[0].AppendFloat(quantile)
		f[1].AppendFloat(value)
		c.Child.EndStruct()
	}
	endList(c, len(d.quantiles))
	return nil
}

// Exemplar, opentelemetry/proto/metrics/v1/metrics.proto.
const (
	exemplarTime               = 2 // Exemplar: fixed64 time_unix_nano = 2;
	exemplarAsDouble           = 3 // Exemplar: double as_double = 3;
	exemplarSpanID             = 4 // Exemplar: bytes span_id = 4;
	exemplarTraceID            = 5 // Exemplar: bytes trace_id = 5;
	exemplarAsInt              = 6 // Exemplar: sfixed64 as_int = 6;
	exemplarFilteredAttributes = 7 // Exemplar: repeated opentelemetry.proto.common.v1.KeyValue filtered_attributes = 7;
)

func (d *pbDecoder) appendExemplars(c *shred.Column) error {
	fl := c.Child.Fields
	for _, e := range d.exemplars {
		var t uint64
		var val uint64
		var hasDouble, hasInt bool
		var tid, sid []byte
		d.subAttrs = d.subAttrs[:0]
		err := pbEach(e, func(f pbField) error {
			var err error
			switch f.num {
			case exemplarTime, exemplarAsDouble, exemplarAsInt:
				if err = f.want(protowire.Fixed64Type, "Exemplar", "fixed64"); err != nil {
					return err
				}
				switch f.num {
				case exemplarTime:
					t = f.u
				case exemplarAsDouble:
					val, hasDouble, hasInt = f.u, true, false
				case exemplarAsInt:
					val, hasInt, hasDouble = f.u, true, false
				}
			case exemplarSpanID, exemplarTraceID, exemplarFilteredAttributes:
				if err = f.want(protowire.BytesType, "Exemplar", "bytes"); err != nil {
					return err
				}
				switch f.num {
				case exemplarSpanID:
					sid, err = pbID(f.b, 8, "SpanID")
				case exemplarTraceID:
					tid, err = pbID(f.b, 16, "TraceID")
				case exemplarFilteredAttributes:
					d.subAttrs = append(d.subAttrs, f.b)
				}
			}
			return err
		})
		if err != nil {
			return err
		}
		d.times.check(t, "exemplars.timeUnixNano")
		fl[0].AppendTime(t)
		switch {
		case hasDouble:
			fl[1].AppendFloat(math.Float64frombits(val))
			fl[2].AppendNull()
		case hasInt:
			fl[1].AppendFloat(float64(int64(val)))
			fl[2].AppendInt(int64(val))
		default:
			fl[1].AppendNull()
			fl[2].AppendNull()
		}
		appendID(fl[3], tid)
		appendID(fl[4], sid)
		if err := d.appendKVsJSON(fl[5], d.subAttrs); err != nil {
			return err
		}
		c.Child.EndStruct()
	}
	endList(c, len(d.exemplars))
	return nil
}
