package transforms

import (
	"math"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/shredduck/shredduck/shred"
)

// Metrics is the otlp-metrics transform: one table for every metric kind,
// one row per data point. Columns that do not apply to a row's kind are
// NULL, and so are empty lists.
var Metrics Transform = metricsTransform{}

// Core columns of otel_metrics, in table order.
const (
	mMetricType = iota
	mMetricName
	mMetricDescription
	mMetricUnit
	mMetricMetadata
	mTime
	mStartTime
	mValue
	mValueInt
	mAggregationTemporality
	mIsMonotonic
	mCount
	mSum
	mMin
	mMax
	mBucketCounts
	mExplicitBounds
	mScale
	mZeroCount
	mZeroThreshold
	mPositiveOffset
	mPositiveBucketCounts
	mNegativeOffset
	mNegativeBucketCounts
	mQuantiles
	mExemplars
	mFlags
	mServiceName
	mScopeName
	mScopeVersion
	mResourceSchemaURL
	mScopeSchemaURL
	mResourceDroppedAttributes
	mScopeDroppedAttributes
	mAttributesOverflow
	mResourceAttributesOverflow
	mScopeAttributesOverflow
)

var quantileType = shred.StructOf(
	shred.Field{Name: "quantile", Type: shred.TDouble},
	shred.Field{Name: "value", Type: shred.TDouble},
)

var exemplarType = shred.StructOf(
	shred.Field{Name: "time", Type: shred.TTimestampNS},
	shred.Field{Name: "value", Type: shred.TDouble},
	shred.Field{Name: "value_int", Type: shred.TInt64},
	shred.Field{Name: "trace_id", Type: shred.TString},
	shred.Field{Name: "span_id", Type: shred.TString},
	shred.Field{Name: "filtered_attributes", Type: shred.TJSON},
)

var metricsCore = []shred.CoreColumn{
	mMetricType:                 {Name: "metric_type", Type: shred.EnumOf(metricTypes[:]...)},
	mMetricName:                 {Name: "metric_name", Type: shred.TString},
	mMetricDescription:          {Name: "metric_description", Type: shred.TString},
	mMetricUnit:                 {Name: "metric_unit", Type: shred.TString},
	mMetricMetadata:             {Name: "metric_metadata", Type: shred.TJSON, Deferred: true},
	mTime:                       {Name: "time", Type: shred.TTimestampNS},
	mStartTime:                  {Name: "start_time", Type: shred.TTimestampNS},
	mValue:                      {Name: "value", Type: shred.TDouble},
	mValueInt:                   {Name: "value_int", Type: shred.TInt64},
	mAggregationTemporality:     {Name: "aggregation_temporality", Type: shred.TString},
	mIsMonotonic:                {Name: "is_monotonic", Type: shred.TBool},
	mCount:                      {Name: "count", Type: shred.TUint64, Deferred: true},
	mSum:                        {Name: "sum", Type: shred.TDouble, Deferred: true},
	mMin:                        {Name: "min", Type: shred.TDouble, Deferred: true},
	mMax:                        {Name: "max", Type: shred.TDouble, Deferred: true},
	mBucketCounts:               {Name: "bucket_counts", Type: shred.ListOf(shred.TUint64), Deferred: true},
	mExplicitBounds:             {Name: "explicit_bounds", Type: shred.ListOf(shred.TDouble), Deferred: true},
	mScale:                      {Name: "scale", Type: shred.TInt32, Deferred: true},
	mZeroCount:                  {Name: "zero_count", Type: shred.TUint64, Deferred: true},
	mZeroThreshold:              {Name: "zero_threshold", Type: shred.TDouble, Deferred: true},
	mPositiveOffset:             {Name: "positive_offset", Type: shred.TInt32, Deferred: true},
	mPositiveBucketCounts:       {Name: "positive_bucket_counts", Type: shred.ListOf(shred.TUint64), Deferred: true},
	mNegativeOffset:             {Name: "negative_offset", Type: shred.TInt32, Deferred: true},
	mNegativeBucketCounts:       {Name: "negative_bucket_counts", Type: shred.ListOf(shred.TUint64), Deferred: true},
	mQuantiles:                  {Name: "quantiles", Type: shred.ListOf(quantileType), Deferred: true},
	mExemplars:                  {Name: "exemplars", Type: shred.ListOf(exemplarType), Deferred: true},
	mFlags:                      {Name: "flags", Type: shred.TUint32, Deferred: true, Zero: true},
	mServiceName:                {Name: "service_name", Type: shred.TString},
	mScopeName:                  {Name: "scope_name", Type: shred.TString},
	mScopeVersion:               {Name: "scope_version", Type: shred.TString},
	mResourceSchemaURL:          {Name: "resource_schema_url", Type: shred.TString, Deferred: true},
	mScopeSchemaURL:             {Name: "scope_schema_url", Type: shred.TString, Deferred: true},
	mResourceDroppedAttributes:  {Name: "resource_dropped_attributes_count", Type: shred.TUint32, Deferred: true, Zero: true},
	mScopeDroppedAttributes:     {Name: "scope_dropped_attributes_count", Type: shred.TUint32, Deferred: true, Zero: true},
	mAttributesOverflow:         {Name: "attributes_overflow", Type: shred.TJSON, Deferred: true},
	mResourceAttributesOverflow: {Name: "resource_attributes_overflow", Type: shred.TJSON, Deferred: true},
	mScopeAttributesOverflow:    {Name: "scope_attributes_overflow", Type: shred.TJSON, Deferred: true},
}

