package shred

import (
	"fmt"
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
	Level Level
	Key   string
	Col   *Column
}

// Batch is a set of rows in columnar form: the transform's core columns,
// filled for every row in order, and dynamic columns created as attribute
// keys appear, padded with NULLs. A Batch is not safe for concurrent use.
type Batch struct {
	Rows    int
	Core    []*Column
	Dyn     []*DynColumn
	idx     [NumLevels]map[string]int
	scratch []byte
	// spare holds the dynamic columns of earlier use, by key: a key gets
	// its own column back (its buffers sized for its values), a new key
	// any other.
	spare  [NumLevels]map[string]*DynColumn
	marked int            // len(Dyn) at Mark
	saved  map[int]Column // columns as they were before a widening since Mark
	// Truncated counts the values a transform stored whole, as JSON,
	// because they were nested deeper than its depth limit (NDJSON).
	Truncated       int
	markedTruncated int
	lim             limitState // SetLimits (limit.go)
}

// NewBatch returns an empty batch with the given core columns.
func NewBatch(core []CoreColumn) *Batch {
	b := &Batch{Core: make([]*Column, len(core))}
	for i, c := range core {
		b.Core[i] = NewColumn(c.Type)
	}
	for i := range b.idx {
		b.idx[i] = make(map[string]int)
		b.spare[i] = make(map[string]*DynColumn)
	}
	return b
}

// reuse takes a spare column, preferably the one key had before.
func (b *Batch) reuse(level Level, key []byte) *DynColumn {
	if d := b.spare[level][string(key)]; d != nil {
		delete(b.spare[level], d.Key)
		return d
	}
	for _, m := range b.spare {
		for k, d := range m {
			delete(m, k)
			d.Key = string(key)
			return d
		}
	}
	return nil
}

// dyn returns the batch column for (level, key), creating it with the kind
// of v (or widening it to hold v).
func (b *Batch) dyn(level Level, key []byte, v Value) *Column {
	k := v.Kind
	i, ok := b.idx[level][string(key)]
	if !ok {
		d := b.reuse(level, key)
		if d != nil {
			d.Col.resetAs(ScalarType(k))
		} else {
			d = &DynColumn{Key: string(key), Col: NewColumn(ScalarType(k))}
		}
		if b.lim.on {
			b.Reserve(dynColumnCost + len(key)) // FillAttr stops at a refusal
		}
		d.Level = level
		b.idx[level][d.Key] = len(b.Dyn)
		b.Dyn = append(b.Dyn, d)
		return d.Col
	}
	c := b.Dyn[i].Col
	if ck := c.kind(); k != Null && ck != k {
		w := Widen(ck, k)
		if w == Double && ((k == Int64 && !exactInt(v.Int)) || (ck == Int64 && c.beyondExactInt())) {
			w = String // a DOUBLE cannot hold the integer exactly
		}
		if w != ck {
			if _, ok := b.saved[i]; !ok && i < b.marked {
				// Convert builds new buffers, so a shallow copy keeps the
				// column as it was, for Rollback.
				if b.saved == nil {
					b.saved = make(map[int]Column)
				}
				b.saved[i] = *c
			}
			c.Convert(w)
		}
	}
	return c
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
	c := b.dyn(level, key, v)
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
	if i, ok := b.idx[level][string(key)]; ok {
		if c := b.Dyn[i].Col; c.Len > row {
			c.truncate(row)
		}
	}
}

// ClearPrefix is ClearAttr for every key at level that starts with prefix.
// It scans every dynamic column: it is for duplicate keys, which are rare.
func (b *Batch) ClearPrefix(level Level, prefix []byte, row int) {
	for _, d := range b.Dyn {
		if d.Level == level && d.Col.Len > row && strings.HasPrefix(d.Key, string(prefix)) {
			d.Col.truncate(row)
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
	for _, d := range b.Dyn {
		b.spare[d.Level][d.Key] = d
	}
	clear(b.Dyn)
	b.Dyn = b.Dyn[:0]
	for i := range b.idx {
		clear(b.idx[i])
	}
}

// EndRow marks the row as complete; every core column must have received
// exactly one value (or NULL) for it.
func (b *Batch) EndRow() {
	b.Rows++
	if b.lim.on {
		b.endRow()
	}
}

// Finish pads every dynamic column to the batch's row count and checks
// that the core columns are complete.
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
		d.Col.AppendNulls(b.Rows - d.Col.Len)
	}
	return nil
}

// Truncate drops rows [n, Rows): a record that failed half-way is removed
// again. Must be called before Finish, with n at a row boundary.
func (b *Batch) Truncate(n int) {
	for _, c := range b.Core {
		c.truncate(n)
	}
	for _, d := range b.Dyn {
		d.Col.truncate(n)
	}
	b.Rows = n
}

// InvalidUTF8 calls fn, in no particular order, for every row from row
// from on that holds text that is not valid UTF-8, or a value under a key
// that is not (its column may predate the rows, made by an attribute
// without a value), naming the column. A row may be reported more than
// once.
func (b *Batch) InvalidUTF8(from int, coreNames []CoreColumn, fn func(row int, err error)) {
	each := func(c *Column, what func() error) {
		var err error
		for r := c.checkUTF8(from); r >= 0; r = c.checkUTF8(r + 1) {
			if err == nil {
				err = what()
			}
			fn(r, err)
		}
	}
	for i, c := range b.Core {
		each(c, func() error { return fmt.Errorf("field %s: invalid UTF-8", coreNames[i].Name) })
	}
	for _, d := range b.Dyn {
		if !utf8.ValidString(d.Key) {
			err := fmt.Errorf("%s attribute key %q: invalid UTF-8", d.Level, d.Key)
			for r := from; r < d.Col.Len; r++ {
				if d.Col.IsValid(r) {
					fn(r, err)
				}
			}
			continue
		}
		each(d.Col, func() error { return fmt.Errorf("%s attribute %q: invalid UTF-8", d.Level, d.Key) })
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
	for i, c := range b.saved {
		col := b.Dyn[i].Col
		*col = c
		// The validity bitmap is shared with the widened column, which may
		// have set bits past the restored length in its last byte.
		if col.Len&7 != 0 {
			col.Valid[col.Len>>3] &= 1<<(col.Len&7) - 1
		}
	}
	clear(b.saved)
	b.Truncated = b.markedTruncated
	b.Truncate(n)
	for i, d := range b.Dyn {
		if i >= b.marked { // created by the failed record: only NULLs remain
			d.Col.resetAs(ScalarType(Null))
			d.Col.AppendNulls(n)
		}
	}
}

// Bytes estimates the memory held by the batch's values.
func (b *Batch) Bytes() int {
	n := 0
	for _, c := range b.Core {
		n += c.bytes()
	}
	for _, d := range b.Dyn {
		n += d.Col.bytes()
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
