package transforms

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/shredduck/shredduck/shred"
)

// OTLP/protobuf traces, logs and metrics are decoded straight from the wire into
// columns, as OTLP/JSON is: no pdata objects. pdata's generated decoder
// allocated a struct per record, key-value and value, and was a sixth of
// the server's CPU on the streaming benchmark. The rules follow protobuf and pdata: a
// field may come in any order and more than once (a scalar's last value
// wins, a repeated field's values add up, a message merges), unknown
// fields are skipped, a known field with another wire type is an error,
// and a trace or span id is empty or exactly 16 or 8 bytes.
// (FuzzTracesProtoDirect, FuzzLogsProtoDirect and FuzzMetricsProtoDirect
// check it against pdata.)

// pbField is one field of a protobuf message.
type pbField struct {
	num protowire.Number
	typ protowire.Type
	u   uint64 // varint, fixed32 and fixed64 values
	b   []byte // length-delimited value
}

// pbNext reads the field at the start of buf and returns the rest.
func pbNext(buf []byte) (f pbField, rest []byte, err error) {
	// The tag as pdata reads it: any positive int32 field number (protowire
	// would refuse those beyond 2^29-1, which pdata skips as unknown).
	tag, n := pbVarint(buf)
	if n < 0 {
		return f, nil, protowire.ParseError(n)
	}
	num, typ := int32(tag>>3), protowire.Type(tag&7)
	if num <= 0 {
		return f, nil, fmt.Errorf("proto: illegal field number %d", num)
	}
	buf = buf[n:]
	f.num, f.typ = protowire.Number(num), typ
	switch typ {
	case protowire.VarintType:
		f.u, n = pbVarint(buf)
	case protowire.Fixed32Type:
		if len(buf) < 4 {
			return f, nil, io.ErrUnexpectedEOF
		}
		f.u, n = uint64(binary.LittleEndian.Uint32(buf)), 4
	case protowire.Fixed64Type:
		if len(buf) < 8 {
			return f, nil, io.ErrUnexpectedEOF
		}
		f.u, n = binary.LittleEndian.Uint64(buf), 8
	case protowire.BytesType:
		var l uint64
		l, n = pbVarint(buf)
		if n >= 0 {
			if l > uint64(len(buf)-n) {
				return f, nil, io.ErrUnexpectedEOF
			}
			f.b = buf[n : n+int(l) : n+int(l)]
			n += int(l)
		}
	default:
		// Deprecated groups: pdata mis-skips any but empty ones, and no
		// OTLP encoder writes them.
		return f, nil, errPBGroup
	}
	if n < 0 {
		return f, nil, fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
	}
	return f, buf[n:], nil
}

// pbVarint reads a varint as pdata does: up to ten bytes, the bits beyond
// 64 of the tenth dropped (protowire.ConsumeVarint refuses a tenth byte
// above 1; found by FuzzTracesProtoDirect,
// testdata/fuzz/FuzzTracesProtoDirect/76dba093ebd83344). A negative n is
// a protowire error code, for protowire.ParseError.
func pbVarint(buf []byte) (v uint64, n int) {
	if len(buf) > 0 && buf[0] < 0x80 {
		return uint64(buf[0]), 1
	}
	for i, b := range buf {
		if i == 10 {
			return 0, pbErrOverflow
		}
		v |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			return v, i + 1
		}
	}
	if len(buf) >= 10 {
		return 0, pbErrOverflow
	}
	return 0, pbErrTruncated
}

// protowire's error codes (protowire.ParseError).
const (
	pbErrTruncated = -1
	pbErrOverflow  = -3
)

// want checks a known field's wire type.
func (f pbField) want(typ protowire.Type, msg, name string) error {
	if f.typ != typ {
		return fmt.Errorf("proto: wrong wire type %d for field %s.%s", f.typ, msg, name)
	}
	return nil
}

// pbEach calls fn for every field of a message.
func pbEach(msg []byte, fn func(f pbField) error) error {
	for len(msg) > 0 {
		f, rest, err := pbNext(msg)
		if err != nil {
			return err
		}
		if err := fn(f); err != nil {
			return err
		}
		msg = rest
	}
	return nil
}

