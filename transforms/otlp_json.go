package transforms

import (
	"fmt"
	"strconv"
	"sync"

	"github.com/shredduck/shredduck/shred"
)

// This file holds the OTLP/JSON decoding shared by the signals: it reads
// export requests straight into batch columns, without building pdata
// objects (see https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding).
// Keys are accepted in lowerCamelCase and in their proto names; unknown
// keys are skipped; ids are hex (any case) or base64; 64-bit integers are
// numbers or decimal strings; enums are integers.

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

func protoError(n int, err error) error {
	return fmt.Errorf("cannot decode %d-byte protobuf request: %w", n, err)
}

// decoder is the per-goroutine state of OTLP/JSON decoding.
type decoder struct {
	it      jsonIter
	sub     jsonIter
	key     []byte
	scratch []byte
	obj     []byte
	bufs    [4][]byte
	idbuf   [5][16]byte // trace, span, parent span, link trace, link span
	res     scopeInfo
	scope   scopeInfo
	attrs   attrSet
	rej     rejects
	times   timeCheck // of the record being decoded
}

var decoderPool = sync.Pool{New: func() any { return new(decoder) }}

// maxPooledScratch caps the buffers a pooled decoder keeps.
const maxPooledScratch = 1 << 20

func getDecoder() *decoder { return decoderPool.Get().(*decoder) }

func putDecoder(d *decoder) {
	if cap(d.scratch) > maxPooledScratch || cap(d.obj) > maxPooledScratch || cap(d.res.attrs.arena) > maxPooledScratch {
		return
	}
	d.it.Reset(nil)
	d.sub.Reset(nil)
	decoderPool.Put(d)
}

// signalKeys are the JSON keys of one signal's request structure.
type signalKeys struct {
	top, scopes, records [2]string
	noun                 string // one record, in messages
	// pointRecords: the objects under records hold several records each,
	// which rec numbers itself (rejects.begin): a metric's data points.
	pointRecords bool
}

func is(key []byte, names [2]string) bool {
	return string(key) == names[0] || string(key) == names[1]
}

// recordFunc parses one record object (span, log record, metric) at d.it
// and appends its rows.
type recordFunc func(d *decoder, b *shred.Batch)

// walk decodes one export request, appending rows through rec. On error the
// rows appended for the request are removed again; records that rec
// rejects are left out (RejectedError).
func (d *decoder) walk(b *shred.Batch, data []byte, k *signalKeys, bc *blockCols, rec recordFunc) (int, error) {
	start := b.Rows
	d.rej.reset(k.noun)
	if err := d.rej.passes(b, func() error { return d.walkOnce(b, data, k, bc, rec) }); err != nil {
		return 0, err
	}
	return b.Rows - start, d.rej.result()
}

func (d *decoder) walkOnce(b *shred.Batch, data []byte, k *signalKeys, bc *blockCols, rec recordFunc) error {
	start := b.Rows
	b.Mark()
	it := &d.it
	it.Reset(data)
	if it.ObjectStart() {
		for key, ok := it.NextKey(); ok; key, ok = it.NextKey() {
			if !is(key, k.top) {
				d.checkWrongSignal(key, k)
				it.Skip()
				continue
			}
			if it.ReadNull() {
				continue
			}
			if !it.ArrayStart() {
				break
			}
			for it.NextElem() {
				d.resourceBlock(b, k, bc, rec)
			}
		}
	}
	if it.Err() == nil && it.More() {
		it.ReportError(it.Offset(), "unexpected data after the request object")
	}
	if err := it.Err(); err != nil {
		b.Rollback(start)
		if berr := b.Err(); berr != nil {
			return berr // atLimit stopped the iterator
		}
		return err
	}
	if err := b.Err(); err != nil {
		// A limit reached in the last record's fills, or by its EndRow.
		b.Rollback(start)
		return err
	}
	return nil
}

// atLimit stops the iterator when the batch reached a limit (b.Err), so
// that decoding ends at once; walkOnce then returns the batch's error.
func (d *decoder) atLimit(b *shred.Batch) bool {
	if b.Err() == nil {
		return false
	}
	d.it.ReportError(d.it.Offset(), "batch limit reached")
	return true
}

