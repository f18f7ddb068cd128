package transforms

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"testing"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/shredduck/shredduck/shred"
)

// fuzzDataDir holds the OTLP fixtures that seed the fuzzers.
const fuzzDataDir = "../testdata/otlp"

// fuzzSeeds returns every request of the fixtures under fuzzDataDir: with
// proto, each .pb file; otherwise each line of a .jsonl file and each .json
// file.
func fuzzSeeds(tb testing.TB, proto bool) [][]byte {
	tb.Helper()
	var reqs [][]byte
	err := filepath.WalkDir(fuzzDataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		ext := filepath.Ext(path)
		if proto != (ext == ".pb") || (!proto && ext != ".json" && ext != ".jsonl") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if ext != ".jsonl" {
			reqs = append(reqs, data)
			return nil
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			if line := bytes.TrimSpace(sc.Bytes()); len(line) > 0 {
				reqs = append(reqs, bytes.Clone(line))
			}
		}
		return sc.Err()
	})
	if err != nil {
		tb.Fatal(err)
	}
	if len(reqs) == 0 {
		tb.Fatalf("no seed requests under %s", fuzzDataDir)
	}
	return reqs
}

// fuzzJSONEdgeCases are hand-written requests for the corners of OTLP/JSON.
var fuzzJSONEdgeCases = []string{
	// empty and null
	`{}`,
	`{"resourceSpans":null}`,
	`{"resourceSpans":[null,{"resource":null,"schemaUrl":null,"scopeSpans":[null,{"scope":null,"schemaUrl":null,"spans":null}]}]}`,
	`{"resourceSpans":[{"resource":{"attributes":null,"droppedAttributesCount":null},"scopeSpans":[{"scope":{"name":null,"version":null,"attributes":null},"spans":[{"traceId":null,"spanId":null,"parentSpanId":null,"traceState":null,"flags":null,"name":null,"kind":null,"startTimeUnixNano":null,"endTimeUnixNano":null,"attributes":[{"key":null,"value":null}],"droppedAttributesCount":null,"events":[{"timeUnixNano":null,"name":null,"attributes":null}],"droppedEventsCount":null,"links":[{"traceId":null,"spanId":null,"traceState":null,"attributes":null}],"droppedLinksCount":null,"status":{"code":null,"message":null}}]}]}]}`,
	`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"timeUnixNano":null,"observedTimeUnixNano":null,"severityNumber":null,"severityText":null,"body":null,"attributes":[{"key":"k","value":{"stringValue":null}}],"traceId":null,"spanId":null,"flags":null,"eventName":null}]}]}]}`,
	`{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":null,"gauge":{"dataPoints":[{"asDouble":null,"asInt":null,"attributes":null,"exemplars":null}]}},{"name":"s","sum":{"dataPoints":null,"aggregationTemporality":null,"isMonotonic":null}},{"histogram":{"dataPoints":[{"bucketCounts":null,"explicitBounds":null,"sum":null,"min":null,"max":null}]}},{"exponentialHistogram":{"dataPoints":[{"positive":null,"negative":null,"scale":null,"zeroCount":null}]}},{"summary":{"dataPoints":[{"quantileValues":null}]}}]}]}]}`,
	// value before key; kvlist and array values at every level
	`{"resourceSpans":[{"resource":{"attributes":[{"value":{"kvlistValue":{"values":[{"value":{"intValue":"1"},"key":"k"},{"key":"a","value":{"arrayValue":{"values":[{"stringValue":"x"},{"boolValue":true},{"doubleValue":1.5},{"bytesValue":"aGk="},{"kvlistValue":{}},null]}}}]}},"key":"r"}]},"scopeSpans":[{"scope":{"attributes":[{"value":{"arrayValue":{}},"key":"s"}]},"spans":[{"attributes":[{"value":{"stringValue":"v"},"key":"x"},{"key":"x","value":{"intValue":2}},{"key":"y"}],"events":[{"attributes":[{"value":{"boolValue":false},"key":"e"}]}],"links":[{"attributes":[{"value":{"doubleValue":"NaN"},"key":"l"}]}]}]}]}]}`,
	`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"kvlistValue":{"values":[{"value":{"arrayValue":{"values":[{"intValue":"-1"},{"kvlistValue":{"values":[{"key":"deep","value":{"bytesValue":"AP8="}}]}}]}},"key":"list"}]}},"attributes":[{"value":{"intValue":"7"},"key":"n"},{"value":{"doubleValue":7.5},"key":"n"}]}]}]}]}`,
	// bad ids: not hex, one digit short, base64 (standard, raw, URL-safe), all zero
	`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"zz","spanId":"0123456789abcdef"}]}]}]}`,
	`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"5B8EFFF798038103D269B633813FC60","spanId":"EEE19B7EC3C1B17"}]}]}]}`,
	`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"nXmxo38xgBzRGmcG+0DWvQ==","spanId":"3lYkOenBuCM","links":[{"traceId":"00000000000000000000000000000000","spanId":"_-_-_-_-_-8="}]}]}]}]}`,
	`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"traceId":"!!!!!!!!!!!!!!!!!!!!!!!!","spanId":"12345678"}]}]}]}`,
	// huge and out-of-range integers and doubles
	`{"resourceSpans":[{"scopeSpans":[{"spans":[{"startTimeUnixNano":"18446744073709551615","endTimeUnixNano":"1","flags":4294967295,"droppedAttributesCount":4294967296,"attributes":[{"key":"i","value":{"intValue":"9223372036854775808"}}]}]}]}]}`,
	`{"resourceSpans":[{"scopeSpans":[{"spans":[{"startTimeUnixNano":1e18,"endTimeUnixNano":"2e18","attributes":[{"key":"i","value":{"intValue":-9223372036854775808}},{"key":"d","value":{"doubleValue":1e308}}]}]}]}]}`,
	`{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"g","gauge":{"dataPoints":[{"asInt":"99999999999999999999"}]}}]}]}]}`,
	`{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"exponentialHistogram":{"dataPoints":[{"scale":2147483648,"positive":{"offset":-2147483649,"bucketCounts":["18446744073709551615"]}}]}}]}]}]}`,
	// NaN and infinities as strings
	`{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"n","gauge":{"dataPoints":[{"asDouble":"NaN"},{"asDouble":"Infinity"},{"asDouble":"-Infinity"}]}}]}]}]}`,
	`{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"n","gauge":{"dataPoints":[{"asDouble":"nan"}]}}]}]}]}`,
	`{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"h","histogram":{"dataPoints":[{"count":"3","sum":"NaN","min":"-Infinity","max":"Infinity","bucketCounts":["1","2"],"explicitBounds":["NaN",1.5],"exemplars":[{"asDouble":"NaN","traceId":"5B8EFFF798038103D269B633813FC60C","filteredAttributes":[{"key":"f","value":{"doubleValue":"Infinity"}}]}]}]}}]}]}]}`,
	// enum names, with and without prefix, and out of range
	`{"resourceSpans":[{"scopeSpans":[{"spans":[{"kind":"SPAN_KIND_SERVER","status":{"code":"STATUS_CODE_ERROR"}},{"kind":"CLIENT","status":{"code":"OK"}},{"kind":"3"}]}]}]}`,
	`{"resourceSpans":[{"scopeSpans":[{"spans":[{"kind":9}]}]}]}`,
	`{"resourceSpans":[{"scopeSpans":[{"spans":[{"kind":"SPAN_KIND_BOGUS"}]}]}]}`,
	`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"severityNumber":"SEVERITY_NUMBER_FATAL4"},{"severityNumber":"WARN"},{"severityNumber":21}]}]}]}`,
	`{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"sum":{"aggregationTemporality":"AGGREGATION_TEMPORALITY_DELTA","isMonotonic":true,"dataPoints":[{"asInt":"1"}]}},{"sum":{"aggregationTemporality":3,"dataPoints":[{"asInt":"1"}]}}]}]}]}`,
	// snake_case keys
	`{"resource_spans":[{"schema_url":"u","scope_spans":[{"schema_url":"v","spans":[{"trace_id":"5b8efff798038103d269b633813fc60c","span_id":"eee19b7ec3c1b174","parent_span_id":"eee19b7ec3c1b173","start_time_unix_nano":"1","end_time_unix_nano":"2","dropped_attributes_count":1,"dropped_events_count":2,"dropped_links_count":3,"trace_state":"a=b","events":[{"time_unix_nano":"1","dropped_attributes_count":1}],"links":[{"trace_id":"5b8efff798038103d269b633813fc60c","span_id":"eee19b7ec3c1b174","trace_state":"x"}]}]}]}]}`,
	`{"resource_logs":[{"scope_logs":[{"log_records":[{"time_unix_nano":"1","observed_time_unix_nano":"2","severity_number":9,"severity_text":"INFO","body":{"string_value":"x"},"event_name":"e","attributes":[{"key":"b","value":{"bytes_value":"aGk="}}]}]}]}]}`,
	`{"resource_metrics":[{"scope_metrics":[{"metrics":[{"name":"e","exponential_histogram":{"aggregation_temporality":2,"data_points":[{"zero_count":"1","zero_threshold":0.5,"positive":{"offset":1,"bucket_counts":["1"]}}]}},{"name":"s","summary":{"data_points":[{"quantile_values":[{"quantile":0.5,"value":1}]}]}}]}]}]}`,
	// a metric's data is a oneof; repeated keys
	`{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"gauge":{"dataPoints":[{"asInt":1},{"asInt":2}]},"sum":{"dataPoints":[{"asDouble":1}]},"name":"m"}]}]}]}`,
	`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"a"}],"spans":[{"name":"b"}]}],"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"late"}}]}}]}`,
	// mixed signals, trailing data, not an object
	`{"resourceSpans":[],"resourceLogs":[]}`,
	`{"resourceLogs":[]} {}`,
	`[]`,
	`{"other":1}`,
}

