package transforms

import (
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/shredduck/shredduck/shred"
)

// The pdata-based reading of resources, scopes and attributes, used by the
// reference decoders that the direct protobuf decoders are fuzzed against
// (appendTracesPdata, appendLogsPdata, appendMetricsPdata).

// pdataValue converts a pcommon.Value; scratch receives JSON renderings.
func pdataValue(v pcommon.Value, scratch []byte) (shred.Value, []byte) {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return shred.Value{Kind: shred.String, Bytes: []byte(v.Str())}, scratch
	case pcommon.ValueTypeInt:
		return shred.Value{Kind: shred.Int64, Int: v.Int()}, scratch
	case pcommon.ValueTypeDouble:
		return shred.Value{Kind: shred.Double, Float: v.Double()}, scratch
	case pcommon.ValueTypeBool:
		var i int64
		if v.Bool() {
			i = 1
		}
		return shred.Value{Kind: shred.Bool, Int: i}, scratch
	case pcommon.ValueTypeBytes:
		return shred.Value{Kind: shred.Blob, Bytes: v.Bytes().AsRaw()}, scratch
	case pcommon.ValueTypeSlice, pcommon.ValueTypeMap:
		scratch = appendPdataJSON(scratch[:0], v)
		return shred.Value{Kind: shred.JSON, Bytes: scratch}, scratch
	}
	return shred.Value{}, scratch
}

// appendPdataJSON renders a value as plain JSON (not the OTLP AnyValue
// wrapping): kvlists as objects, arrays as arrays, bytes as base64 strings.
func appendPdataJSON(dst []byte, v pcommon.Value) []byte {
	switch v.Type() {
	case pcommon.ValueTypeSlice:
		s := v.Slice()
		dst = append(dst, '[')
		for i := 0; i < s.Len(); i++ {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendPdataJSON(dst, s.At(i))
		}
		return append(dst, ']')
	case pcommon.ValueTypeMap:
		return appendPdataMapJSON(dst, v.Map())
	case pcommon.ValueTypeEmpty:
		return append(dst, "null"...)
	}
	sv, _ := pdataValue(v, nil)
	return shred.AppendJSON(dst, sv)
}

func appendPdataMapJSON(dst []byte, m pcommon.Map) []byte {
	dst = append(dst, '{')
	first := true
	for k, v := range m.All() {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = shred.AppendJSONString(dst, []byte(k))
		dst = append(dst, ':')
		dst = appendPdataJSON(dst, v)
	}
	return append(dst, '}')
}

// appendAttrsJSON appends a map as a JSON object to c, or NULL when empty.
func appendAttrsJSON(c *shred.Column, m pcommon.Map, scratch []byte) []byte {
	if m.Len() == 0 {
		c.AppendNull()
		return scratch
	}
	scratch = appendPdataMapJSON(scratch[:0], m)
	c.AppendBytes(scratch)
	return scratch
}

// pdataAttrs copies a map into an attrSet.
func pdataAttrs(dst *attrSet, m pcommon.Map) {
	var scratch []byte
	for k, v := range m.All() {
		var sv shred.Value
		sv, scratch = pdataValue(v, scratch)
		dst.add([]byte(k), sv)
	}
}

// setPdataAttrs sets a record's attributes on row.
func setPdataAttrs(b *shred.Batch, row int, m pcommon.Map, scratch []byte) []byte {
	for k, v := range m.All() {
		var sv shred.Value
		sv, scratch = pdataValue(v, scratch)
		b.SetAttr(shred.Record, []byte(k), row, sv)
	}
	return scratch
}

func pdataResource(dst *scopeInfo, r pcommon.Resource, schemaURL string) {
	dst.reset()
	dst.schemaURL = schemaURL
	dst.dropped = r.DroppedAttributesCount()
	pdataAttrs(&dst.attrs, r.Attributes())
}

func pdataScope(dst *scopeInfo, s pcommon.InstrumentationScope, schemaURL string) {
	dst.reset()
	dst.name, dst.version, dst.schemaURL = s.Name(), s.Version(), schemaURL
	dst.dropped = s.DroppedAttributesCount()
	pdataAttrs(&dst.attrs, s.Attributes())
}

// bytesF, varintF and fixed64F append a protobuf field to b, for
// hand-made requests.
func bytesF(b []byte, num protowire.Number, v []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
}

func varintF(b []byte, num protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
}

func fixed64F(b []byte, num protowire.Number, v uint64) []byte {
	return protowire.AppendFixed64(protowire.AppendTag(b, num, protowire.Fixed64Type), v)
}

// refRejectLate rejects the record whose row starts at row, after it was
// appended (as the direct decoders do: its attributes leave columns of
// NULLs), when one of its times is past what TIMESTAMP_NS holds. It
// reports whether it did.
func refRejectLate(b *shred.Batch, r *rejects, row int, ts ...uint64) bool {
	err := refTimesErr(ts...)
	if err == nil {
		return false
	}
	b.Truncate(row)
	r.reject(err)
	return true
}

// refTimesErr is the reference decoders' rule for times: a record with a
// time past what TIMESTAMP_NS holds (int64 nanoseconds; the largest is
// infinity) is rejected.
func refTimesErr(ts ...uint64) error {
	for _, t := range ts {
		if t >= math.MaxInt64 {
			return fmt.Errorf("time %d past int64", t)
		}
	}
	return nil
}

// refExemplarTimes lists the times of a data point's exemplars.
func refExemplarTimes(es pmetric.ExemplarSlice) []uint64 {
	var ts []uint64
	for _, e := range es.All() {
		ts = append(ts, uint64(e.Timestamp()))
	}
	return ts
}

// refPasses runs a reference decoder's pass as appendPB does: records the
// pass rejects, or whose rows hold text that is not UTF-8, are skipped in
// a further pass, until none is found. A pass numbers the records with
// r.begin and notes their rows with r.rows.
func refPasses(b *shred.Batch, core []shred.CoreColumn, noun string, pass func(r *rejects)) (int, error) {
	var r rejects
	r.reset(noun)
	start := b.Rows
	r.passes(b, func() error {
		b.Mark()
		pass(&r)
		r.checkUTF8(b, start, core)
		return nil
	})
	return b.Rows - start, r.result()
}
