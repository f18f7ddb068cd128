package transforms

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/shredduck/shredduck/shred"
)

// otlpDataDir holds the OTLP fixtures the logs and metrics tests read.
const otlpDataDir = "/work/shared/data/otlp"

// --- helpers shared by the logs and metrics tests ---

// readRequests returns the export requests of a fixture: one per line for
// .jsonl, the whole file otherwise.
func readRequests(t *testing.T, rel string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(otlpDataDir, rel))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(rel, ".jsonl") {
		return [][]byte{data}
	}
	var reqs [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		if line := bytes.TrimSpace(sc.Bytes()); len(line) > 0 {
			reqs = append(reqs, bytes.Clone(line))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return reqs
}

// decodeRequests appends every request to a new batch (protobuf when
// proto is set) and finishes it.
func decodeRequests(t *testing.T, tr Transform, reqs [][]byte, proto bool) *shred.Batch {
	t.Helper()
	b := shred.NewBatch(tr.Core())
	for i, req := range reqs {
		before := b.Rows
		var n int
		var err error
		if proto {
			n, err = tr.AppendProto(b, req)
		} else {
			n, err = tr.AppendJSON(b, req)
		}
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if n != b.Rows-before {
			t.Fatalf("request %d: returned %d rows, appended %d", i, n, b.Rows-before)
		}
	}
	if err := finishPadded(b); err != nil {
		t.Fatal(err)
	}
	checkBatch(t, b)
	return b
}

// decodeFile decodes a fixture by its extension.
func decodeFile(t *testing.T, tr Transform, rel string) *shred.Batch {
	t.Helper()
	return decodeRequests(t, tr, readRequests(t, rel), strings.HasSuffix(rel, ".pb"))
}

// checkBatch checks the layout invariants of every column of a finished batch.
func checkBatch(t *testing.T, b *shred.Batch) {
	t.Helper()
	for i, c := range b.Core {
		if c.Len != b.Rows {
			t.Errorf("core column %d: %d rows, batch %d", i, c.Len, b.Rows)
		}
		checkColumn(t, "core "+strconv.Itoa(i), c)
	}
	for _, d := range b.Dyn {
		if d.Col.Len != b.Rows {
			t.Errorf("%s %q: %d rows, batch %d", d.Level, d.Key, d.Col.Len, b.Rows)
		}
		checkColumn(t, d.Level.String()+" "+d.Key, d.Col)
	}
}

func checkColumn(t *testing.T, name string, c *shred.Column) {
	t.Helper()
	nulls := 0
	for i := 0; i < c.Len; i++ {
		if !c.IsValid(i) {
			nulls++
		}
	}
	if nulls != c.Nulls || len(c.Valid) != (c.Len+7)/8 {
		t.Errorf("%s: Nulls %d, counted %d; %d validity bytes for %d rows", name, c.Nulls, nulls, len(c.Valid), c.Len)
	}
	switch c.Type.Kind {
	case shred.Double:
		if len(c.F64) != c.Len {
			t.Errorf("%s: %d doubles for %d rows", name, len(c.F64), c.Len)
		}
	case shred.String, shred.Blob, shred.JSON, shred.Enum:
		if len(c.Offs) != c.Len+1 || int(c.Offs[c.Len]) != len(c.Data) {
			t.Errorf("%s: %d offsets for %d rows", name, len(c.Offs), c.Len)
		}
	case shred.List:
		if len(c.Offs) != c.Len+1 || int(c.Offs[c.Len]) != c.Child.Len {
			t.Errorf("%s: %d offsets for %d rows, child has %d", name, len(c.Offs), c.Len, c.Child.Len)
		}
		checkColumn(t, name+"[]", c.Child)
	case shred.Struct:
		for i, f := range c.Fields {
			if f.Len != c.Len {
				t.Errorf("%s.%s: %d rows, struct %d", name, c.Type.Fields[i].Name, f.Len, c.Len)
			}
			checkColumn(t, name+"."+c.Type.Fields[i].Name, f)
		}
	case shred.Null:
	default:
		if len(c.I64) != c.Len {
			t.Errorf("%s: %d ints for %d rows", name, len(c.I64), c.Len)
		}
	}
}

// cell renders row i of c as text, for comparisons and messages.
func cell(c *shred.Column, i int) string {
	if !c.IsValid(i) {
		return "NULL"
	}
	switch c.Type.Kind {
	case shred.Double:
		return strconv.FormatFloat(c.F64[i], 'g', -1, 64)
	case shred.String, shred.Blob, shred.JSON, shred.Enum:
		return string(c.Data[c.Offs[i]:c.Offs[i+1]])
	case shred.Bool:
		return strconv.FormatBool(c.I64[i] != 0)
	case shred.Uint64:
		return strconv.FormatUint(uint64(c.I64[i]), 10)
	case shred.List:
		parts := []string{}
		for j := c.Offs[i]; j < c.Offs[i+1]; j++ {
			parts = append(parts, cell(c.Child, int(j)))
		}
		return "[" + strings.Join(parts, " ") + "]"
	case shred.Struct:
		parts := []string{}
		for j, f := range c.Fields {
			parts = append(parts, c.Type.Fields[j].Name+":"+cell(f, i))
		}
		return "{" + strings.Join(parts, " ") + "}"
	}
	return strconv.FormatInt(c.I64[i], 10)
}

// coreCol returns the core column called name.
func coreCol(t *testing.T, tr Transform, b *shred.Batch, name string) *shred.Column {
	t.Helper()
	for i, c := range tr.Core() {
		if c.Name == name {
			return b.Core[i]
		}
	}
	t.Fatalf("no core column %q", name)
	return nil
}

// dynCol returns the dynamic column of (level, key), or nil.
func dynCol(b *shred.Batch, level shred.Level, key string) *shred.Column {
	for _, d := range b.Dyn {
		if d.Level == level && d.Key == key {
			return d.Col
		}
	}
	return nil
}

// dynColLike is dynCol for the batch column of the key of the type like
// has, among the key's column and its strays (shred.DynColumn.Family),
// else the key's column.
func dynColLike(b *shred.Batch, level shred.Level, key string, like *shred.Column) *shred.Column {
	for _, d := range b.Dyn {
		if d.Level == level && d.Key == key && d.Col.Type.SQL() == like.Type.SQL() {
			return d.Col
		}
	}
	return dynCol(b, level, key)
}

// dynCell is row's cell of the key: of whichever of its batch columns
// (its column, its strays) holds a value there; NULL if none.
func dynCell(b *shred.Batch, level shred.Level, key string, row int) (string, bool) {
	found := false
	for _, d := range b.Dyn {
		if d.Level == level && d.Key == key {
			found = true
			if row < d.Col.Len && d.Col.IsValid(row) {
				return cell(d.Col, row), true
			}
		}
	}
	return "NULL", found
}

// expectCells checks row i of the named columns; a name "record:key"
// (or "resource:", "scope:") names a dynamic column.
func expectCells(t *testing.T, tr Transform, b *shred.Batch, row int, want map[string]string) {
	t.Helper()
	for name, w := range want {
		var c *shred.Column
		if lvl, key, ok := strings.Cut(name, ":"); ok {
			level, _ := shred.ParseLevel(lvl)
			got, ok := dynCell(b, level, key, row)
			if !ok {
				t.Errorf("row %d: no %s column %q", row, lvl, key)
			} else if got != w {
				t.Errorf("row %d %s = %s, want %s", row, name, got, w)
			}
			continue
		} else {
			c = coreCol(t, tr, b, name)
		}
		if got := cell(c, row); got != w {
			t.Errorf("row %d %s = %s, want %s", row, name, got, w)
		}
	}
}

// sameBatches checks that two batches hold the same rows: core columns
// cell by cell, dynamic columns by (level, key) with the same kind.
func sameBatches(t *testing.T, tr Transform, a, b *shred.Batch) {
	t.Helper()
	if a.Rows != b.Rows {
		t.Fatalf("rows: %d vs %d", a.Rows, b.Rows)
	}
	core := tr.Core()
	for ci := range core {
		for r := 0; r < a.Rows; r++ {
			if x, y := cell(a.Core[ci], r), cell(b.Core[ci], r); x != y {
				t.Errorf("row %d %s: %s vs %s", r, core[ci].Name, x, y)
			}
		}
	}
	if len(a.Dyn) != len(b.Dyn) {
		t.Errorf("dynamic columns: %d vs %d", len(a.Dyn), len(b.Dyn))
	}
	for _, d := range a.Dyn {
		o := dynColLike(b, d.Level, d.Key, d.Col)
		if o == nil {
			t.Errorf("%s %q only in the first batch", d.Level, d.Key)
			continue
		}
		if d.Col.Type.Kind != o.Type.Kind {
			t.Errorf("%s %q: %s vs %s", d.Level, d.Key, d.Col.Type.SQL(), o.Type.SQL())
		}
		for r := 0; r < a.Rows; r++ {
			if x, y := cell(d.Col, r), cell(o, r); x != y {
				t.Errorf("row %d %s %q: %s vs %s", r, d.Level, d.Key, x, y)
			}
		}
	}
}

// sameRows is sameBatches for a batch that may have extra dynamic columns
// left behind by a failed request: those must hold only NULLs.
// (shred.Batch.Truncate keeps the columns a removed row created.)
func sameRows(t *testing.T, tr Transform, got, want *shred.Batch) {
	t.Helper()
	trimmed := *got
	trimmed.Dyn = nil
	for _, d := range got.Dyn {
		if dynCol(want, d.Level, d.Key) != nil {
			trimmed.Dyn = append(trimmed.Dyn, d)
		} else if d.Col.Nulls != d.Col.Len {
			t.Errorf("%s %q: values left behind by a failed request", d.Level, d.Key)
		}
	}
	sameBatches(t, tr, &trimmed, want)
}

// genericJSON decodes a request with encoding/json (numbers kept exact).
func genericJSON(t *testing.T, data []byte) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// field returns m[camel] or m[snake].
func field(m map[string]any, camel, snake string) any {
	if v, ok := m[camel]; ok {
		return v
	}
	return m[snake]
}

func objects(v any) []map[string]any {
	a, _ := v.([]any)
	out := make([]map[string]any, 0, len(a))
	for _, e := range a {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

var camelRE = regexp.MustCompile(`[A-Z]`)

// snakeKeys renames every object key of a JSON document to snake_case
// (timeUnixNano -> time_unix_nano): the proto field names.
func snakeKeys(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			k = camelRE.ReplaceAllStringFunc(k, func(s string) string { return "_" + strings.ToLower(s) })
			m[k] = snakeKeys(e)
		}
		return m
	case []any:
		for i, e := range x {
			x[i] = snakeKeys(e)
		}
	}
	return v
}

func snakeCase(t *testing.T, data []byte) []byte {
	t.Helper()
	out, err := json.Marshal(snakeKeys(genericJSON(t, data)))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// --- logs ---

var logsFiles = []string{
	"otel-proto-examples-logs.json",
	"otel-proto-examples-events.json",
	"otlp2parquet/log.json",
	"otlp2parquet/logs.jsonl",
	"otlp2parquet/logs.pb",
}

// countLogRecords counts the log records of a request with encoding/json.
func countLogRecords(t *testing.T, data []byte) int {
	n := 0
	for _, rl := range objects(field(genericJSON(t, data), "resourceLogs", "resource_logs")) {
		for _, sl := range objects(field(rl, "scopeLogs", "scope_logs")) {
			n += len(objects(field(sl, "logRecords", "log_records")))
		}
	}
	return n
}

func TestLogsFiles(t *testing.T) {
	for _, rel := range logsFiles {
		t.Run(rel, func(t *testing.T) {
			b := decodeFile(t, Logs, rel)
			want := 0
			for _, req := range readRequests(t, rel) {
				if strings.HasSuffix(rel, ".pb") {
					ld, err := (&plog.ProtoUnmarshaler{}).UnmarshalLogs(req)
					if err != nil {
						t.Fatal(err)
					}
					want += ld.LogRecordCount()
					continue
				}
				generic := countLogRecords(t, req)
				// pdata reads hex ids only; where it can, it must agree.
				if ld, err := (&plog.JSONUnmarshaler{}).UnmarshalLogs(req); err == nil && ld.LogRecordCount() != generic {
					t.Fatalf("pdata counts %d records, encoding/json %d", ld.LogRecordCount(), generic)
				}
				want += generic
			}
			if want == 0 || b.Rows != want {
				t.Fatalf("%d rows, want %d log records", b.Rows, want)
			}
		})
	}
}

// The NDJSON and protobuf versions of the otlp2parquet logs hold the same
// records (the JSON with base64 ids and severity names).
func TestLogsJSONMatchesProto(t *testing.T) {
	j := decodeFile(t, Logs, "otlp2parquet/logs.jsonl")
	p := decodeFile(t, Logs, "otlp2parquet/logs.pb")
	sameBatches(t, Logs, j, p)
}

// For every fixture pdata can read, the JSON path and the protobuf path
// (the same request re-encoded by pdata) give the same columns, and so does
// the request with snake_case keys.
func TestLogsJSONProtoRoundTrip(t *testing.T) {
	for _, rel := range []string{"otel-proto-examples-logs.json", "otel-proto-examples-events.json"} {
		t.Run(rel, func(t *testing.T) {
			reqs := readRequests(t, rel)
			ld, err := (&plog.JSONUnmarshaler{}).UnmarshalLogs(reqs[0])
			if err != nil {
				t.Fatal(err)
			}
			pb, err := (&plog.ProtoMarshaler{}).MarshalLogs(ld)
			if err != nil {
				t.Fatal(err)
			}
			j := decodeRequests(t, Logs, reqs, false)
			sameBatches(t, Logs, j, decodeRequests(t, Logs, [][]byte{pb}, true))
			sameBatches(t, Logs, j, decodeRequests(t, Logs, [][]byte{snakeCase(t, reqs[0])}, false))
		})
	}
}

func TestLogsExample(t *testing.T) {
	b := decodeFile(t, Logs, "otel-proto-examples-logs.json")
	expectCells(t, Logs, b, 0, map[string]string{
		"time":                              "1544712660300000000",
		"observed_time":                     "1544712660300000000",
		"severity_number":                   "10",
		"severity_text":                     "Information",
		"body":                              "Example log record",
		"body_type":                         "string",
		"trace_id":                          "5b8efff798038103d269b633813fc60c",
		"span_id":                           "eee19b7ec3c1b174",
		"flags":                             "0",
		"event_name":                        "NULL",
		"dropped_attributes_count":          "0",
		"service_name":                      "my.service",
		"scope_name":                        "my.library",
		"scope_version":                     "1.0.0",
		"resource_schema_url":               "NULL",
		"scope_schema_url":                  "NULL",
		"resource_dropped_attributes_count": "0",
		"scope_dropped_attributes_count":    "0",
		"attributes_overflow":               "NULL",
		"resource_attributes_overflow":      "NULL",
		"scope_attributes_overflow":         "NULL",
		"record:string.attribute":           "some string",
		"record:boolean.attribute":          "true",
		"record:int.attribute":              "10",
		"record:double.attribute":           "637.704",
		"record:array.attribute":            `["many","values"]`,
		"record:map.attribute":              `{"some.map.key":"some value"}`,
		"resource:service.name":             "my.service",
		"scope:my.scope.attribute":          "some scope attribute",
	})
	kinds := map[string]shred.Kind{
		"string.attribute": shred.String, "boolean.attribute": shred.Bool, "int.attribute": shred.Int64,
		"double.attribute": shred.Double, "array.attribute": shred.JSON, "map.attribute": shred.JSON,
	}
	for k, want := range kinds {
		if c := dynCol(b, shred.Record, k); c == nil || c.Type.Kind != want {
			t.Errorf("%s: want kind %s", k, want)
		}
	}
}

func TestLogsEventsExample(t *testing.T) {
	b := decodeFile(t, Logs, "otel-proto-examples-events.json")
	expectCells(t, Logs, b, 0, map[string]string{
		"event_name":             "browser.page_view",
		"severity_number":        "9",
		"severity_text":          "test severity text",
		"body_type":              "kvlist",
		"body":                   `{"type":0,"url":"https://www.guidgenerator.com/online-guid-generator.aspx","referrer":"https://wwww.google.com","title":"Free Online GUID Generator"}`,
		"trace_id":               "NULL",
		"span_id":                "NULL",
		"record:event.attribute": "some event attribute",
	})
	var obj map[string]any
	if err := json.Unmarshal([]byte(cell(coreCol(t, Logs, b, "body"), 0)), &obj); err != nil || obj["title"] != "Free Online GUID Generator" {
		t.Errorf("body is not the kvlist as a JSON object: %v %v", obj, err)
	}
}

func TestLogsOtlp2parquet(t *testing.T) {
	b := decodeFile(t, Logs, "otlp2parquet/log.json")
	expectCells(t, Logs, b, 0, map[string]string{
		"severity_number":            "9", // "SEVERITY_NUMBER_INFO"
		"severity_text":              "INFO",
		"observed_time":              "NULL",
		"body_type":                  "string",
		"service_name":               "frontend-proxy",
		"scope_name":                 "NULL",
		"resource:zone_name":         "",
		"record:destination.address": "172.18.0.25",
	})
	// ids are base64 in this file: they come out as hex.
	if tid := cell(coreCol(t, Logs, b, "trace_id"), 0); !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(tid) {
		t.Errorf("trace_id %q", tid)
	}
	body := cell(coreCol(t, Logs, b, "body"), 0)
	if !strings.HasPrefix(body, `[2025-10-17T22:52:52.254Z] "GET /api/products/LS4PSXUNUM`) || !strings.HasSuffix(body, " - -\n") {
		t.Errorf("body not verbatim: %q", body)
	}
}

// Every body kind, through both decoders.
func TestLogsBodyKinds(t *testing.T) {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.SetSchemaUrl("https://opentelemetry.io/schemas/1.26.0")
	rl.Resource().Attributes().PutStr("service.name", "svc")
	rl.Resource().SetDroppedAttributesCount(3)
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName("lib")
	sl.Scope().SetDroppedAttributesCount(4)
	add := func(set func(v pcommon.Value)) plog.LogRecord {
		r := sl.LogRecords().AppendEmpty()
		set(r.Body())
		return r
	}
	r := add(func(v pcommon.Value) { v.SetStr("tab\there \"quoted\" ünï") })
	r.SetTimestamp(1)
	r.SetTraceID(pcommon.TraceID{1, 2, 3})
	r.SetSpanID(pcommon.SpanID{0xab})
	r.SetFlags(plog.DefaultLogRecordFlags.WithIsSampled(true))
	r.SetSeverityNumber(plog.SeverityNumberFatal4)
	r.SetEventName("ev")
	r.SetDroppedAttributesCount(7)
	r.Attributes().PutInt("n", 1)
	add(func(v pcommon.Value) { v.SetInt(-42) }).Attributes().PutStr("n", "two") // n widens to VARCHAR
	add(func(v pcommon.Value) { v.SetDouble(1.5) })
	add(func(v pcommon.Value) { v.SetDouble(math.NaN()) })
	add(func(v pcommon.Value) { v.SetBool(false) })
	add(func(v pcommon.Value) { v.SetEmptyBytes().FromRaw([]byte{0xff, 0x00, 0x10}) })
	add(func(v pcommon.Value) {
		s := v.SetEmptySlice()
		s.AppendEmpty().SetStr("a")
		s.AppendEmpty().SetInt(2)
		s.AppendEmpty().SetEmptyMap().PutBool("x", true)
	})
	add(func(v pcommon.Value) {
		m := v.SetEmptyMap()
		m.PutDouble("d", 0.25)
		m.PutEmptySlice("l").AppendEmpty().SetEmptyBytes().FromRaw([]byte("hi"))
	})
	add(func(pcommon.Value) {}) // no body
	add(func(v pcommon.Value) { v.SetStr("") })

	js, err := (&plog.JSONMarshaler{}).MarshalLogs(ld)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := (&plog.ProtoMarshaler{}).MarshalLogs(ld)
	if err != nil {
		t.Fatal(err)
	}
	j := decodeRequests(t, Logs, [][]byte{js}, false)
	p := decodeRequests(t, Logs, [][]byte{pb}, true)
	sameBatches(t, Logs, j, p)
	sameBatches(t, Logs, j, decodeRequests(t, Logs, [][]byte{snakeCase(t, js)}, false))

	want := []struct{ body, typ string }{
		{"tab\there \"quoted\" ünï", "string"},
		{"-42", "int"},
		{"1.5", "double"},
		{`"NaN"`, "double"},
		{"false", "bool"},
		{`"/wAQ"`, "bytes"},
		{`["a",2,{"x":true}]`, "array"},
		{`{"d":0.25,"l":["aGk="]}`, "kvlist"},
		{"NULL", "NULL"},
		{"", "string"},
	}
	if j.Rows != len(want) {
		t.Fatalf("%d rows", j.Rows)
	}
	for i, w := range want {
		expectCells(t, Logs, j, i, map[string]string{"body": w.body, "body_type": w.typ})
		if w.typ != "string" && w.typ != "NULL" && !json.Valid([]byte(w.body)) {
			t.Errorf("row %d: body %s is not JSON", i, w.body)
		}
	}
	expectCells(t, Logs, j, 0, map[string]string{
		"time": "1", "observed_time": "NULL", "severity_number": "24", "trace_id": "01020300000000000000000000000000",
		"span_id": "ab00000000000000", "flags": "1", "event_name": "ev", "dropped_attributes_count": "7",
		"resource_schema_url": "https://opentelemetry.io/schemas/1.26.0", "resource_dropped_attributes_count": "3",
		"scope_dropped_attributes_count": "4", "scope_name": "lib", "scope_version": "NULL", "service_name": "svc",
		"record:n": "1",
	})
	expectCells(t, Logs, j, 1, map[string]string{"record:n": "two", "severity_number": "0", "trace_id": "NULL"})
	expectCells(t, Logs, j, 2, map[string]string{"record:n": "NULL"})
}

// Lenient JSON: severity names with and without prefix, numbers as strings,
// keys in any order, unknown keys, nulls.
func TestLogsJSONLenient(t *testing.T) {
	req := `{"resourceLogs":[{"scopeLogs":[{"logRecords":[
		{"severityNumber":"SEVERITY_NUMBER_WARN3","unknown":{"a":[1,2]},"body":{"intValue":"12"},"flags":"1"},
		{"severityNumber":"ERROR","body":{"doubleValue":"Infinity"},"traceId":"","spanId":null},
		{"severity_number":"17","time_unix_nano":5,"body":null,"severityText":null},
		{"body":{"bytesValue":"aGk="},"attributes":[{"value":{"stringValue":"v"},"key":"late"}]}
	]}],"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"s"}}]}}]}`
	b := decodeRequests(t, Logs, [][]byte{[]byte(req)}, false)
	expectCells(t, Logs, b, 0, map[string]string{"severity_number": "15", "body": "12", "body_type": "int", "flags": "1", "service_name": "s"})
	expectCells(t, Logs, b, 1, map[string]string{"severity_number": "17", "body": `"Infinity"`, "body_type": "double", "trace_id": "NULL", "span_id": "NULL", "service_name": "s"})
	expectCells(t, Logs, b, 2, map[string]string{"severity_number": "17", "time": "5", "body": "NULL", "body_type": "NULL", "severity_text": "NULL"})
	expectCells(t, Logs, b, 3, map[string]string{"body": `"aGk="`, "body_type": "bytes", "record:late": "v", "service_name": "s"})
}

func TestLogsErrors(t *testing.T) {
	good := readRequests(t, "otel-proto-examples-logs.json")[0]
	traces, err := os.ReadFile(filepath.Join(otlpDataDir, "otel-proto-examples-trace.json"))
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := os.ReadFile(filepath.Join(otlpDataDir, "otel-proto-examples-metrics.json"))
	if err != nil {
		t.Fatal(err)
	}
	twoRecords := `{"resourceLogs":[{"resource":{"attributes":[{"key":"r","value":{"intValue":1}}]},"scopeLogs":[{"logRecords":[
		{"body":{"stringValue":"ok"},"attributes":[{"key":"new.key","value":{"stringValue":"x"}}]},
		{"attributes":[{"key":"other","value":{"boolValue":true}}],"traceId":"zz"}]}]}]}`
	bad := map[string][]byte{
		"truncated":            good[:len(good)/2],
		"not json":             []byte("hello"),
		"trailing data":        append(bytes.Clone(good), "{}"...),
		"traces request":       traces,
		"metrics request":      metrics,
		"bad id in 2nd record": []byte(twoRecords),
		"bad severity":         []byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"severityNumber":"LOUD"}]}]}]}`),
		"severity overflow":    []byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"severityNumber":4294967296}]}]}]}`),
		"bad bytes body":       []byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"bytesValue":"!!"}}]}]}]}`),
		"records not an array": []byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":{}}]}]}`),
	}
	for name, data := range bad {
		t.Run(name, func(t *testing.T) {
			b := shred.NewBatch(Logs.Core())
			if _, err := Logs.AppendJSON(b, good); err != nil {
				t.Fatal(err)
			}
			n, err := Logs.AppendJSON(b, data)
			if err == nil {
				t.Fatal("no error")
			}
			if n != 0 || b.Rows != 1 {
				t.Fatalf("n=%d, rows=%d after a failed request", n, b.Rows)
			}
			if err := finishPadded(b); err != nil {
				t.Fatal(err)
			}
			checkBatch(t, b)
			sameRows(t, Logs, b, decodeRequests(t, Logs, [][]byte{good}, false))
		})
	}
	b := shred.NewBatch(Logs.Core())
	if _, err := Logs.AppendProto(b, []byte{0xff, 0xff, 0xff}); err == nil {
		t.Error("bad protobuf: no error")
	}
	if b.Rows != 0 {
		t.Errorf("rows %d", b.Rows)
	}
}