// metricsCoreMaps is metricsCore and the overflow maps after it.
var metricsCoreMaps = withOverflowMaps(metricsCore)

// Metric kinds: the values of metric_type.
const (
	kindGauge = iota
	kindSum
	kindHistogram
	kindExpHistogram
	kindSummary
)

var metricTypes = [...]string{
	kindGauge: "gauge", kindSum: "sum", kindHistogram: "histogram",
	kindExpHistogram: "exponential_histogram", kindSummary: "summary",
}

var temporalities = [...]string{"UNSPECIFIED", "DELTA", "CUMULATIVE"}

type metricsTransform struct{}

func (metricsTransform) Name() string             { return OTLPMetrics }
func (metricsTransform) Table() string            { return "otel_metrics" }
func (metricsTransform) Core() []shred.CoreColumn { return metricsCoreMaps }
func (metricsTransform) Overflow() [shred.NumLevels]string {
	return otlpOverflow
}

var metricsBlock = blockCols{
	service: mServiceName, resURL: mResourceSchemaURL, resDropped: mResourceDroppedAttributes,
	scopeName: mScopeName, scopeVersion: mScopeVersion, scopeURL: mScopeSchemaURL, scopeDropped: mScopeDroppedAttributes,
}

// metricInfo is what a Metric contributes to each of its rows; it is filled
// once per metric, after its data points (in OTLP/JSON, name, description
// and unit may follow the data).
type metricInfo struct {
	name, description, unit []byte
	metadata                []byte // JSON object; nil when there is none
}

// fillMetric fills the metric columns of rows [from, b.Rows).
func fillMetric(b *shred.Batch, m *metricInfo, from int) {
	c := b.Core
	if !b.Reserve((b.Rows - from) * (len(m.name) + len(m.description) + len(m.unit) + len(m.metadata) + 4*8)) {
		return // the decoder fails with b.Err()
	}
	for r := from; r < b.Rows; r++ {
		c[mMetricName].AppendBytes(m.name)
		appendBytesOrNull(c[mMetricDescription], m.description)
		appendBytesOrNull(c[mMetricUnit], m.unit)
		appendBytesOrNull(c[mMetricMetadata], m.metadata)
	}
}

// fillData fills the columns that come from a metric's data object (Gauge,
// Sum, Histogram, ...) for rows [from, b.Rows).
func fillData(b *shred.Batch, kind int, temporality int64, monotonic bool, from int) {
	c := b.Core
	n := b.Rows - from
	if !b.Reserve(n * (3*8 + 32)) {
		return // the decoder fails with b.Err()
	}
	c[mMetricType].AppendStringN(metricTypes[kind], n)
	if kind == kindGauge || kind == kindSummary {
		c[mAggregationTemporality].AppendNulls(n)
	} else {
		c[mAggregationTemporality].AppendStringN(enumName(temporalities[:], temporality), n)
	}
	if kind == kindSum {
		for ; n > 0; n-- {
			c[mIsMonotonic].AppendBool(monotonic)
		}
	} else {
		c[mIsMonotonic].AppendNulls(n)
	}
}

