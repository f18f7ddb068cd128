package transforms

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/shredduck/shredduck/shred"
)

var tracesFiles = []string{
	"otel-proto-examples-trace.json",
	"otlp2parquet/trace.json",
	"otlp2parquet/traces.jsonl",
	"otlp2parquet/trace.pb",
	"otlp2parquet/traces.pb",
}

// countSpans counts the spans of a request with encoding/json.
func countSpans(t *testing.T, data []byte) int {
	n := 0
	for _, rs := range objects(field(genericJSON(t, data), "resourceSpans", "resource_spans")) {
		for _, ss := range objects(field(rs, "scopeSpans", "scope_spans")) {
			n += len(objects(ss["spans"]))
		}
	}
	return n
}

// tracesJSON appends one OTLP/JSON request to a new batch and finishes it,
// or returns the error.
func tracesJSON(t *testing.T, req string) (*shred.Batch, error) {
	t.Helper()
	b := shred.NewBatch(Traces.Core())
	if _, err := Traces.AppendJSON(b, []byte(req)); err != nil {
		return nil, err
	}
	if err := finishPadded(b); err != nil {
		t.Fatal(err)
	}
	checkBatch(t, b)
	return b, nil
}

// marshalTraces encodes td as OTLP/JSON and as protobuf, through pdata.
func marshalTraces(t *testing.T, td ptrace.Traces) (js, pb []byte) {
	t.Helper()
	js, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	pb, err = (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	return js, pb
}

func TestTracesFiles(t *testing.T) {
	for _, rel := range tracesFiles {
		t.Run(rel, func(t *testing.T) {
			b := decodeFile(t, Traces, rel)
			want := 0
			for _, req := range readRequests(t, rel) {
				if strings.HasSuffix(rel, ".pb") {
					td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(req)
					if err != nil {
						t.Fatal(err)
					}
					want += td.SpanCount()
					continue
				}
				generic := countSpans(t, req)
				// pdata reads hex ids only; where it can, it must agree.
				if td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(req); err == nil && td.SpanCount() != generic {
					t.Fatalf("pdata counts %d spans, encoding/json %d", td.SpanCount(), generic)
				}
				want += generic
			}
			if want == 0 || b.Rows != want {
				t.Fatalf("%d rows, want %d spans", b.Rows, want)
			}
		})
	}
}

// The official example: upper-case hex ids come out lower-case, the kind as
// its name, attributes at the three levels as typed columns.
func TestTracesExample(t *testing.T) {
	b := decodeFile(t, Traces, "otel-proto-examples-trace.json")
	if b.Rows != 1 {
		t.Fatalf("%d rows", b.Rows)
	}
	expectCells(t, Traces, b, 0, map[string]string{
		"trace_id":                          "5b8efff798038103d269b633813fc60c",
		"span_id":                           "eee19b7ec3c1b174",
		"parent_span_id":                    "eee19b7ec3c1b173",
		"trace_state":                       "NULL",
		"flags":                             "0",
		"name":                              "I'm a server span",
		"kind":                              "SERVER",
		"start_time":                        "1544712660000000000",
		"end_time":                          "1544712661000000000",
		"duration_ns":                       "1000000000",
		"status_code":                       "UNSET",
		"status_message":                    "NULL",
		"service_name":                      "my.service",
		"scope_name":                        "my.library",
		"scope_version":                     "1.0.0",
		"resource_schema_url":               "NULL",
		"scope_schema_url":                  "NULL",
		"dropped_attributes_count":          "0",
		"dropped_events_count":              "0",
		"dropped_links_count":               "0",
		"resource_dropped_attributes_count": "0",
		"scope_dropped_attributes_count":    "0",
		"events":                            "NULL",
		"links":                             "NULL",
		"attributes_overflow":               "NULL",
		"resource_attributes_overflow":      "NULL",
		"scope_attributes_overflow":         "NULL",
		"record:my.span.attr":               "some value",
		"resource:service.name":             "my.service",
		"scope:my.scope.attribute":          "some scope attribute",
	})
	for _, d := range b.Dyn {
		if d.Col.Type.Kind != shred.String {
			t.Errorf("%s %q: kind %s, want VARCHAR", d.Level, d.Key, d.Col.Type.Kind)
		}
	}
	if len(b.Dyn) != 3 {
		t.Errorf("%d dynamic columns, want 3", len(b.Dyn))
	}
}

func TestTracesCoreColumns(t *testing.T) {
	if Traces.Name() != "otlp-traces" || Traces.Table() != "otel_traces" {
		t.Error("name")
	}
	names := []string{}
	for _, c := range Traces.Core() {
		names = append(names, c.Name+" "+c.Type.SQL())
	}
	want := []string{
		"trace_id VARCHAR", "span_id VARCHAR", "parent_span_id VARCHAR", "trace_state VARCHAR", "flags UINTEGER",
		"name VARCHAR",
		"kind ENUM('UNSPECIFIED', 'INTERNAL', 'SERVER', 'CLIENT', 'PRODUCER', 'CONSUMER')",
		"start_time TIMESTAMP_NS", "end_time TIMESTAMP_NS", "duration_ns BIGINT",
		"status_code ENUM('UNSET', 'OK', 'ERROR')", "status_message VARCHAR",
		"service_name VARCHAR", "scope_name VARCHAR", "scope_version VARCHAR",
		"resource_schema_url VARCHAR", "scope_schema_url VARCHAR",
		"dropped_attributes_count UINTEGER", "dropped_events_count UINTEGER", "dropped_links_count UINTEGER",
		"resource_dropped_attributes_count UINTEGER", "scope_dropped_attributes_count UINTEGER",
		`events STRUCT("time" TIMESTAMP_NS, "name" VARCHAR, "attributes" JSON, "dropped_attributes_count" UINTEGER)[]`,
		`links STRUCT("trace_id" VARCHAR, "span_id" VARCHAR, "trace_state" VARCHAR, "flags" UINTEGER, "attributes" JSON, "dropped_attributes_count" UINTEGER)[]`,
		"attributes_overflow JSON", "resource_attributes_overflow JSON", "scope_attributes_overflow JSON",
		"attributes_str MAP(VARCHAR, VARCHAR)",
		"attributes_int MAP(VARCHAR, BIGINT)",
		"attributes_double MAP(VARCHAR, DOUBLE)",
		"attributes_bool MAP(VARCHAR, BOOLEAN)",
		"resource_attributes_str MAP(VARCHAR, VARCHAR)",
		"resource_attributes_int MAP(VARCHAR, BIGINT)",
		"resource_attributes_double MAP(VARCHAR, DOUBLE)",
		"resource_attributes_bool MAP(VARCHAR, BOOLEAN)",
		"scope_attributes_str MAP(VARCHAR, VARCHAR)",
		"scope_attributes_int MAP(VARCHAR, BIGINT)",
		"scope_attributes_double MAP(VARCHAR, DOUBLE)",
		"scope_attributes_bool MAP(VARCHAR, BOOLEAN)",
	}
	if got, w := strings.Join(names, "\n"), strings.Join(want, "\n"); got != w {
		t.Errorf("core columns:\n%s\nwant\n%s", got, w)
	}
	for _, o := range Traces.Overflow() {
		if c := coreCol(t, Traces, shred.NewBatch(Traces.Core()), o); c.Type.Kind != shred.JSON {
			t.Errorf("%s is not JSON", o)
		}
	}
}

// The otlp2parquet traces as OTLP/JSON (base64 ids, enum names) and as
// protobuf hold the same spans.
func TestTracesJSONMatchesProto(t *testing.T) {
	for _, tc := range []struct{ json, pb string }{
		{"otlp2parquet/trace.json", "otlp2parquet/trace.pb"},
		{"otlp2parquet/traces.jsonl", "otlp2parquet/traces.pb"},
	} {
		t.Run(tc.json, func(t *testing.T) {
			j := decodeFile(t, Traces, tc.json)
			p := decodeFile(t, Traces, tc.pb)
			sameBatches(t, Traces, j, p)
		})
	}
}

// Base64 ids decode to the bytes the protobuf file holds, written as hex.
func TestTracesBase64IDs(t *testing.T) {
	j := decodeFile(t, Traces, "otlp2parquet/traces.jsonl")
	p := decodeFile(t, Traces, "otlp2parquet/traces.pb")
	row := 0
	for _, req := range readRequests(t, "otlp2parquet/traces.jsonl") {
		for _, rs := range objects(genericJSON(t, req)["resourceSpans"]) {
			for _, ss := range objects(rs["scopeSpans"]) {
				for _, s := range objects(ss["spans"]) {
					for _, id := range []struct{ key, col string }{
						{"traceId", "trace_id"}, {"spanId", "span_id"}, {"parentSpanId", "parent_span_id"},
					} {
						want := "NULL"
						if v, _ := s[id.key].(string); v != "" {
							raw, err := base64.StdEncoding.DecodeString(v)
							if err != nil {
								t.Fatalf("row %d %s %q: %v", row, id.key, v, err)
							}
							want = hex.EncodeToString(raw)
						}
						got := cell(coreCol(t, Traces, j, id.col), row)
						if got != want {
							t.Errorf("row %d %s: %s, want %s (base64 %v)", row, id.col, got, want, s[id.key])
						}
						if pb := cell(coreCol(t, Traces, p, id.col), row); pb != got {
							t.Errorf("row %d %s: %s, protobuf has %s", row, id.col, got, pb)
						}
					}
					row++
				}
			}
		}
	}
	if row != j.Rows || row == 0 {
		t.Fatalf("checked %d spans of %d", row, j.Rows)
	}
}

// Span events are a list of structs; the otlp2parquet traces have 6, one
// each on 6 spans.
func TestTracesEvents(t *testing.T) {
	for _, rel := range []string{"otlp2parquet/traces.jsonl", "otlp2parquet/traces.pb"} {
		t.Run(rel, func(t *testing.T) {
			b := decodeFile(t, Traces, rel)
			ev := coreCol(t, Traces, b, "events")
			if ev.Type.Kind != shred.List || ev.Child.Type.Kind != shred.Struct {
				t.Fatalf("events is %s", ev.Type.SQL())
			}
			withEvents, names := 0, []string{}
			for r := 0; r < b.Rows; r++ {
				if !ev.IsValid(r) {
					continue
				}
				withEvents++
				for i := ev.Offs[r]; i < ev.Offs[r+1]; i++ {
					names = append(names, cell(ev.Child.Fields[1], int(i)))
				}
			}
			if withEvents != 6 || ev.Child.Len != 6 {
				t.Errorf("%d spans with events, %d events; want 6 and 6", withEvents, ev.Child.Len)
			}
			if got := strings.Join(names, " "); got != "processing validation validation checkpoint checkpoint validation" {
				t.Errorf("event names %s", got)
			}
			first := -1
			for r := 0; r < b.Rows && first < 0; r++ {
				if ev.IsValid(r) {
					first = r
				}
			}
			if got, want := cell(ev, first), "[{time:1760738065711680000 name:processing attributes:NULL dropped_attributes_count:0}]"; got != want {
				t.Errorf("row %d events = %s, want %s", first, got, want)
			}
			if links := coreCol(t, Traces, b, "links"); links.Nulls != b.Rows {
				t.Errorf("%d spans with links, want none", b.Rows-links.Nulls)
			}
		})
	}
}

// Events and links with every field, through both decoders and with
// snake_case keys.
func TestTracesEventsAndLinks(t *testing.T) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "svc")
	ss := rs.ScopeSpans().AppendEmpty()
	s := ss.Spans().AppendEmpty()
	s.SetTraceID(pcommon.TraceID{0xAB, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	s.SetSpanID(pcommon.SpanID{1, 2, 3, 4, 5, 6, 7, 8})
	s.SetName("with events and links")
	s.SetKind(ptrace.SpanKindProducer)
	s.SetStartTimestamp(1000)
	s.SetEndTimestamp(1500)
	s.SetDroppedEventsCount(4)
	s.SetDroppedLinksCount(5)
	s.Status().SetCode(ptrace.StatusCodeError)
	s.Status().SetMessage("boom")
	e := s.Events().AppendEmpty()
	e.SetTimestamp(1200)
	e.SetName("exception")
	e.Attributes().PutStr("exception.message", "bad \"thing\"")
	e.Attributes().PutInt("n", 3)
	e.Attributes().PutEmptySlice("l").AppendEmpty().SetBool(true)
	e.SetDroppedAttributesCount(2)
	s.Events().AppendEmpty() // an event with nothing set
	l := s.Links().AppendEmpty()
	l.SetTraceID(pcommon.TraceID{0xFF, 0xEE, 15: 1})
	l.SetSpanID(pcommon.SpanID{7: 9})
	l.TraceState().FromRaw("vendor=value")
	l.SetFlags(257)
	l.Attributes().PutDouble("weight", 0.5)
	l.SetDroppedAttributesCount(6)
	s.Links().AppendEmpty() // a link with nothing set
	s2 := ss.Spans().AppendEmpty()
	s2.SetName("plain")

	js, pb := marshalTraces(t, td)
	j := decodeRequests(t, Traces, [][]byte{js}, false)
	p := decodeRequests(t, Traces, [][]byte{pb}, true)
	sameBatches(t, Traces, j, p)
	sameBatches(t, Traces, j, decodeRequests(t, Traces, [][]byte{snakeCase(t, js)}, false))

	expectCells(t, Traces, j, 0, map[string]string{
		"trace_id":             "ab0102030405060708090a0b0c0d0e0f",
		"span_id":              "0102030405060708",
		"parent_span_id":       "NULL",
		"kind":                 "PRODUCER",
		"duration_ns":          "500",
		"status_code":          "ERROR",
		"status_message":       "boom",
		"dropped_events_count": "4",
		"dropped_links_count":  "5",
		"service_name":         "svc",
		"events": `[{time:1200 name:exception attributes:{"exception.message":"bad \"thing\"","n":3,"l":[true]} dropped_attributes_count:2}` +
			` {time:NULL name: attributes:NULL dropped_attributes_count:0}]`,
		"links": `[{trace_id:ffee0000000000000000000000000001 span_id:0000000000000009 trace_state:vendor=value flags:257 attributes:{"weight":0.5} dropped_attributes_count:6}` +
			` {trace_id:NULL span_id:NULL trace_state:NULL flags:0 attributes:NULL dropped_attributes_count:0}]`,
	})
	expectCells(t, Traces, j, 1, map[string]string{
		"name": "plain", "kind": "UNSPECIFIED", "events": "NULL", "links": "NULL", "trace_id": "NULL",
		"start_time": "NULL", "duration_ns": "NULL", "status_code": "UNSET",
	})
}

// Enums may be names (with or without their prefix) or numbers, also as
// strings.
func TestTracesEnumNames(t *testing.T) {
	f := func(kind, code, wantKind, wantCode string) {
		t.Helper()
		req := `{"resourceSpans":[{"scopeSpans":[{"spans":[{"kind":` + kind + `,"status":{"code":` + code + `}}]}]}]}`
		b, err := tracesJSON(t, req)
		if err != nil {
			t.Fatalf("%s: %v", req, err)
		}
		expectCells(t, Traces, b, 0, map[string]string{"kind": wantKind, "status_code": wantCode})
	}
	f(`"SPAN_KIND_SERVER"`, `"STATUS_CODE_ERROR"`, "SERVER", "ERROR")
	f(`"SPAN_KIND_UNSPECIFIED"`, `"STATUS_CODE_UNSET"`, "UNSPECIFIED", "UNSET")
	f(`"CONSUMER"`, `"OK"`, "CONSUMER", "OK")
	f(`2`, `2`, "SERVER", "ERROR")
	f(`"4"`, `"1"`, "PRODUCER", "OK")
	f(`null`, `null`, "UNSPECIFIED", "UNSET")
	for i, name := range spanKinds {
		f(`"SPAN_KIND_`+name+`"`, fmt.Sprint(i%3), name, statusCodes[i%3])
	}
}

// A kind or status code outside the enum is bad data in both encodings:
// that span is rejected (RejectedError, naming it and the field), the
// request's other spans are appended, and the rejected span's attributes
// leave no column and no widening behind.
func TestTracesEnumOutOfRange(t *testing.T) {
	good := readRequests(t, "otel-proto-examples-trace.json")[0]
	for _, tc := range []struct {
		name string
		set  func(ptrace.Span)
	}{
		{"kind 9", func(s ptrace.Span) { s.SetKind(ptrace.SpanKind(9)) }},
		{"kind -1", func(s ptrace.Span) { s.SetKind(ptrace.SpanKind(-1)) }},
		{"status code 3", func(s ptrace.Span) { s.Status().SetCode(ptrace.StatusCode(3)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			build := func(withBad bool) ptrace.Traces {
				td := ptrace.NewTraces()
				spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
				first := spans.AppendEmpty()
				first.SetName("fine")
				first.Attributes().PutInt("n", 1)
				if withBad {
					bad := spans.AppendEmpty()
					bad.SetName("bad")
					bad.Attributes().PutStr("n", "widens n to VARCHAR")
					bad.Attributes().PutBool("only.bad", true)
					tc.set(bad)
				}
				spans.AppendEmpty().SetName("fine too")
				return td
			}
			js, pb := marshalTraces(t, build(true))
			wantJS, _ := marshalTraces(t, build(false))
			for _, proto := range []bool{false, true} {
				b := shred.NewBatch(Traces.Core())
				if _, err := Traces.AppendJSON(b, good); err != nil {
					t.Fatal(err)
				}
				var n int
				var err error
				if proto {
					n, err = Traces.AppendProto(b, pb)
				} else {
					n, err = Traces.AppendJSON(b, js)
				}
				var rej *RejectedError
				if !errors.As(err, &rej) {
					t.Fatalf("proto=%v: %v, want a RejectedError", proto, err)
				}
				field := "kind"
				if strings.HasPrefix(tc.name, "status") {
					field = "status.code"
				}
				if rej.Records != 1 || !strings.Contains(rej.Error(), "1 span rejected; first: span 2 of the request: field "+field+":") {
					t.Errorf("proto=%v: %q (%d records)", proto, rej.Error(), rej.Records)
				}
				if n != 2 || b.Rows != 3 {
					t.Fatalf("proto=%v: n=%d rows=%d", proto, n, b.Rows)
				}
				if err := finishPadded(b); err != nil {
					t.Fatal(err)
				}
				checkBatch(t, b)
				sameRows(t, Traces, b, decodeRequests(t, Traces, [][]byte{good, wantJS}, false))
				if c := dynCol(b, shred.Record, "n"); c == nil || c.Type.Kind != shred.Int64 {
					t.Errorf("proto=%v: column n is %v, want BIGINT (the rejected span's string must not widen it)", proto, c)
				}
				if c := dynCol(b, shred.Record, "only.bad"); c != nil && c.Nulls != c.Len {
					t.Errorf("proto=%v: the rejected span's key has values", proto)
				}
			}
		})
	}
	for _, req := range []string{
		`{"resourceSpans":[{"scopeSpans":[{"spans":[{"kind":9}]}]}]}`,
		`{"resourceSpans":[{"scopeSpans":[{"spans":[{"kind":"9"}]}]}]}`,
		`{"resourceSpans":[{"scopeSpans":[{"spans":[{"kind":"SPAN_KIND_LOUD"}]}]}]}`,
		`{"resourceSpans":[{"scopeSpans":[{"spans":[{"kind":2.5}]}]}]}`,
		`{"resourceSpans":[{"scopeSpans":[{"spans":[{"status":{"code":"STATUS_CODE_MAYBE"}}]}]}]}`,
		`{"resourceSpans":[{"scopeSpans":[{"spans":[{"status":{"code":-1}}]}]}]}`,
	} {
		if b, err := tracesJSON(t, req); err == nil || b != nil && b.Rows != 0 {
			t.Errorf("no error for %s", req)
		}
	}
}

// Requests of another signal are errors, not empty traces requests.
func TestTracesWrongSignal(t *testing.T) {
	for _, rel := range []string{
		"otel-proto-examples-logs.json", "otel-proto-examples-metrics.json", "otlp2parquet/logs.jsonl",
	} {
		for i, req := range readRequests(t, rel) {
			for _, data := range [][]byte{req, snakeCase(t, req)} {
				b := shred.NewBatch(Traces.Core())
				n, err := Traces.AppendJSON(b, data)
				if err == nil || n != 0 || b.Rows != 0 {
					t.Fatalf("%s request %d: n=%d rows=%d err=%v", rel, i, n, b.Rows, err)
				}
				if !strings.Contains(err.Error(), ErrWrongSignal.Error()) {
					t.Errorf("%s: error %q does not say %q", rel, err, ErrWrongSignal)
				}
			}
		}
	}
	// A traces key beside another signal's is an error too.
	if _, err := tracesJSON(t, `{"resourceSpans":[],"resourceLogs":[]}`); err == nil {
		t.Error("traces and logs in one request: no error")
	}
	// And the other transforms refuse traces.
	traces := readRequests(t, "otel-proto-examples-trace.json")[0]
	for _, tr := range []Transform{Logs, Metrics} {
		if _, err := tr.AppendJSON(shred.NewBatch(tr.Core()), traces); err == nil {
			t.Errorf("%s takes a traces request", tr.Name())
		}
	}
}

// Keys may come in any order: the resource and schemaUrl after the
// scopeSpans, the scope after the spans, ids and attributes anywhere.
func TestTracesKeyOrder(t *testing.T) {
	const (
		res   = `"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"svc-%d"}},{"key":"r","value":{"intValue":"%d"}}],"droppedAttributesCount":%d}`
		url   = `"schemaUrl":"https://example.com/%d"`
		scope = `"scope":{"name":"lib-%d","version":"v%d","attributes":[{"key":"s","value":{"boolValue":true}}]}`
		span  = `{"traceId":"5B8EFFF798038103D269B633813FC6%02d","spanId":"EEE19B7EC3C1B1%02d","name":"span %d","kind":%d,"attributes":[{"key":"a","value":{"intValue":%d}}]}`
	)
	spans := func(first int) string {
		var parts []string
		for i := first; i < first+3; i++ {
			parts = append(parts, fmt.Sprintf(span, i, i, i, i%6, i))
		}
		return `"spans":[` + strings.Join(parts, ",") + `]`
	}
	scopeSpans := func(r int, scopeLast bool) string {
		var parts []string
		for s := 0; s < 2; s++ {
			first := r*10 + s*3
			sc := fmt.Sprintf(scope, first, first)
			su := fmt.Sprintf(`"schemaUrl":"https://example.com/scope/%d"`, first)
			if scopeLast {
				parts = append(parts, "{"+spans(first)+","+su+","+sc+"}")
			} else {
				parts = append(parts, "{"+sc+","+su+","+spans(first)+"}")
			}
		}
		return `"scopeSpans":[` + strings.Join(parts, ",") + `]`
	}
	request := func(order string) string {
		var blocks []string
		for r := 0; r < 2; r++ {
			rs, u, ss := fmt.Sprintf(res, r, r, r), fmt.Sprintf(url, r), scopeSpans(r, order == "scope after spans")
			switch order {
			case "resource after scopeSpans":
				blocks = append(blocks, "{"+u+","+ss+","+rs+"}")
			case "schemaUrl after scopeSpans":
				blocks = append(blocks, "{"+rs+","+ss+","+u+"}")
			case "everything after scopeSpans":
				blocks = append(blocks, "{"+ss+","+u+","+rs+"}")
			default:
				blocks = append(blocks, "{"+rs+","+u+","+ss+"}")
			}
		}
		return `{"resourceSpans":[` + strings.Join(blocks, ",") + `]}`
	}
	want, err := tracesJSON(t, request("canonical"))
	if err != nil {
		t.Fatal(err)
	}
	if want.Rows != 12 {
		t.Fatalf("%d rows", want.Rows)
	}
	expectCells(t, Traces, want, 11, map[string]string{
		"service_name": "svc-1", "resource:r": "1", "resource_dropped_attributes_count": "1",
		"resource_schema_url": "https://example.com/1", "scope_name": "lib-13", "scope_version": "v13",
		"scope_schema_url": "https://example.com/scope/13", "scope:s": "true", "record:a": "15", "name": "span 15",
	})
	for _, order := range []string{"resource after scopeSpans", "schemaUrl after scopeSpans", "everything after scopeSpans", "scope after spans"} {
		t.Run(order, func(t *testing.T) {
			got, err := tracesJSON(t, request(order))
			if err != nil {
				t.Fatal(err)
			}
			sameBatches(t, Traces, got, want)
		})
	}
}

// A failed request must not change the batch's earlier rows, nor the kind
// of their columns: the rows of a rejected request would otherwise decide
// the table's schema (BIGINT would become VARCHAR) or change values.
func TestTracesFailedRequestKeepsColumnKinds(t *testing.T) {
	attr := func(v string) string { return `[{"key":"x","value":` + v + `}]` }
	for _, tc := range []struct {
		name, good string
		bad        []string // values of x in the failed request, in order
	}{
		{"int to string", `{"intValue":"200"}`, []string{`{"stringValue":"OK"}`}},
		{"int to double", `{"intValue":"7"}`, []string{`{"doubleValue":1.5}`}},
		{"int to double beyond 2^53", `{"intValue":"9007199254740993"}`, []string{`{"doubleValue":1.5}`}},
		{"int to double to string", `{"intValue":"1"}`, []string{`{"doubleValue":1.5}`, `{"stringValue":"x"}`}},
		{"double to string", `{"doubleValue":0.1}`, []string{`{"stringValue":"x"}`}},
		{"bool to string", `{"boolValue":true}`, []string{`{"intValue":"1"}`}},
		{"bytes to string", `{"bytesValue":"AP8="}`, []string{`{"stringValue":"x"}`}},
		{"json to string", `{"arrayValue":{"values":[{"intValue":"1"}]}}`, []string{`{"stringValue":"x"}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			good := `{"resourceSpans":[{"resource":{"attributes":` + attr(tc.good) + `},"scopeSpans":[{"spans":[{"name":"ok","attributes":` + attr(tc.good) + `}]}]}]}`
			var spans []string
			for _, v := range tc.bad {
				spans = append(spans, `{"name":"widens","attributes":`+attr(v)+`}`)
			}
			bad := `{"resourceSpans":[{"resource":{"attributes":` + attr(tc.bad[0]) + `},"scopeSpans":[{"spans":[` +
				strings.Join(spans, ",") + `,{"name":"bad","traceId":"not an id"}]}]}]}`
			want, err := tracesJSON(t, good)
			if err != nil {
				t.Fatal(err)
			}
			b := shred.NewBatch(Traces.Core())
			if _, err := Traces.AppendJSON(b, []byte(good)); err != nil {
				t.Fatal(err)
			}
			if _, err := Traces.AppendJSON(b, []byte(bad)); err == nil {
				t.Fatal("no error")
			}
			if err := finishPadded(b); err != nil {
				t.Fatal(err)
			}
			checkBatch(t, b)
			sameRows(t, Traces, b, want)
		})
	}
}

// A trace id of 24 base64 characters without padding decodes to 18 bytes:
// it must be rejected like any other malformed id, not crash the decoder.
func TestTracesUnpaddedBase64TraceID(t *testing.T) {
	for _, id := range []string{
		"AAAAAAAAAAAAAAAAAAAAAAAA",
		"000000000000000000000000",
		"nXmxo38xgBzRGmcG-0DWvQAA",
	} {
		t.Run(id, func(t *testing.T) {
			for _, key := range []string{"traceId", "links"} {
				req := `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"` + id + `"}]}]}]}`
				if key == "links" {
					req = `{"resourceSpans":[{"scopeSpans":[{"spans":[{"links":[{"traceId":"` + id + `"}]}]}]}]}`
				}
				var err error
				func() {
					defer func() {
						if r := recover(); r != nil {
							err = nil
							t.Errorf("%s %q: panic: %v", key, id, r)
						}
					}()
					b := shred.NewBatch(Traces.Core())
					_, err = Traces.AppendJSON(b, []byte(req))
					if err == nil {
						t.Errorf("%s %q: no error", key, id)
					}
				}()
			}
		})
	}
}

// A KeyValue without "key" has the empty key, as protobuf has it: the JSON
// decoder must not reuse the key of the attribute before it (or of an
// earlier request: the decoder is pooled).
func TestTracesAttributeWithoutKey(t *testing.T) {
	req := `{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"s","attributes":[` +
		`{"key":"a","value":{"intValue":"1"}},{"value":{"intValue":"2"}}]}]}]}]}`
	b, err := tracesJSON(t, req)
	if err != nil {
		t.Fatal(err)
	}
	td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces([]byte(req))
	if err != nil {
		t.Fatal(err)
	}
	_, pb := marshalTraces(t, td)
	sameBatches(t, Traces, b, decodeRequests(t, Traces, [][]byte{pb}, true))
	if got := cell(dynCol(b, shred.Record, "a"), 0); got != "1" {
		t.Errorf(`record "a" = %s, want 1`, got)
	}
}

func TestTracesEmptyAndProbe(t *testing.T) {
	b := shred.NewBatch(Traces.Core())
	for _, req := range []string{
		`{}`, `{"resourceSpans":[]}`, `{"resourceSpans":null}`, `{"resource_spans":[{"scope_spans":[{}]}]}`,
		`{"resourceSpans":[{"scopeSpans":[{"spans":[]}]}]}`, ` {"resourceSpans":[{}]} `,
	} {
		if n, err := Traces.AppendJSON(b, []byte(req)); err != nil || n != 0 {
			t.Errorf("%s: n=%d err=%v", req, n, err)
		}
	}
	if n, err := Traces.AppendProto(b, nil); err != nil || n != 0 {
		t.Errorf("empty protobuf: n=%d err=%v", n, err)
	}
	if _, err := Traces.AppendProto(b, []byte{0xff, 0xff, 0xff}); err == nil {
		t.Error("bad protobuf: no error")
	}
	if b.Rows != 0 {
		t.Errorf("rows %d", b.Rows)
	}
	pb, err := os.ReadFile(filepath.Join(otlpDataDir, "otlp2parquet/traces.pb"))
	if err != nil {
		t.Fatal(err)
	}
	if !Traces.(protoProber).probeProto(pb) {
		t.Error("probeProto rejects traces.pb")
	}
	if tr, err := DetectProto("x.bin", pb); err != nil || tr != Traces {
		t.Errorf("DetectProto: %v, %v", tr, err)
	}
	for _, rel := range []string{"otel-proto-examples-trace.json", "otlp2parquet/trace.json"} {
		if tr, err := DetectJSON(readRequests(t, rel)[0]); err != nil || tr != Traces {
			t.Errorf("DetectJSON(%s): %v, %v", rel, tr, err)
		}
	}
	if tr, err := DetectJSON([]byte(`{"resource_spans":[]}`)); err != nil || tr != Traces {
		t.Errorf("DetectJSON(snake_case): %v, %v", tr, err)
	}
}

// A request that fails inside a span's events or links must take the
// elements it appended with it: shred's truncate leaves a list column's
// child alone when the list itself has no row to drop yet, and the next
// span's list then starts with the rejected request's elements.
func TestTracesFailedRequestLeavesNoListElements(t *testing.T) {
	good := `{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"ok","events":[{"name":"mine"}],"links":[{"spanId":"eee19b7ec3c1b174"}]}]}]}]}`
	want, err := tracesJSON(t, good)
	if err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]string{
		"second event bad": `{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"x","events":[{"name":"leaked"},{"name":5}]}]}]}]}`,
		"event attrs bad":  `{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"x","events":[{"name":"leaked","attributes":[{"key":"k","value":{"intValue":"x"}}]}]}]}]}]}`,
		"second link bad":  `{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"x","links":[{"spanId":"0000000000000001"},{"spanId":"zz"}]}]}]}]}`,
		"after the lists":  `{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"x","events":[{"name":"leaked"}],"links":[{"spanId":"0000000000000001"}],"kind":9}]}]}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			b := shred.NewBatch(Traces.Core())
			if _, err := Traces.AppendJSON(b, []byte(bad)); err == nil {
				t.Fatal("no error")
			}
			if _, err := Traces.AppendJSON(b, []byte(good)); err != nil {
				t.Fatal(err)
			}
			if err := finishPadded(b); err != nil {
				t.Fatal(err)
			}
			checkBatch(t, b)
			sameRows(t, Traces, b, want)
		})
	}
}