// pbID checks an id's length: empty (absent) or exactly size bytes.
func pbID(b []byte, size int, name string) ([]byte, error) {
	if len(b) != 0 && len(b) != size {
		return nil, fmt.Errorf("invalid length %d for %s (want %d bytes)", len(b), name, size)
	}
	return b, nil
}

// pbDecoder holds the scratch state of one request's decoding.
type pbDecoder struct {
	res, scope scopeInfo
	attrs      [][]byte // KeyValue messages of the record being decoded
	events     [][]byte
	links      [][]byte
	statuses   [][]byte
	bodies     [][]byte
	subAttrs   [][]byte // KeyValue messages of the event or link being decoded
	scratch    []byte
	valueBuf   []byte
	vals       [][]byte
	rej        rejects
	times      timeCheck // of the record being decoded
	// metrics
	datas                                []metricData
	meta, exemplars, quantiles           [][]byte
	metaJSON                             []byte
	counts, bounds, posCounts, negCounts []uint64
}

var pbDecoderPool = sync.Pool{New: func() any { return new(pbDecoder) }}

// The three levels above a record have the same field numbers in the
// three signals: the export request (opentelemetry/proto/collector/{trace,
// logs,metrics}/v1/*_service.proto), the resource block and the scope block
// (opentelemetry/proto/{trace,logs,metrics}/v1/*.proto). A line that is
// the same in the three is quoted once.

// ExportTraceServiceRequest, ExportLogsServiceRequest, ExportMetricsServiceRequest.
const (
	// ExportTraceServiceRequest: repeated opentelemetry.proto.trace.v1.ResourceSpans resource_spans = 1;
	// ExportLogsServiceRequest: repeated opentelemetry.proto.logs.v1.ResourceLogs resource_logs = 1;
	// ExportMetricsServiceRequest: repeated opentelemetry.proto.metrics.v1.ResourceMetrics resource_metrics = 1;
	requestResources = 1
)

// ResourceSpans, ResourceLogs, ResourceMetrics.
const (
	resourceBlockResource = 1 // opentelemetry.proto.resource.v1.Resource resource = 1;
	// ResourceSpans: repeated ScopeSpans scope_spans = 2;
	// ResourceLogs: repeated ScopeLogs scope_logs = 2;
	// ResourceMetrics: repeated ScopeMetrics scope_metrics = 2;
	resourceBlockScopes    = 2
	resourceBlockSchemaURL = 3 // string schema_url = 3;
	// Reserved since OTLP 0.19; the lines are v0.18.0's. From 0.15 to 0.18
	// the field carried the scope blocks in their form before 0.15
	// (wire-compatible with ScopeSpans, ScopeLogs, ScopeMetrics):
	// ResourceSpans: repeated InstrumentationLibrarySpans instrumentation_library_spans = 1000 [deprecated = true];
	// ResourceLogs: repeated InstrumentationLibraryLogs instrumentation_library_logs = 1000 [deprecated = true];
	// ResourceMetrics: repeated InstrumentationLibraryMetrics instrumentation_library_metrics = 1000 [deprecated = true];
	resourceBlockLibraries = 1000
)

// ScopeSpans, ScopeLogs, ScopeMetrics.
const (
	scopeBlockScope = 1 // opentelemetry.proto.common.v1.InstrumentationScope scope = 1;
	// ScopeSpans: repeated Span spans = 2;
	// ScopeLogs: repeated LogRecord log_records = 2;
	// ScopeMetrics: repeated Metric metrics = 2;
	scopeBlockRecords   = 2
	scopeBlockSchemaURL = 3 // string schema_url = 3;
)

// pbSignal is what differs between the signals' requests (the levels above
// a record share their field numbers: requestResources, resourceBlock...,
// scopeBlock...).
type pbSignal struct {
	block  *blockCols
	core   []shred.CoreColumn
	noun   string // one record, in messages
	record func(d *pbDecoder, b *shred.Batch, msg []byte) error
	// pointRecords: the messages record reads hold several records each,
	// which it numbers itself (rejects.begin, rejects.rows): a metric's data
	// points.
	pointRecords bool
}