// dataPoint is one data point's scalar fields, whichever decoder read them.
// Fields that do not apply to the point's kind are ignored.
type dataPoint struct {
	time, start            uint64
	flags                  uint32
	hasDouble, hasInt      bool    // number points: which value is set
	dval                   float64 // asDouble
	ival                   int64   // asInt
	count                  uint64
	hasSum, hasMin, hasMax bool
	sum, min, max          float64
	scale                  int32
	zeroCount              uint64
	zeroThreshold          float64
	posOffset, negOffset   int32
}

// checkTimes checks the point's times, given the check of its exemplars'
// (timeCheck).
func (p *dataPoint) checkTimes(c *timeCheck) error {
	c.check(p.time, "timeUnixNano")
	c.check(p.start, "startTimeUnixNano")
	return c.err
}

// appendPointCore appends the scalar core columns of one data point row of
// the given kind: every column except the lists (which the decoders append
// themselves) and the per-data-object, per-metric, resource and scope ones.
func appendPointCore(b *shred.Batch, kind int, p *dataPoint) {
	c := b.Core
	c[mTime].AppendTime(p.time)
	c[mStartTime].AppendTime(p.start)
	number := kind == kindGauge || kind == kindSum
	switch {
	case number && p.hasDouble:
		c[mValue].AppendFloat(p.dval)
		c[mValueInt].AppendNull()
	case number && p.hasInt:
		c[mValue].AppendFloat(float64(p.ival))
		c[mValueInt].AppendInt(p.ival)
	default:
		c[mValue].AppendNull()
		c[mValueInt].AppendNull()
	}
	if number {
		c[mCount].AppendNull()
	} else {
		c[mCount].AppendInt(int64(p.count))
	}
	appendOptFloat(c[mSum], p.hasSum && !number, p.sum)
	hist := kind == kindHistogram || kind == kindExpHistogram
	appendOptFloat(c[mMin], p.hasMin && hist, p.min)
	appendOptFloat(c[mMax], p.hasMax && hist, p.max)
	if kind == kindExpHistogram {
		c[mScale].AppendInt(int64(p.scale))
		c[mZeroCount].AppendInt(int64(p.zeroCount))
		c[mZeroThreshold].AppendFloat(p.zeroThreshold)
		c[mPositiveOffset].AppendInt(int64(p.posOffset))
		c[mNegativeOffset].AppendInt(int64(p.negOffset))
	} else {
		c[mScale].AppendNull()
		c[mZeroCount].AppendNull()
		c[mZeroThreshold].AppendNull()
		c[mPositiveOffset].AppendNull()
		c[mNegativeOffset].AppendNull()
	}
	c[mFlags].AppendInt(int64(p.flags))
	c[mAttributesOverflow].AppendNull()
	c[mResourceAttributesOverflow].AppendNull()
	c[mScopeAttributesOverflow].AppendNull()
	for _, m := range c[len(metricsCore):] {
		m.AppendNull() // the overflow maps, which the schema fills
	}
}

func appendOptFloat(c *shred.Column, ok bool, v float64) {
	if ok {
		c.AppendFloat(v)
	} else {
		c.AppendNull()
	}
}

// --- protobuf: DetectProto asks pdata (AppendProto: otlp_*_pb.go) ---

func (metricsTransform) probeProto(data []byte) bool {
	md, err := (&pmetric.ProtoUnmarshaler{}).UnmarshalMetrics(data)
	return err == nil && md.DataPointCount() > 0
}

// --- OTLP/JSON ---

var metricsKeys = signalKeys{
	top:     [2]string{"resourceMetrics", "resource_metrics"},
	scopes:  [2]string{"scopeMetrics", "scope_metrics"},
	records: [2]string{"metrics", "metrics"},
	noun:    "data point",
	// As in protobuf and OTLP's partial success, each data point is a
	// record: one that is rejected leaves its metric's other points.
	pointRecords: true,
}

func (metricsTransform) AppendJSON(b *shred.Batch, data []byte) (int, error) {
	d := getDecoder()
	defer putDecoder(d)
	return d.walk(b, data, &metricsKeys, &metricsBlock, (*decoder).metric)
}

// metricKind maps a Metric's data key to its kind, or -1.
func metricKind(key []byte) int {
	switch string(key) {
	case "gauge":
		return kindGauge
	case "sum":
		return kindSum
	case "histogram":
		return kindHistogram
	case "exponentialHistogram", "exponential_histogram":
		return kindExpHistogram
	case "summary":
		return kindSummary
	}
	return -1
}