// fuzzPrefix is a good request per transform, appended before the fuzz
// input to check that a failed request leaves earlier rows alone.
func fuzzPrefix(tb testing.TB) map[Transform][]byte {
	tb.Helper()
	p := make(map[Transform][]byte)
	for tr, name := range map[Transform]string{Traces: "trace", Logs: "logs", Metrics: "metrics"} {
		data, err := os.ReadFile(filepath.Join(fuzzDataDir, "otel-proto-examples-"+name+".json"))
		if err != nil {
			tb.Fatal(err)
		}
		p[tr] = data
	}
	return p
}

// appendRequest appends one request; a panic is turned into a test
// failure so that a crasher in the seed corpus does not stop the other
// tests of the package.
func appendRequest(t *testing.T, tr Transform, b *shred.Batch, data []byte, proto bool) (int, error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("%s: panic: %v\n%s", tr.Name(), r, debug.Stack())
		}
	}()
	if proto {
		return tr.AppendProto(b, data)
	}
	return tr.AppendJSON(b, data)
}

// stored reports whether an append's error leaves its rows stored (nil or
// a RejectedError) and how many records it rejected.
func stored(err error) (ok bool, rejected int) {
	if err == nil {
		return true, 0
	}
	var rej *RejectedError
	if errors.As(err, &rej) {
		return true, rej.Records
	}
	return false, 0
}

