package transforms

import (
	"bytes"
	"fmt"
	"strconv"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/shredduck/shredduck/shred"
)

// Traces is the otlp-traces transform: one row per span.
var Traces Transform = tracesTransform{}

// Core columns of otel_traces, in table order.
const (
	tTraceID = iota
	tSpanID
	tParentSpanID
	tTraceState
	tFlags
	tName
	tKind
	tStartTime
	tEndTime
	tDurationNS
	tStatusCode
	tStatusMessage
	tServiceName
	tScopeName
	tScopeVersion
	tResourceSchemaURL
	tScopeSchemaURL
	tDroppedAttributes
	tDroppedEvents
	tDroppedLinks
	tResourceDroppedAttributes
	tScopeDroppedAttributes
	tEvents
	tLinks
	tAttributesOverflow
	tResourceAttributesOverflow
	tScopeAttributesOverflow
)

var eventType = shred.StructOf(
	shred.Field{Name: "time", Type: shred.TTimestampNS},
	shred.Field{Name: "name", Type: shred.TString},
	shred.Field{Name: "attributes", Type: shred.TJSON},
	shred.Field{Name: "dropped_attributes_count", Type: shred.TUint32},
)

var linkType = shred.StructOf(
	shred.Field{Name: "trace_id", Type: shred.TString},
	shred.Field{Name: "span_id", Type: shred.TString},
	shred.Field{Name: "trace_state", Type: shred.TString},
	shred.Field{Name: "flags", Type: shred.TUint32},
	shred.Field{Name: "attributes", Type: shred.TJSON},
	shred.Field{Name: "dropped_attributes_count", Type: shred.TUint32},
)

var tracesCore = []shred.CoreColumn{
	tTraceID:                    {Name: "trace_id", Type: shred.TString},
	tSpanID:                     {Name: "span_id", Type: shred.TString},
	tParentSpanID:               {Name: "parent_span_id", Type: shred.TString},
	tTraceState:                 {Name: "trace_state", Type: shred.TString, Deferred: true},
	tFlags:                      {Name: "flags", Type: shred.TUint32},
	tName:                       {Name: "name", Type: shred.TString},
	tKind:                       {Name: "kind", Type: shred.EnumOf(spanKinds[:]...)},
	tStartTime:                  {Name: "start_time", Type: shred.TTimestampNS},
	tEndTime:                    {Name: "end_time", Type: shred.TTimestampNS},
	tDurationNS:                 {Name: "duration_ns", Type: shred.TInt64},
	tStatusCode:                 {Name: "status_code", Type: shred.EnumOf(statusCodes[:]...)},
	tStatusMessage:              {Name: "status_message", Type: shred.TString, Deferred: true},
	tServiceName:                {Name: "service_name", Type: shred.TString},
	tScopeName:                  {Name: "scope_name", Type: shred.TString},
	tScopeVersion:               {Name: "scope_version", Type: shred.TString},
	tResourceSchemaURL:          {Name: "resource_schema_url", Type: shred.TString, Deferred: true},
	tScopeSchemaURL:             {Name: "scope_schema_url", Type: shred.TString, Deferred: true},
	tDroppedAttributes:          {Name: "dropped_attributes_count", Type: shred.TUint32, Deferred: true, Zero: true},
	tDroppedEvents:              {Name: "dropped_events_count", Type: shred.TUint32, Deferred: true, Zero: true},
	tDroppedLinks:               {Name: "dropped_links_count", Type: shred.TUint32, Deferred: true, Zero: true},
	tResourceDroppedAttributes:  {Name: "resource_dropped_attributes_count", Type: shred.TUint32, Deferred: true, Zero: true},
	tScopeDroppedAttributes:     {Name: "scope_dropped_attributes_count", Type: shred.TUint32, Deferred: true, Zero: true},
	tEvents:                     {Name: "events", Type: shred.ListOf(eventType), Deferred: true},
	tLinks:                      {Name: "links", Type: shred.ListOf(linkType), Deferred: true},
	tAttributesOverflow:         {Name: "attributes_overflow", Type: shred.TJSON, Deferred: true},
	tResourceAttributesOverflow: {Name: "resource_attributes_overflow", Type: shred.TJSON, Deferred: true},
	tScopeAttributesOverflow:    {Name: "scope_attributes_overflow", Type: shred.TJSON, Deferred: true},
}