// An AnyValue inside an arrayValue or kvlistValue with two value fields
// (a oneof: the last one wins, as at the top level) must still render as
// JSON: the JSON column otherwise holds ["a"1], and DuckDB rejects the
// whole insert ("Malformed JSON").
func TestTracesCompositeAttributeIsJSON(t *testing.T) {
	for _, v := range []string{
		`{"arrayValue":{"values":[{"stringValue":"a","intValue":"1"}]}}`,
		`{"kvlistValue":{"values":[{"key":"k","value":{"boolValue":true,"doubleValue":2.5}}]}}`,
		`{"arrayValue":{"values":[{"arrayValue":{"values":[]},"kvlistValue":{"values":[]}}]}}`,
	} {
		req := `{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"x","attributes":[{"key":"j","value":` + v + `}]}]}]}]}`
		b, err := tracesJSON(t, req)
		if err != nil {
			continue // rejecting the request is fine too
		}
		checkLayout(t, Traces, b)
	}
	top := `{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"x","attributes":[{"key":"j","value":{"stringValue":"a","intValue":"1"}}]}]}]}]}`
	if b, err := tracesJSON(t, top); err != nil || cell(dynCol(b, shred.Record, "j"), 0) != "1" {
		t.Errorf("top-level AnyValue with two values: last should win (%v)", err)
	}
	arr := `{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"x","attributes":[{"key":"j","value":{"arrayValue":{"values":[{"stringValue":"a","intValue":"1"}]}}}]}]}]}]}`
	if b, err := tracesJSON(t, arr); err == nil && cell(dynCol(b, shred.Record, "j"), 0) != "[1]" {
		t.Errorf("AnyValue with two values in an array = %s, want [1] (the last wins)", cell(dynCol(b, shred.Record, "j"), 0))
	}
}