// fuzzAppend appends data to a fresh batch and checks the batch whatever
// the outcome: no rows on error, n rows on success (some records may be
// rejected), a consistent layout after Finish either way.
func fuzzAppend(t *testing.T, tr Transform, data []byte, proto bool) (*shred.Batch, int, error) {
	t.Helper()
	b := shred.NewBatch(tr.Core())
	n, err := appendRequest(t, tr, b, data, proto)
	ok, rejected := stored(err)
	if !ok && (n != 0 || b.Rows != 0) {
		t.Fatalf("%s: error %v, but n=%d, rows=%d", tr.Name(), err, n, b.Rows)
	}
	if ok && n != b.Rows {
		t.Fatalf("%s: returned %d rows, batch has %d", tr.Name(), n, b.Rows)
	}
	if err != nil && ok && rejected <= 0 {
		t.Fatalf("%s: %v with %d records", tr.Name(), err, rejected)
	}
	if ferr := finishPadded(b); ferr != nil {
		t.Fatalf("%s: Finish: %v (append error %v)", tr.Name(), ferr, err)
	}
	checkLayout(t, tr, b)
	return b, n, err
}

// fuzzAfterPrefix appends data after the rows of a good request: on error
// the good rows must be exactly as before; on success the new rows must be
// what a fresh batch got.
func fuzzAfterPrefix(t *testing.T, tr Transform, prefix, data []byte, proto bool, fresh *shred.Batch, freshErr error) {
	t.Helper()
	want := shred.NewBatch(tr.Core())
	if _, err := tr.AppendJSON(want, prefix); err != nil {
		t.Fatal(err)
	}
	b := shred.NewBatch(tr.Core())
	if _, err := tr.AppendJSON(b, prefix); err != nil {
		t.Fatal(err)
	}
	rows := b.Rows
	n, err := appendRequest(t, tr, b, data, proto)
	ok, rejected := stored(err)
	freshOK, freshRejected := stored(freshErr)
	if ok != freshOK || rejected != freshRejected {
		t.Fatalf("%s: error %v after a good request, %v in a fresh batch", tr.Name(), err, freshErr)
	}
	if !ok && (n != 0 || b.Rows != rows) {
		t.Fatalf("%s: error %v, but n=%d, rows %d -> %d", tr.Name(), err, n, rows, b.Rows)
	}
	if ok && b.Rows != rows+n {
		t.Fatalf("%s: returned %d rows, batch grew by %d", tr.Name(), n, b.Rows-rows)
	}
	if ferr := finishPadded(b); ferr != nil {
		t.Fatalf("%s: Finish: %v", tr.Name(), ferr)
	}
	if ferr := finishPadded(want); ferr != nil {
		t.Fatal(ferr)
	}
	checkLayout(t, tr, b)
	if !ok {
		// A failed request leaves the batch as it was, column kinds
		// included; only all-NULL columns may remain.
		sameRows(t, tr, b, want)
		if t.Failed() {
			t.FailNow()
		}
		return
	}
	sameCells(t, tr, want, 0, b, 0, rows, "good request")
	sameCells(t, tr, fresh, 0, b, rows, n, "fuzz request")
}

