package transforms

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/shredduck/shredduck/shred"
)

var metricsKinds = []string{"gauge", "sum", "histogram", "exponential_histogram", "summary", "mixed"}

// metricsFiles lists every metrics fixture.
func metricsFiles() []string {
	files := []string{"otel-proto-examples-metrics.json"}
	for _, k := range metricsKinds {
		for _, ext := range []string{".json", ".jsonl", ".pb"} {
			files = append(files, "otlp2parquet/metrics_"+k+ext)
		}
	}
	return files
}

// countDataPoints counts the data points of a request with encoding/json.
func countDataPoints(t *testing.T, data []byte) int {
	n := 0
	for _, rm := range objects(field(genericJSON(t, data), "resourceMetrics", "resource_metrics")) {
		for _, sm := range objects(field(rm, "scopeMetrics", "scope_metrics")) {
			for _, m := range objects(sm["metrics"]) {
				for _, k := range []string{"gauge", "sum", "histogram", "exponentialHistogram", "exponential_histogram", "summary"} {
					if d, ok := m[k].(map[string]any); ok {
						n += len(objects(field(d, "dataPoints", "data_points")))
					}
				}
			}
		}
	}
	return n
}

func TestMetricsFiles(t *testing.T) {
	for _, rel := range metricsFiles() {
		t.Run(rel, func(t *testing.T) {
			b := decodeFile(t, Metrics, rel)
			want := 0
			for _, req := range readRequests(t, rel) {
				if strings.HasSuffix(rel, ".pb") {
					md, err := (&pmetric.ProtoUnmarshaler{}).UnmarshalMetrics(req)
					if err != nil {
						t.Fatal(err)
					}
					want += md.DataPointCount()
					continue
				}
				generic := countDataPoints(t, req)
				md, err := (&pmetric.JSONUnmarshaler{}).UnmarshalMetrics(req)
				if err != nil {
					t.Fatal(err)
				}
				if md.DataPointCount() != generic {
					t.Fatalf("pdata counts %d data points, encoding/json %d", md.DataPointCount(), generic)
				}
				want += generic
			}
			if want == 0 || b.Rows != want {
				t.Fatalf("%d rows, want %d data points", b.Rows, want)
			}
		})
	}
}

// The .json, .jsonl and .pb versions of each otlp2parquet metrics file give
// the same columns; so does every JSON fixture re-encoded as protobuf by
// pdata, and with snake_case keys.
func TestMetricsJSONMatchesProto(t *testing.T) {
	for _, k := range metricsKinds {
		t.Run(k, func(t *testing.T) {
			j := decodeFile(t, Metrics, "otlp2parquet/metrics_"+k+".json")
			sameBatches(t, Metrics, j, decodeFile(t, Metrics, "otlp2parquet/metrics_"+k+".jsonl"))
			sameBatches(t, Metrics, j, decodeFile(t, Metrics, "otlp2parquet/metrics_"+k+".pb"))
		})
	}
	for _, rel := range metricsFiles() {
		if strings.HasSuffix(rel, ".pb") {
			continue
		}
		t.Run("roundtrip/"+rel, func(t *testing.T) {
			reqs := readRequests(t, rel)
			var pbs, snake [][]byte
			for _, req := range reqs {
				md, err := (&pmetric.JSONUnmarshaler{}).UnmarshalMetrics(req)
				if err != nil {
					t.Fatal(err)
				}
				pb, err := (&pmetric.ProtoMarshaler{}).MarshalMetrics(md)
				if err != nil {
					t.Fatal(err)
				}
				pbs = append(pbs, pb)
				snake = append(snake, snakeCase(t, req))
			}
			j := decodeRequests(t, Metrics, reqs, false)
			sameBatches(t, Metrics, j, decodeRequests(t, Metrics, pbs, true))
			sameBatches(t, Metrics, j, decodeRequests(t, Metrics, snake, false))
		})
	}
}