// Protobuf strings that are not UTF-8 (pdata does not check them) must not
// reach a VARCHAR column as they are: DuckDB fails the whole insert
// ("Invalid unicode (byte sequence mismatch) detected in segment
// statistics update"). The spans whose rows would hold such text are
// rejected, naming the field; the others are appended, and the rejected
// ones leave no column behind.
func TestTracesProtoInvalidUTF8(t *testing.T) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "svc\xff")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("lib\xfe")
	s := ss.Spans().AppendEmpty()
	s.SetName("bad\xffname")
	s.Status().SetMessage("\xc3")
	s.Attributes().PutStr("k\xff", "v\xfe")
	s.Events().AppendEmpty().SetName("ev\xff")
	// A second resource: one span with a bad event name, one with a bad
	// attribute key, one fine.
	spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	spans.AppendEmpty().Events().AppendEmpty().SetName("ev\xff")
	spans.AppendEmpty().Attributes().PutStr("key\xfe", "v")
	fine := spans.AppendEmpty()
	fine.SetName("fine")
	fine.Attributes().PutStr("k", "v")
	_, pb := marshalTraces(t, td)
	b := shred.NewBatch(Traces.Core())
	n, err := Traces.AppendProto(b, pb)
	var rej *RejectedError
	if !errors.As(err, &rej) || rej.Records != 3 || n != 1 {
		t.Fatalf("n=%d, %v; want 1 row and 3 spans rejected", n, err)
	}
	if !strings.Contains(rej.First, "span 1 of the request: ") || !strings.Contains(rej.First, "invalid UTF-8") {
		t.Errorf("first rejection: %q", rej.First)
	}
	if err := finishPadded(b); err != nil {
		t.Fatal(err)
	}
	for i, c := range b.Core {
		checkUTF8(t, Traces.Core()[i].Name, c)
	}
	if got := cell(b.Core[tName], 0); got != "fine" {
		t.Errorf("stored span %q, want fine", got)
	}
	for _, d := range b.Dyn {
		if d.Key != "k" && d.Col.Nulls != d.Col.Len { // all NULL: no table column (Schema.Plan)
			t.Errorf("column %s %q has values of a rejected span", d.Level, d.Key)
		}
	}
}

