package shred

import (
	"bytes"
	"encoding/base64"
	"math"
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

// resetAs empties the column and gives it scalar type t, keeping buffer
// capacity: batches reuse the columns of keys they no longer see.
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
	}
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

// AppendNulls appends n NULL rows.
func (c *Column) AppendNulls(n int) {
	for ; n > 0; n-- {
		c.AppendNull()
	}
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
		end := c.Child.Len
		if n < c.Len {
			end = int(c.Offs[n])
		} else {
			end = int(c.Offs[c.Len])
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
		for _, f := range c.Fields {
			if r := f.checkUTF8(from); r >= 0 {
				return r
			}
		}
	}
	return -1
}

// Value is one attribute value on its way into a dynamic column.
// Bool is carried in Int as 0 or 1; String, Blob and JSON in Bytes.
type Value struct {
	Kind  Kind
	Int   int64
	Float float64
	Bytes []byte
}

// appendValue appends v, which must be of the column's kind or narrower.
func (c *Column) appendValue(v Value, scratch []byte) []byte {
	k := c.Type.Kind
	switch {
	case v.Kind == Null:
		c.AppendNull()
	case k == v.Kind && (k == Bool || k == Int64):
		c.AppendInt(v.Int)
	case k == Double && v.Kind == Double:
		c.AppendFloat(v.Float)
	case k == Double && v.Kind == Int64:
		c.AppendFloat(float64(v.Int))
	case k == v.Kind:
		c.AppendBytes(v.Bytes)
	default: // widened to String
		scratch = AppendText(scratch[:0], v)
		c.AppendBytes(scratch)
	}
	return scratch
}

// Convert rewrites the column's values into the wider dynamic kind to
// (Widen(kind, to) == to); text renderings follow AppendText.
func (c *Column) Convert(to Kind) {
	from := c.Type.Kind
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
	case to == String || to == JSON:
		offs := make([]int32, 1, c.Len+1)
		var data []byte
		for i := 0; i < c.Len; i++ {
			if c.IsValid(i) {
				data = AppendText(data, c.ValueAt(i))
			}
			offs = append(offs, int32(len(data)))
		}
		c.I64, c.F64, c.Offs, c.Data = nil, nil, offs, data
	default:
		panic("shred: invalid conversion from " + from.String() + " to " + to.String())
	}
	c.Type = ScalarType(to)
}

// narrow undoes Convert: it parses the column's values back into kind k,
// which they were widened from. Every text form of AppendText parses back
// exactly; if a value does not, the column keeps its wider kind.
func (c *Column) narrow(k Kind) {
	from := c.Type.Kind
	if k == Null || from == k {
		return
	}
	n := NewColumn(ScalarType(k))
	for i := 0; i < c.Len; i++ {
		if !c.IsValid(i) {
			n.AppendNull()
			continue
		}
		v := c.ValueAt(i)
		if from == Double && k == Int64 {
			n.AppendInt(int64(v.Float))
			continue
		}
		text := string(v.Bytes)
		switch k {
		case Bool:
			if text != "true" && text != "false" {
				return
			}
			n.AppendBool(text == "true")
		case Int64:
			x, err := strconv.ParseInt(text, 10, 64)
			if err != nil {
				return
			}
			n.AppendInt(x)
		case Double:
			x, err := strconv.ParseFloat(text, 64)
			if err != nil {
				return
			}
			n.AppendFloat(x)
		case Blob:
			raw, err := base64.StdEncoding.DecodeString(text)
			if err != nil {
				return
			}
			n.AppendBytes(raw)
		case JSON:
			n.AppendBytes(v.Bytes)
		default:
			return
		}
	}
	*c = *n
}

// ValueAt returns row i of a dynamic-kind column; Bytes alias the column.
func (c *Column) ValueAt(i int) Value {
	if !c.IsValid(i) {
		return Value{}
	}
	k := c.Type.Kind
	switch k {
	case Double:
		return Value{Kind: k, Float: c.F64[i]}
	case String, Blob, JSON, Enum:
		return Value{Kind: k, Bytes: c.Data[c.Offs[i]:c.Offs[i+1]]}
	}
	return Value{Kind: k, Int: c.I64[i]}
}

// AppendText appends the text form of v: what a value becomes in a column
// widened to VARCHAR. Booleans are true/false, doubles as DuckDB casts them
// (appendFloat), blobs standard base64, JSON its text.
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
	}
	return append(dst, v.Bytes...)
}

// appendFloat renders a double the way DuckDB casts DOUBLE to VARCHAR (the
// shortest round-trip digits; fixed notation with at least one decimal for
// exponents -4..15, else d.ddde±XX; nan, inf, -inf), so that a value
// widened in a batch reads the same as one widened by ALTER TABLE.
func appendFloat(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "nan"...)
	case math.IsInf(f, 1):
		return append(dst, "inf"...)
	case math.IsInf(f, -1):
		return append(dst, "-inf"...)
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
// strings, non-finite doubles as the strings "NaN", "Infinity", "-Infinity".
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
	case Blob:
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, v.Bytes)
		return append(dst, '"')
	}
	return AppendText(dst, v)
}

const hexDigits = "0123456789abcdef"

// AppendJSONString appends s as a quoted JSON string. Invalid UTF-8 becomes
// U+FFFD.
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