// metric parses one Metric object into one row per data point. The metric's
// own columns are filled after the object ends, since its name, description
// and unit may come after the data.
func (d *decoder) metric(b *shred.Batch) {
	it := &d.it
	if !it.ObjectStart() {
		return
	}
	start := b.Rows
	name, desc, unit, meta := d.bufs[0][:0], d.bufs[1][:0], d.bufs[2][:0], d.bufs[3][:0]
	hasMeta := false
	var dataMark rejectsMark // the numbering before the metric's data
	hasData := false
	for key, ok := it.NextKey(); ok; key, ok = it.NextKey() {
		switch string(key) {
		case "name":
			name = d.readBytes(name)
		case "description":
			desc = d.readBytes(desc)
		case "unit":
			unit = d.readBytes(unit)
		case "metadata":
			d.attrs.reset()
			d.attrList(&d.attrs)
			meta, hasMeta = d.attrs.appendJSONObject(meta[:0])
		default:
			kind := metricKind(key)
			if !d.present(kind >= 0) {
				continue
			}
			// The data is a oneof: as in protobuf, the last one wins, and
			// the data points of the one it replaces were not records.
			if hasData {
				d.rej.undo(dataMark)
			} else {
				dataMark, hasData = d.rej.mark(), true
			}
			if b.Rows > start {
				b.Truncate(start)
			}
			d.metricData(b, kind)
		}
	}
	d.bufs[0], d.bufs[1], d.bufs[2], d.bufs[3] = name, desc, unit, meta
	if it.Err() != nil {
		return
	}
	mi := metricInfo{name: name, description: desc, unit: unit}
	if hasMeta {
		mi.metadata = meta
	}
	fillMetric(b, &mi, start)
	d.atLimit(b)
}

// metricData parses a Gauge, Sum, Histogram, ExponentialHistogram or
// Summary object.
func (d *decoder) metricData(b *shred.Batch, kind int) {
	it := &d.it
	if !it.ObjectStart() {
		return
	}
	start := b.Rows
	var temporality int64
	monotonic := false
	for key, ok := it.NextKey(); ok; key, ok = it.NextKey() {
		switch string(key) {
		case "dataPoints", "data_points":
			if it.ReadNull() || !it.ArrayStart() {
				continue
			}
			for it.NextElem() && !d.atLimit(b) {
				if d.rej.begin() {
					it.Skip()
					continue
				}
				d.dataPoint(b, kind)
			}
		case "aggregationTemporality", "aggregation_temporality":
			if kind == kindGauge || kind == kindSummary {
				it.Skip() // not a field of these
				continue
			}
			temporality = d.readEnum(temporalities[:], "AGGREGATION_TEMPORALITY_")
		case "isMonotonic", "is_monotonic":
			if !d.present(kind == kindSum) {
				continue
			}
			monotonic = it.ReadBool()
		default:
			it.Skip()
		}
	}
	if it.Err() != nil {
		return
	}
	fillData(b, kind, temporality, monotonic, start)
	d.atLimit(b)
}

// list columns of a data point, in the order of pointLists.
const (
	plBucketCounts = iota
	plExplicitBounds
	plPositive
	plNegative
	plQuantiles
	plExemplars
	numPointLists
)

var pointLists = [numPointLists]int{mBucketCounts, mExplicitBounds, mPositiveBucketCounts, mNegativeBucketCounts, mQuantiles, mExemplars}