// sameCells compares n rows of two batches, starting at rows ra and rb:
// every core column, and the dynamic columns both batches have with the
// same kind. (After a successful request a dynamic column's kind may
// differ: the keys of an earlier request widen it.)
func sameCells(t *testing.T, tr Transform, a *shred.Batch, ra int, b *shred.Batch, rb, n int, what string) {
	t.Helper()
	for ci, c := range tr.Core() {
		for i := 0; i < n; i++ {
			if x, y := cell(a.Core[ci], ra+i), cell(b.Core[ci], rb+i); x != y {
				t.Fatalf("%s: %s row %d, %s: %s, want %s", tr.Name(), what, i, c.Name, y, x)
			}
		}
	}
	for _, d := range a.Dyn {
		o := dynColLike(b, d.Level, d.Key, d.Col)
		if o == nil {
			if d.Col.Nulls != d.Col.Len {
				t.Fatalf("%s: %s: %s %q missing", tr.Name(), what, d.Level, d.Key)
			}
			continue
		}
		if o.Type.Kind != d.Col.Type.Kind {
			continue
		}
		for i := 0; i < n; i++ {
			if x, y := cell(d.Col, ra+i), cell(o, rb+i); x != y {
				t.Fatalf("%s: %s row %d, %s %q: %s, want %s", tr.Name(), what, i, d.Level, d.Key, y, x)
			}
		}
	}
}

