package transforms

import (
	"math"
	"strconv"

	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/shredduck/shredduck/shred"
)

// Logs is the otlp-logs transform: one row per log record.
var Logs Transform = logsTransform{}

// Core columns of otel_logs, in table order.
const (
	lTime = iota
	lObservedTime
	lSeverityNumber
	lSeverityText
	lBody
	lBodyType
	lTraceID
	lSpanID
	lFlags
	lEventName
	lDroppedAttributes
	lServiceName
	lScopeName
	lScopeVersion
	lResourceSchemaURL
	lScopeSchemaURL
	lResourceDroppedAttributes
	lScopeDroppedAttributes
	lAttributesOverflow
	lResourceAttributesOverflow
	lScopeAttributesOverflow
)

var logsCore = []shred.CoreColumn{
	lTime:                       {Name: "time", Type: shred.TTimestampNS},
	lObservedTime:               {Name: "observed_time", Type: shred.TTimestampNS},
	lSeverityNumber:             {Name: "severity_number", Type: shred.TInt32},
	lSeverityText:               {Name: "severity_text", Type: shred.TString},
	lBody:                       {Name: "body", Type: shred.TString},
	lBodyType:                   {Name: "body_type", Type: shred.EnumOf(bodyTypes[bodyString:]...)},
	lTraceID:                    {Name: "trace_id", Type: shred.TString},
	lSpanID:                     {Name: "span_id", Type: shred.TString},
	lFlags:                      {Name: "flags", Type: shred.TUint32},
	lEventName:                  {Name: "event_name", Type: shred.TString, Deferred: true},
	lDroppedAttributes:          {Name: "dropped_attributes_count", Type: shred.TUint32, Deferred: true, Zero: true},
	lServiceName:                {Name: "service_name", Type: shred.TString},
	lScopeName:                  {Name: "scope_name", Type: shred.TString},
	lScopeVersion:               {Name: "scope_version", Type: shred.TString},
	lResourceSchemaURL:          {Name: "resource_schema_url", Type: shred.TString, Deferred: true},
	lScopeSchemaURL:             {Name: "scope_schema_url", Type: shred.TString, Deferred: true},
	lResourceDroppedAttributes:  {Name: "resource_dropped_attributes_count", Type: shred.TUint32, Deferred: true, Zero: true},
	lScopeDroppedAttributes:     {Name: "scope_dropped_attributes_count", Type: shred.TUint32, Deferred: true, Zero: true},
	lAttributesOverflow:         {Name: "attributes_overflow", Type: shred.TJSON, Deferred: true},
	lResourceAttributesOverflow: {Name: "resource_attributes_overflow", Type: shred.TJSON, Deferred: true},
	lScopeAttributesOverflow:    {Name: "scope_attributes_overflow", Type: shred.TJSON, Deferred: true},
}

// logsCoreMaps is logsCore and the overflow maps after it.
var logsCoreMaps = withOverflowMaps(logsCore)

// severityNumbers names the SeverityNumber enum values (SEVERITY_NUMBER_ + name).
var severityNumbers = [...]string{
	"UNSPECIFIED",
	"TRACE", "TRACE2", "TRACE3", "TRACE4",
	"DEBUG", "DEBUG2", "DEBUG3", "DEBUG4",
	"INFO", "INFO2", "INFO3", "INFO4",
	"WARN", "WARN2", "WARN3", "WARN4",
	"ERROR", "ERROR2", "ERROR3", "ERROR4",
	"FATAL", "FATAL2", "FATAL3", "FATAL4",
}

// Body types, the values of body_type.
const (
	bodyNone = iota
	bodyString
	bodyInt
	bodyDouble
	bodyBool
	bodyBytes
	bodyArray
	bodyKvlist
)

var bodyTypes = [...]string{
	bodyNone: "", bodyString: "string", bodyInt: "int", bodyDouble: "double", bodyBool: "bool",
	bodyBytes: "bytes", bodyArray: "array", bodyKvlist: "kvlist",
}

type logsTransform struct{}

func (logsTransform) Name() string             { return OTLPLogs }
func (logsTransform) Table() string            { return "otel_logs" }
func (logsTransform) Core() []shred.CoreColumn { return logsCoreMaps }
func (logsTransform) Overflow() [shred.NumLevels]string {
	return otlpOverflow
}

// logRecord is one log record's scalar fields, whichever decoder read them.
type logRecord struct {
	time, observed  uint64
	severity        int32
	severityText    []byte
	body            []byte // the body's text: a string verbatim, anything else as JSON
	bodyType        int
	traceID, spanID []byte
	flags           uint32
	eventName       []byte
	droppedAttrs    uint32
}

// checkTimes rejects a time no TIMESTAMP_NS column holds (timeCheck).
func (r *logRecord) checkTimes() error {
	var c timeCheck
	c.check(r.time, "timeUnixNano")
	c.check(r.observed, "observedTimeUnixNano")
	return c.err
}

var logsBlock = blockCols{
	service: lServiceName, resURL: lResourceSchemaURL, resDropped: lResourceDroppedAttributes,
	scopeName: lScopeName, scopeVersion: lScopeVersion, scopeURL: lScopeSchemaURL, scopeDropped: lScopeDroppedAttributes,
}