// checkWrongSignal fails a request that belongs to another signal.
func (d *decoder) checkWrongSignal(key []byte, k *signalKeys) {
	for _, other := range [...]string{"resourceSpans", "resourceLogs", "resourceMetrics", "resource_spans", "resource_logs", "resource_metrics"} {
		if string(key) == other && !is(key, k.top) {
			d.it.ReportError(d.it.Offset(), fmt.Sprintf("%s: %v (use the matching --transform, or auto)", other, ErrWrongSignal))
			return
		}
	}
}

func (d *decoder) resourceBlock(b *shred.Batch, k *signalKeys, bc *blockCols, rec recordFunc) {
	it := &d.it
	d.res.reset()
	resStart := b.Rows
	if it.ReadNull() || !it.ObjectStart() {
		return
	}
	for key, ok := it.NextKey(); ok; key, ok = it.NextKey() {
		switch {
		case string(key) == "resource":
			d.resource()
		case string(key) == "schemaUrl" || string(key) == "schema_url":
			d.res.schemaURL = d.readString()
		case is(key, k.scopes):
			if it.ReadNull() || !it.ArrayStart() {
				continue
			}
			for it.NextElem() {
				d.scopeBlock(b, k, bc, rec)
			}
		default:
			it.Skip()
		}
	}
	if it.Err() == nil {
		bc.fillResource(b, &d.res, resStart)
		d.atLimit(b)
	}
}

func (d *decoder) resource() {
	it := &d.it
	if it.ReadNull() || !it.ObjectStart() {
		return
	}
	for key, ok := it.NextKey(); ok; key, ok = it.NextKey() {
		switch string(key) {
		case "attributes":
			d.attrList(&d.res.attrs)
		case "droppedAttributesCount", "dropped_attributes_count":
			d.res.dropped = d.readUint32()
		default:
			it.Skip()
		}
	}
}

func (d *decoder) scopeBlock(b *shred.Batch, k *signalKeys, bc *blockCols, rec recordFunc) {
	it := &d.it
	d.scope.reset()
	scopeStart := b.Rows
	if it.ReadNull() || !it.ObjectStart() {
		return
	}
	for key, ok := it.NextKey(); ok; key, ok = it.NextKey() {
		switch {
		case string(key) == "scope":
			d.scopeObject()
		case string(key) == "schemaUrl" || string(key) == "schema_url":
			d.scope.schemaURL = d.readString()
		case is(key, k.records):
			if it.ReadNull() || !it.ArrayStart() {
				continue
			}
			for it.NextElem() && !d.atLimit(b) {
				if !k.pointRecords && d.rej.begin() {
					it.Skip()
					continue
				}
				rec(d, b)
			}
		default:
			it.Skip()
		}
	}
	if it.Err() == nil {
		bc.fillScope(b, &d.scope, scopeStart)
		d.atLimit(b)
	}
}

func (d *decoder) scopeObject() {
	it := &d.it
	if it.ReadNull() || !it.ObjectStart() {
		return
	}
	for key, ok := it.NextKey(); ok; key, ok = it.NextKey() {
		switch string(key) {
		case "name":
			d.scope.name = d.readString()
		case "version":
			d.scope.version = d.readString()
		case "attributes":
			d.attrList(&d.scope.attrs)
		case "droppedAttributesCount", "dropped_attributes_count":
			d.scope.dropped = d.readUint32()
		default:
			it.Skip()
		}
	}
}

func (d *decoder) readString() string {
	if d.it.ReadNull() {
		return ""
	}
	return string(d.it.ReadString())
}

// readBytes reads a string into dst (reused) and returns it.
func (d *decoder) readBytes(dst []byte) []byte {
	if d.it.ReadNull() {
		return dst[:0]
	}
	return d.it.ReadStringInto(dst[:0])
}

func (d *decoder) readUint32() uint32 {
	if d.it.ReadNull() {
		return 0
	}
	off := d.it.Offset()
	v := d.it.ReadUint64()
	if v > 1<<32-1 {
		d.it.ReportError(off, "value out of range for uint32")
	}
	return uint32(v)
}

func (d *decoder) readUint64() uint64 {
	if d.it.ReadNull() {
		return 0
	}
	return d.it.ReadUint64()
}