func TestMetricsExample(t *testing.T) {
	b := decodeFile(t, Metrics, "otel-proto-examples-metrics.json")
	if b.Rows != 4 {
		t.Fatalf("%d rows", b.Rows)
	}
	common := map[string]string{
		"time": "1544712660300000000", "metric_unit": "1", "metric_metadata": "NULL", "flags": "0",
		"service_name": "my.service", "scope_name": "my.library", "scope_version": "1.0.0",
		"scope:my.scope.attribute": "some scope attribute", "resource:service.name": "my.service",
		"attributes_overflow": "NULL", "resource_attributes_overflow": "NULL", "scope_attributes_overflow": "NULL",
		"exemplars": "NULL",
	}
	notHist := map[string]string{
		"bucket_counts": "NULL", "explicit_bounds": "NULL", "scale": "NULL", "zero_count": "NULL",
		"zero_threshold": "NULL", "positive_offset": "NULL", "positive_bucket_counts": "NULL",
		"negative_offset": "NULL", "negative_bucket_counts": "NULL", "quantiles": "NULL",
	}
	rows := []map[string]string{
		{
			"metric_type": "sum", "metric_name": "my.counter", "metric_description": "I am a Counter",
			"start_time": "1544712660300000000", "value": "5", "value_int": "NULL",
			"aggregation_temporality": "DELTA", "is_monotonic": "true", "count": "NULL", "sum": "NULL",
			"min": "NULL", "max": "NULL", "record:my.counter.attr": "some value",
		},
		{
			"metric_type": "gauge", "metric_name": "my.gauge", "metric_description": "I am a Gauge",
			"start_time": "NULL", "value": "10", "value_int": "NULL", "aggregation_temporality": "NULL",
			"is_monotonic": "NULL", "count": "NULL", "record:my.gauge.attr": "some value", "record:my.counter.attr": "NULL",
		},
		{
			"metric_type": "histogram", "metric_name": "my.histogram", "value": "NULL", "value_int": "NULL",
			"aggregation_temporality": "DELTA", "is_monotonic": "NULL", "count": "2", "sum": "2",
			"min": "0", "max": "2", "bucket_counts": "[1 1]", "explicit_bounds": "[1]", "scale": "NULL",
			"positive_bucket_counts": "NULL", "quantiles": "NULL", "record:my.histogram.attr": "some value",
		},
		{
			"metric_type": "exponential_histogram", "metric_name": "my.exponential.histogram",
			"metric_description": "I am an Exponential Histogram", "aggregation_temporality": "DELTA",
			"is_monotonic": "NULL", "count": "3", "sum": "10", "min": "0", "max": "5", "scale": "0",
			"zero_count": "1", "zero_threshold": "0", "positive_offset": "1", "positive_bucket_counts": "[0 2]",
			"negative_offset": "0", "negative_bucket_counts": "NULL", "bucket_counts": "NULL",
			"explicit_bounds": "NULL", "value": "NULL", "record:my.exponential.histogram.attr": "some value",
		},
	}
	for i, want := range rows {
		expectCells(t, Metrics, b, i, common)
		if i < 2 {
			expectCells(t, Metrics, b, i, notHist)
		}
		expectCells(t, Metrics, b, i, want)
	}
}