// tracesCoreMaps is tracesCore and the overflow maps after it.
var tracesCoreMaps = withOverflowMaps(tracesCore)

var spanKinds = [...]string{"UNSPECIFIED", "INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER"}
var statusCodes = [...]string{"UNSET", "OK", "ERROR"}

func enumName(names []string, v int64) string {
	if v >= 0 && v < int64(len(names)) {
		return names[v]
	}
	return "UNKNOWN_" + itoa(v)
}

// checkEnum rejects a value that is not one of an ENUM column's names:
// such a record is bad data, reported rather than stored as something else.
func checkEnum(names []string, v int64, field string) error {
	if v < 0 || v >= int64(len(names)) {
		return fmt.Errorf("field %s: %d is not a valid value (0-%d)", field, v, len(names)-1)
	}
	return nil
}

// checkEnums checks the span's kind and status code, which are ENUM
// columns.
func (s *span) checkEnums() error {
	if err := checkEnum(spanKinds[:], s.kind, "kind"); err != nil {
		return err
	}
	return checkEnum(statusCodes[:], s.statusCode, "status.code")
}

// check checks the span's enums and its times, given the check of its
// events' times.
func (s *span) check(times *timeCheck) error {
	if err := s.checkEnums(); err != nil {
		return err
	}
	times.check(s.start, "startTimeUnixNano")
	times.check(s.end, "endTimeUnixNano")
	return times.err
}

type tracesTransform struct{}

func (tracesTransform) Name() string             { return OTLPTraces }
func (tracesTransform) Table() string            { return "otel_traces" }
func (tracesTransform) Core() []shred.CoreColumn { return tracesCoreMaps }
func (tracesTransform) Overflow() [shred.NumLevels]string {
	return otlpOverflow
}

// span is one span's scalar fields, whichever decoder read them.
type span struct {
	traceID, spanID, parentSpanID []byte
	traceState, name, statusMsg   []byte
	flags                         uint32
	kind, statusCode              int64
	start, end                    uint64
	droppedAttrs, droppedEvents   uint32
	droppedLinks                  uint32
}

var tracesBlock = blockCols{
	service: tServiceName, resURL: tResourceSchemaURL, resDropped: tResourceDroppedAttributes,
	scopeName: tScopeName, scopeVersion: tScopeVersion, scopeURL: tScopeSchemaURL, scopeDropped: tScopeDroppedAttributes,
}

// appendSpanCore appends the core columns of one span row except events,
// links (which the decoders append themselves) and the resource and scope
// columns (filled per block).
func appendSpanCore(b *shred.Batch, s *span) {
	c := b.Core
	appendID(c[tTraceID], s.traceID)
	appendID(c[tSpanID], s.spanID)
	appendID(c[tParentSpanID], s.parentSpanID)
	appendBytesOrNull(c[tTraceState], s.traceState)
	c[tFlags].AppendInt(int64(s.flags))
	c[tName].AppendBytes(s.name)
	c[tKind].AppendString(enumName(spanKinds[:], s.kind))
	c[tStartTime].AppendTime(s.start)
	c[tEndTime].AppendTime(s.end)
	if s.start != 0 && s.end != 0 {
		c[tDurationNS].AppendInt(int64(s.end - s.start))
	} else {
		c[tDurationNS].AppendNull()
	}
	c[tStatusCode].AppendString(enumName(statusCodes[:], s.statusCode))
	appendBytesOrNull(c[tStatusMessage], s.statusMsg)
	c[tDroppedAttributes].AppendInt(int64(s.droppedAttrs))
	c[tDroppedEvents].AppendInt(int64(s.droppedEvents))
	c[tDroppedLinks].AppendInt(int64(s.droppedLinks))
	c[tAttributesOverflow].AppendNull()
	c[tResourceAttributesOverflow].AppendNull()
	c[tScopeAttributesOverflow].AppendNull()
	for _, m := range c[len(tracesCore):] {
		m.AppendNull() // the overflow maps, which the schema fills
	}
}

