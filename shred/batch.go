package shred

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Level is where an attribute was attached in OTLP (or, for generic JSON,
// Record for every key).
type Level uint8

// Attribute levels.
const (
	Record   Level = iota // span, log record or data point attributes; NDJSON fields
	Resource              // resource attributes
	Scope                 // instrumentation scope attributes
	NumLevels
)

var levelNames = [NumLevels]string{"record", "resource", "scope"}
var levelPrefix = [NumLevels]string{"", "resource.", "scope."}

// String names the level as recorded in the catalog.
func (l Level) String() string { return levelNames[l] }

// Prefix is prepended to a key to form its column name.
func (l Level) Prefix() string { return levelPrefix[l] }

// ParseLevel is the inverse of Level.String.
func ParseLevel(s string) (Level, bool) {
	for i, n := range levelNames {
		if n == s {
			return Level(i), true
		}
	}
	return 0, false
}

// CoreColumn is a fixed column that a transform fills for every row.
//
// A Deferred column is one that most data leaves at its default: NULL, or
// 0 with Zero (a span's trace_state, its dropped-attribute counts, the
// overflow columns). DuckDB's storage work per row grows with the number of
// columns, NULL or not, so such a column is created virtual (GENERATED
// ALWAYS AS its default) and stored only once a batch holds another value
// (see ingest). Queries see the column, and the same values, either way.
type CoreColumn struct {
	Name     string
	Type     *Type
	Deferred bool
	// Zero: the column's default is 0, not NULL (an integer the protocol
	// cannot leave out, such as a count). Only with Deferred.
	Zero bool
	// OnDemand: the column is not in the table until a batch holds a value
	// other than NULL, then added (ingest). For columns most tables never
	// need, the overflow maps: even virtual, a column costs at every
	// insert (DuckDB computes virtual columns per row; twelve maps made
	// the 1M-span load 12% slower).
	OnDemand bool
}

// DefaultSQL is the column's default as SQL: 0 or NULL.
func (c CoreColumn) DefaultSQL() string {
	if c.Zero {
		return "0"
	}
	return "NULL"
}

// OnlyDefault reports whether every row of col, a batch column of c, holds
// c's default (DefaultSQL): the batch then needs no storage for it.
func (c CoreColumn) OnlyDefault(col *Column) bool {
	if col.Nulls == col.Len {
		return true
	}
	if !c.Zero {
		return false
	}
	for i, v := range col.I64 {
		if v != 0 && col.IsValid(i) {
			return false
		}
	}
	return true
}

// DynColumn is a batch column for one attribute key at one level.
type DynColumn struct {
	Key string
	Col *Column
	// At, when not nil, holds the row of each of Col's values: the column
	// is sparse, not padded with NULLs (sparse.go). Nil: row i is value i.
	At []int32
	// spare is At's buffer while the column is padded, for its next use.
	spare []int32
	// spareValid is the bitmap buffer densifyInPlace swaps with Col's.
	spareValid []byte
	// gen is the use of the batch (Batch.gen) the column belongs to, pos
	// its index in Dyn then; a column of an earlier use is kept for reuse.
	gen uint32
	pos int32
	// hi bounds the rows of a sparse column's values (all are below it),
	// so that a fill past them need not read At to find a value to cut.
	hi int32
	// inexact: the column was given an integer beyond ±MaxExactInt,
	// perhaps cut since (a later duplicate of its key). Decoded after
	// rows whose column of the key is DOUBLE, such a value widens it to
	// VARCHAR: Append widens so too.
	inexact bool
	Level   Level
	// planned is the key's entry in the schema plannedWith, found by Plan
	// and kept while the column keeps its key.
	planned     *ColInfo
	plannedWith *Schema
	// Values of a kind that the key's column holds only by a lossy
	// widening (a string among integers) go to a column of their own
	// kind, one of the key column's strays, so that a stray value never
	// retypes the others (docs/SCHEMA.md, 5.6). A stray has its key's
	// column as primary; the batch's key map holds only the primary.
	strays  []*DynColumn
	primary *DynColumn
	col     Column // what Col points to: one allocation per column
}

// Lossless reports whether widening a column of kind from to kind to
// keeps every value and every query on it: from NULL, BIGINT to DOUBLE
// (for integers within ±MaxExactInt, checked by the caller), a list of
// NULLs (or an empty one) to a typed list or JSON. Other widenings (to VARCHAR or JSON) are not
// made: the values that would need them are strays.
func Lossless(from, to Kind) bool {
	return from == to || from == Null || (from == Int64 && to == Double) || (from == ListNull && (to.IsList() || to == JSON))
}

// Batch is a set of rows in columnar form: the transform's core columns,
// filled for every row in order, and dynamic columns created as attribute
// keys appear, padded with NULLs. A Batch is not safe for concurrent use.
type Batch struct {
	Rows int
	Core []*Column
	Dyn  []*DynColumn
	// keys holds the column of each key in Dyn and, until the next Reset,
	// those of the previous use (prev): a key that comes again gets its own
	// column back without allocating, and a new key takes one of prev
	// whose key has not come back (next is the next to try). With
	// thousands of keys per batch, most of them in every batch, this saves
	// an allocation and a map insert per key and batch.
	keys    [NumLevels]map[string]*DynColumn
	gen     uint32
	prev    []*DynColumn
	next    int
	scratch []byte
	out     outBuffers       // Output's
	marked  int              // len(Dyn) at Mark
	saved   map[int]savedCol // columns as they were before a widening or densify since Mark
	// Truncated counts the values a transform stored whole, as JSON,
	// because they were nested deeper than its depth limit (NDJSON).
	Truncated       int
	markedTruncated int
	lim             limitState // SetLimits (limit.go)
	strays          int        // stray columns in Dyn (they share their primary's key)
}

// NewBatch returns an empty batch with the given core columns.
func NewBatch(core []CoreColumn) *Batch {
	b := &Batch{Core: make([]*Column, len(core)), gen: 1}
	for i, c := range core {
		b.Core[i] = NewColumn(c.Type)
	}
	for i := range b.keys {
		b.keys[i] = make(map[string]*DynColumn)
	}
	return b
}

// lookup returns the batch column of (level, key), or nil.
func (b *Batch) lookup(level Level, key []byte) *DynColumn {
	if d := b.keys[level][string(key)]; d != nil && d.gen == b.gen {
		return d
	}
	return nil
}

// column returns a column for a key new to the batch: the key's own from
// the previous use, one of the previous use whose key has not come back,
// or a new one.
func (b *Batch) column(level Level, key []byte) *DynColumn {
	if d := b.keys[level][string(key)]; d != nil {
		return d
	}
	for b.next < len(b.prev) {
		d := b.prev[b.next]
		b.next++
		if d.gen != b.gen { // its key has not come back: take it
			delete(b.keys[d.Level], d.Key)
			d.Key = string(key)
			d.planned, d.plannedWith = nil, nil
			b.keys[level][d.Key] = d
			return d
		}
	}
	d := &DynColumn{Key: string(key)}
	d.Col = &d.col
	b.keys[level][d.Key] = d
	return d
}

// dyn returns the batch column for (level, key), creating it (sparse)
// with the kind of v or widening it to hold v, and its index in Dyn.
func (b *Batch) dyn(level Level, key []byte, v Value) (*DynColumn, int) {
	return b.dynKind(level, key, v.Kind, v.Kind == Int64 && !exactInt(v.Int))
}

// dynKind is dyn for values of kind k; inexact says that one of them is an
// integer a DOUBLE cannot hold exactly.
func (b *Batch) dynKind(level Level, key []byte, k Kind, inexact bool) (*DynColumn, int) {
	d := b.keys[level][string(key)]
	if d == nil || d.gen != b.gen {
		d = b.column(level, key)
		d.strays = d.strays[:0]
		b.addDyn(d, level, key, k, inexact)
		return d, len(b.Dyn) - 1
	}
	if k == Null || d.Col.kind() == k {
		return b.widened(d, d.Col.kind(), inexact)
	}
	for _, s := range d.strays { // a column of k's own kind first
		if s.Col.kind() == k {
			return b.widened(s, k, inexact)
		}
	}
	if w, ok := d.takes(k, inexact); ok {
		return b.widened(d, w, inexact)
	}
	for _, s := range d.strays {
		if w, ok := s.takes(k, inexact); ok {
			return b.widened(s, w, inexact)
		}
	}
	s := &DynColumn{Key: d.Key, primary: d}
	s.Col = &s.col
	d.strays = append(d.strays, s)
	b.strays++
	b.addDyn(s, level, key, k, inexact)
	return s, len(b.Dyn) - 1
}

// addDyn starts d, empty and sparse, as the batch's next dynamic column.
func (b *Batch) addDyn(d *DynColumn, level Level, key []byte, k Kind, inexact bool) {
	d.Col.resetAs(ScalarType(k))
	d.sparse()
	if b.lim.on {
		b.Reserve(dynColumnCost + len(key)) // FillAttr stops at a refusal
	}
	d.Level, d.gen, d.pos, d.hi, d.inexact = level, b.gen, int32(len(b.Dyn)), 0, inexact
	b.Dyn = append(b.Dyn, d)
}

// takes reports whether d's column can hold values of kind k (inexact:
// an integer beyond ±MaxExactInt among them), and the kind it must be
// widened to for them: Lossless from its own kind and from k (a VARCHAR
// batch column does not take integers: a stored BIGINT column may).
func (d *DynColumn) takes(k Kind, inexact bool) (Kind, bool) {
	ck := d.Col.kind()
	if k == Null || ck == k {
		return ck, true
	}
	w := Widen(ck, k)
	if w == Double && ((k == Int64 && inexact) || (ck == Int64 && (d.inexact || d.Col.beyondExactInt()))) {
		w = String // a DOUBLE cannot hold the integer exactly (or could not, before a duplicate key cut it)
	}
	return w, Lossless(ck, w) && Lossless(k, w) // neither the column's values nor k's change kind lossily
}

// widened widens d to w (a lossless widening, or none) for a value.
func (b *Batch) widened(d *DynColumn, w Kind, inexact bool) (*DynColumn, int) {
	i := int(d.pos)
	if inexact && !d.inexact {
		b.save(i) // before a widening: Rollback undoes both
		d.inexact = true
	}
	if w != d.Col.kind() {
		b.save(i) // Convert builds new buffers: a shallow copy keeps the old
		d.Col.Convert(w)
	}
	return d, i
}

// cutFamily drops the values that the other columns of d's key (its
// primary and strays) hold in rows from on: a key set again in a row
// keeps only its last value, whatever its kind.
func (d *DynColumn) cutFamily(from int) {
	p := d
	if d.primary != nil {
		p = d.primary
	}
	if len(p.strays) == 0 {
		return
	}
	if p != d {
		p.cut(from)
	}
	for _, s := range p.strays {
		if s != d {
			s.cut(from)
		}
	}
}

// members returns the columns of d's key in the batch: its primary, then
// its strays.
func (d *DynColumn) members() []*DynColumn {
	p := d
	if d.primary != nil {
		p = d.primary
	}
	return append([]*DynColumn{p}, p.strays...)
}

// Family returns the batch's columns of d's key: the key's column, then
// its strays, each of a kind the others cannot take without a lossy
// widening (a key set only to values of one kind has one). Their rows are
// disjoint. The slice is new; the columns are the batch's.
func (d *DynColumn) Family() []*DynColumn { return d.members() }

// Stray reports whether d holds values of its key that the key's column
// (Family()[0]) could take only by a lossy widening.
func (d *DynColumn) Stray() bool { return d.primary != nil }

// lead returns the first column of d's key with a value, or d.
func (d *DynColumn) lead() *DynColumn {
	if d.primary == nil && len(d.strays) == 0 {
		return d
	}
	for _, m := range d.members() {
		if m.gen == d.gen && m.Col.Len > m.Col.Nulls && m.Col.kind() != Null {
			return m
		}
	}
	return d
}

// familyBeyond reports whether a BIGINT column of d's key holds an
// integer beyond ±MaxExactInt.
func (d *DynColumn) familyBeyond() bool {
	for _, m := range d.members() {
		if m.gen == d.gen && m.Col.kind() == Int64 && m.Col.beyondExactInt() {
			return true
		}
	}
	return false
}

// family returns the kind of the column of d's key that holds the most
// values (of several, the smallest Kind), the widening of all their kinds (String where
// a DOUBLE cannot hold one of the integers), and the values they hold.
func (d *DynColumn) family() (major, join Kind, n int) {
	if d.primary == nil && len(d.strays) == 0 {
		k := d.Col.kind()
		return k, widenExact(Null, k, false), d.Col.Len - d.Col.Nulls
	}
	most, beyond := -1, false
	for _, m := range d.members() {
		k, c := m.Col.kind(), m.Col.Len-m.Col.Nulls
		if m.gen != d.gen || k == Null || c == 0 {
			continue
		}
		if c > most || (c == most && k < major) { // a tie: the first kind, not the first value, so that batch boundaries do not decide
			major, most = k, c
		}
		join = Widen(join, k)
		beyond = beyond || (k == Int64 && m.Col.beyondExactInt())
		n += c
	}
	if join == Double && beyond {
		join = String
	}
	return major, join, n
}

// save keeps Dyn[i] as it is, for Rollback, before the first change since
// Mark that Truncate cannot undo (a widening, a densify).
func (b *Batch) save(i int) {
	if _, ok := b.saved[i]; ok || i >= b.marked {
		return
	}
	if b.saved == nil {
		b.saved = make(map[int]savedCol)
	}
	d := b.Dyn[i]
	b.saved[i] = savedCol{col: *d.Col, at: d.At, inexact: d.inexact}
}

// savedCol is a dynamic column as Mark found it.
type savedCol struct {
	col     Column
	at      []int32
	inexact bool
}

// SetAttr sets attribute key at level for row (the row being built, or a
// later one). Setting the same key twice in a row keeps the last value.
func (b *Batch) SetAttr(level Level, key []byte, row int, v Value) {
	b.FillAttr(level, key, row, row+1, v)
}

// FillAttr sets attribute key at level for rows [from, to): resource and
// scope attributes are filled once for all rows they apply to. Fills of one
// key must come in row order.
func (b *Batch) FillAttr(level Level, key []byte, from, to int, v Value) {
	if to <= from || b.lim.err != nil {
		return
	}
	d, i := b.dyn(level, key, v)
	c := d.Col
	if d.primary != nil || len(d.strays) > 0 {
		d.cutFamily(from)
	}
	if d.At != nil {
		if b.lim.on && !b.Reserve((to-from)*(4+padCell+len(v.Bytes))) {
			return
		}
		if int32(from) < d.hi {
			d.cut(from) // the same key again: last wins
		}
		for r := from; r < to; r++ {
			b.scratch = c.appendValue(v, b.scratch)
			d.At = append(d.At, int32(r))
		}
		d.hi = int32(to)
		if len(d.At) >= sparseMin && len(d.At)*denseShare >= to {
			b.save(i)
			b.Reserve((to - len(d.At)) * padCell)
			d.densify(to)
		}
		return
	}
	if b.lim.on && !b.reserveFill(c, from, to, v) {
		return
	}
	if c.Len > from {
		c.truncate(from) // the same key again: last wins
	}
	c.AppendNulls(from - c.Len)
	for r := from; r < to; r++ {
		b.scratch = c.appendValue(v, b.scratch)
	}
}

// ClearAttr makes key at level NULL in row (the row being built) if it
// was set there: a later duplicate key whose value is null or an object
// wins over an earlier value. Kinds widened by the earlier value stay.
func (b *Batch) ClearAttr(level Level, key []byte, row int) {
	if d := b.lookup(level, key); d != nil {
		d.cut(row)
		d.cutFamily(row)
	}
}

// ClearPrefix is ClearAttr for every key at level that starts with prefix.
// It scans every dynamic column: it is for duplicate keys, which are rare.
func (b *Batch) ClearPrefix(level Level, prefix []byte, row int) {
	for _, d := range b.Dyn {
		if d.Level == level && strings.HasPrefix(d.Key, string(prefix)) {
			d.cut(row)
		}
	}
}

// Reset empties the batch for reuse, keeping its buffers' capacity.
func (b *Batch) Reset() {
	b.Rows = 0
	b.lim = limitState{}
	b.marked = 0
	b.Truncated, b.markedTruncated = 0, 0
	clear(b.saved)
	for _, c := range b.Core {
		c.Reset()
	}
	// The columns of the previous use whose keys did not come back are
	// dropped: the batch keeps those of one use, however many keys it saw.
	for _, d := range b.prev[b.next:] {
		if d.gen != b.gen && d.primary == nil {
			delete(b.keys[d.Level], d.Key)
		}
	}
	clear(b.prev)
	b.prev, b.Dyn = b.Dyn, b.prev[:0]
	if b.strays > 0 { // strays are made again when needed: only key columns are reused
		b.prev = slices.DeleteFunc(b.prev, func(d *DynColumn) bool { return d.primary != nil })
		b.strays = 0
	}
	b.out.reset()
	b.next = 0
	b.gen++
}

// EndRow marks the row as complete; every core column must have received
// exactly one value (or NULL) for it.
func (b *Batch) EndRow() {
	b.Rows++
	if b.lim.on {
		b.endRow()
	}
}

// Finish pads every dynamic column to the batch's row count, but sparse
// ones that hold values in fewer than one in denseShare rows (they stay
// sparse: Output reads them so; Pad pads them too), and checks that the
// core columns are complete.
func (b *Batch) Finish() error {
	if b.lim.on && !b.reservePadding() {
		return b.lim.err
	}
	for i, c := range b.Core {
		if c.Len != b.Rows {
			return fmt.Errorf("shred: core column %d has %d rows, batch has %d", i, c.Len, b.Rows)
		}
	}
	for _, d := range b.Dyn {
		switch {
		case d.At == nil:
			d.Col.AppendNulls(b.Rows - d.Col.Len)
		case b.padSparse(d):
			d.densifyInPlace(b.Rows)
		}
	}
	return nil
}

// padSparse reports whether Finish pads the sparse column d.
func (b *Batch) padSparse(d *DynColumn) bool { return len(d.At)*denseShare >= b.Rows }

// Pad pads the columns a finished batch left sparse, so that row i of
// every dynamic column is value i (for readers other than Output; it
// costs a slot per row and key).
func (b *Batch) Pad() {
	for _, d := range b.Dyn {
		d.densifyInPlace(b.Rows)
	}
}

// Truncate drops rows [n, Rows): a record that failed half-way is removed
// again. Must be called before Finish, with n at a row boundary.
func (b *Batch) Truncate(n int) {
	for _, c := range b.Core {
		c.truncate(n)
	}
	for _, d := range b.Dyn {
		d.cut(n)
	}
	b.Rows = n
}

// InvalidUTF8 calls fn, in no particular order, for every row from row
// from on that holds text that is not valid UTF-8, or a value under a key
// that is not (its column may predate the rows, made by an attribute
// without a value), naming the column. A row may be reported more than
// once.
func (b *Batch) InvalidUTF8(from int, coreNames []CoreColumn, fn func(row int, err error)) {
	each := func(d *DynColumn, c *Column, what func() error) {
		var err error
		start := from
		if d != nil {
			start = d.first(from)
		}
		for i := c.checkUTF8(start); i >= 0; i = c.checkUTF8(i + 1) {
			if err == nil {
				err = what()
			}
			if d != nil {
				fn(d.row(i), err)
			} else {
				fn(i, err)
			}
		}
	}
	for i, c := range b.Core {
		each(nil, c, func() error { return fmt.Errorf("field %s: invalid UTF-8", coreNames[i].Name) })
	}
	for _, d := range b.Dyn {
		if !utf8.ValidString(d.Key) {
			err := fmt.Errorf("%s attribute key %q: invalid UTF-8", d.Level, d.Key)
			for i := d.first(from); i < d.Col.Len; i++ {
				if d.Col.IsValid(i) {
					fn(d.row(i), err)
				}
			}
			continue
		}
		each(d, d.Col, func() error { return fmt.Errorf("%s attribute %q: invalid UTF-8", d.Level, d.Key) })
	}
}

// Mark records the state of the batch before a record is decoded, for
// Rollback. It costs O(1): widenings save the columns they change as they
// happen.
func (b *Batch) Mark() {
	clear(b.saved)
	b.marked = len(b.Dyn)
	b.markedTruncated = b.Truncated
}

// Rollback removes rows [n, Rows) of a record that failed, like Truncate,
// and undoes the widenings the failed record caused, so that rejected
// data leaves no trace in column types. n must be the row count at Mark.
func (b *Batch) Rollback(n int) {
	for i, sc := range b.saved {
		d := b.Dyn[i]
		col := d.Col
		*col = sc.col
		d.At, d.inexact = sc.at, sc.inexact
		// The validity bitmap is shared with the widened column, which may
		// have set bits past the restored length in its last byte.
		if col.Len&7 != 0 {
			col.Valid[col.Len>>3] &= 1<<(col.Len&7) - 1
		}
		// A change saved in the middle of the failed record (a padding
		// once the record's value was in, or the widening of a duplicate
		// key) may be followed by a later duplicate of the key in that
		// record, which rewrote bits of the copy's last values: count its
		// NULLs again from the bitmap, so that Truncate, which drops those
		// values counting their bits as they are now, leaves the NULLs of
		// the rows before right (one too few handed DuckDB no bitmap).
		col.Nulls = col.Len - col.validCount()
	}
	clear(b.saved)
	b.Truncated = b.markedTruncated
	b.Truncate(n)
	b.dropStrays(b.marked)
	for i, d := range b.Dyn {
		if i >= b.marked { // created by the failed record: only NULLs remain
			d.Col.resetAs(ScalarType(Null))
			d.inexact = false
			if d.At != nil {
				d.At = d.At[:0]
			} else {
				d.Col.AppendNulls(n)
			}
		}
	}
}

// dropStrays removes the strays from Dyn[from:] (made by a failed
// record): a key's column keeps no stray without values.
func (b *Batch) dropStrays(from int) {
	if b.strays == 0 {
		return
	}
	kept := b.Dyn[:from]
	for _, d := range b.Dyn[from:] {
		if d.primary == nil {
			d.pos = int32(len(kept))
			kept = append(kept, d)
			continue
		}
		p := d.primary
		p.strays = slices.DeleteFunc(p.strays, func(s *DynColumn) bool { return s == d })
		b.strays--
	}
	clear(b.Dyn[len(kept):])
	b.Dyn = kept
}

// Bytes estimates the memory held by the batch's values (and, once
// output, by its overflow maps).
func (b *Batch) Bytes() int {
	n := 0
	for _, c := range b.Core {
		n += c.bytes()
	}
	for _, d := range b.Dyn {
		n += d.Col.bytes() + 4*len(d.At)
	}
	for _, l := range b.out.built { // the overflow maps of the last Output
		for _, c := range l {
			if c != nil {
				n += c.bytes()
			}
		}
	}
	return n
}

func (c *Column) bytes() int {
	n := len(c.Valid) + 8*len(c.I64) + 8*len(c.F64) + 4*len(c.Offs) + len(c.Data)
	if c.Child != nil {
		n += c.Child.bytes()
	}
	for _, f := range c.Fields {
		n += f.bytes()
	}
	return n
}