func TestLogsEmptyAndProbe(t *testing.T) {
	b := shred.NewBatch(Logs.Core())
	for _, req := range []string{`{}`, `{"resourceLogs":[]}`, `{"resourceLogs":[{"scopeLogs":[{}]}]}`} {
		if n, err := Logs.AppendJSON(b, []byte(req)); err != nil || n != 0 {
			t.Errorf("%s: n=%d err=%v", req, n, err)
		}
	}
	if n, err := Logs.AppendProto(b, nil); err != nil || n != 0 {
		t.Errorf("empty protobuf: n=%d err=%v", n, err)
	}
	pb := readRequests(t, "otlp2parquet/logs.pb")[0]
	if !Logs.(protoProber).probeProto(pb) {
		t.Error("probeProto rejects logs.pb")
	}
	if Logs.(protoProber).probeProto(nil) {
		t.Error("probeProto accepts an empty request")
	}
	if tr, err := DetectProto("x.bin", pb); err != nil || tr != Logs {
		t.Errorf("DetectProto: %v, %v", tr, err)
	}
	if tr, err := DetectJSON(readRequests(t, "otlp2parquet/log.json")[0]); err != nil || tr != Logs {
		t.Errorf("DetectJSON: %v, %v", tr, err)
	}
	if Logs.Name() != "otlp-logs" || Logs.Table() != "otel_logs" {
		t.Error("name")
	}
	names := []string{}
	for _, c := range Logs.Core() {
		names = append(names, c.Name)
	}
	want := "time observed_time severity_number severity_text body body_type trace_id span_id flags event_name dropped_attributes_count service_name scope_name scope_version resource_schema_url scope_schema_url resource_dropped_attributes_count scope_dropped_attributes_count attributes_overflow resource_attributes_overflow scope_attributes_overflow attributes_str attributes_int attributes_double attributes_bool resource_attributes_str resource_attributes_int resource_attributes_double resource_attributes_bool scope_attributes_str scope_attributes_int scope_attributes_double scope_attributes_bool"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("core columns:\n%s\nwant\n%s", got, want)
	}
	for _, o := range Logs.Overflow() {
		if c := coreCol(t, Logs, shred.NewBatch(Logs.Core()), o); c.Type.Kind != shred.JSON {
			t.Errorf("%s is not JSON", o)
		}
	}
}

func BenchmarkLogsJSON(b *testing.B) {
	data, err := os.ReadFile(filepath.Join(otlpDataDir, "otlp2parquet/logs.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	reqs := bytes.Split(bytes.TrimSpace(data), []byte("\n"))
	batch := shred.NewBatch(Logs.Core())
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		for _, req := range reqs {
			if _, err := Logs.AppendJSON(batch, req); err != nil {
				b.Fatal(err)
			}
		}
		batch.Truncate(0)
	}
}