func appendBytesOrNull(c *shred.Column, b []byte) {
	if len(b) == 0 {
		c.AppendNull()
		return
	}
	c.AppendBytes(b)
}

// --- protobuf: DetectProto asks pdata (AppendProto: otlp_*_pb.go) ---

func (tracesTransform) probeProto(data []byte) bool {
	td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(data)
	return err == nil && td.SpanCount() > 0
}

// --- OTLP/JSON ---

var tracesKeys = signalKeys{
	top:     [2]string{"resourceSpans", "resource_spans"},
	scopes:  [2]string{"scopeSpans", "scope_spans"},
	records: [2]string{"spans", "spans"},
	noun:    "span",
}

func (tracesTransform) AppendJSON(b *shred.Batch, data []byte) (int, error) {
	d := getDecoder()
	defer putDecoder(d)
	return d.walk(b, data, &tracesKeys, &tracesBlock, (*decoder).span)
}

// span parses one Span object into a row.
func (d *decoder) span(b *shred.Batch) {
	it := &d.it
	if !it.ObjectStart() {
		return
	}
	var s span
	row := b.Rows
	d.times.reset()
	traceState, name, statusMsg := d.bufs[0][:0], d.bufs[1][:0], d.bufs[2][:0]
	eventsDone, linksDone := false, false
	for key, ok := it.NextKey(); ok; key, ok = it.NextKey() {
		switch string(key) {
		case "traceId", "trace_id":
			s.traceID = d.readID(0, 16, "traceId")
		case "spanId", "span_id":
			s.spanID = d.readID(1, 8, "spanId")
		case "parentSpanId", "parent_span_id":
			s.parentSpanID = d.readID(2, 8, "parentSpanId")
		case "traceState", "trace_state":
			traceState = d.readBytes(traceState)
		case "flags":
			s.flags = d.readUint32()
		case "name":
			name = d.readBytes(name)
		case "kind":
			s.kind = d.readEnum(spanKinds[:], "SPAN_KIND_")
		case "startTimeUnixNano", "start_time_unix_nano":
			s.start = d.readUint64()
		case "endTimeUnixNano", "end_time_unix_nano":
			s.end = d.readUint64()
		case "attributes":
			d.recordAttrs(b, row)
		case "droppedAttributesCount", "dropped_attributes_count":
			s.droppedAttrs = d.readUint32()
		case "events":
			if !eventsDone {
				d.events(b.Core[tEvents])
				eventsDone = true
			} else {
				it.Skip()
			}
		case "droppedEventsCount", "dropped_events_count":
			s.droppedEvents = d.readUint32()
		case "links":
			if !linksDone {
				d.links(b.Core[tLinks])
				linksDone = true
			} else {
				it.Skip()
			}
		case "droppedLinksCount", "dropped_links_count":
			s.droppedLinks = d.readUint32()
		case "status":
			statusMsg = d.status(&s, statusMsg)
		default:
			it.Skip()
		}
	}
	if it.Err() != nil {
		return
	}
	if err := s.check(&d.times); err != nil {
		b.Truncate(row) // its attributes, events and links
		d.rej.reject(err)
		return
	}
	if !eventsDone {
		b.Core[tEvents].AppendNull()
	}
	if !linksDone {
		b.Core[tLinks].AppendNull()
	}
	s.traceState, s.name, s.statusMsg = traceState, name, statusMsg
	d.bufs[0], d.bufs[1], d.bufs[2] = traceState, name, statusMsg
	appendSpanCore(b, &s)
	b.EndRow()
}