func (d *decoder) readInt64() int64 {
	if d.it.ReadNull() {
		return 0
	}
	return d.it.ReadInt64()
}

func (d *decoder) readFloat() float64 {
	if d.it.ReadNull() {
		return 0
	}
	return d.it.ReadFloat64()
}

// readID reads a trace (size 16) or span (size 8) id into slot.
func (d *decoder) readID(slot, size int, field string) []byte {
	if d.it.ReadNull() {
		return nil
	}
	off := d.it.Offset()
	s := d.it.ReadString()
	id, err := decodeID(d.idbuf[slot][:size:16], s, size)
	if err != nil {
		d.it.ReportError(off, "field "+field+": "+err.Error())
	}
	return id
}

// attrList reads a KeyValue list into dst.
func (d *decoder) attrList(dst *attrSet) {
	d.keyValues(func(key []byte, v shred.Value) { dst.add(key, v) })
}

// recordAttrs reads a KeyValue list into the record-level columns of row.
func (d *decoder) recordAttrs(b *shred.Batch, row int) {
	d.keyValues(func(key []byte, v shred.Value) { b.SetAttr(shred.Record, key, row, v) })
}

// attrsJSON reads a KeyValue list and appends it to c as one JSON object
// (NULL when empty).
func (d *decoder) attrsJSON(c *shred.Column) {
	d.attrs.reset()
	d.attrList(&d.attrs)
	var ok bool
	d.obj, ok = d.attrs.appendJSONObject(d.obj[:0])
	if !ok {
		c.AppendNull()
		return
	}
	c.AppendBytes(d.obj)
}

// keyValues reads a JSON array of OTLP KeyValue objects and calls fn for
// each; fn's arguments are valid only during the call.
func (d *decoder) keyValues(fn func(key []byte, v shred.Value)) {
	it := &d.it
	if it.ReadNull() || !it.ArrayStart() {
		return
	}
	for it.NextElem() {
		if !it.ObjectStart() {
			return
		}
		var v shred.Value
		var raw []byte
		d.key = d.key[:0] // a KeyValue without "key" has the empty key
		haveKey, haveValue := false, false
		for key, ok := it.NextKey(); ok; key, ok = it.NextKey() {
			switch string(key) {
			case "key":
				d.key = d.readBytes(d.key)
				haveKey = true
			case "value":
				if haveKey {
					v = d.anyValue(it)
					haveValue = true
				} else {
					raw = it.Raw() // value before key: decode it once the key is known
				}
			default:
				it.Skip()
			}
		}
		if it.Err() != nil {
			return
		}
		if !haveValue && raw != nil {
			d.sub.Reset(raw)
			v = d.anyValue(&d.sub)
			if err := d.sub.Err(); err != nil {
				it.ReportError(it.Offset(), "attribute value: "+err.Error())
				return
			}
		}
		fn(d.key, v)
	}
}

// anyValue reads an OTLP AnyValue object. Strings and bytes alias the
// iterator's or the decoder's buffers until the next read.
func (d *decoder) anyValue(it *jsonIter) shred.Value {
	var v shred.Value
	if it.ReadNull() || !it.ObjectStart() {
		return v
	}
	for key, ok := it.NextKey(); ok; key, ok = it.NextKey() {
		switch string(key) {
		case "stringValue", "string_value":
			if it.ReadNull() {
				continue
			}
			d.scratch = it.ReadStringInto(d.scratch[:0])
			v = shred.Value{Kind: shred.String, Bytes: d.scratch}
		case "intValue", "int_value":
			if it.ReadNull() {
				continue
			}
			v = shred.Value{Kind: shred.Int64, Int: it.ReadInt64()}
		case "doubleValue", "double_value":
			if it.ReadNull() {
				continue
			}
			v = shred.Value{Kind: shred.Double, Float: it.ReadFloat64()}
		case "boolValue", "bool_value":
			if it.ReadNull() {
				continue
			}
			v = shred.Value{Kind: shred.Bool}
			if it.ReadBool() {
				v.Int = 1
			}
		case "bytesValue", "bytes_value":
			if it.ReadNull() {
				continue
			}
			off := it.Offset()
			s := it.ReadString()
			raw, err := decodeBase64(d.scratch[:0], s)
			if err != nil {
				it.ReportError(off, "bytesValue: "+err.Error())
				return v
			}
			d.scratch = raw
			v = shred.Value{Kind: shred.Blob, Bytes: raw}
		case "arrayValue", "array_value", "kvlistValue", "kvlist_value":
			if it.ReadNull() {
				continue
			}
			isArray := key[0] == 'a'
			d.scratch = appendCompositeJSON(d.scratch[:0], it, isArray)
			v = shred.Value{Kind: shred.JSON, Bytes: d.scratch}
		default:
			it.Skip()
		}
	}
	return v
}