// checkLayout is checkBatch plus what the ingest stage relies on beyond
// lengths: offsets start at 0 and never decrease, enum cells are names of
// the enum, JSON cells are JSON, text is UTF-8, and a key has one dynamic
// column per level and type (its column, and its strays).
func checkLayout(t *testing.T, tr Transform, b *shred.Batch) {
	t.Helper()
	checkBatch(t, b)
	if t.Failed() {
		t.FailNow()
	}
	for i, c := range b.Core {
		checkBuffers(t, tr.Name()+" "+tr.Core()[i].Name, c)
	}
	seen := make(map[[3]string]bool)
	for _, d := range b.Dyn {
		// A key's strays (shred.DynColumn.Family) are of other types
		// than its column and each other.
		k := [3]string{d.Level.String(), d.Key, d.Col.Type.SQL()}
		if seen[k] || (d.Stray() != (d.Family()[0] != d)) {
			t.Fatalf("%s: two dynamic columns of %s for %s %q", tr.Name(), d.Col.Type.SQL(), d.Level, d.Key)
		}
		seen[k] = true
		if d.Col.Type.Kind > shred.JSON {
			t.Fatalf("%s: dynamic column %s %q has kind %s", tr.Name(), d.Level, d.Key, d.Col.Type.Kind)
		}
		checkBuffers(t, tr.Name()+" "+d.Level.String()+" "+d.Key, d.Col)
	}
}

func checkBuffers(t *testing.T, name string, c *shred.Column) {
	t.Helper()
	switch c.Type.Kind {
	case shred.String, shred.Blob, shred.JSON, shred.Enum, shred.List:
		if c.Offs[0] != 0 {
			t.Fatalf("%s: first offset %d", name, c.Offs[0])
		}
		for i := 0; i < c.Len; i++ {
			if c.Offs[i+1] < c.Offs[i] {
				t.Fatalf("%s: offsets decrease at row %d: %v", name, i, c.Offs[i:i+2])
			}
		}
	}
	for i := 0; i < c.Len; i++ {
		if !c.IsValid(i) {
			continue
		}
		switch c.Type.Kind {
		case shred.Enum:
			if v := cell(c, i); !slices.Contains(c.Type.Values, v) {
				t.Fatalf("%s row %d: %q is not one of %v", name, i, v, c.Type.Values)
			}
		case shred.JSON:
			if v := c.Data[c.Offs[i]:c.Offs[i+1]]; !json.Valid(v) {
				t.Fatalf("%s row %d: invalid JSON %s", name, i, v)
			}
		case shred.String:
			if v := c.Data[c.Offs[i]:c.Offs[i+1]]; !utf8.Valid(v) {
				t.Fatalf("%s row %d: invalid UTF-8 %q", name, i, v)
			}
		}
	}
	switch c.Type.Kind {
	case shred.List:
		checkBuffers(t, name+"[]", c.Child)
	case shred.Struct:
		for i, f := range c.Fields {
			checkBuffers(t, name+"."+c.Type.Fields[i].Name, f)
		}
	}
}

// emptyKey matches an object member with the empty key, which pdata's
// JSON decoder (json-iterator) takes for the end of the object.
var emptyKey = regexp.MustCompile(`""\s*:`)

// pdataJSONCount is the record count pdata's OTLP/JSON decoder finds.
func pdataJSONCount(tr Transform, data []byte) (int, error) {
	if emptyKey.Match(data) {
		return 0, errors.New("pdata misreads empty keys")
	}
	switch tr {
	case Traces:
		td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(data)
		if err != nil {
			return 0, err
		}
		return td.SpanCount(), nil
	case Logs:
		ld, err := (&plog.JSONUnmarshaler{}).UnmarshalLogs(data)
		if err != nil {
			return 0, err
		}
		return ld.LogRecordCount(), nil
	}
	md, err := (&pmetric.JSONUnmarshaler{}).UnmarshalMetrics(data)
	if err != nil {
		return 0, err
	}
	return md.DataPointCount(), nil
}