// appendLogCore appends the core columns of one log record row except the
// resource and scope columns (filled per block).
func appendLogCore(b *shred.Batch, r *logRecord) {
	c := b.Core
	c[lTime].AppendTime(r.time)
	c[lObservedTime].AppendTime(r.observed)
	c[lSeverityNumber].AppendInt(int64(r.severity))
	appendBytesOrNull(c[lSeverityText], r.severityText)
	if r.bodyType == bodyNone {
		c[lBody].AppendNull()
		c[lBodyType].AppendNull()
	} else {
		c[lBody].AppendBytes(r.body)
		c[lBodyType].AppendString(bodyTypes[r.bodyType])
	}
	appendID(c[lTraceID], r.traceID)
	appendID(c[lSpanID], r.spanID)
	c[lFlags].AppendInt(int64(r.flags))
	appendBytesOrNull(c[lEventName], r.eventName)
	c[lDroppedAttributes].AppendInt(int64(r.droppedAttrs))
	c[lAttributesOverflow].AppendNull()
	c[lResourceAttributesOverflow].AppendNull()
	c[lScopeAttributesOverflow].AppendNull()
	for _, m := range c[len(logsCore):] {
		m.AppendNull() // the overflow maps, which the schema fills
	}
}

// --- protobuf: DetectProto asks pdata (AppendProto: otlp_*_pb.go) ---

func (logsTransform) probeProto(data []byte) bool {
	ld, err := (&plog.ProtoUnmarshaler{}).UnmarshalLogs(data)
	return err == nil && ld.LogRecordCount() > 0
}

// --- OTLP/JSON ---

var logsKeys = signalKeys{
	top:     [2]string{"resourceLogs", "resource_logs"},
	scopes:  [2]string{"scopeLogs", "scope_logs"},
	records: [2]string{"logRecords", "log_records"},
	noun:    "log record",
}

func (logsTransform) AppendJSON(b *shred.Batch, data []byte) (int, error) {
	d := getDecoder()
	defer putDecoder(d)
	return d.walk(b, data, &logsKeys, &logsBlock, (*decoder).logRecord)
}

// logRecord parses one LogRecord object into a row.
func (d *decoder) logRecord(b *shred.Batch) {
	it := &d.it
	if !it.ObjectStart() {
		return
	}
	var r logRecord
	row := b.Rows
	sevText, body, eventName := d.bufs[0][:0], d.bufs[1][:0], d.bufs[2][:0]
	for key, ok := it.NextKey(); ok; key, ok = it.NextKey() {
		switch string(key) {
		case "timeUnixNano", "time_unix_nano":
			r.time = d.readUint64()
		case "observedTimeUnixNano", "observed_time_unix_nano":
			r.observed = d.readUint64()
		case "severityNumber", "severity_number":
			off := it.Offset()
			v := d.readEnum(severityNumbers[:], "SEVERITY_NUMBER_")
			if v < math.MinInt32 || v > math.MaxInt32 {
				it.ReportError(off, "severityNumber out of range")
			}
			r.severity = int32(v)
		case "severityText", "severity_text":
			sevText = d.readBytes(sevText)
		case "body":
			body, r.bodyType = d.logBody(body[:0])
		case "attributes":
			d.recordAttrs(b, row)
		case "droppedAttributesCount", "dropped_attributes_count":
			r.droppedAttrs = d.readUint32()
		case "flags":
			r.flags = d.readUint32()
		case "traceId", "trace_id":
			r.traceID = d.readID(0, 16, "traceId")
		case "spanId", "span_id":
			r.spanID = d.readID(1, 8, "spanId")
		case "eventName", "event_name":
			eventName = d.readBytes(eventName)
		default:
			it.Skip()
		}
	}
	d.bufs[0], d.bufs[1], d.bufs[2] = sevText, body, eventName
	if it.Err() != nil {
		return
	}
	if err := r.checkTimes(); err != nil {
		b.Truncate(row) // its attributes
		d.rej.reject(err)
		return
	}
	r.severityText, r.body, r.eventName = sevText, body, eventName
	appendLogCore(b, &r)
	b.EndRow()
}

// logBody reads a log body (an AnyValue) and renders it into dst: a string
// verbatim, any other kind as JSON (kvlist as an object, array as an array,
// bytes as a base64 string). It returns bodyNone for null or an empty value.
func (d *decoder) logBody(dst []byte) ([]byte, int) {
	v := d.anyValue(&d.it)
	switch v.Kind {
	case shred.String:
		return append(dst, v.Bytes...), bodyString
	case shred.Int64:
		return strconv.AppendInt(dst, v.Int, 10), bodyInt
	case shred.Double:
		return shred.AppendJSON(dst, v), bodyDouble
	case shred.Bool:
		return shred.AppendJSON(dst, v), bodyBool
	case shred.Blob:
		return shred.AppendJSON(dst, v), bodyBytes
	case shred.JSON:
		t := bodyKvlist
		if len(v.Bytes) > 0 && v.Bytes[0] == '[' {
			t = bodyArray
		}
		return append(dst, v.Bytes...), t
	}
	return dst, bodyNone
}