// appendPB decodes one export request of sig into b. Records with data no
// column can take are left out (RejectedError).
func appendPB(b *shred.Batch, data []byte, sig *pbSignal) (int, error) {
	d := pbDecoderPool.Get().(*pbDecoder)
	defer pbDecoderPool.Put(d)
	start := b.Rows
	d.rej.reset(sig.noun)
	if err := d.rej.passes(b, func() error { return d.decode(b, data, sig) }); err != nil {
		return 0, err
	}
	return b.Rows - start, d.rej.result()
}

// decode is one pass of appendPB: it appends the records not skipped and
// adds those to reject to d.rej.
func (d *pbDecoder) decode(b *shred.Batch, data []byte, sig *pbSignal) error {
	start := b.Rows
	b.Mark()
	err := pbEach(data, func(f pbField) error {
		if f.num != requestResources {
			return nil
		}
		if err := f.want(protowire.BytesType, "Export*ServiceRequest", "resource_*"); err != nil {
			return err
		}
		return d.resourceBlock(b, f.b, sig)
	})
	if err == nil {
		// A limit reached in the last record's fills, or by its EndRow.
		err = b.Err()
	}
	if err != nil {
		b.Rollback(start)
		return protoError(len(data), err)
	}
	d.rej.checkUTF8(b, start, sig.core)
	return nil
}