// pdataJSONToProto re-encodes an OTLP/JSON request as protobuf, through pdata.
func pdataJSONToProto(tr Transform, data []byte) ([]byte, error) {
	if emptyKey.Match(data) {
		return nil, errors.New("pdata misreads empty keys")
	}
	switch tr {
	case Traces:
		td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(data)
		if err != nil {
			return nil, err
		}
		return (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	case Logs:
		ld, err := (&plog.JSONUnmarshaler{}).UnmarshalLogs(data)
		if err != nil {
			return nil, err
		}
		return (&plog.ProtoMarshaler{}).MarshalLogs(ld)
	}
	md, err := (&pmetric.JSONUnmarshaler{}).UnmarshalMetrics(data)
	if err != nil {
		return nil, err
	}
	return (&pmetric.ProtoMarshaler{}).MarshalMetrics(md)
}

// pdataProtoToJSON re-encodes a protobuf request as OTLP/JSON, through pdata.
func pdataProtoToJSON(tr Transform, data []byte) ([]byte, error) {
	switch tr {
	case Traces:
		td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(data)
		if err != nil {
			return nil, err
		}
		return (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	case Logs:
		ld, err := (&plog.ProtoUnmarshaler{}).UnmarshalLogs(data)
		if err != nil {
			return nil, err
		}
		return (&plog.JSONMarshaler{}).MarshalLogs(ld)
	}
	md, err := (&pmetric.ProtoUnmarshaler{}).UnmarshalMetrics(data)
	if err != nil {
		return nil, err
	}
	return (&pmetric.JSONMarshaler{}).MarshalMetrics(md)
}

// pdataProtoCount is the record count pdata's protobuf decoder finds.
func pdataProtoCount(tr Transform, data []byte) (int, error) {
	switch tr {
	case Traces:
		td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(data)
		if err != nil {
			return 0, err
		}
		return td.SpanCount(), nil
	case Logs:
		ld, err := (&plog.ProtoUnmarshaler{}).UnmarshalLogs(data)
		if err != nil {
			return 0, err
		}
		return ld.LogRecordCount(), nil
	}
	md, err := (&pmetric.ProtoUnmarshaler{}).UnmarshalMetrics(data)
	if err != nil {
		return 0, err
	}
	return md.DataPointCount(), nil
}

// FuzzOTLPJSON feeds arbitrary bytes to DetectJSON and to every transform's
// AppendJSON: no panic, no rows on error, a consistent batch always, rows
// (and column kinds) unchanged by a failed request, and where pdata reads
// the request too (pdata takes hex ids only) as many rows as pdata finds
// records and the same batch as AppendProto makes of pdata's protobuf
// encoding of it.
func FuzzOTLPJSON(f *testing.F) {
	for _, req := range fuzzSeeds(f, false) {
		f.Add(req)
	}
	for _, s := range fuzzJSONEdgeCases {
		f.Add([]byte(s))
	}
	prefix := fuzzPrefix(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		detected, detectErr := DetectJSON(data)
		for _, tr := range All() {
			b, n, err := fuzzAppend(t, tr, data, false)
			fuzzAfterPrefix(t, tr, prefix[tr], data, false, b, err)
			ok, rejected := stored(err)
			if !ok {
				continue
			}
			if n+rejected > 0 && (detected != tr || detectErr != nil) {
				t.Fatalf("%s appended %d rows, but DetectJSON says %v, %v", tr.Name(), n, detected, detectErr)
			}
			if want, perr := pdataJSONCount(tr, data); perr == nil && want != n+rejected {
				t.Fatalf("%s: %d rows and %d rejected, pdata finds %d records", tr.Name(), n, rejected, want)
			}
			// Where pdata reads the request, its protobuf encoding must
			// give the same batch, rejecting the same records.
			if pb, perr := pdataJSONToProto(tr, data); perr == nil {
				p, _, perr := fuzzAppend(t, tr, pb, true)
				if pok, prej := stored(perr); !pok || prej != rejected {
					t.Fatalf("%s: JSON decodes (%v), protobuf from pdata: %v", tr.Name(), err, perr)
				}
				sameBatches(t, tr, b, p)
			}
		}
		if detectErr == nil && detected == nil {
			// An empty request: every transform takes it, with no rows.
			for _, tr := range All() {
				if n, err := appendRequest(t, tr, shred.NewBatch(tr.Core()), data, false); err != nil || n != 0 {
					t.Fatalf("DetectJSON says empty request; %s: n=%d, %v", tr.Name(), n, err)
				}
			}
		}
	})
}

// FuzzOTLPProto feeds arbitrary bytes to DetectProto and to every
// transform's AppendProto: no panic, no rows on error, a consistent batch
// on success with as many rows as pdata finds records, and the same batch
// as the JSON decoder makes of pdata's OTLP/JSON encoding of the request.
func FuzzOTLPProto(f *testing.F) {
	for _, req := range fuzzSeeds(f, true) {
		f.Add(req)
	}
	f.Add([]byte{})
	prefix := fuzzPrefix(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, name := range []string{"", "x.bin", "traces.pb"} {
			tr, err := DetectProto(name, data)
			if name != "" || err != nil || tr == nil {
				continue
			}
			// Detected by content: pdata reads it as that signal's request.
			if n, err := pdataProtoCount(tr, data); err != nil || n == 0 {
				t.Fatalf("DetectProto picks %s, where pdata finds %d records (%v)", tr.Name(), n, err)
			}
		}
		for _, tr := range All() {
			b, n, err := fuzzAppend(t, tr, data, true)
			fuzzAfterPrefix(t, tr, prefix[tr], data, true, b, err)
			ok, rejected := stored(err)
			if !ok {
				continue
			}
			if want, perr := pdataProtoCount(tr, data); perr != nil || want != n+rejected {
				t.Fatalf("%s: %d rows and %d rejected, pdata finds %d records (%v)", tr.Name(), n, rejected, want, perr)
			}
			// pdata's OTLP/JSON encoding of the request gives the same batch.
			js, jerr := pdataProtoToJSON(tr, data)
			if jerr != nil {
				t.Fatal(jerr)
			}
			if !utf8.Valid(js) {
				// pdata copies invalid UTF-8 from a protobuf string into
				// its JSON, which is then not JSON (RFC 8259 8.1) and is
				// refused. The protobuf path checks only the text it
				// stores (rejects.checkUTF8): the invalid text is in a
				// rejected record or in something that makes no row
				// (e.g. the name of a metric without data points). Found
				// by this fuzzer
				// (testdata/fuzz/FuzzOTLPProto/metric-name-invalid-utf8-no-points).
				b.InvalidUTF8(0, tr.Core(), func(row int, err error) {
					t.Fatalf("%s: protobuf decoded row %d with invalid UTF-8: %v", tr.Name(), row, err)
				})
				continue
			}
			j, _, jerr := fuzzAppend(t, tr, js, false)
			if jok, jrej := stored(jerr); !jok || jrej != rejected {
				t.Fatalf("%s: protobuf decodes (%v), its JSON from pdata: %v\n%s", tr.Name(), err, jerr, js)
			}
			sameBatches(t, tr, b, j)
		}
	})
}