func TestMetricsOtlp2parquetKinds(t *testing.T) {
	g := decodeFile(t, Metrics, "otlp2parquet/metrics_gauge.json")
	expectCells(t, Metrics, g, 0, map[string]string{"metric_type": "gauge", "metric_name": "cpu.usage", "metric_unit": "percent",
		"value": "67.95700988434129", "value_int": "NULL", "record:host": "web-01", "record:cpu": "0", "service_name": "demo-service"})
	expectCells(t, Metrics, g, 2, map[string]string{"metric_name": "memory.available", "value": "8.589934592e+09",
		"value_int": "8589934592", "record:cpu": "NULL", "metric_description": "Available memory in bytes"})

	s := decodeFile(t, Metrics, "otlp2parquet/metrics_sum.json")
	expectCells(t, Metrics, s, 1, map[string]string{"metric_type": "sum", "value_int": "3421", "value": "3421",
		"aggregation_temporality": "CUMULATIVE", "is_monotonic": "true", "record:http.status_code": "201"})

	h := decodeFile(t, Metrics, "otlp2parquet/metrics_histogram.json")
	expectCells(t, Metrics, h, 0, map[string]string{"metric_type": "histogram", "count": "1543", "sum": "45120.5",
		"bucket_counts": "[23 342 687 398 78 15]", "explicit_bounds": "[10 25 50 100 250]", "min": "2.3", "max": "421.8",
		"aggregation_temporality": "CUMULATIVE", "start_time": "NULL", "is_monotonic": "NULL"})
	expectCells(t, Metrics, h, 2, map[string]string{"metric_name": "db.query.duration", "bucket_counts": "[1234 2891 876 198 35]",
		"explicit_bounds": "[1 5 10 50]", "record:db.system": "postgresql", "record:http.method": "NULL"})

	e := decodeFile(t, Metrics, "otlp2parquet/metrics_exponential_histogram.json")
	expectCells(t, Metrics, e, 0, map[string]string{"metric_type": "exponential_histogram", "scale": "3", "zero_count": "5",
		"positive_offset": "2", "positive_bucket_counts": "[234 567 892 645 178 22]",
		"negative_offset": "0", "negative_bucket_counts": "NULL", "count": "2543", "sum": "125634.5",
		"aggregation_temporality": "CUMULATIVE"})
	expectCells(t, Metrics, e, 1, map[string]string{"positive_offset": "1", "positive_bucket_counts": "[156 432 721 412 98 12]", "max": "892.3"})

	q := decodeFile(t, Metrics, "otlp2parquet/metrics_summary.json")
	expectCells(t, Metrics, q, 0, map[string]string{"metric_type": "summary", "count": "8534", "sum": "4.5892134e+07",
		"quantiles":               "[{quantile:0 value:128} {quantile:0.5 value:4512} {quantile:0.9 value:12834} {quantile:0.95 value:18923} {quantile:0.99 value:45123} {quantile:1 value:98234}]",
		"aggregation_temporality": "NULL", "is_monotonic": "NULL", "min": "NULL", "max": "NULL", "exemplars": "NULL",
		"value": "NULL", "record:endpoint": "/api/analytics"})

	m := decodeFile(t, Metrics, "otlp2parquet/metrics_mixed.json")
	for i, typ := range []string{"gauge", "sum", "histogram"} {
		expectCells(t, Metrics, m, i, map[string]string{"metric_type": typ, "service_name": "multi-service"})
	}
}

