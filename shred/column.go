package shred

import (
	"bytes"
	"encoding/base64"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Column is one column of a batch, laid out like an Arrow array so that the
// ingest stage can hand it to DuckDB without copying values one by one.
//
// Storage by kind:
//   - Bool, Int32, Int64, Uint32, Uint64 (bit pattern), TimestampNS: I64
//   - Double: F64
//   - String, Blob, JSON, Enum: Offs (Len+1 entries) and Data
//   - List: Offs (Len+1 entries) into Child
//   - Struct: one column per field in Fields, each of length Len
//
// Valid is a little-endian bitmap: bit i is set when row i is not NULL.
// A NULL row still occupies a slot in every buffer.
type Column struct {
	Type   *Type
	Len    int
	Nulls  int
	Valid  []byte
	I64    []int64
	F64    []float64
	Offs   []int32
	Data   []byte
	Child  *Column
	Fields []*Column
}

// NewColumn returns an empty column of type t.
func NewColumn(t *Type) *Column {
	c := &Column{Type: t}
	switch t.Kind {
	case String, Blob, JSON, Enum:
		c.Offs = append(c.Offs, 0)
	case List:
		c.Offs = append(c.Offs, 0)
		c.Child = NewColumn(t.Elem)
	case Struct:
		c.Fields = make([]*Column, len(t.Fields))
		for i, f := range t.Fields {
			c.Fields[i] = NewColumn(f.Type)
		}
	}
	return c
}

// Reset empties the column, keeping its buffers' capacity.
func (c *Column) Reset() {
	c.Len, c.Nulls = 0, 0
	c.Valid = c.Valid[:0]
	c.I64 = c.I64[:0]
	c.F64 = c.F64[:0]
	c.Data = c.Data[:0]
	if c.Offs != nil {
		c.Offs = append(c.Offs[:0], 0)
	}
	if c.Child != nil {
		c.Child.Reset()
	}
	for _, f := range c.Fields {
		f.Reset()
	}
}

// resetAs empties the column and gives it type t (a scalar, or a list of a
// scalar), keeping buffer capacity: batches reuse the columns of keys they
// no longer see.
func (c *Column) resetAs(t *Type) {
	c.Type = t
	c.Len, c.Nulls = 0, 0
	c.Valid = c.Valid[:0]
	c.I64 = c.I64[:0]
	c.F64 = c.F64[:0]
	c.Data = c.Data[:0]
	c.Offs = c.Offs[:0]
	switch t.Kind {
	case String, Blob, JSON, Enum:
		c.Offs = append(c.Offs, 0)
	case List:
		c.Offs = append(c.Offs, 0)
		if c.Child != nil {
			c.Child.resetAs(t.Elem)
		} else {
			c.Child = NewColumn(t.Elem)
		}
		return
	}
	c.Child = nil
}

// validCount counts the rows that hold a value (bits past Len are clear).
func (c *Column) validCount() int {
	n := 0
	for _, x := range c.Valid[:(c.Len+7)/8] {
		n += bits.OnesCount8(x)
	}
	return n
}

// IsValid reports whether row i holds a value.
func (c *Column) IsValid(i int) bool { return c.Valid[i>>3]&(1<<(i&7)) != 0 }

func (c *Column) pushValid(ok bool) {
	if c.Len&7 == 0 {
		c.Valid = append(c.Valid, 0)
	}
	if ok {
		c.Valid[c.Len>>3] |= 1 << (c.Len & 7)
	} else {
		c.Nulls++
	}
	c.Len++
}

// AppendNull appends a NULL row.
func (c *Column) AppendNull() {
	switch c.Type.Kind {
	case Double:
		c.F64 = append(c.F64, 0)
	case String, Blob, JSON, Enum:
		c.Offs = append(c.Offs, int32(len(c.Data)))
	case List:
		c.Offs = append(c.Offs, int32(c.Child.Len))
	case Struct:
		for _, f := range c.Fields {
			f.AppendNull()
		}
	default:
		c.I64 = append(c.I64, 0)
	}
	c.pushValid(false)
}

// AppendNulls appends n NULL rows. Batches pad sparse columns with it, so
// it fills the buffers in bulk.
func (c *Column) AppendNulls(n int) {
	if n <= 0 {
		return
	}
	switch c.Type.Kind {
	case Struct:
		for ; n > 0; n-- {
			c.AppendNull()
		}
		return
	case Double:
		c.F64 = append(c.F64, make([]float64, n)...)
	case String, Blob, JSON, Enum, List:
		end := int32(len(c.Data))
		if c.Type.Kind == List {
			end = int32(c.Child.Len)
		}
		c.Offs = slices.Grow(c.Offs, n)
		for range n {
			c.Offs = append(c.Offs, end)
		}
	default:
		c.I64 = append(c.I64, make([]int64, n)...)
	}
	// Bits past Len are always clear, so only whole bytes are added.
	c.Len += n
	c.Nulls += n
	c.Valid = append(c.Valid, make([]byte, (c.Len+7)/8-len(c.Valid))...)
}

// AppendInt appends an integer (Bool: 0 or 1; Uint64: the bit pattern).
func (c *Column) AppendInt(v int64) {
	c.I64 = append(c.I64, v)
	c.pushValid(true)
}

// AppendTime appends a TimestampNS value; 0 (unset in OTLP) appends NULL.
func (c *Column) AppendTime(ns uint64) {
	if ns == 0 {
		c.AppendNull()
		return
	}
	c.AppendInt(int64(ns))
}

// AppendBool appends a boolean.
func (c *Column) AppendBool(v bool) {
	var i int64
	if v {
		i = 1
	}
	c.AppendInt(i)
}

// AppendFloat appends a double.
func (c *Column) AppendFloat(v float64) {
	c.F64 = append(c.F64, v)
	c.pushValid(true)
}

// AppendBytes appends a String, Blob or JSON value.
func (c *Column) AppendBytes(b []byte) {
	c.Data = append(c.Data, b...)
	c.Offs = append(c.Offs, int32(len(c.Data)))
	c.pushValid(true)
}

// AppendString appends a String, Blob or JSON value.
func (c *Column) AppendString(s string) {
	c.Data = append(c.Data, s...)
	c.Offs = append(c.Offs, int32(len(c.Data)))
	c.pushValid(true)
}

// AppendStringOrNull appends s, or NULL when s is empty.
func (c *Column) AppendStringOrNull(s string) {
	if s == "" {
		c.AppendNull()
		return
	}
	c.AppendString(s)
}

// AppendStringN appends s n times; an empty s appends NULLs.
func (c *Column) AppendStringN(s string, n int) {
	for ; n > 0; n-- {
		c.AppendStringOrNull(s)
	}
}

// AppendIntN appends v n times.
func (c *Column) AppendIntN(v int64, n int) {
	for ; n > 0; n-- {
		c.AppendInt(v)
	}
}

// EndList closes a list row whose elements were appended to Child since
// the previous row.
func (c *Column) EndList() {
	c.Offs = append(c.Offs, int32(c.Child.Len))
	c.pushValid(true)
}

// EndStruct closes a non-NULL struct row whose fields were each appended.
func (c *Column) EndStruct() { c.pushValid(true) }

// truncate drops rows from the end so that Len == n. Nested columns also
// drop child elements appended past row n for a row that was never ended.
func (c *Column) truncate(n int) {
	switch c.Type.Kind {
	case List:
		end := int(c.Offs[c.Len])
		if n < c.Len {
			end = int(c.Offs[n])
		}
		c.Child.truncate(end)
	case Struct:
		for _, f := range c.Fields {
			f.truncate(min(n, c.Len))
		}
	}
	if c.Len <= n {
		return
	}
	for i := n; i < c.Len; i++ {
		if !c.IsValid(i) {
			c.Nulls--
		}
		c.Valid[i>>3] &^= 1 << (i & 7)
	}
	c.Len = n
	c.Valid = c.Valid[:(n+7)/8]
	switch c.Type.Kind {
	case Double:
		c.F64 = c.F64[:n]
	case String, Blob, JSON, Enum:
		c.Offs = c.Offs[:n+1]
		c.Data = c.Data[:c.Offs[n]]
	case List:
		c.Offs = c.Offs[:n+1]
	case Struct:
	default:
		c.I64 = c.I64[:n]
	}
}

// checkUTF8 reports the first row from row from on whose text is not valid
// UTF-8, or -1.
func (c *Column) checkUTF8(from int) int {
	if from >= c.Len {
		return -1
	}
	switch c.Type.Kind {
	case String, JSON, Enum:
		if utf8.Valid(c.Data[c.Offs[from]:c.Offs[c.Len]]) {
			return -1
		}
		for i := from; i < c.Len; i++ {
			if !utf8.Valid(c.Data[c.Offs[i]:c.Offs[i+1]]) {
				return i
			}
		}
	case List:
		if r := c.Child.checkUTF8(int(c.Offs[from])); r >= 0 {
			for i := from; i < c.Len; i++ {
				if int(c.Offs[i+1]) > r {
					return i
				}
			}
		}
	case Struct:
		first := -1
		for _, f := range c.Fields {
			if r := f.checkUTF8(from); r >= 0 && (first < 0 || r < first) {
				first = r
			}
		}
		return first
	}
	return -1
}

// Value is one attribute value on its way into a dynamic column.
// Bool is carried in Int as 0 or 1; String, Blob and JSON in Bytes.
type Value struct {
	Kind  Kind
	Int   int64 // Bool, Int64, TimestampTZ (microseconds)
	Float float64
	Bytes []byte
	Elems []Value // the elements of a dynamic list kind: each Null or of its element kind
}

// kind is the column's dynamic kind.
func (c *Column) kind() Kind { return c.Type.DynKind() }

// appendValue appends v, which must be of the column's kind or narrower
// (and, into a DOUBLE column, an integer within ±MaxExactInt).
func (c *Column) appendValue(v Value, scratch []byte) []byte {
	k := c.kind()
	switch {
	case v.Kind == Null:
		c.AppendNull()
	case k == v.Kind && (k == Bool || k == Int64 || k == TimestampTZ):
		c.AppendInt(v.Int)
	case k == Double && v.Kind == Double:
		c.AppendFloat(v.Float)
	case k == Double && v.Kind == Int64:
		c.AppendFloat(float64(v.Int))
	case k.IsList() && v.Kind.IsList(): // the same kind, or a list of NULLs
		for _, e := range v.Elems {
			scratch = c.Child.appendValue(e, scratch)
		}
		c.EndList()
	case k == v.Kind:
		c.AppendBytes(v.Bytes)
	default: // widened to String or JSON
		scratch = AppendText(scratch[:0], v)
		c.AppendBytes(scratch)
	}
	return scratch
}

// Convert rewrites the column's values into the wider dynamic kind to
// (Widen(kind, to) == to; from BIGINT to DOUBLE only when every value is
// within ±MaxExactInt); text renderings follow AppendTextAt. It builds new
// buffers and leaves the old ones as they were, so a shallow copy of the
// column taken before keeps its old contents (Batch.Rollback relies on it).
func (c *Column) Convert(to Kind) {
	from := c.kind()
	if from == to {
		return
	}
	switch {
	case from == Null:
		n := c.Len
		*c = *NewColumn(ScalarType(to))
		c.AppendNulls(n)
		return
	case from == Int64 && to == Double:
		c.F64 = make([]float64, len(c.I64))
		for i, v := range c.I64 {
			c.F64[i] = float64(v)
		}
		c.I64 = nil
	case from == ListNull && to.IsList():
		child := NewColumn(ScalarType(to.Elem()))
		child.AppendNulls(c.Child.Len)
		c.Child = child
	case to == String || to == JSON:
		offs := make([]int32, 1, c.Len+1)
		var data []byte
		for i := 0; i < c.Len; i++ {
			if c.IsValid(i) {
				data = c.AppendTextAt(data, i)
			}
			offs = append(offs, int32(len(data)))
		}
		c.I64, c.F64, c.Offs, c.Data, c.Child = nil, nil, offs, data, nil
	default:
		panic("shred: invalid conversion from " + from.String() + " to " + to.String())
	}
	c.Type = ScalarType(to)
}

// beyondExactInt reports whether an Int64 column holds a value beyond
// ±MaxExactInt, which a DOUBLE cannot hold exactly.
func (c *Column) beyondExactInt() bool {
	for i, v := range c.I64 {
		if !exactInt(v) && c.IsValid(i) {
			return true
		}
	}
	return false
}

// ValueAt returns row i of a dynamic-kind column; Bytes alias the column.
// For a list it allocates Elems.
func (c *Column) ValueAt(i int) Value {
	if !c.IsValid(i) {
		return Value{}
	}
	k := c.kind()
	switch {
	case k == Double:
		return Value{Kind: k, Float: c.F64[i]}
	case k == String || k == Blob || k == JSON || k == Enum:
		return Value{Kind: k, Bytes: c.Data[c.Offs[i]:c.Offs[i+1]]}
	case k.IsList():
		v := Value{Kind: k, Elems: make([]Value, 0, c.Offs[i+1]-c.Offs[i])}
		for j := c.Offs[i]; j < c.Offs[i+1]; j++ {
			v.Elems = append(v.Elems, c.Child.ValueAt(int(j)))
		}
		return v
	}
	return Value{Kind: k, Int: c.I64[i]}
}

// AppendTextAt appends the text form (AppendText) of row i, which must
// not be NULL.
func (c *Column) AppendTextAt(dst []byte, i int) []byte {
	if c.kind().IsList() {
		return c.appendListJSON(dst, i)
	}
	return AppendText(dst, c.ValueAt(i))
}

// AppendJSONAt appends row i as a JSON value (AppendJSON).
func (c *Column) AppendJSONAt(dst []byte, i int) []byte {
	if c.kind().IsList() && c.IsValid(i) {
		return c.appendListJSON(dst, i)
	}
	return AppendJSON(dst, c.ValueAt(i))
}

func (c *Column) appendListJSON(dst []byte, i int) []byte {
	dst = append(dst, '[')
	for j := c.Offs[i]; j < c.Offs[i+1]; j++ {
		if j > c.Offs[i] {
			dst = append(dst, ',')
		}
		dst = appendElemJSON(dst, c.Child.ValueAt(int(j)))
	}
	return append(dst, ']')
}

// appendElemJSON appends a list element in the canonical JSON form of a
// list: null, true/false, decimal integers, doubles in their text form,
// strings and timestamps (their text form) as JSON strings. The SQL of
// ingest's widening renders lists the same way.
func appendElemJSON(dst []byte, v Value) []byte {
	switch v.Kind {
	case Null:
		return append(dst, "null"...)
	case String:
		return AppendJSONString(dst, v.Bytes)
	case TimestampTZ:
		dst = append(dst, '"')
		dst = AppendTimestamp(dst, v.Int)
		return append(dst, '"')
	}
	return AppendText(dst, v)
}

// AppendText appends the text form of v: what a value becomes in a column
// widened to VARCHAR. Booleans are true/false, doubles as appendFloat
// renders them, timestamps canonical (AppendTimestamp), blobs standard
// base64, lists their canonical JSON (appendElemJSON), JSON its text.
func AppendText(dst []byte, v Value) []byte {
	switch v.Kind {
	case Bool:
		return strconv.AppendBool(dst, v.Int != 0)
	case Int64:
		return strconv.AppendInt(dst, v.Int, 10)
	case Double:
		return appendFloat(dst, v.Float)
	case Blob:
		return base64.StdEncoding.AppendEncode(dst, v.Bytes)
	case TimestampTZ:
		return AppendTimestamp(dst, v.Int)
	}
	if v.Kind.IsList() {
		dst = append(dst, '[')
		for j, e := range v.Elems {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = appendElemJSON(dst, e)
		}
		return append(dst, ']')
	}
	return append(dst, v.Bytes...)
}

// appendFloat renders a double as text: an integral value within
// ±MaxExactInt as the integer ("1", and "0" for -0), so that an integer
// keeps its text through a widening from BIGINT to DOUBLE to VARCHAR; any
// other value the way DuckDB casts DOUBLE to VARCHAR (the shortest
// round-trip digits; fixed notation with at least one decimal for
// exponents -4..15, else d.ddde±XX; nan, inf, -inf). ingest widens DOUBLE
// columns to VARCHAR with the same rule in SQL.
func appendFloat(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "nan"...)
	case math.IsInf(f, 1):
		return append(dst, "inf"...)
	case math.IsInf(f, -1):
		return append(dst, "-inf"...)
	case f == math.Trunc(f) && f >= -MaxExactInt && f <= MaxExactInt:
		return strconv.AppendInt(dst, int64(f), 10)
	}
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', -1, 64) // -d.ddde±XX
	neg := e[0] == '-'
	if neg {
		e = e[1:]
		dst = append(dst, '-')
	}
	mant, expPart, _ := bytes.Cut(e, []byte{'e'})
	exp, _ := strconv.Atoi(string(expPart))
	digits := make([]byte, 0, 20)
	for _, c := range mant {
		if c != '.' {
			digits = append(digits, c)
		}
	}
	if exp < -4 || exp >= 16 {
		dst = append(dst, digits[0])
		if len(digits) > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:]...)
		}
		dst = append(dst, 'e')
		if exp < 0 {
			dst = append(dst, '-')
			exp = -exp
		} else {
			dst = append(dst, '+')
		}
		if exp < 10 {
			dst = append(dst, '0')
		}
		return strconv.AppendInt(dst, int64(exp), 10)
	}
	if exp < 0 {
		dst = append(dst, '0', '.')
		for i := -1; i > exp; i-- {
			dst = append(dst, '0')
		}
		return append(dst, digits...)
	}
	if len(digits) <= exp+1 {
		dst = append(dst, digits...)
		for i := len(digits); i <= exp; i++ {
			dst = append(dst, '0')
		}
		return append(dst, '.', '0')
	}
	dst = append(dst, digits[:exp+1]...)
	dst = append(dst, '.')
	return append(dst, digits[exp+1:]...)
}

