package shred

import "math/bits"

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