// Exemplars, optional fields, non-finite doubles, metadata and flags,
// through both decoders.
func TestMetricsEdgeCases(t *testing.T) {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "svc")
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.SetSchemaUrl("https://scope")
	sm.Scope().Attributes().PutInt("scope.n", 3)

	g := sm.Metrics().AppendEmpty()
	g.SetName("g")
	g.Metadata().PutStr("meta", "data")
	g.Metadata().PutEmptyMap("nested").PutInt("x", 1)
	gp := g.SetEmptyGauge().DataPoints()
	p := gp.AppendEmpty()
	p.SetDoubleValue(math.Inf(-1))
	p.SetFlags(pmetric.DefaultDataPointFlags.WithNoRecordedValue(true))
	ex := p.Exemplars().AppendEmpty()
	ex.SetTimestamp(99)
	ex.SetIntValue(-7)
	ex.SetTraceID(pcommon.TraceID{0xde, 0xad})
	ex.SetSpanID(pcommon.SpanID{0xbe, 0xef})
	ex.FilteredAttributes().PutStr("user", "u1")
	ex2 := p.Exemplars().AppendEmpty()
	ex2.SetDoubleValue(math.NaN())
	gp.AppendEmpty() // no value at all
	gp.AppendEmpty().SetIntValue(math.MinInt64)

	s := sm.Metrics().AppendEmpty()
	s.SetName("s")
	s.SetUnit("By")
	sum := s.SetEmptySum()
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	sum.DataPoints().AppendEmpty().SetIntValue(math.MaxInt64)

	h := sm.Metrics().AppendEmpty()
	h.SetName("h")
	hp := h.SetEmptyHistogram().DataPoints().AppendEmpty() // no sum, min, max, buckets
	hp.SetCount(0)
	hp.Attributes().PutBool("b", true)
	hp2 := h.Histogram().DataPoints().AppendEmpty()
	hp2.SetSum(math.NaN())
	hp2.SetMin(math.Inf(1))
	hp2.BucketCounts().FromRaw([]uint64{math.MaxUint64})
	hp2.ExplicitBounds().FromRaw([]float64{})

	e := sm.Metrics().AppendEmpty()
	e.SetName("e")
	ep := e.SetEmptyExponentialHistogram().DataPoints().AppendEmpty()
	ep.SetScale(-4)
	ep.SetZeroThreshold(1e-9)
	ep.Negative().SetOffset(-3)
	ep.Negative().BucketCounts().FromRaw([]uint64{1, 0, 5})
	ep.Positive().SetOffset(2)
	ep.SetCount(6)

	q := sm.Metrics().AppendEmpty()
	q.SetName("q")
	q.SetEmptySummary().DataPoints().AppendEmpty() // no quantiles, sum 0

	sm.Metrics().AppendEmpty().SetName("no data") // no rows

	js, err := (&pmetric.JSONMarshaler{}).MarshalMetrics(md)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := (&pmetric.ProtoMarshaler{}).MarshalMetrics(md)
	if err != nil {
		t.Fatal(err)
	}
	j := decodeRequests(t, Metrics, [][]byte{js}, false)
	sameBatches(t, Metrics, j, decodeRequests(t, Metrics, [][]byte{pb}, true))
	sameBatches(t, Metrics, j, decodeRequests(t, Metrics, [][]byte{snakeCase(t, js)}, false))
	if j.Rows != 8 {
		t.Fatalf("%d rows", j.Rows)
	}
	expectCells(t, Metrics, j, 0, map[string]string{
		"metric_name": "g", "metric_metadata": `{"meta":"data","nested":{"x":1}}`, "value": "-Inf", "flags": "1",
		"exemplars": "[{time:99 value:-7 value_int:-7 trace_id:dead0000000000000000000000000000 span_id:beef000000000000 filtered_attributes:{\"user\":\"u1\"}} " +
			"{time:NULL value:NaN value_int:NULL trace_id:NULL span_id:NULL filtered_attributes:NULL}]",
		"scope_schema_url": "https://scope", "scope:scope.n": "3", "service_name": "svc",
	})
	expectCells(t, Metrics, j, 1, map[string]string{"metric_name": "g", "value": "NULL", "value_int": "NULL", "exemplars": "NULL", "metric_metadata": `{"meta":"data","nested":{"x":1}}`})
	expectCells(t, Metrics, j, 2, map[string]string{"value": "-9.223372036854776e+18", "value_int": "-9223372036854775808"})
	expectCells(t, Metrics, j, 3, map[string]string{"metric_type": "sum", "metric_unit": "By", "metric_metadata": "NULL",
		"value_int": "9223372036854775807", "aggregation_temporality": "DELTA", "is_monotonic": "false"})
	expectCells(t, Metrics, j, 4, map[string]string{"metric_type": "histogram", "count": "0", "sum": "NULL", "min": "NULL",
		"max": "NULL", "bucket_counts": "NULL", "explicit_bounds": "NULL", "aggregation_temporality": "UNSPECIFIED", "record:b": "true"})
	expectCells(t, Metrics, j, 5, map[string]string{"sum": "NaN", "min": "+Inf", "max": "NULL",
		"bucket_counts": "[18446744073709551615]", "explicit_bounds": "NULL", "record:b": "NULL"})
	expectCells(t, Metrics, j, 6, map[string]string{"metric_type": "exponential_histogram", "scale": "-4", "zero_threshold": "1e-09",
		"negative_offset": "-3", "negative_bucket_counts": "[1 0 5]", "positive_offset": "2", "positive_bucket_counts": "NULL",
		"count": "6", "sum": "NULL", "zero_count": "0"})
	expectCells(t, Metrics, j, 7, map[string]string{"metric_type": "summary", "quantiles": "NULL", "count": "0", "sum": "0",
		"exemplars": "NULL", "scale": "NULL"})
}