// AppendJSON appends v as a JSON value: strings quoted, blobs as base64
// strings, non-finite doubles as the strings "NaN", "Infinity", "-Infinity",
// timestamps as JSON strings of their text form, lists as JSON arrays
// (appendElemJSON).
func AppendJSON(dst []byte, v Value) []byte {
	switch v.Kind {
	case Null:
		return append(dst, "null"...)
	case Double:
		switch {
		case math.IsNaN(v.Float):
			return append(dst, `"NaN"`...)
		case math.IsInf(v.Float, 1):
			return append(dst, `"Infinity"`...)
		case math.IsInf(v.Float, -1):
			return append(dst, `"-Infinity"`...)
		}
		return strconv.AppendFloat(dst, v.Float, 'g', -1, 64)
	case String:
		return AppendJSONString(dst, v.Bytes)
	case TimestampTZ:
		return appendElemJSON(dst, v)
	case Blob:
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, v.Bytes)
		return append(dst, '"')
	}
	return AppendText(dst, v)
}

const hexDigits = "0123456789ABCDEF"

// AppendJSONString appends s as a quoted JSON string, escaped as DuckDB's
// to_json escapes: `"`, `\`, \b, \f, \n, \r, \t, other control characters as
// \u00XX (upper-case hex), everything else verbatim. Invalid UTF-8 becomes
// \ufffd.
func AppendJSONString(dst, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