func (d *pbDecoder) resourceBlock(b *shred.Batch, msg []byte, sig *pbSignal) error {
	d.res.reset()
	resStart := b.Rows
	var scopes, deprecated [][]byte
	err := pbEach(msg, func(f pbField) error {
		switch f.num {
		case resourceBlockResource:
			if err := f.want(protowire.BytesType, "Resource*", "resource"); err != nil {
				return err
			}
			return d.resource(f.b)
		case resourceBlockScopes, resourceBlockLibraries:
			if err := f.want(protowire.BytesType, "Resource*", "scope_*"); err != nil {
				return err
			}
			if f.num == resourceBlockScopes {
				scopes = append(scopes, f.b)
			} else {
				deprecated = append(deprecated, f.b)
			}
		case resourceBlockSchemaURL:
			if err := f.want(protowire.BytesType, "Resource*", "schema_url"); err != nil {
				return err
			}
			d.res.schemaURL = string(f.b)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// resourceBlockLibraries holds the scope blocks in OTLP's form before
	// 0.15 (instrumentation library spans, logs): pdata takes them only
	// when resourceBlockScopes is absent, but decodes them either way.
	if len(scopes) == 0 {
		scopes = deprecated
	} else if len(deprecated) > 0 {
		scratch := shred.NewBatch(sig.core)
		d.rej.off = true // none of these is stored
		for _, ss := range deprecated {
			if err := d.scopeBlock(scratch, ss, sig); err != nil {
				return err
			}
		}
		d.rej.off = false
		d.scope.reset()
	}
	for _, ss := range scopes {
		if err := d.scopeBlock(b, ss, sig); err != nil {
			return err
		}
	}
	sig.block.fillResource(b, &d.res, resStart)
	return b.Err()
}

// Resource, opentelemetry/proto/resource/v1/resource.proto.
const (
	resourceAttributes        = 1 // Resource: repeated opentelemetry.proto.common.v1.KeyValue attributes = 1;
	resourceDroppedAttributes = 2 // Resource: uint32 dropped_attributes_count = 2;
	resourceEntityRefs        = 3 // Resource: repeated opentelemetry.proto.common.v1.EntityRef entity_refs = 3;
)

// EntityRef, opentelemetry/proto/common/v1/common.proto.
const (
	entityRefSchemaURL       = 1 // EntityRef: string schema_url = 1;
	entityRefType            = 2 // EntityRef: string type = 2;
	entityRefIDKeys          = 3 // EntityRef: repeated string id_keys = 3;
	entityRefDescriptionKeys = 4 // EntityRef: repeated string description_keys = 4;
)

// resource reads a Resource into d.res (merging, if it comes twice).
func (d *pbDecoder) resource(msg []byte) error {
	return pbEach(msg, func(f pbField) error {
		switch f.num {
		case resourceAttributes:
			if err := f.want(protowire.BytesType, "Resource", "attributes"); err != nil {
				return err
			}
			return d.keyValue(f.b, func(k []byte, v shred.Value) { d.res.attrs.add(k, v) })
		case resourceDroppedAttributes:
			if err := f.want(protowire.VarintType, "Resource", "dropped_attributes_count"); err != nil {
				return err
			}
			d.res.dropped = uint32(f.u)
		case resourceEntityRefs: // not stored, but checked as pdata does
			if err := f.want(protowire.BytesType, "Resource", "entity_refs"); err != nil {
				return err
			}
			return pbEach(f.b, func(f pbField) error {
				switch f.num {
				case entityRefSchemaURL, entityRefType, entityRefIDKeys, entityRefDescriptionKeys:
					return f.want(protowire.BytesType, "EntityRef", "string")
				}
				return nil
			})
		}
		return nil
	})
}

func (d *pbDecoder) scopeBlock(b *shred.Batch, msg []byte, sig *pbSignal) error {
	d.scope.reset()
	scopeStart := b.Rows
	err := pbEach(msg, func(f pbField) error {
		switch f.num {
		case scopeBlockScope:
			if err := f.want(protowire.BytesType, "Scope*", "scope"); err != nil {
				return err
			}
			return d.instrumentationScope(f.b)
		case scopeBlockRecords:
			if err := f.want(protowire.BytesType, "Scope*", "records"); err != nil {
				return err
			}
			if err := b.Err(); err != nil {
				return err // a limit: stop at once
			}
			if sig.pointRecords {
				return sig.record(d, b, f.b)
			}
			if d.rej.begin() {
				return nil
			}
			rows := b.Rows
			if err := sig.record(d, b, f.b); err != nil {
				return err
			}
			d.rej.rows(b.Rows - rows)
			return nil
		case scopeBlockSchemaURL:
			if err := f.want(protowire.BytesType, "Scope*", "schema_url"); err != nil {
				return err
			}
			d.scope.schemaURL = string(f.b)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sig.block.fillScope(b, &d.scope, scopeStart)
	return b.Err()
}

// InstrumentationScope, opentelemetry/proto/common/v1/common.proto.
const (
	scopeName              = 1 // InstrumentationScope: string name = 1;
	scopeVersion           = 2 // InstrumentationScope: string version = 2;
	scopeAttributes        = 3 // InstrumentationScope: repeated KeyValue attributes = 3;
	scopeDroppedAttributes = 4 // InstrumentationScope: uint32 dropped_attributes_count = 4;
)

func (d *pbDecoder) instrumentationScope(msg []byte) error {
	return pbEach(msg, func(f pbField) error {
		switch f.num {
		case scopeName, scopeVersion:
			if err := f.want(protowire.BytesType, "InstrumentationScope", "name"); err != nil {
				return err
			}
			if f.num == scopeName {
				d.scope.name = string(f.b)
			} else {
				d.scope.version = string(f.b)
			}
		case scopeAttributes:
			if err := f.want(protowire.BytesType, "InstrumentationScope", "attributes"); err != nil {
				return err
			}
			return d.keyValue(f.b, func(k []byte, v shred.Value) { d.scope.attrs.add(k, v) })
		case scopeDroppedAttributes:
			if err := f.want(protowire.VarintType, "InstrumentationScope", "dropped_attributes_count"); err != nil {
				return err
			}
			d.scope.dropped = uint32(f.u)
		}
		return nil
	})
}

// endRecord sets the record's attributes (d.attrs) on row and ends the row.
func (d *pbDecoder) endRecord(b *shred.Batch, row int) error {
	for _, kv := range d.attrs {
		if err := d.keyValue(kv, func(k []byte, v shred.Value) { b.SetAttr(shred.Record, k, row, v) }); err != nil {
			return err
		}
	}
	b.EndRow()
	return nil
}

// appendKVsJSON appends KeyValue messages as one JSON object to c, or NULL
// when there are none.
func (d *pbDecoder) appendKVsJSON(c *shred.Column, kvs [][]byte) error {
	if len(kvs) == 0 {
		c.AppendNull()
		return nil
	}
	out, err := d.kvsJSON(d.scratch[:0], kvs)
	d.scratch = out
	if err != nil {
		return err
	}
	c.AppendBytes(out)
	return nil
}

// kvsJSON appends KeyValue messages to dst as one JSON object.
func (d *pbDecoder) kvsJSON(dst []byte, kvs [][]byte) ([]byte, error) {
	dst = append(dst, '{')
	for i, kv := range kvs {
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = appendPBKeyValueJSON(dst, kv, 0); err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}

// pbMaxDepth is pdata's limit on the nesting of KeyValue, AnyValue,
// ArrayValue and KeyValueList messages below a record (proto.RecursionLimit):
// a message entered at this depth is an error.
const pbMaxDepth = 100

var (
	errPBDepth = errors.New("proto: exceeded max recursion depth")
	errPBGroup = errors.New("proto: group wire types are not supported")
)

// KeyValue, opentelemetry/proto/common/v1/common.proto.
const (
	kvKey         = 1 // KeyValue: string key = 1;
	kvValue       = 2 // KeyValue: AnyValue value = 2;
	kvKeyStrindex = 3 // KeyValue: int32 key_strindex = 3;
)

// pbKV is a KeyValue's key and its value messages: a value given twice
// merges, as if the two were one message.
type pbKV struct {
	key  []byte
	vals [][]byte
}

func pbKeyValue(msg []byte, depth int, vals [][]byte) (pbKV, error) {
	if depth >= pbMaxDepth {
		return pbKV{}, errPBDepth
	}
	kv := pbKV{vals: vals[:0]}
	err := pbEach(msg, func(f pbField) error {
		switch f.num {
		case kvKey:
			if err := f.want(protowire.BytesType, "KeyValue", "key"); err != nil {
				return err
			}
			kv.key = f.b
		case kvValue:
			if err := f.want(protowire.BytesType, "KeyValue", "value"); err != nil {
				return err
			}
			kv.vals = append(kv.vals, f.b)
		case kvKeyStrindex: // profiles only
			return f.want(protowire.VarintType, "KeyValue", "key_strindex")
		}
		return nil
	})
	return kv, err
}

// pbKeyValueFast reads a KeyValue in the forms OTLP encoders write: the
// key (kvKey) and the value (kvValue, holding one scalar field), once
// each, in either order (pdata writes the value first). For any other
// form ok is false and keyValue reads it field by field, with the same
// result for these forms; they cost no call per field. (Each tag is one
// byte: its field number is below 16.)
func pbKeyValueFast(msg []byte) (key []byte, v shred.Value, ok bool) {
	const keyTag, valueTag = kvKey<<3 | byte(protowire.BytesType), kvValue<<3 | byte(protowire.BytesType)
	var av []byte
	seen := byte(0)
	for range 2 {
		if len(msg) < 2 || msg[0] != keyTag && msg[0] != valueTag || seen == msg[0] {
			return nil, v, false
		}
		l, n := pbVarint(msg[1:])
		if n < 0 || l > uint64(len(msg)-1-n) {
			return nil, v, false
		}
		end := 1 + n + int(l)
		if msg[0] == keyTag {
			key = msg[1+n : end : end]
		} else {
			av = msg[1+n : end : end]
		}
		seen, msg = msg[0], msg[end:]
	}
	if len(msg) != 0 {
		return nil, v, false
	}
	if len(av) == 0 {
		return key, v, true // an empty AnyValue
	}
	switch tag, rest := av[0], av[1:]; tag {
	case anyString<<3 | byte(protowire.BytesType), anyBytes<<3 | byte(protowire.BytesType):
		l, n := pbVarint(rest)
		if n < 0 || l != uint64(len(rest)-n) {
			return nil, v, false
		}
		v = shred.Value{Kind: shred.String, Bytes: rest[n:len(rest):len(rest)]}
		if tag>>3 == anyBytes {
			v.Kind = shred.Blob
		}
	case anyBool<<3 | byte(protowire.VarintType), anyInt<<3 | byte(protowire.VarintType):
		x, n := pbVarint(rest)
		if n != len(rest) {
			return nil, v, false
		}
		v = shred.Value{Kind: shred.Int64, Int: int64(x)}
		if tag>>3 == anyBool {
			v = shred.Value{Kind: shred.Bool}
			if x != 0 {
				v.Int = 1
			}
		}
	case anyDouble<<3 | byte(protowire.Fixed64Type):
		if len(rest) != 8 {
			return nil, v, false
		}
		v = shred.Value{Kind: shred.Double, Float: math.Float64frombits(binary.LittleEndian.Uint64(rest))}
	default:
		return nil, v, false
	}
	return key, v, true
}

// keyValue reads one KeyValue message and passes its key and value to fn.
// The value's bytes stay valid until the next call.
func (d *pbDecoder) keyValue(msg []byte, fn func(k []byte, v shred.Value)) error {
	if k, v, ok := pbKeyValueFast(msg); ok {
		fn(k, v)
		return nil
	}
	return d.keyValueFields(msg, fn)
}

// keyValueFields is keyValue for any form of the message.
func (d *pbDecoder) keyValueFields(msg []byte, fn func(k []byte, v shred.Value)) error {
	kv, err := pbKeyValue(msg, 0, d.vals)
	d.vals = kv.vals
	if err != nil {
		return err
	}
	var v shred.Value
	if len(kv.vals) > 0 {
		if v, d.valueBuf, err = pbAnyValue(kv.vals, d.valueBuf, 1); err != nil {
			return err
		}
	}
	fn(kv.key, v)
	return nil
}

// AnyValue, opentelemetry/proto/common/v1/common.proto: the fields of its
// oneof value.
const (
	anyString         = 1 // AnyValue: string string_value = 1;
	anyBool           = 2 // AnyValue: bool bool_value = 2;
	anyInt            = 3 // AnyValue: int64 int_value = 3;
	anyDouble         = 4 // AnyValue: double double_value = 4;
	anyArray          = 5 // AnyValue: ArrayValue array_value = 5;
	anyKVList         = 6 // AnyValue: KeyValueList kvlist_value = 6;
	anyBytes          = 7 // AnyValue: bytes bytes_value = 7;
	anyStringStrindex = 8 // AnyValue: int32 string_value_strindex = 8;
)

// ArrayValue, opentelemetry/proto/common/v1/common.proto.
const (
	arrayValues = 1 // ArrayValue: repeated AnyValue values = 1;
)

// KeyValueList, opentelemetry/proto/common/v1/common.proto.
const (
	kvListValues = 1 // KeyValueList: repeated KeyValue values = 1;
)

// AnyValue kinds.
const (
	pbEmpty = iota
	pbScalar
	pbArray
	pbKVList
)

// pbAnyValueParts reads an AnyValue given as one or more messages (which
// merge): the last oneof field wins. Composite values that a later field
// replaces are still checked, as pdata decodes them.
func pbAnyValueParts(msgs [][]byte, depth int) (kind int, v shred.Value, composite []byte, err error) {
	if depth >= pbMaxDepth {
		return 0, v, nil, errPBDepth
	}
	superseded := func() error {
		if kind != pbArray && kind != pbKVList {
			return nil
		}
		_, err := appendPBCompositeJSON(nil, kind, composite, depth+1)
		return err
	}
	for _, msg := range msgs {
		err = pbEach(msg, func(f pbField) error {
			switch f.num {
			case anyString, anyBool, anyInt, anyDouble, anyArray, anyKVList, anyBytes, anyStringStrindex:
				if err := superseded(); err != nil {
					return err
				}
			}
			switch f.num {
			case anyString, anyBytes:
				if err := f.want(protowire.BytesType, "AnyValue", "bytes"); err != nil {
					return err
				}
				k := shred.String
				if f.num == anyBytes {
					k = shred.Blob
				}
				kind, v, composite = pbScalar, shred.Value{Kind: k, Bytes: f.b}, nil
			case anyBool, anyInt:
				if err := f.want(protowire.VarintType, "AnyValue", "varint"); err != nil {
					return err
				}
				if f.num == anyBool {
					var i int64
					if f.u != 0 {
						i = 1
					}
					v = shred.Value{Kind: shred.Bool, Int: i}
				} else {
					v = shred.Value{Kind: shred.Int64, Int: int64(f.u)}
				}
				kind, composite = pbScalar, nil
			case anyDouble:
				if err := f.want(protowire.Fixed64Type, "AnyValue", "double_value"); err != nil {
					return err
				}
				kind, v, composite = pbScalar, shred.Value{Kind: shred.Double, Float: math.Float64frombits(f.u)}, nil
			case anyStringStrindex: // profiles only: pdata reads it as empty
				if err := f.want(protowire.VarintType, "AnyValue", "string_value_strindex"); err != nil {
					return err
				}
				kind, v, composite = pbEmpty, shred.Value{}, nil
			case anyArray, anyKVList:
				if err := f.want(protowire.BytesType, "AnyValue", "composite"); err != nil {
					return err
				}
				kind, v, composite = pbArray, shred.Value{}, f.b
				if f.num == anyKVList {
					kind = pbKVList
				}
			}
			return nil
		})
		if err != nil {
			return 0, shred.Value{}, nil, err
		}
	}
	return kind, v, composite, nil
}

// pbAnyValue converts an AnyValue; arrays and kvlists become JSON text in
// buf (returned for reuse).
func pbAnyValue(msgs [][]byte, buf []byte, depth int) (shred.Value, []byte, error) {
	kind, v, composite, err := pbAnyValueParts(msgs, depth)
	if err != nil || kind != pbArray && kind != pbKVList {
		return v, buf, err
	}
	buf, err = appendPBCompositeJSON(buf[:0], kind, composite, depth+1)
	if err != nil {
		return shred.Value{}, buf, err
	}
	return shred.Value{Kind: shred.JSON, Bytes: buf}, buf, nil
}

// appendPBAnyJSON renders an AnyValue as plain JSON, as appendPdataJSON
// does: kvlists as objects, arrays as arrays, bytes as base64, an empty
// value as null.
func appendPBAnyJSON(dst []byte, msgs [][]byte, depth int) ([]byte, error) {
	kind, v, composite, err := pbAnyValueParts(msgs, depth)
	switch {
	case err != nil:
		return nil, err
	case kind == pbEmpty:
		return append(dst, "null"...), nil
	case kind == pbScalar:
		return shred.AppendJSON(dst, v), nil
	}
	return appendPBCompositeJSON(dst, kind, composite, depth+1)
}

// appendPBCompositeJSON renders an ArrayValue or a KeyValueList (their
// values, arrayValues and kvListValues).
func appendPBCompositeJSON(dst []byte, kind int, msg []byte, depth int) ([]byte, error) {
	if depth >= pbMaxDepth {
		return nil, errPBDepth
	}
	open, closing, values := byte('['), byte(']'), protowire.Number(arrayValues)
	if kind == pbKVList {
		open, closing, values = '{', '}', kvListValues
	}
	dst = append(dst, open)
	first := true
	err := pbEach(msg, func(f pbField) error {
		if f.num != values {
			return nil
		}
		if err := f.want(protowire.BytesType, "ArrayValue", "values"); err != nil {
			return err
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		var err error
		if kind == pbKVList {
			dst, err = appendPBKeyValueJSON(dst, f.b, depth+1)
		} else {
			dst, err = appendPBAnyJSON(dst, [][]byte{f.b}, depth+1)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return append(dst, closing), nil
}

// appendPBKeyValueJSON renders a KeyValue as `"key":value`.
func appendPBKeyValueJSON(dst []byte, msg []byte, depth int) ([]byte, error) {
	kv, err := pbKeyValue(msg, depth, nil)
	if err != nil {
		return nil, err
	}
	dst = shred.AppendJSONString(dst, kv.key)
	dst = append(dst, ':')
	if len(kv.vals) == 0 {
		return append(dst, "null"...), nil
	}
	return appendPBAnyJSON(dst, kv.vals, depth+1)
}