// DetectJSON reports an empty request only for an empty object: "{}"
// followed by more than whitespace is not JSON (AppendJSON says so), and a
// loader that trusts DetectJSON's nil, nil skips such a line silently.
// Found by FuzzOTLPJSON (testdata/fuzz/FuzzOTLPJSON/6d5283d5738fe566).
func TestDetectJSONEmptyRequest(t *testing.T) {
	for _, req := range []string{`{}`, " { }\n", "{\t}\r\n"} {
		if tr, err := DetectJSON([]byte(req)); tr != nil || err != nil {
			t.Errorf("DetectJSON(%q) = %v, %v; want nil, nil", req, tr, err)
		}
	}
	for _, req := range []string{`{}00`, `{}x`, `{} {}`, `{}]`, `{}}`} {
		if tr, err := DetectJSON([]byte(req)); err == nil {
			t.Errorf("DetectJSON(%q) = %v, nil; want an error", req, tr)
		}
		if _, err := Traces.AppendJSON(shred.NewBatch(Traces.Core()), []byte(req)); err == nil {
			t.Errorf("AppendJSON(%q): no error", req)
		}
	}
	for _, req := range []string{``, `[]`, `"x"`, `{`, `{"a"}`} {
		if _, err := DetectJSON([]byte(req)); err == nil {
			t.Errorf("DetectJSON(%q): no error", req)
		}
	}
	if _, err := DetectJSON([]byte(`{"a":1}`)); !errors.Is(err, ErrNotOTLP) {
		t.Errorf("DetectJSON of another object: %v, want ErrNotOTLP", err)
	}
}

// finishPadded finishes b and pads its sparse columns, so that tests read
// row i of every dynamic column as value i.
func finishPadded(b *shred.Batch) error {
	err := b.Finish()
	b.Pad()
	return err
}
