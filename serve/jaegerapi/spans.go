package jaegerapi

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/shredduck/shredduck/shred"
)

// spanColumns are the core columns a span is rebuilt from, in the order
// of the span row's values (the attribute columns follow them). Times are
// read as nanoseconds, events with theirs, so that no value goes through
// a text form.
var spanColumns = []string{
	"trace_id", "span_id", "parent_span_id", "trace_state", "flags", "name",
	"CAST(kind AS VARCHAR)", "epoch_ns(start_time)", "epoch_ns(end_time)",
	"CAST(status_code AS VARCHAR)", "status_message", "scope_name", "scope_version",
	"resource_schema_url", "scope_schema_url", "dropped_attributes_count",
	"dropped_events_count", "dropped_links_count", "resource_dropped_attributes_count",
	"scope_dropped_attributes_count",
	`CAST(to_json(list_transform(events, lambda e: {'t': epoch_ns(e."time"), 'n': e."name", 'a': CAST(e.attributes AS JSON), 'd': e.dropped_attributes_count})) AS VARCHAR)`,
	`CAST(to_json(list_transform(links, lambda l: {'tid': l.trace_id, 'sid': l.span_id, 'ts': l.trace_state, 'f': l.flags, 'a': CAST(l.attributes AS JSON), 'd': l.dropped_attributes_count})) AS VARCHAR)`,
}

// Positions in a span row.
const (
	colTraceID = iota
	colSpanID
	colParentSpanID
	colTraceState
	colFlags
	colName
	colKind
	colStart
	colEnd
	colStatusCode
	colStatusMessage
	colScopeName
	colScopeVersion
	colResourceSchemaURL
	colScopeSchemaURL
	colDropped
	colDroppedEvents
	colDroppedLinks
	colResourceDropped
	colScopeDropped
	colEvents
	colLinks
	nCore
)

// trace is one trace rebuilt from its rows: a resource per distinct
// resource, a scope per distinct scope within it.
type trace struct {
	id     string
	traces ptrace.Traces
	cut    bool // spans are missing: the answer reached the query limits
}

// cutWarning is the warning of a trace whose spans were cut.
const cutWarning = "shredduck: this trace's spans were cut at the query limits (--query-max-rows, --query-max-bytes); some are missing"

type traceBuilder struct {
	td        ptrace.Traces
	resources map[string]ptrace.ResourceSpans
	scopes    map[string]ptrace.ScopeSpans
}

func newTraceBuilder() *traceBuilder {
	return &traceBuilder{td: ptrace.NewTraces(), resources: map[string]ptrace.ResourceSpans{}, scopes: map[string]ptrace.ScopeSpans{}}
}

// add appends the span of row r, under the resource and scope its columns
// name (made when first seen).
func (b *traceBuilder) add(s *schema, r []any) error {
	attrs := map[shred.Level]pcommon.Map{shred.Record: pcommon.NewMap(), shred.Resource: pcommon.NewMap(), shred.Scope: pcommon.NewMap()}
	for i, k := range s.keys {
		v := r[nCore+i]
		if v == nil {
			continue
		}
		if err := putValue(attrs[k.level], k.key, k.typ, v); err != nil {
			return fmt.Errorf("attribute %q: %w", k.key, err)
		}
	}
	rkey := key(attrs[shred.Resource], r[colResourceSchemaURL], r[colResourceDropped])
	rs, ok := b.resources[rkey]
	if !ok {
		rs = b.td.ResourceSpans().AppendEmpty()
		attrs[shred.Resource].CopyTo(rs.Resource().Attributes())
		rs.SetSchemaUrl(str(r[colResourceSchemaURL]))
		rs.Resource().SetDroppedAttributesCount(u32(r[colResourceDropped]))
		b.resources[rkey] = rs
	}
	skey := rkey + "\x00" + key(attrs[shred.Scope], r[colScopeName], r[colScopeVersion], r[colScopeSchemaURL], r[colScopeDropped])
	ss, ok := b.scopes[skey]
	if !ok {
		ss = rs.ScopeSpans().AppendEmpty()
		attrs[shred.Scope].CopyTo(ss.Scope().Attributes())
		ss.Scope().SetName(str(r[colScopeName]))
		ss.Scope().SetVersion(str(r[colScopeVersion]))
		ss.Scope().SetDroppedAttributesCount(u32(r[colScopeDropped]))
		ss.SetSchemaUrl(str(r[colScopeSchemaURL]))
		b.scopes[skey] = ss
	}
	sp := ss.Spans().AppendEmpty()
	attrs[shred.Record].MoveTo(sp.Attributes())
	return fillSpan(sp, r)
}