// dataPoint parses one data point object of the given kind into a row.
// Fields that do not belong to the kind are skipped.
func (d *decoder) dataPoint(b *shred.Batch, kind int) {
	it := &d.it
	if !it.ObjectStart() {
		return
	}
	row := b.Rows
	c := b.Core
	var p dataPoint
	var done [numPointLists]bool
	d.times.reset()
	number := kind == kindGauge || kind == kindSum
	hist := kind == kindHistogram || kind == kindExpHistogram
	exp := kind == kindExpHistogram
	for key, ok := it.NextKey(); ok; key, ok = it.NextKey() {
		if list, isList := pointListOf(string(key), kind); isList {
			d.pointList(list, &done, c, &p)
			continue
		}
		switch string(key) {
		case "attributes":
			d.recordAttrs(b, row)
		case "timeUnixNano", "time_unix_nano":
			p.time = d.readUint64()
		case "startTimeUnixNano", "start_time_unix_nano":
			p.start = d.readUint64()
		case "flags":
			p.flags = d.readUint32()
		case "asDouble", "as_double":
			if !d.present(number) {
				continue
			}
			p.dval, p.hasDouble, p.hasInt = it.ReadFloat64(), true, false
		case "asInt", "as_int":
			if !d.present(number) {
				continue
			}
			p.ival, p.hasInt, p.hasDouble = it.ReadInt64(), true, false
		case "count":
			if number {
				it.Skip()
				continue
			}
			p.count = d.readUint64()
		case "sum":
			if !d.present(!number) {
				continue
			}
			p.sum, p.hasSum = it.ReadFloat64(), true
		case "min":
			if !d.present(hist) {
				continue
			}
			p.min, p.hasMin = it.ReadFloat64(), true
		case "max":
			if !d.present(hist) {
				continue
			}
			p.max, p.hasMax = it.ReadFloat64(), true
		case "scale":
			if !exp {
				it.Skip()
				continue
			}
			p.scale = d.readInt32("scale")
		case "zeroCount", "zero_count":
			if !exp {
				it.Skip()
				continue
			}
			p.zeroCount = d.readUint64()
		case "zeroThreshold", "zero_threshold":
			if !exp {
				it.Skip()
				continue
			}
			p.zeroThreshold = d.readFloat()
		default:
			it.Skip()
		}
	}
	if it.Err() != nil {
		return
	}
	if err := p.checkTimes(&d.times); err != nil {
		b.Truncate(row) // its attributes, lists and exemplars
		d.rej.reject(err)
		return
	}
	if kind == kindSummary {
		p.hasSum = true // not optional in a summary
	}
	for i, ok := range done {
		if !ok {
			c[pointLists[i]].AppendNull()
		}
	}
	appendPointCore(b, kind, &p)
	b.EndRow()
}

// pointListOf tells a data point's list fields: isList for their names,
// with list -1 when the point's kind has no such list (it is skipped).
func pointListOf(key string, kind int) (list int, isList bool) {
	exp := kind == kindExpHistogram
	switch key {
	case "exemplars":
		return ifKind(kind != kindSummary, plExemplars), true
	case "bucketCounts", "bucket_counts":
		return ifKind(kind == kindHistogram, plBucketCounts), true
	case "explicitBounds", "explicit_bounds":
		return ifKind(kind == kindHistogram, plExplicitBounds), true
	case "positive":
		return ifKind(exp, plPositive), true
	case "negative":
		return ifKind(exp, plNegative), true
	case "quantileValues", "quantile_values":
		return ifKind(kind == kindSummary, plQuantiles), true
	}
	return -1, false
}

func ifKind(ok bool, list int) int {
	if ok {
		return list
	}
	return -1
}

// pointList reads list field list of a data point into its column (c by
// pointLists); a list the kind has not, or a repeated key, is skipped:
// the first one counts.
func (d *decoder) pointList(list int, done *[numPointLists]bool, c []*shred.Column, p *dataPoint) {
	if list < 0 || done[list] {
		d.it.Skip()
		return
	}
	done[list] = true
	col := c[pointLists[list]]
	switch list {
	case plBucketCounts:
		d.uint64List(col)
	case plExplicitBounds:
		d.float64List(col)
	case plPositive:
		p.posOffset = d.buckets(col)
	case plNegative:
		p.negOffset = d.buckets(col)
	case plQuantiles:
		d.quantiles(col)
	case plExemplars:
		d.exemplars(col)
	}
}

// present is for a field that is read only when ok: it skips the value
// when not ok, consumes a null, and reports whether a value is to be read.
func (d *decoder) present(ok bool) bool {
	if !ok {
		d.it.Skip()
		return false
	}
	return !d.it.ReadNull()
}

// readInt32 reads an int32 field (a number or a decimal string).
func (d *decoder) readInt32(field string) int32 {
	off := d.it.Offset()
	v := d.readInt64()
	if v < math.MinInt32 || v > math.MaxInt32 {
		d.it.ReportError(off, field+": value out of range for int32")
	}
	return int32(v)
}

// uint64List reads an array of uint64 into a list column (NULL when empty).
func (d *decoder) uint64List(c *shred.Column) {
	it := &d.it
	if it.ReadNull() || !it.ArrayStart() {
		c.AppendNull()
		return
	}
	n := 0
	for it.NextElem() {
		c.Child.AppendInt(int64(it.ReadUint64()))
		n++
	}
	endList(c, n)
}

