package transforms

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/shredduck/shredduck/shred"
	"github.com/shredduck/shredduck/transforms/internal/jsonscan"
)

// The none transform shreds any NDJSON object into typed columns: nested
// objects flatten into dotted paths, each path is a dynamic column of
// level Record (docs/SCHEMA.md, section 8).
//
// A path key is the object keys from the top, joined with "."; a "." or
// "\" inside a key is escaped with "\", so that {"a.b":1} (key a\.b) and
// {"a":{"b":1}} (key a.b) stay apart. Values become:
//
//   - true/false: BOOLEAN
//   - an integer within int64, written canonically: BIGINT
//   - another number that reads back as written (AppendText): DOUBLE
//   - a canonical RFC 3339 UTC timestamp (shred.ParseTimestamp): TIMESTAMPTZ
//   - any other string, and any other number (its text): VARCHAR
//   - an array whose non-null elements are all of one of these kinds
//     (numbers and timestamps canonical): LIST of it; [] and [null] are
//     lists of NULL
//   - any other array, and an object nested deeper than the depth limit:
//     JSON, re-encoded compactly
//   - null and {} store nothing
//
// Keys repeated in one object: the last wins, whatever the kinds of the
// values (an earlier object's paths are cleared in that row).

// None is the name of the NDJSON transform.
const None = "none"

// DefaultMaxDepth is the default nesting limit of the none transform.
const DefaultMaxDepth = 16

// ndjsonCore is the JSON overflow column and its maps.
var ndjsonCore = append([]shred.CoreColumn{{Name: "_overflow", Type: shred.TJSON}},
	shred.OverflowMaps([shred.NumLevels]string{"_overflow", "_overflow", "_overflow"})...)

type ndjsonTransform struct{ maxDepth int }

// NewNDJSON returns the none transform: every JSON object is one row,
// flattened into one column per path, up to maxDepth keys deep (≤ 0: the
// default, 16); deeper objects are stored whole, as JSON, in the column of
// the path where the limit is reached, and counted in Batch.Truncated.
func NewNDJSON(maxDepth int) Transform {
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	return ndjsonTransform{maxDepth: maxDepth}
}

func (ndjsonTransform) Name() string             { return None }
func (ndjsonTransform) Table() string            { return "ndjson" }
func (ndjsonTransform) Core() []shred.CoreColumn { return ndjsonCore }

// Overflow names _overflow for every level; NDJSON keys are all Record.
func (ndjsonTransform) Overflow() [shred.NumLevels]string {
	return [shred.NumLevels]string{"_overflow", "_overflow", "_overflow"}
}

// PathKeys reports that the dynamic keys are escaped paths
// (shred.Schema.PathKeys).
func (ndjsonTransform) PathKeys() bool { return true }

// MaxDepth is the nesting limit.
func (t ndjsonTransform) MaxDepth() int { return t.maxDepth }

func (ndjsonTransform) AppendProto(*shred.Batch, []byte) (int, error) {
	return 0, errors.New("transform none reads JSON objects, not protobuf")
}

// AppendJSON appends the JSON object data as one row. Anything else (an
// array, a scalar, malformed JSON) is an error, and appends nothing.
func (t ndjsonTransform) AppendJSON(b *shred.Batch, data []byte) (int, error) {
	if err := b.Err(); err != nil {
		return 0, err
	}
	f := flattenerPool.Get().(*flattener)
	defer f.put()
	f.reset(b, data, t.maxDepth)
	b.Mark()
	it := &f.it
	if k := it.Next(); k != jsonscan.Object && k != jsonscan.Invalid {
		return 0, fmt.Errorf("not a JSON object but a JSON %s", k)
	}
	if it.ObjectStart() {
		f.object(1)
	}
	if it.Err() == nil && it.More() {
		it.ReportError(it.Offset(), "unexpected data after the object")
	}
	if err := it.Err(); err != nil {
		b.Rollback(f.row)
		return 0, err
	}
	for _, c := range b.Core {
		c.AppendNull() // the overflow column and maps, which the schema fills
	}
	b.EndRow()
	if err := b.Err(); err != nil {
		b.Rollback(f.row)
		return 0, err
	}
	return 1, nil
}

// flattener is the state of one AppendJSON call; pooled, so that
// flattening allocates nothing once its buffers have grown.
type flattener struct {
	it       jsonIter
	sub      jsonIter // numbers and re-encoding, beside it
	data     []byte
	b        *shred.Batch
	row      int
	maxDepth int
	path     []byte        // escaped path of the current member
	str      []byte        // a string value, unescaped
	num      []byte        // text form of a double, to compare
	json     []byte        // JSON text of an array or a cut subtree
	elems    []shred.Value // list elements
	elemEnds []int         // end of each string element in elemBuf
	elemBuf  []byte
	conts    []byteRange // keys of the open objects whose value was an object
	contBuf  []byte
}