func checkUTF8(t *testing.T, name string, c *shred.Column) {
	t.Helper()
	switch c.Type.Kind {
	case shred.String, shred.JSON:
		for i := 0; i < c.Len; i++ {
			if v := c.Data[c.Offs[i]:c.Offs[i+1]]; c.IsValid(i) && !utf8.Valid(v) {
				t.Errorf("%s row %d: %q is not UTF-8", name, i, v)
			}
		}
	case shred.List:
		checkUTF8(t, name+"[]", c.Child)
	case shred.Struct:
		for i, f := range c.Fields {
			checkUTF8(t, name+"."+c.Type.Fields[i].Name, f)
		}
	}
}

// A key that is not UTF-8 is checked whenever it gets a value, also when
// an earlier request in the batch made its column with only NULLs (an
// attribute without a value): the record is rejected, and no value is
// stored under the key.
func TestTracesProtoInvalidKeyAfterNull(t *testing.T) {
	first := ptrace.NewTraces()
	first.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty().Attributes().PutEmpty("k\xff")
	second := ptrace.NewTraces()
	spans := second.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	spans.AppendEmpty().Attributes().PutStr("k\xff", "v")
	spans.AppendEmpty().SetName("fine")
	_, pb1 := marshalTraces(t, first)
	_, pb2 := marshalTraces(t, second)
	b := shred.NewBatch(Traces.Core())
	if n, err := Traces.AppendProto(b, pb1); n != 1 || err != nil {
		t.Fatalf("first request: n=%d, %v", n, err)
	}
	n, err := Traces.AppendProto(b, pb2)
	var rej *RejectedError
	if !errors.As(err, &rej) || rej.Records != 1 || n != 1 {
		t.Fatalf("second request: n=%d, %v; want 1 row and 1 span rejected", n, err)
	}
	if err := finishPadded(b); err != nil {
		t.Fatal(err)
	}
	for _, d := range b.Dyn {
		if !utf8.ValidString(d.Key) && d.Col.Nulls != d.Col.Len {
			t.Errorf("values stored under the invalid key %q", d.Key)
		}
	}
}
