package shred

import (
	"fmt"
	"slices"
)

// Append adds src's rows to b, as decoding src's records into b would
// have: the core columns in bulk, each dynamic column into b's column of
// its key, created or widened as its values would widen it. src (finished
// or not) is left as it is. It ignores b's limits: a merged batch is the
// sum of batches each built within them. Both must have one transform's
// core columns. It ends what Mark began: no Rollback may follow it (it pads
// columns in place, over values a Rollback would restore).
func (b *Batch) Append(src *Batch) error {
	if len(src.Core) != len(b.Core) {
		return fmt.Errorf("shred: appending a batch of %d core columns to one of %d", len(src.Core), len(b.Core))
	}
	for i, c := range src.Core {
		if c.Len != src.Rows || b.Core[i].Len != b.Rows || (c.Type != b.Core[i].Type && c.Type.SQL() != b.Core[i].Type.SQL()) {
			return fmt.Errorf("shred: core column %d: %d rows of %s appended to %d of %s (batches of %d and %d rows)",
				i, c.Len, c.Type.SQL(), b.Core[i].Len, b.Core[i].Type.SQL(), src.Rows, b.Rows)
		}
	}
	for i, c := range src.Core {
		b.Core[i].appendColumn(c)
	}
	base := b.Rows
	rows := base + src.Rows
	for _, sd := range src.Dyn {
		k := sd.Col.kind()
		if k == Null {
			continue // plans and stores nothing, widens nothing
		}
		// Each column goes to b's column of its key that takes its kind,
		// or to a stray of that kind, as its values would when decoded. A
		// column of NULLs keeps the kind of a value a duplicate key cut,
		// which widened the key's column where it was decoded: it widens
		// b's so too.
		key := []byte(sd.Key)
		d, _ := b.dynKind(sd.Level, key, k, k == Int64 && sd.inexact)
		d.inexact = d.inexact || sd.inexact
		c := d.Col
		bulk := c.kind() == k
		switch {
		case d.At == nil && sd.At == nil && bulk:
			c.AppendNulls(base - c.Len)
			c.appendColumn(sd.Col)
		case d.At == nil && bulk && sd.At != nil && c.copiesRows():
			c.AppendNulls(base - c.Len)
			c.appendSparse(sd.Col, sd.At, src.Rows)
		case d.At == nil:
			for i, r := range sd.values {
				c.AppendNulls(base + r - c.Len)
				b.scratch = c.appendValue(sd.Col.ValueAt(i), b.scratch)
			}
		default:
			if bulk && sd.At != nil && sd.Col.Nulls == 0 {
				c.appendColumn(sd.Col)
				for _, r := range sd.At {
					d.At = append(d.At, int32(base)+r)
				}
			} else {
				for i, r := range sd.values {
					b.scratch = c.appendValue(sd.Col.ValueAt(i), b.scratch)
					d.At = append(d.At, int32(base+r))
				}
			}
			if n := len(d.At); n > 0 {
				d.hi = d.At[n-1] + 1
			}
			if len(d.At) >= sparseMin && len(d.At)*denseShare >= rows {
				d.densifyInPlace(rows)
			}
		}
	}
	b.Rows = rows
	b.Truncated += src.Truncated
	clear(b.saved)
	return nil
}

// copiesRows reports whether appendSparse takes c's kind.
func (c *Column) copiesRows() bool { return c.Type.Kind != List && c.Type.Kind != Struct }

// appendSparse appends n rows, NULL but those of src's values: value i
// is row at[i] (increasing) of them. src is of c's kind, not a list or a
// struct.
func (c *Column) appendSparse(src *Column, at []int32, n int) {
	base := c.Len
	switch c.Type.Kind {
	case Double:
		c.F64 = append(c.F64, make([]float64, n)...)
		for i, r := range at {
			c.F64[base+int(r)] = src.F64[i]
		}
	case String, Blob, JSON, Enum:
		c.Offs = slices.Grow(c.Offs, n)
		j := 0
		for r := range n {
			if j < len(at) && int(at[j]) == r {
				c.Data = append(c.Data, src.Data[src.Offs[j]:src.Offs[j+1]]...)
				j++
			}
			c.Offs = append(c.Offs, int32(len(c.Data)))
		}
	default:
		c.I64 = append(c.I64, make([]int64, n)...)
		for i, r := range at {
			c.I64[base+int(r)] = src.I64[i]
		}
	}
	c.Len += n
	c.Valid = append(c.Valid, make([]byte, (c.Len+7)/8-len(c.Valid))...)
	nulls := n
	for i, r := range at {
		if src.IsValid(i) {
			row := base + int(r)
			c.Valid[row>>3] |= 1 << (row & 7)
			nulls--
		}
	}
	c.Nulls += nulls
}

// appendColumn appends every row of src, a column of c's type.
func (c *Column) appendColumn(src *Column) {
	n := src.Len
	if n == 0 {
		return
	}
	switch c.Type.Kind {
	case Double:
		c.F64 = append(c.F64, src.F64[:n]...)
	case String, Blob, JSON, Enum:
		delta := int32(len(c.Data)) - src.Offs[0]
		c.Data = append(c.Data, src.Data[src.Offs[0]:src.Offs[n]]...)
		c.Offs = appendShifted(c.Offs, src.Offs[1:n+1], delta)
	case List:
		delta := int32(c.Child.Len) - src.Offs[0]
		c.Offs = appendShifted(c.Offs, src.Offs[1:n+1], delta)
		c.Child.appendColumn(src.Child)
	case Struct:
		for i, f := range c.Fields {
			f.appendColumn(src.Fields[i])
		}
	default:
		c.I64 = append(c.I64, src.I64[:n]...)
	}
	c.appendValid(src.Valid, n)
	c.Len += n
	c.Nulls += src.Nulls
}

// appendShifted appends offs, each plus delta, to dst.
func appendShifted(dst, offs []int32, delta int32) []int32 {
	at := len(dst)
	dst = slices.Grow(dst, len(offs))[:at+len(offs)]
	out := dst[at:]
	for i, o := range offs {
		out[i] = o + delta
	}
	return dst
}

// appendValid appends the first n bits of valid to c's bitmap (before
// c.Len moves on). Bits past a column's rows are clear, so whole bytes of
// valid can be shifted in.
func (c *Column) appendValid(valid []byte, n int) {
	bytes := valid[:(n+7)/8]
	off := c.Len & 7
	if off == 0 {
		c.Valid = append(c.Valid, bytes...)
		return
	}
	for _, x := range bytes {
		c.Valid[len(c.Valid)-1] |= x << off
		c.Valid = append(c.Valid, x>>(8-off))
	}
	c.Valid = c.Valid[:(c.Len+n+7)/8]
}