type byteRange struct{ start, end int }

var flattenerPool = sync.Pool{New: func() any { return new(flattener) }}

func (f *flattener) reset(b *shred.Batch, data []byte, maxDepth int) {
	f.b, f.row, f.data, f.maxDepth = b, b.Rows, data, maxDepth
	f.path = f.path[:0]
	f.conts = f.conts[:0]
	f.contBuf = f.contBuf[:0]
	f.it.Reset(data)
}

func (f *flattener) put() {
	if cap(f.json) > maxPooledScratch || cap(f.str) > maxPooledScratch || cap(f.elemBuf) > maxPooledScratch {
		return
	}
	f.b, f.data = nil, nil
	f.it.Reset(nil)
	f.sub.Reset(nil)
	clear(f.elems)
	flattenerPool.Put(f)
}

// object reads the members of an object whose '{' has been consumed;
// depth is the number of keys in its members' paths.
func (f *flattener) object(depth int) {
	it := &f.it
	base := len(f.path)
	contBase, contBufBase := len(f.conts), len(f.contBuf)
	for key, ok := it.NextKey(); ok; key, ok = it.NextKey() {
		f.path = f.path[:base]
		if depth > 1 { // not len(f.path) > 0: the parent's key may be ""
			f.path = append(f.path, '.')
		}
		segStart := len(f.path)
		f.path = appendSegment(f.path, key)
		seg := f.path[segStart:]
		for _, c := range f.conts[contBase:] {
			if bytes.Equal(f.contBuf[c.start:c.end], seg) {
				// The key was seen before with an object: last wins.
				f.b.ClearPrefix(shred.Record, append(f.path, '.'), f.row)
				break
			}
		}
		f.value(depth, seg)
	}
	f.path = f.path[:base]
	f.conts = f.conts[:contBase]
	f.contBuf = f.contBuf[:contBufBase]
}

// value reads the value of the member at f.path, whose last key is seg.
func (f *flattener) value(depth int, seg []byte) {
	it := &f.it
	switch it.Next() {
	case jsonscan.Object:
		if depth >= f.maxDepth {
			f.b.Truncated++
			f.json = appendCompactJSON(f.json[:0], &f.sub, it.Raw())
			f.set(shred.Value{Kind: shred.JSON, Bytes: f.json})
			return
		}
		start := len(f.contBuf)
		f.contBuf = append(f.contBuf, seg...)
		f.conts = append(f.conts, byteRange{start, len(f.contBuf)})
		f.b.ClearAttr(shred.Record, f.path, f.row) // an earlier value of the key
		if it.ObjectStart() {
			f.object(depth + 1)
		}
	case jsonscan.Array:
		f.array()
	case jsonscan.String:
		f.str = it.ReadStringInto(f.str[:0])
		f.set(stringValue(f.str))
	case jsonscan.Number:
		if raw := it.ReadNumberRaw(); raw != nil {
			f.set(numberValue(raw, &f.sub, &f.num))
		}
	case jsonscan.Bool:
		var v int64
		if it.ReadBool() {
			v = 1
		}
		f.set(shred.Value{Kind: shred.Bool, Int: v})
	case jsonscan.Null:
		it.ReadNull()
		f.b.ClearAttr(shred.Record, f.path, f.row)
	default:
		it.Skip() // records the syntax error
	}
}

func (f *flattener) set(v shred.Value) {
	if f.it.Err() == nil {
		f.b.SetAttr(shred.Record, f.path, f.row, v)
	}
}

// array stores an array as a list, when its elements allow, or as JSON.
func (f *flattener) array() {
	it := &f.it
	start := it.Offset()
	if !it.ArrayStart() {
		return
	}
	f.elems, f.elemEnds, f.elemBuf = f.elems[:0], f.elemEnds[:0], f.elemBuf[:0]
	elem := shred.Null
	list := true
	for it.NextElem() {
		if !list {
			it.Skip()
			continue
		}
		var v shred.Value
		switch it.Next() {
		case jsonscan.String:
			s := it.ReadString()
			if v = stringValue(s); v.Kind == shred.String {
				f.elemBuf = append(f.elemBuf, s...)
				f.elemEnds = append(f.elemEnds, len(f.elemBuf))
				v.Bytes = nil // set below: elemBuf may move
			}
		case jsonscan.Number:
			raw := it.ReadNumberRaw()
			if v = numberValue(raw, &f.sub, &f.num); v.Kind == shred.String {
				list = false // not canonical: its text stays in JSON
			}
		case jsonscan.Bool:
			v.Kind = shred.Bool
			if it.ReadBool() {
				v.Int = 1
			}
		case jsonscan.Null:
			it.ReadNull()
		default:
			it.Skip()
			list = false
		}
		if v.Kind != shred.Null {
			if elem == shred.Null {
				elem = v.Kind
			} else if elem != v.Kind {
				list = false
			}
		}
		f.elems = append(f.elems, v)
	}
	if it.Err() != nil {
		return
	}
	if !list {
		f.json = appendCompactJSON(f.json[:0], &f.sub, f.data[start:it.Offset()])
		f.set(shred.Value{Kind: shred.JSON, Bytes: f.json})
		return
	}
	if elem == shred.String {
		prev, n := 0, 0
		for i := range f.elems {
			if f.elems[i].Kind == shred.String {
				end := f.elemEnds[n]
				f.elems[i].Bytes = f.elemBuf[prev:end]
				prev = end
				n++
			}
		}
	}
	f.set(shred.Value{Kind: shred.ListKind(elem), Elems: f.elems})
}

