package shred

import (
	"errors"
	"fmt"
)

// Limits bound what a batch may take while a request is decoded into it:
// a decoded batch can be much larger than its input (a two-byte empty span
// is a row of some thirty columns, a resource attribute is copied into
// every row of its block, a key seen in one row is padded with NULLs in
// all the others), so the input's size alone bounds nothing.
type Limits struct {
	// MaxRows, when positive, is the most rows the batch may hold.
	MaxRows int
	// MaxKeys, when positive, is the most distinct attribute keys (of all
	// levels) the batch may hold: each new one is a catalog row for good.
	MaxKeys int
	// Charge, when set, is asked for bytes before the batch grows by an
	// amount its input does not bound (values filled into many rows, NULL
	// padding) and, every few rows, for what it has grown by since; it
	// returns false to refuse. Bytes granted are not given back.
	Charge func(n int64) bool
}

// Errors reported by Batch.Err.
var (
	ErrTooManyRows = errors.New("too many rows")
	ErrTooManyKeys = errors.New("too many distinct attribute keys")
	ErrMemory      = errors.New("no memory granted for the batch")
)

// Limited batches measure themselves every measureRows rows at least, and
// at least as seldom as they have columns (measuring costs a pass over
// them). Charges are asked in steps of chargeStep, to keep calls few.
const (
	measureRows = 1024
	chargeStep  = 256 << 10
	// padCell is what one NULL of padding costs, at most: an 8-byte slot.
	padCell = 8
	// dynColumnCost is what an attribute column costs before its values:
	// its structs, its index entry and its first buffers.
	dynColumnCost = 512
)

// limitState is a batch's Limits and what it has used of them.
type limitState struct {
	Limits
	on      bool
	est     int64 // estimate of the batch's bytes, incl. padding still to come
	charged int64 // granted by Charge
	next    int   // Rows at which to measure again
	err     error
}

// SetLimits applies l to the batch until Reset. A batch past its limits
// stops growing where it can (fills are skipped) and reports it in Err;
// decoders check Err at every record and fail the request with it.
func (b *Batch) SetLimits(l Limits) {
	b.lim = limitState{Limits: l, on: l.MaxRows > 0 || l.MaxKeys > 0 || l.Charge != nil, est: int64(b.Bytes())}
	b.lim.next = b.Rows + measureRows
}

// Err reports the first limit the batch reached (an error wrapping
// ErrTooManyRows or ErrMemory), or nil.
func (b *Batch) Err() error { return b.lim.err }

// Reserve is called before the caller adds about n bytes that the input
// does not bound (one value copied into many rows). False: the limits
// refuse them; the caller adds nothing and the decoder fails with Err.
func (b *Batch) Reserve(n int) bool {
	if !b.lim.on {
		return true
	}
	if b.lim.err != nil {
		return false
	}
	b.lim.est += int64(n)
	return b.charge()
}

func (b *Batch) charge() bool {
	l := &b.lim
	if l.Charge == nil || l.est <= l.charged {
		return true
	}
	want := l.est + chargeStep
	if !l.Charge(want - l.charged) {
		l.err = fmt.Errorf("%w: %d bytes in %d rows and %d attribute columns", ErrMemory, l.est, b.Rows, len(b.Dyn))
		return false
	}
	l.charged = want
	return true
}

// endRow checks the limits after row b.Rows-1 was ended.
func (b *Batch) endRow() {
	l := &b.lim
	if l.err != nil {
		return
	}
	if l.MaxRows > 0 && b.Rows > l.MaxRows {
		l.err = fmt.Errorf("%w: more than %d", ErrTooManyRows, l.MaxRows)
		return
	}
	if keys := len(b.Dyn) - b.strays; l.MaxKeys > 0 && keys > l.MaxKeys {
		l.err = fmt.Errorf("%w: %d by record %d, more than %d", ErrTooManyKeys, keys, b.Rows, l.MaxKeys)
		return
	}
	if b.Rows >= l.next {
		l.next = b.Rows + max(measureRows, len(b.Core)+len(b.Dyn))
		b.measure()
	}
}

// measure sets the estimate to the bytes the batch holds plus the NULL
// padding its attribute columns will get, and charges the growth.
func (b *Batch) measure() bool {
	est := int64(b.Bytes())
	for _, d := range b.Dyn {
		switch {
		case d.At == nil:
			est += int64(b.Rows-d.Col.Len) * padCell
		case b.padSparse(d):
			est += int64(b.Rows-len(d.At)) * padCell
		}
	}
	b.lim.est = max(b.lim.est, est)
	return b.charge()
}

// reserveFill reserves what FillAttr is about to add to c: padding up to
// from and the value in rows [from, to).
func (b *Batch) reserveFill(c *Column, from, to int, v Value) bool {
	n := max(from-c.Len, 0)*padCell + (to-from)*(padCell+len(v.Bytes))
	return b.Reserve(n)
}

// reservePadding reserves the padding Finish is about to add.
func (b *Batch) reservePadding() bool {
	if !b.lim.on {
		return true
	}
	if b.lim.err != nil {
		return false
	}
	return b.measure()
}

// Capacity is the memory the batch keeps for reuse: the capacity of the
// buffers of every column, those of keys it no longer sees and of its
// output's overflow maps included.
func (b *Batch) Capacity() int {
	n := 0
	for _, c := range b.Core {
		n += c.capacity()
	}
	for _, m := range b.keys {
		for _, d := range m {
			n += d.Col.capacity()
		}
	}
	for _, l := range b.out.built {
		for _, c := range l {
			if c != nil {
				n += c.capacity()
			}
		}
	}
	return n
}

// SpareColumns counts the attribute columns the batch keeps for reuse.
func (b *Batch) SpareColumns() int {
	n := 0
	for _, m := range b.keys {
		n += len(m)
	}
	return n
}

func (c *Column) capacity() int {
	n := cap(c.Valid) + 8*cap(c.I64) + 8*cap(c.F64) + 4*cap(c.Offs) + cap(c.Data)
	if c.Child != nil {
		n += c.Child.capacity()
	}
	for _, f := range c.Fields {
		n += f.capacity()
	}
	return n
}
