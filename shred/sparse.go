package shred

import (
	"math/bits"
	"slices"
)

// Sparse dynamic columns. A key that few rows of a batch carry (HTTP
// headers, user-defined keys: thousands of keys, each on a fraction of a
// percent of the rows) would cost a padded slot in every row; a sparse
// column holds only its values and the row of each (DynColumn.At), so a
// batch's memory grows with its values, not with keys × rows. A column
// starts sparse and is padded once it is dense (denseShare), and by
// Output for a key with a stored column.
const (
	// sparseMin values at least before a filling column is padded.
	sparseMin = 64
	// denseShare: a column with values in one of denseShare rows or more
	// is padded.
	denseShare = 8
)

// sparse empties d's row index for a column that starts again (a column
// of a padded key is nil there).
func (d *DynColumn) sparse() {
	if d.At == nil {
		d.At, d.spare = d.spare, nil
		if d.At == nil {
			d.At = []int32{}
		}
	}
	d.At = d.At[:0]
}

// cut drops the values of rows from row on.
func (d *DynColumn) cut(row int) {
	if d.At == nil {
		if d.Col.Len > row {
			d.Col.truncate(row)
		}
		return
	}
	n := d.first(row)
	if n < len(d.At) {
		d.Col.truncate(n)
		d.At = d.At[:n]
	}
}

// first returns the index of the first value in row row or later.
func (d *DynColumn) first(row int) int {
	if d.At == nil {
		return row
	}
	n := len(d.At)
	for n > 0 && int(d.At[n-1]) >= row { // fills come in row order: cuts are near the end
		n--
	}
	return n
}

// row returns the row of value i.
func (d *DynColumn) row(i int) int {
	if d.At == nil {
		return i
	}
	return int(d.At[i])
}

// densify pads a sparse column into one value per row, rows rows. A
// column whose values are rows 0 to n-1 is padded in place: a copy saved
// for Rollback reads only its first values, which padding leaves as they
// are (Rollback clears the bits past them).
func (d *DynColumn) densify(rows int) {
	if d.At == nil {
		d.Col.AppendNulls(rows - d.Col.Len)
		return
	}
	if n := len(d.At); n == 0 || int(d.At[n-1]) == n-1 { // rows increase: values 0..n-1
		d.Col.AppendNulls(rows - d.Col.Len)
		d.At, d.spare = nil, d.At[:0]
		return
	}
	src := d.Col
	dst := NewColumn(src.Type)
	var scratch []byte
	for i, r := range d.At {
		dst.AppendNulls(int(r) - dst.Len)
		scratch = dst.appendValue(src.ValueAt(i), scratch)
	}
	dst.AppendNulls(rows - dst.Len)
	*d.Col = *dst
	d.At, d.spare = nil, d.At[:0]
}

// densifyInPlace is densify for a batch no Rollback reads again (finished,
// or merged by Append): the values move to their rows in place, from the
// last one back (row >= index), and the bitmap is rebuilt in a buffer the
// column keeps, so that padding allocates nothing once the batch is
// reused.
func (d *DynColumn) densifyInPlace(rows int) {
	c := d.Col
	n := len(d.At)
	if d.At == nil || n == 0 || int(d.At[n-1]) == n-1 || c.Type.Kind == Struct {
		d.densify(rows)
		return
	}
	at := d.At
	switch c.Type.Kind {
	case Double:
		c.F64 = spread(c.F64, at, rows)
	case String, Blob, JSON, Enum, List:
		c.Offs = spreadOffsets(c.Offs, at, rows)
	default:
		c.I64 = spread(c.I64, at, rows)
	}
	valid := slices.Grow(d.spareValid[:0], (rows+7)/8)[:(rows+7)/8]
	clear(valid)
	for i, r := range at {
		if c.Nulls == 0 || c.IsValid(i) {
			valid[r>>3] |= 1 << (r & 7)
		}
	}
	d.spareValid, c.Valid = c.Valid[:0], valid
	c.Nulls += rows - n
	c.Len = rows
	d.At, d.spare = nil, d.At[:0]
}

// spread moves value i of v to index at[i] (at increasing, at[i] >= i),
// zeroing the others, in a slice of rows values.
func spread[T int64 | float64](v []T, at []int32, rows int) []T {
	n := len(at)
	v = slices.Grow(v[:n], rows-n)[:rows]
	next := rows
	for i := n - 1; i >= 0; i-- {
		r := int(at[i])
		clear(v[r+1 : next])
		v[r] = v[i]
		next = r
	}
	clear(v[:next])
	return v
}

// spreadOffsets is spread for the offsets of a column of variable width:
// the bytes (or child values) stay where they are, and a padded row is
// empty at the end of the value before it.
func spreadOffsets(offs []int32, at []int32, rows int) []int32 {
	n := len(at)
	first := offs[0]
	offs = slices.Grow(offs[:n+1], rows-n)[:rows+1]
	next := rows // offs[next] is set: the start of the value after
	for i := n - 1; i >= 0; i-- {
		r := int(at[i])
		s, e := offs[i], offs[i+1]
		for k := r + 1; k <= next; k++ {
			offs[k] = e
		}
		offs[r] = s
		next = r
	}
	for k := 0; k < next; k++ {
		offs[k] = first
	}
	return offs
}

// values yields the index and row of every non-NULL value of d, in order.
func (d *DynColumn) values(yield func(i, row int) bool) {
	c := d.Col
	if d.At != nil {
		for i, r := range d.At {
			if (c.Nulls == 0 || c.IsValid(i)) && !yield(i, int(r)) {
				return
			}
		}
		return
	}
	for j, b := range c.Valid {
		for b != 0 {
			i := j<<3 + bits.TrailingZeros8(b)
			b &= b - 1
			if i < c.Len && !yield(i, i) {
				return
			}
		}
	}
}

// valuesIn counts d's values (not NULL) in rows [from, to).
func (d *DynColumn) valuesIn(from, to int) int {
	n := 0
	if d.At != nil {
		for i, r := range d.At {
			if int(r) >= from && int(r) < to && d.Col.IsValid(i) {
				n++
			}
		}
		return n
	}
	for r := from; r < min(to, d.Col.Len); r++ {
		if d.Col.IsValid(r) {
			n++
		}
	}
	return n
}
