package shred

import (
	"fmt"
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
type CoreColumn struct {
	Name string
	Type *Type
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
	spare   []*DynColumn // dynamic columns of earlier use, for reuse
	marks   []Kind       // dynamic column kinds at Mark
}

// NewBatch returns an empty batch with the given core columns.
func NewBatch(core []CoreColumn) *Batch {
	b := &Batch{Core: make([]*Column, len(core))}
	for i, c := range core {
		b.Core[i] = NewColumn(c.Type)
	}
	for i := range b.idx {
		b.idx[i] = make(map[string]int)
	}
	return b
}

// dyn returns the batch column for (level, key), creating it with kind k
// (or widening it to hold k).
func (b *Batch) dyn(level Level, key []byte, k Kind) *Column {
	i, ok := b.idx[level][string(key)]
	if !ok {
		var d *DynColumn
		if n := len(b.spare); n > 0 {
			d = b.spare[n-1]
			b.spare = b.spare[:n-1]
			d.Col.resetAs(ScalarType(k))
		} else {
			d = &DynColumn{Col: NewColumn(ScalarType(k))}
		}
		d.Level, d.Key = level, string(key)
		b.idx[level][d.Key] = len(b.Dyn)
		b.Dyn = append(b.Dyn, d)
		return d.Col
	}
	c := b.Dyn[i].Col
	if k != Null && c.Type.Kind != k {
		if w := Widen(c.Type.Kind, k); w != c.Type.Kind {
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
	if to <= from {
		return
	}
	c := b.dyn(level, key, v.Kind)
	if c.Len > from {
		c.truncate(from) // the same key again: last wins
	}
	c.AppendNulls(from - c.Len)
	for r := from; r < to; r++ {
		b.scratch = c.appendValue(v, b.scratch)
	}
}

// Reset empties the batch for reuse, keeping its buffers' capacity.
func (b *Batch) Reset() {
	b.Rows = 0
	for _, c := range b.Core {
		c.Reset()
	}
	b.spare = append(b.spare, b.Dyn...)
	clear(b.Dyn)
	b.Dyn = b.Dyn[:0]
	for i := range b.idx {
		clear(b.idx[i])
	}
}

// EndRow marks the row as complete; every core column must have received
// exactly one value (or NULL) for it.
func (b *Batch) EndRow() { b.Rows++ }

// Finish pads every dynamic column to the batch's row count and checks
// that the core columns are complete.
func (b *Batch) Finish() error {
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

// CheckUTF8 returns an error naming the first column whose text in rows
// [from, Rows) (or whose key, for a column created since Mark) is not
// valid UTF-8, which DuckDB's VARCHAR cannot hold. Decoders whose input
// does not guarantee UTF-8 (protobuf) call it before accepting a record.
func (b *Batch) CheckUTF8(from int, coreNames []CoreColumn) error {
	for i, c := range b.Core {
		if r := c.checkUTF8(from); r >= 0 {
			return fmt.Errorf("field %s: invalid UTF-8", coreNames[i].Name)
		}
	}
	for i, d := range b.Dyn {
		if i >= len(b.marks) && !utf8.ValidString(d.Key) {
			return fmt.Errorf("%s attribute key %q: invalid UTF-8", d.Level, d.Key)
		}
		if r := d.Col.checkUTF8(from); r >= 0 {
			return fmt.Errorf("%s attribute %q: invalid UTF-8", d.Level, d.Key)
		}
	}
	return nil
}

// Mark records the dynamic columns' kinds before a record is decoded, for
// Rollback.
func (b *Batch) Mark() {
	b.marks = b.marks[:0]
	for _, d := range b.Dyn {
		b.marks = append(b.marks, d.Col.Type.Kind)
	}
}

// Rollback removes rows [n, Rows) of a record that failed, like Truncate,
// and undoes the widenings the failed record caused, so that rejected
// data leaves no trace in column types. n must be the row count at Mark.
func (b *Batch) Rollback(n int) {
	b.Truncate(n)
	for i, d := range b.Dyn {
		switch {
		case i >= len(b.marks): // created by the failed record: only NULLs remain
			d.Col.resetAs(ScalarType(Null))
			d.Col.AppendNulls(n)
		case d.Col.Type.Kind != b.marks[i]:
			d.Col.narrow(b.marks[i])
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