// float64List reads an array of doubles into a list column (NULL when empty).
func (d *decoder) float64List(c *shred.Column) {
	it := &d.it
	if it.ReadNull() || !it.ArrayStart() {
		c.AppendNull()
		return
	}
	n := 0
	for it.NextElem() {
		c.Child.AppendFloat(it.ReadFloat64())
		n++
	}
	endList(c, n)
}

func endList(c *shred.Column, n int) {
	if n == 0 {
		c.AppendNull()
		return
	}
	c.EndList()
}

// buckets reads an ExponentialHistogram Buckets object: its bucket counts
// go into c, its offset is returned.
func (d *decoder) buckets(c *shred.Column) int32 {
	it := &d.it
	if it.ReadNull() || !it.ObjectStart() {
		c.AppendNull()
		return 0
	}
	var offset int32
	countsDone := false
	for key, ok := it.NextKey(); ok; key, ok = it.NextKey() {
		switch string(key) {
		case "offset":
			offset = d.readInt32("offset")
		case "bucketCounts", "bucket_counts":
			if countsDone {
				it.Skip()
				continue
			}
			countsDone = true
			d.uint64List(c)
		default:
			it.Skip()
		}
	}
	if !countsDone && it.Err() == nil {
		c.AppendNull()
	}
	return offset
}

// quantiles reads a list of ValueAtQuantile objects.
func (d *decoder) quantiles(c *shred.Column) {
	it := &d.it
	if it.ReadNull() || !it.ArrayStart() {
		c.AppendNull()
		return
	}
	f := c.Child.Fields
	n := 0
	for it.NextElem() {
		if it.ReadNull() || !it.ObjectStart() {
			if it.Err() == nil {
				it.ReportError(it.Offset(), "quantileValues: null element")
			}
			return
		}
		var q, v float64
		for key, ok := it.NextKey(); ok; key, ok = it.NextKey() {
			switch string(key) {
			case "quantile":
				q = d.readFloat()
			case "value":
				v = d.readFloat()
			default:
				it.Skip()
			}
		}
		if it.Err() != nil {
			return
		}
		f[0].AppendFloat(q)
		f[1].AppendFloat(v)
		c.Child.EndStruct()
		n++
	}
	endList(c, n)
}

// exemplars reads a list of Exemplar objects.
func (d *decoder) exemplars(c *shred.Column) {
	it := &d.it
	if it.ReadNull() || !it.ArrayStart() {
		c.AppendNull()
		return
	}
	f := c.Child.Fields
	n := 0
	for it.NextElem() {
		if it.ReadNull() || !it.ObjectStart() {
			if it.Err() == nil {
				it.ReportError(it.Offset(), "exemplars: null element")
			}
			return
		}
		var t uint64
		var dbl float64
		var i int64
		hasDouble, hasInt, attrsDone := false, false, false
		var tid, sid []byte
		for key, ok := it.NextKey(); ok; key, ok = it.NextKey() {
			switch string(key) {
			case "timeUnixNano", "time_unix_nano":
				t = d.readUint64()
			case "asDouble", "as_double":
				if it.ReadNull() {
					continue
				}
				dbl, hasDouble, hasInt = it.ReadFloat64(), true, false
			case "asInt", "as_int":
				if it.ReadNull() {
					continue
				}
				i, hasInt, hasDouble = it.ReadInt64(), true, false
			case "traceId", "trace_id":
				tid = d.readID(0, 16, "exemplars.traceId")
			case "spanId", "span_id":
				sid = d.readID(1, 8, "exemplars.spanId")
			case "filteredAttributes", "filtered_attributes":
				if attrsDone {
					it.Skip()
					continue
				}
				attrsDone = true
				d.attrsJSON(f[5])
			default:
				it.Skip()
			}
		}
		if it.Err() != nil {
			return
		}
		if !attrsDone {
			f[5].AppendNull()
		}
		d.times.check(t, "exemplars.timeUnixNano")
		f[0].AppendTime(t)
		switch {
		case hasDouble:
			f[1].AppendFloat(dbl)
			f[2].AppendNull()
		case hasInt:
			f[1].AppendFloat(float64(i))
			f[2].AppendInt(i)
		default:
			f[1].AppendNull()
			f[2].AppendNull()
		}
		appendID(f[3], tid)
		appendID(f[4], sid)
		c.Child.EndStruct()
		n++
	}
	endList(c, n)
}