// appendSegment appends a key to a path, escaping "." and "\" with "\".
func appendSegment(dst, key []byte) []byte {
	if bytes.IndexByte(key, '.') < 0 && bytes.IndexByte(key, '\\') < 0 {
		return append(dst, key...)
	}
	for _, c := range key {
		if c == '.' || c == '\\' {
			dst = append(dst, '\\')
		}
		dst = append(dst, c)
	}
	return dst
}

// stringValue is a JSON string's value: a timestamp if it is a canonical
// one, else the string (aliasing s).
func stringValue(s []byte) shred.Value {
	if us, ok := shred.ParseTimestamp(s); ok {
		return shred.Value{Kind: shred.TimestampTZ, Int: us}
	}
	return shred.Value{Kind: shred.String, Bytes: s}
}

// numberValue is a JSON number's value: BIGINT for an integer within
// int64 in canonical form (not -0), DOUBLE for a number whose text form
// (shred.AppendText) is exactly raw, otherwise its text as VARCHAR. The
// result aliases raw; sub and num are scratch.
func numberValue(raw []byte, sub *jsonIter, num *[]byte) shred.Value {
	if v, ok, isInt := parseInt(raw); isInt {
		if ok {
			return shred.Value{Kind: shred.Int64, Int: v}
		}
		return shred.Value{Kind: shred.String, Bytes: raw}
	}
	sub.Reset(raw)
	x := sub.ReadFloat64()
	if sub.Err() == nil {
		*num = shred.AppendText((*num)[:0], shred.Value{Kind: shred.Double, Float: x})
		if bytes.Equal(*num, raw) {
			return shred.Value{Kind: shred.Double, Float: x}
		}
	}
	return shred.Value{Kind: shred.String, Bytes: raw}
}

// parseInt parses a JSON number without fraction or exponent (isInt);
// ok is false when it is beyond int64 or -0.
func parseInt(raw []byte) (v int64, ok, isInt bool) {
	d := raw
	neg := len(d) > 0 && d[0] == '-'
	if neg {
		d = d[1:]
	}
	var u uint64
	for i, c := range d {
		if c < '0' || c > '9' {
			return 0, false, false
		}
		if i == 19 { // beyond uint64 range is beyond int64 too
			return 0, false, !bytes.ContainsAny(d[i:], ".eE")
		}
		u = u*10 + uint64(c-'0')
	}
	switch {
	case len(d) == 0:
		return 0, false, false
	case neg && (u == 0 || u > 1<<63):
		return 0, false, true
	case neg:
		return -int64(u), true, true
	case u > math.MaxInt64:
		return 0, false, true
	}
	return int64(u), true, true
}

// appendCompactJSON re-encodes the valid JSON value raw compactly:
// whitespace dropped, strings escaped as shred.AppendJSONString does,
// numbers and literals as written, members in order (repeated keys kept).
func appendCompactJSON(dst []byte, it *jsonIter, raw []byte) []byte {
	it.Reset(raw)
	dst = appendJSONValue(dst, it)
	it.Reset(nil)
	return dst
}

func appendJSONValue(dst []byte, it *jsonIter) []byte {
	switch it.Next() {
	case jsonscan.Object:
		it.ObjectStart()
		dst = append(dst, '{')
		n := 0
		for key, ok := it.NextKey(); ok; key, ok = it.NextKey() {
			if n > 0 {
				dst = append(dst, ',')
			}
			n++
			dst = shred.AppendJSONString(dst, key)
			dst = append(dst, ':')
			dst = appendJSONValue(dst, it)
		}
		return append(dst, '}')
	case jsonscan.Array:
		it.ArrayStart()
		dst = append(dst, '[')
		n := 0
		for it.NextElem() {
			if n > 0 {
				dst = append(dst, ',')
			}
			n++
			dst = appendJSONValue(dst, it)
		}
		return append(dst, ']')
	case jsonscan.String:
		return shred.AppendJSONString(dst, it.ReadString())
	case jsonscan.Number:
		return append(dst, it.ReadNumberRaw()...)
	}
	return append(dst, it.Raw()...) // true, false, null
}