// key identifies a resource or scope by its attributes and fields.
func key(m pcommon.Map, fields ...any) string {
	raw, _ := json.Marshal(m.AsRaw())
	return fmt.Sprint(fields...) + "\x00" + string(raw)
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func u32(v any) uint32 {
	n, _ := v.(uint32)
	return n
}

func i64(v any) int64 {
	n, _ := v.(int64)
	return n
}

var spanKinds = map[string]ptrace.SpanKind{
	"UNSPECIFIED": ptrace.SpanKindUnspecified, "INTERNAL": ptrace.SpanKindInternal, "SERVER": ptrace.SpanKindServer,
	"CLIENT": ptrace.SpanKindClient, "PRODUCER": ptrace.SpanKindProducer, "CONSUMER": ptrace.SpanKindConsumer,
}

var statusCodes = map[string]ptrace.StatusCode{"UNSET": ptrace.StatusCodeUnset, "OK": ptrace.StatusCodeOk, "ERROR": ptrace.StatusCodeError}

func fillSpan(sp ptrace.Span, r []any) error {
	var err error
	setID := func(v any, set func([]byte)) {
		s, _ := v.(string)
		if s == "" || err != nil {
			return
		}
		var b []byte
		if b, err = hex.DecodeString(s); err == nil {
			set(b)
		}
	}
	setID(r[colTraceID], func(b []byte) { sp.SetTraceID(pcommon.TraceID(b)) })
	setID(r[colSpanID], func(b []byte) { sp.SetSpanID(pcommon.SpanID(b)) })
	setID(r[colParentSpanID], func(b []byte) { sp.SetParentSpanID(pcommon.SpanID(b)) })
	if err != nil {
		return fmt.Errorf("bad id: %w", err)
	}
	sp.TraceState().FromRaw(str(r[colTraceState]))
	sp.SetFlags(u32(r[colFlags]))
	sp.SetName(str(r[colName]))
	sp.SetKind(spanKinds[str(r[colKind])])
	sp.SetStartTimestamp(pcommon.Timestamp(i64(r[colStart])))
	sp.SetEndTimestamp(pcommon.Timestamp(i64(r[colEnd])))
	sp.Status().SetCode(statusCodes[str(r[colStatusCode])])
	sp.Status().SetMessage(str(r[colStatusMessage]))
	sp.SetDroppedAttributesCount(u32(r[colDropped]))
	sp.SetDroppedEventsCount(u32(r[colDroppedEvents]))
	sp.SetDroppedLinksCount(u32(r[colDroppedLinks]))
	if err := fillEvents(sp.Events(), str(r[colEvents])); err != nil {
		return fmt.Errorf("events: %w", err)
	}
	if err := fillLinks(sp.Links(), str(r[colLinks])); err != nil {
		return fmt.Errorf("links: %w", err)
	}
	return nil
}

func fillEvents(dst ptrace.SpanEventSlice, text string) error {
	if text == "" {
		return nil
	}
	var evs []struct {
		T int64           `json:"t"`
		N string          `json:"n"`
		A json.RawMessage `json:"a"`
		D uint32          `json:"d"`
	}
	if err := json.Unmarshal([]byte(text), &evs); err != nil {
		return err
	}
	for _, e := range evs {
		ev := dst.AppendEmpty()
		ev.SetTimestamp(pcommon.Timestamp(e.T))
		ev.SetName(e.N)
		ev.SetDroppedAttributesCount(e.D)
		if err := putJSONObject(ev.Attributes(), e.A); err != nil {
			return err
		}
	}
	return nil
}

func fillLinks(dst ptrace.SpanLinkSlice, text string) error {
	if text == "" {
		return nil
	}
	var ls []struct {
		TID string          `json:"tid"`
		SID string          `json:"sid"`
		TS  string          `json:"ts"`
		F   uint32          `json:"f"`
		A   json.RawMessage `json:"a"`
		D   uint32          `json:"d"`
	}
	if err := json.Unmarshal([]byte(text), &ls); err != nil {
		return err
	}
	for _, l := range ls {
		lk := dst.AppendEmpty()
		if b, err := hex.DecodeString(l.TID); err == nil && len(b) == 16 {
			lk.SetTraceID(pcommon.TraceID(b))
		}
		if b, err := hex.DecodeString(l.SID); err == nil && len(b) == 8 {
			lk.SetSpanID(pcommon.SpanID(b))
		}
		lk.TraceState().FromRaw(l.TS)
		lk.SetFlags(l.F)
		lk.SetDroppedAttributesCount(l.D)
		if err := putJSONObject(lk.Attributes(), l.A); err != nil {
			return err
		}
	}
	return nil
}

// putValue puts the value v of a key's column of type typ, as the driver
// scanned it, into m.
func putValue(m pcommon.Map, key, typ string, v any) error {
	switch x := v.(type) {
	case string:
		if typ == "JSON" {
			return putJSON(m.PutEmpty(key), json.RawMessage(x))
		}
		m.PutStr(key, x)
	case bool:
		m.PutBool(key, x)
	case int64:
		m.PutInt(key, x)
	case float64:
		m.PutDouble(key, x)
	case []byte:
		m.PutEmptyBytes(key).FromRaw(x)
	default:
		return fmt.Errorf("unexpected %T in a %s column", v, typ)
	}
	return nil
}

// putJSONObject puts the members of a JSON object (the JSON form of
// docs/SCHEMA.md) into m; null or nothing puts none. A JSON string
// holding an object (a virtual column's VARCHAR) is read as that object.
func putJSONObject(m pcommon.Map, raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return err
		}
		raw = json.RawMessage(s)
	}
	v := pcommon.NewValueEmpty()
	if err := putJSON(v, raw); err != nil {
		return err
	}
	if v.Type() == pcommon.ValueTypeMap {
		v.Map().MoveTo(m)
	}
	return nil
}

// putJSON sets v from JSON text in the JSON form: integers as ints, other
// numbers as doubles, objects as maps (members in order), arrays as
// slices.
func putJSON(v pcommon.Value, raw json.RawMessage) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return decodeValue(dec, v)
}

func decodeValue(dec *json.Decoder, v pcommon.Value) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '{' {
			m := v.SetEmptyMap()
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				ks, _ := k.(string)
				if err := decodeValue(dec, m.PutEmpty(ks)); err != nil {
					return err
				}
			}
		} else {
			s := v.SetEmptySlice()
			for dec.More() {
				if err := decodeValue(dec, s.AppendEmpty()); err != nil {
					return err
				}
			}
		}
		_, err = dec.Token() // the closing delimiter
		return err
	case string:
		v.SetStr(t)
	case bool:
		v.SetBool(t)
	case json.Number:
		if n, err := t.Int64(); err == nil {
			v.SetInt(n)
		} else if f, err := t.Float64(); err == nil {
			v.SetDouble(f)
		} else {
			v.SetStr(t.String())
		}
	}
	return nil // null: the empty value
}