// appendCompositeJSON renders an ArrayValue ({"values":[AnyValue...]}) or a
// KeyValueList ({"values":[KeyValue...]}) as a plain JSON array or object.
func appendCompositeJSON(dst []byte, it *jsonIter, isArray bool) []byte {
	open, closing := byte('{'), byte('}')
	if isArray {
		open, closing = '[', ']'
	}
	dst = append(dst, open)
	if !it.ObjectStart() {
		return dst
	}
	n := 0
	for key, ok := it.NextKey(); ok; key, ok = it.NextKey() {
		if string(key) != "values" || it.ReadNull() {
			it.Skip()
			continue
		}
		if !it.ArrayStart() {
			return dst
		}
		for it.NextElem() {
			if n > 0 {
				dst = append(dst, ',')
			}
			n++
			if isArray {
				dst = appendAnyJSON(dst, it)
				continue
			}
			// KeyValue: key first in practice; otherwise decode value later.
			if !it.ObjectStart() {
				return dst
			}
			var k []byte
			var raw []byte
			for f, ok := it.NextKey(); ok; f, ok = it.NextKey() {
				switch string(f) {
				case "key":
					k = append(k[:0], it.ReadString()...)
				case "value":
					raw = it.Raw()
				default:
					it.Skip()
				}
			}
			dst = shred.AppendJSONString(dst, k)
			dst = append(dst, ':')
			if raw == nil {
				dst = append(dst, "null"...)
				continue
			}
			var sub jsonIter
			sub.Reset(raw)
			dst = appendAnyJSON(dst, &sub)
			if err := sub.Err(); err != nil {
				it.ReportError(it.Offset(), "kvlist value: "+err.Error())
				return dst
			}
		}
	}
	return append(dst, closing)
}

// appendAnyJSON renders one AnyValue as plain JSON. Of several value
// fields in one AnyValue (invalid, but possible in JSON) the last wins, as
// in anyValue.
func appendAnyJSON(dst []byte, it *jsonIter) []byte {
	if it.ReadNull() || !it.ObjectStart() {
		return append(dst, "null"...)
	}
	start := len(dst)
	wrote := false
	for key, ok := it.NextKey(); ok; key, ok = it.NextKey() {
		if it.ReadNull() {
			continue
		}
		mark := len(dst)
		switch string(key) {
		case "stringValue", "string_value":
			dst = shred.AppendJSONString(dst, it.ReadString())
		case "intValue", "int_value":
			dst = strconv.AppendInt(dst, it.ReadInt64(), 10)
		case "doubleValue", "double_value":
			dst = shred.AppendJSON(dst, shred.Value{Kind: shred.Double, Float: it.ReadFloat64()})
		case "boolValue", "bool_value":
			dst = strconv.AppendBool(dst, it.ReadBool())
		case "bytesValue", "bytes_value":
			// Validated and re-encoded as standard base64, as a top-level
			// bytes attribute and the protobuf path are.
			off := it.Offset()
			raw, err := decodeBase64(nil, it.ReadString())
			if err != nil {
				it.ReportError(off, "bytesValue: "+err.Error())
				return dst
			}
			dst = shred.AppendJSON(dst, shred.Value{Kind: shred.Blob, Bytes: raw})
		case "arrayValue", "array_value":
			dst = appendCompositeJSON(dst, it, true)
		case "kvlistValue", "kvlist_value":
			dst = appendCompositeJSON(dst, it, false)
		default:
			it.Skip()
			continue
		}
		if wrote { // an earlier value field: keep only this one
			dst = append(dst[:start], dst[mark:]...)
		}
		wrote = true
	}
	if !wrote {
		dst = append(dst, "null"...)
	}
	return dst
}