func (d *decoder) status(s *span, msg []byte) []byte {
	it := &d.it
	if it.ReadNull() || !it.ObjectStart() {
		return msg
	}
	for key, ok := it.NextKey(); ok; key, ok = it.NextKey() {
		switch string(key) {
		case "message":
			msg = d.readBytes(msg)
		case "code":
			s.statusCode = d.readEnum(statusCodes[:], "STATUS_CODE_")
		default:
			it.Skip()
		}
	}
	return msg
}

// readEnum reads an enum as an integer (the OTLP/JSON rule) or, leniently,
// as its proto name (SPAN_KIND_SERVER) as protojson producers may write.
func (d *decoder) readEnum(names []string, prefix string) int64 {
	it := &d.it
	if it.ReadNull() {
		return 0
	}
	if it.Next() != jsonKindString {
		return it.ReadInt64()
	}
	off := it.Offset()
	s := it.ReadString()
	name := bytes.TrimPrefix(s, []byte(prefix))
	for i, n := range names {
		if string(name) == n {
			return int64(i)
		}
	}
	if v, err := strconv.ParseInt(string(s), 10, 32); err == nil {
		return v
	}
	it.ReportError(off, "unknown enum value "+strconv.Quote(string(s)))
	return 0
}

func (d *decoder) events(c *shred.Column) {
	it := &d.it
	if it.ReadNull() || !it.ArrayStart() {
		c.AppendNull()
		return
	}
	f := c.Child.Fields
	n := 0
	for it.NextElem() {
		if !it.ObjectStart() {
			return
		}
		var t uint64
		var dropped uint32
		name := d.bufs[3][:0]
		attrsDone := false
		for key, ok := it.NextKey(); ok; key, ok = it.NextKey() {
			switch string(key) {
			case "timeUnixNano", "time_unix_nano":
				t = d.readUint64()
			case "name":
				name = d.readBytes(name)
			case "attributes":
				if !attrsDone {
					d.attrsJSON(f[2])
					attrsDone = true
				} else {
					it.Skip()
				}
			case "droppedAttributesCount", "dropped_attributes_count":
				dropped = d.readUint32()
			default:
				it.Skip()
			}
		}
		if it.Err() != nil {
			return
		}
		if !attrsDone {
			f[2].AppendNull()
		}
		d.times.check(t, "events.timeUnixNano")
		f[0].AppendTime(t)
		f[1].AppendBytes(name)
		d.bufs[3] = name
		f[3].AppendInt(int64(dropped))
		c.Child.EndStruct()
		n++
	}
	if n == 0 {
		c.AppendNull()
		return
	}
	c.EndList()
}

func (d *decoder) links(c *shred.Column) {
	it := &d.it
	if it.ReadNull() || !it.ArrayStart() {
		c.AppendNull()
		return
	}
	f := c.Child.Fields
	n := 0
	for it.NextElem() {
		if !it.ObjectStart() {
			return
		}
		var tid, sid []byte
		state := d.bufs[3][:0]
		var flags, dropped uint32
		attrsDone := false
		for key, ok := it.NextKey(); ok; key, ok = it.NextKey() {
			switch string(key) {
			case "traceId", "trace_id":
				tid = d.readID(3, 16, "links.traceId")
			case "spanId", "span_id":
				sid = d.readID(4, 8, "links.spanId")
			case "traceState", "trace_state":
				state = d.readBytes(state)
			case "flags":
				flags = d.readUint32()
			case "attributes":
				if !attrsDone {
					d.attrsJSON(f[4])
					attrsDone = true
				} else {
					it.Skip()
				}
			case "droppedAttributesCount", "dropped_attributes_count":
				dropped = d.readUint32()
			default:
				it.Skip()
			}
		}
		if it.Err() != nil {
			return
		}
		if !attrsDone {
			f[4].AppendNull()
		}
		appendID(f[0], tid)
		appendID(f[1], sid)
		appendBytesOrNull(f[2], state)
		d.bufs[3] = state
		f[3].AppendInt(int64(flags))
		f[5].AppendInt(int64(dropped))
		c.Child.EndStruct()
		n++
	}
	if n == 0 {
		c.AppendNull()
		return
	}
	c.EndList()
}