// In OTLP/JSON a metric's name, description, unit and metadata may follow
// its data; the data is a oneof (the last one wins, as in protobuf); keys
// of other kinds are ignored.
func TestMetricsJSONFieldOrder(t *testing.T) {
	req := `{"resourceMetrics":[{"scopeMetrics":[{"metrics":[
	  {"gauge":{"dataPoints":[{"asDouble":1},{"asInt":"2","count":"5","bucketCounts":["1"]}],"aggregationTemporality":"LOUD"},
	   "unit":"u1","name":"first","metadata":[{"key":"k","value":{"stringValue":"v"}}],"description":"d1"},
	  {"sum":{"dataPoints":[{"asDouble":9,"attributes":[{"key":"gone","value":{"stringValue":"x"}}]}],"isMonotonic":true},
	   "name":"second",
	   "histogram":{"aggregationTemporality":"AGGREGATION_TEMPORALITY_DELTA","dataPoints":[{"count":3,"sum":"1.5","bucketCounts":["1","2"],"explicitBounds":[0.5],"asDouble":4,"scale":2}],"isMonotonic":true}},
	  {"name":"third","summary":{"dataPoints":[{"quantileValues":[{"quantile":"0.5","value":"NaN"}],"sum":1,"count":"1","min":3}]}}
	]}],"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"late"}}]}}]}`
	b := decodeRequests(t, Metrics, [][]byte{[]byte(req)}, false)
	md, err := (&pmetric.JSONUnmarshaler{}).UnmarshalMetrics([]byte(strings.Replace(req, `"LOUD"`, `1`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	pb, err := (&pmetric.ProtoMarshaler{}).MarshalMetrics(md)
	if err != nil {
		t.Fatal(err)
	}
	sameRows(t, Metrics, b, decodeRequests(t, Metrics, [][]byte{pb}, true))
	if b.Rows != 4 {
		t.Fatalf("%d rows", b.Rows)
	}
	for i := 0; i < 2; i++ {
		expectCells(t, Metrics, b, i, map[string]string{"metric_type": "gauge", "metric_name": "first", "metric_unit": "u1",
			"metric_description": "d1", "metric_metadata": `{"k":"v"}`, "aggregation_temporality": "NULL", "service_name": "late",
			"count": "NULL", "bucket_counts": "NULL"})
	}
	expectCells(t, Metrics, b, 1, map[string]string{"value": "2", "value_int": "2"})
	expectCells(t, Metrics, b, 2, map[string]string{"metric_type": "histogram", "metric_name": "second", "count": "3", "sum": "1.5",
		"bucket_counts": "[1 2]", "explicit_bounds": "[0.5]", "value": "NULL", "scale": "NULL", "is_monotonic": "NULL",
		"aggregation_temporality": "DELTA", "metric_unit": "NULL", "metric_metadata": "NULL"})
	expectCells(t, Metrics, b, 3, map[string]string{"metric_type": "summary", "metric_name": "third",
		"quantiles": "[{quantile:0.5 value:NaN}]", "min": "NULL", "sum": "1", "count": "1"})
}

// A null field is the same as an absent one.
func TestMetricsJSONNulls(t *testing.T) {
	withNulls := `{"resourceMetrics":[{"resource":null,"schemaUrl":null,"scopeMetrics":[{"scope":null,"metrics":[
	  {"name":"a","description":null,"unit":null,"metadata":null,"summary":null,"gauge":{"dataPoints":[{"asDouble":null,"asInt":null,"timeUnixNano":null,"flags":null,"exemplars":null,"attributes":null,"count":null}]}},
	  {"name":"b","sum":{"aggregationTemporality":null,"isMonotonic":null,"dataPoints":[{"asInt":"3","exemplars":[{"asInt":null,"asDouble":null,"traceId":null,"filteredAttributes":null}]}]}},
	  {"name":"c","histogram":{"dataPoints":[{"sum":null,"min":null,"max":null,"bucketCounts":null,"explicitBounds":null}]}},
	  {"name":"d","exponentialHistogram":{"dataPoints":[{"sum":null,"scale":null,"zeroCount":null,"zeroThreshold":null,"positive":null,"negative":{"offset":null,"bucketCounts":null}}]}},
	  {"name":"e","summary":{"dataPoints":[{"sum":null,"count":null,"quantileValues":null}]},"histogram":null}
	]}]}]}`
	without := `{"resourceMetrics":[{"scopeMetrics":[{"metrics":[
	  {"name":"a","gauge":{"dataPoints":[{}]}},
	  {"name":"b","sum":{"dataPoints":[{"asInt":"3","exemplars":[{}]}]}},
	  {"name":"c","histogram":{"dataPoints":[{}]}},
	  {"name":"d","exponentialHistogram":{"dataPoints":[{}]}},
	  {"name":"e","summary":{"dataPoints":[{}]}}
	]}]}]}`
	a := decodeRequests(t, Metrics, [][]byte{[]byte(withNulls)}, false)
	b := decodeRequests(t, Metrics, [][]byte{[]byte(without)}, false)
	sameBatches(t, Metrics, a, b)
	if a.Rows != 5 {
		t.Fatalf("%d rows", a.Rows)
	}
	expectCells(t, Metrics, a, 1, map[string]string{"is_monotonic": "false", "aggregation_temporality": "UNSPECIFIED",
		"exemplars": "[{time:NULL value:NULL value_int:NULL trace_id:NULL span_id:NULL filtered_attributes:NULL}]"})
	expectCells(t, Metrics, a, 3, map[string]string{"negative_offset": "0", "negative_bucket_counts": "NULL", "sum": "NULL"})
}

func TestMetricsErrors(t *testing.T) {
	good := readRequests(t, "otel-proto-examples-metrics.json")[0]
	logs, err := os.ReadFile(filepath.Join(otlpDataDir, "otel-proto-examples-logs.json"))
	if err != nil {
		t.Fatal(err)
	}
	traces, err := os.ReadFile(filepath.Join(otlpDataDir, "otel-proto-examples-trace.json"))
	if err != nil {
		t.Fatal(err)
	}
	wrap := func(metric string) []byte {
		return []byte(`{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"ok","gauge":{"dataPoints":[{"asInt":1,"attributes":[{"key":"a","value":{"intValue":1}}]}]}},` + metric + `]}]}]}`)
	}
	bad := map[string][]byte{
		"truncated":           good[:len(good)/2],
		"empty input":         nil,
		"array":               []byte(`[]`),
		"logs request":        logs,
		"traces request":      traces,
		"bad temporality":     wrap(`{"sum":{"aggregationTemporality":"SOMETIMES","dataPoints":[{"asInt":1}]}}`),
		"bad count":           wrap(`{"histogram":{"dataPoints":[{"count":-1}]}}`),
		"bad bucket count":    wrap(`{"histogram":{"dataPoints":[{"bucketCounts":["x"]}]}}`),
		"bad scale":           wrap(`{"exponentialHistogram":{"dataPoints":[{"scale":3000000000}]}}`),
		"bad offset":          wrap(`{"exponentialHistogram":{"dataPoints":[{"positive":{"offset":1.5}}]}}`),
		"bad quantile":        wrap(`{"summary":{"dataPoints":[{"quantileValues":[{"quantile":"half"}]}]}}`),
		"null quantile":       wrap(`{"summary":{"dataPoints":[{"quantileValues":[null]}]}}`),
		"bad exemplar id":     wrap(`{"gauge":{"dataPoints":[{"asInt":1,"exemplars":[{"traceId":"abc"}]}]}}`),
		"bad value":           wrap(`{"gauge":{"dataPoints":[{"asDouble":"lots","attributes":[{"key":"b","value":{"intValue":1}}]}]}}`),
		"name after bad data": wrap(`{"gauge":{"dataPoints":[{"asInt":"1.5"}]},"name":"x"}`),
		"bad metadata":        wrap(`{"metadata":[{"key":"k","value":{"bytesValue":"!"}}],"gauge":{"dataPoints":[{"asInt":1}]}}`),
	}
	for name, data := range bad {
		t.Run(name, func(t *testing.T) {
			b := shred.NewBatch(Metrics.Core())
			if _, err := Metrics.AppendJSON(b, good); err != nil {
				t.Fatal(err)
			}
			n, err := Metrics.AppendJSON(b, data)
			if err == nil {
				t.Fatal("no error")
			}
			if n != 0 || b.Rows != 4 {
				t.Fatalf("n=%d, rows=%d after a failed request", n, b.Rows)
			}
			if err := finishPadded(b); err != nil {
				t.Fatal(err)
			}
			checkBatch(t, b)
			sameRows(t, Metrics, b, decodeRequests(t, Metrics, [][]byte{good}, false))
		})
	}
	b := shred.NewBatch(Metrics.Core())
	if _, err := Metrics.AppendProto(b, []byte("not protobuf at all")); err == nil {
		t.Error("bad protobuf: no error")
	}
	if b.Rows != 0 {
		t.Errorf("rows %d", b.Rows)
	}
}

func TestMetricsEmptyAndProbe(t *testing.T) {
	b := shred.NewBatch(Metrics.Core())
	for _, req := range []string{`{}`, `{"resourceMetrics":[]}`, `{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"x"}]}]}]}`,
		`{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"x","sum":{"dataPoints":[]}}]}]}]}`} {
		if n, err := Metrics.AppendJSON(b, []byte(req)); err != nil || n != 0 {
			t.Errorf("%s: n=%d err=%v", req, n, err)
		}
	}
	if err := finishPadded(b); err != nil {
		t.Fatal(err)
	}
	pb := readRequests(t, "otlp2parquet/metrics_mixed.pb")[0]
	if !Metrics.(protoProber).probeProto(pb) {
		t.Error("probeProto rejects metrics_mixed.pb")
	}
	if Metrics.(protoProber).probeProto(nil) {
		t.Error("probeProto accepts an empty request")
	}
	for _, k := range metricsKinds {
		pb := readRequests(t, "otlp2parquet/metrics_"+k+".pb")[0]
		if tr, err := DetectProto("request.bin", pb); err != nil || tr != Metrics {
			t.Errorf("DetectProto(%s): %v, %v", k, tr, err)
		}
	}
	if tr, err := DetectJSON(readRequests(t, "otlp2parquet/metrics_sum.json")[0]); err != nil || tr != Metrics {
		t.Errorf("DetectJSON: %v, %v", tr, err)
	}
	if Metrics.Name() != "otlp-metrics" || Metrics.Table() != "otel_metrics" {
		t.Error("name")
	}
	var sb bytes.Buffer
	for _, c := range Metrics.Core() {
		sb.WriteString(c.Name + " " + c.Type.SQL() + "\n")
	}
	want := `metric_type ENUM('gauge', 'sum', 'histogram', 'exponential_histogram', 'summary')
metric_name VARCHAR
metric_description VARCHAR
metric_unit VARCHAR
metric_metadata JSON
time TIMESTAMP_NS
start_time TIMESTAMP_NS
value DOUBLE
value_int BIGINT
aggregation_temporality VARCHAR
is_monotonic BOOLEAN
count UBIGINT
sum DOUBLE
min DOUBLE
max DOUBLE
bucket_counts UBIGINT[]
explicit_bounds DOUBLE[]
scale INTEGER
zero_count UBIGINT
zero_threshold DOUBLE
positive_offset INTEGER
positive_bucket_counts UBIGINT[]
negative_offset INTEGER
negative_bucket_counts UBIGINT[]
quantiles STRUCT("quantile" DOUBLE, "value" DOUBLE)[]
exemplars STRUCT("time" TIMESTAMP_NS, "value" DOUBLE, "value_int" BIGINT, "trace_id" VARCHAR, "span_id" VARCHAR, "filtered_attributes" JSON)[]
flags UINTEGER
service_name VARCHAR
scope_name VARCHAR
scope_version VARCHAR
resource_schema_url VARCHAR
scope_schema_url VARCHAR
resource_dropped_attributes_count UINTEGER
scope_dropped_attributes_count UINTEGER
attributes_overflow JSON
resource_attributes_overflow JSON
scope_attributes_overflow JSON
attributes_str MAP(VARCHAR, VARCHAR)
attributes_int MAP(VARCHAR, BIGINT)
attributes_double MAP(VARCHAR, DOUBLE)
attributes_bool MAP(VARCHAR, BOOLEAN)
resource_attributes_str MAP(VARCHAR, VARCHAR)
resource_attributes_int MAP(VARCHAR, BIGINT)
resource_attributes_double MAP(VARCHAR, DOUBLE)
resource_attributes_bool MAP(VARCHAR, BOOLEAN)
scope_attributes_str MAP(VARCHAR, VARCHAR)
scope_attributes_int MAP(VARCHAR, BIGINT)
scope_attributes_double MAP(VARCHAR, DOUBLE)
scope_attributes_bool MAP(VARCHAR, BOOLEAN)
`
	if sb.String() != want {
		t.Errorf("core columns:\n%s", sb.String())
	}
}

func BenchmarkMetricsJSON(b *testing.B) {
	var reqs [][]byte
	size := 0
	for _, k := range metricsKinds {
		data, err := os.ReadFile(filepath.Join(otlpDataDir, "otlp2parquet/metrics_"+k+".jsonl"))
		if err != nil {
			b.Fatal(err)
		}
		reqs = append(reqs, bytes.TrimSpace(data))
		size += len(data)
	}
	batch := shred.NewBatch(Metrics.Core())
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		for _, req := range reqs {
			if _, err := Metrics.AppendJSON(batch, req); err != nil {
				b.Fatal(err)
			}
		}
		batch.Truncate(0)
	}
}

// Protobuf text that is not UTF-8 (pdata does not check it) rejects the
// data points whose rows would hold it: a metric's name rejects all its
// points, a data point's attribute only that point. The other points are
// appended, in the same batch as a fresh decode of the request without
// the bad ones, and the rejected points leave no column behind.
func TestMetricsProtoInvalidUTF8(t *testing.T) {
	build := func(withBad bool) []byte {
		md := pmetric.NewMetrics()
		ms := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics()
		g := ms.AppendEmpty()
		g.SetName("requests")
		pts := g.SetEmptyGauge().DataPoints()
		pts.AppendEmpty().SetIntValue(1)
		if withBad {
			bad := pts.AppendEmpty()
			bad.SetIntValue(2)
			bad.Attributes().PutStr("path", "/a\xff")
			bad.Attributes().PutInt("only.bad", 1)
		}
		pts.AppendEmpty().SetIntValue(3)
		if withBad {
			h := ms.AppendEmpty()
			h.SetName("latency\xfe")
			hp := h.SetEmptyHistogram().DataPoints()
			hp.AppendEmpty().SetCount(1)
			hp.AppendEmpty().SetCount(2)
		}
		s := ms.AppendEmpty()
		s.SetName("bytes")
		s.SetEmptySum().DataPoints().AppendEmpty().SetDoubleValue(4.5)
		pb, err := (&pmetric.ProtoMarshaler{}).MarshalMetrics(md)
		if err != nil {
			t.Fatal(err)
		}
		return pb
	}
	b := shred.NewBatch(Metrics.Core())
	n, err := Metrics.AppendProto(b, build(true))
	var rej *RejectedError
	if !errors.As(err, &rej) || rej.Records != 3 || n != 3 {
		t.Fatalf("n=%d, %v; want 3 rows and 3 data points rejected", n, err)
	}
	if want := "3 data points rejected; first: data point 2 of the request: record attribute \"path\": invalid UTF-8"; rej.Error() != want {
		t.Errorf("error %q, want %q", rej.Error(), want)
	}
	if err := finishPadded(b); err != nil {
		t.Fatal(err)
	}
	want := shred.NewBatch(Metrics.Core())
	if _, err := Metrics.AppendProto(want, build(false)); err != nil {
		t.Fatal(err)
	}
	if err := finishPadded(want); err != nil {
		t.Fatal(err)
	}
	sameRows(t, Metrics, b, want)
	if c := dynCol(b, shred.Record, "only.bad"); c != nil && c.Nulls != c.Len {
		t.Error("the rejected point's attribute has values")
	}
}
