package shred

import (
	"strconv"
	"strings"
)

// ColInfo describes where one attribute key's values live in a table.
type ColInfo struct {
	Name     string // column name (unquoted)
	Level    Level
	Key      string
	Kind     Kind // current dynamic kind; Null for overflowed keys
	Overflow bool // true: the key's values go into the level's overflow column
}

// Change is one schema change a batch needs before it can be inserted.
//
// A widening from Int64 to Double is planned from the batch's values only:
// before applying it the caller must check the values already in the table
// and, if one is beyond ±MaxExactInt, set Col.Kind to String instead (the
// batch is converted to Col.Kind by Output).
type Change struct {
	Col  *ColInfo
	Add  bool // a new column (or, with Col.Overflow, a new overflowed key)
	From Kind // for a widening: the previous kind
}

type levelKey struct {
	level Level
	key   string
}

// Schema maps a table's attribute keys to columns. It owns the naming rule:
//
//   - a key's column is its level prefix ("", "resource.", "scope.") + key;
//     the empty record-level key is named "~empty";
//   - DuckDB identifiers are case-insensitive, so when that name equals an
//     existing column's name ignoring case (a core column, or a column of
//     another key), "~2", "~3", ... is appended until it is free;
//   - the "resource." and "scope." prefixes belong to their levels: a record
//     key that starts with one of them (ignoring case) never takes the bare
//     name, it starts at "~2", so that it cannot claim the column of a
//     resource or scope attribute that arrives later;
//   - once a table has MaxColumns dynamic columns, further keys go to the
//     level's overflow column as members of a JSON object.
//
// With PathKeys (NDJSON tables: one level, keys are escaped paths, see
// PathColumnName) the name is PathColumnName(key) and no prefix is
// reserved; the case and overflow rules are the same.
//
// The mapping is recorded in the catalog and never changes once made.
// A Schema is used by one goroutine.
type Schema struct {
	MaxColumns int
	PathKeys   bool
	overflow   [NumLevels]string
	cols       map[levelKey]*ColInfo
	taken      map[string]bool // lower-cased column names in use
	dyn        int
}

// NewSchema returns the schema of a table with the given core columns and
// per-level overflow columns (which must be among the core columns).
func NewSchema(core []CoreColumn, overflow [NumLevels]string, maxColumns int) *Schema {
	s := &Schema{
		MaxColumns: maxColumns,
		overflow:   overflow,
		cols:       make(map[levelKey]*ColInfo),
		taken:      make(map[string]bool),
	}
	for _, c := range core {
		s.taken[strings.ToLower(c.Name)] = true
	}
	return s
}

// Load registers an existing mapping (read back from the catalog).
func (s *Schema) Load(ci ColInfo) {
	c := ci
	s.cols[levelKey{c.Level, c.Key}] = &c
	if !c.Overflow {
		s.taken[strings.ToLower(c.Name)] = true
		s.dyn++
	}
}

// Lookup returns the mapping of (level, key), or nil.
func (s *Schema) Lookup(level Level, key string) *ColInfo {
	return s.cols[levelKey{level, key}]
}

// Columns returns the number of dynamic columns.
func (s *Schema) Columns() int { return s.dyn }

// Taken reports whether name is in use, ignoring case.
func (s *Schema) Taken(name string) bool { return s.taken[strings.ToLower(name)] }

// ColumnName returns the base column name of a key before collision rules.
// A NUL byte, which DuckDB identifiers cannot hold, becomes U+FFFD in the
// name (the catalog keeps the key as it was).
func ColumnName(level Level, key string) string {
	name := level.Prefix() + strings.ReplaceAll(key, "\x00", "\uFFFD")
	if name == "" {
		name = "~empty"
	}
	return name
}

// PathColumnName returns the base column name of an NDJSON path key: its
// segments joined with "." and unescaped. The key a\.b of {"a.b":1} and the
// key a.b of {"a":{"b":1}} are both named "a.b"; the collision rule then
// tells them apart. NUL becomes U+FFFD, and the empty name is "~empty".
func PathColumnName(key string) string {
	if strings.IndexByte(key, '\\') >= 0 {
		var sb strings.Builder
		for i := 0; i < len(key); i++ {
			if key[i] == '\\' && i+1 < len(key) {
				i++
			}
			sb.WriteByte(key[i])
		}
		key = sb.String()
	}
	return ColumnName(Record, key)
}

// Plan resolves every dynamic column of b against the table: new keys get
// names (or the overflow column), kinds that b needs wider are widened.
// It updates the schema and returns the changes to apply before inserting b.
func (s *Schema) Plan(b *Batch) []Change {
	var changes []Change
	for _, d := range b.Dyn {
		k := d.Col.kind()
		lk := levelKey{d.Level, d.Key}
		ci := s.cols[lk]
		if ci == nil {
			if k == Null || d.Col.Nulls == d.Col.Len {
				continue // all NULL: fixes nothing, stores nothing
			}
			ci = &ColInfo{Level: d.Level, Key: d.Key, Kind: k}
			if s.dyn >= s.MaxColumns {
				ci.Overflow, ci.Kind, ci.Name = true, Null, s.overflow[d.Level]
			} else {
				if s.PathKeys {
					ci.Name = s.freeName(PathColumnName(d.Key), false)
				} else {
					ci.Name = s.freeName(ColumnName(d.Level, d.Key), d.Level == Record && levelPrefixed(d.Key))
				}
				s.taken[strings.ToLower(ci.Name)] = true
				s.dyn++
			}
			s.cols[lk] = ci
			changes = append(changes, Change{Col: ci, Add: true})
			continue
		}
		if ci.Overflow || k == Null || d.Col.Nulls == d.Col.Len {
			continue
		}
		w := Widen(ci.Kind, k)
		if w == Double && k == Int64 && d.Col.beyondExactInt() {
			w = String
		}
		if w != ci.Kind {
			changes = append(changes, Change{Col: ci, From: ci.Kind})
			ci.Kind = w
		}
	}
	return changes
}

// levelPrefixed reports whether a record key looks like another level's
// column name.
func levelPrefixed(key string) bool {
	for _, l := range []Level{Resource, Scope} {
		p := l.Prefix()
		if len(key) >= len(p) && strings.EqualFold(key[:len(p)], p) {
			return true
		}
	}
	return false
}

// freeName returns name, or name~N for the smallest N >= 2 that is free.
func (s *Schema) freeName(name string, skipBare bool) string {
	if !skipBare && !s.taken[strings.ToLower(name)] {
		return name
	}
	for i := 2; ; i++ {
		n := name + "~" + strconv.Itoa(i)
		if !s.taken[strings.ToLower(n)] {
			return n
		}
	}
}

// OutColumn is a named column ready to insert.
type OutColumn struct {
	Name string
	Col  *Column
}

// Output returns b's columns under their table names, in table terms: each
// dynamic column converted to its table kind, overflowed keys folded into
// their level's overflow column. core names the core columns in order.
// b must have been planned and finished.
func (s *Schema) Output(core []CoreColumn, b *Batch) []OutColumn {
	out := make([]OutColumn, 0, len(core)+len(b.Dyn))
	var over [NumLevels][]*DynColumn
	for i, c := range core {
		out = append(out, OutColumn{Name: c.Name, Col: b.Core[i]})
	}
	for _, d := range b.Dyn {
		ci := s.cols[levelKey{d.Level, d.Key}]
		if ci == nil {
			continue // only NULLs
		}
		if ci.Overflow {
			over[d.Level] = append(over[d.Level], d)
			continue
		}
		if d.Col.kind() != ci.Kind {
			if d.Col.Nulls == d.Col.Len { // only NULLs: any kind will do
				n := d.Col.Len
				d.Col.resetAs(ScalarType(ci.Kind))
				d.Col.AppendNulls(n)
			} else {
				d.Col.Convert(ci.Kind)
			}
		}
		out = append(out, OutColumn{Name: ci.Name, Col: d.Col})
	}
	for level, ds := range over {
		if len(ds) == 0 {
			continue
		}
		for i := range out[:len(core)] {
			if out[i].Name == s.overflow[level] {
				out[i].Col = foldOverflow(out[i].Col, ds, b.Rows)
			}
		}
	}
	return out
}

// foldOverflow builds a JSON column whose row i is an object of the
// overflowed keys that have a value in row i, merged with what the
// transform already put into the overflow column.
func foldOverflow(prev *Column, ds []*DynColumn, rows int) *Column {
	out := NewColumn(TJSON)
	var buf []byte
	for r := 0; r < rows; r++ {
		buf = buf[:0]
		n := 0
		if prev.IsValid(r) {
			obj := prev.Data[prev.Offs[r]:prev.Offs[r+1]]
			if len(obj) > 2 {
				buf = append(buf, obj[:len(obj)-1]...)
				n++
			}
		}
		for _, d := range ds {
			if !d.Col.IsValid(r) {
				continue
			}
			if n == 0 {
				buf = append(buf, '{')
			} else {
				buf = append(buf, ',')
			}
			n++
			buf = AppendJSONString(buf, []byte(d.Key))
			buf = append(buf, ':')
			buf = d.Col.AppendJSONAt(buf, r)
		}
		if n == 0 {
			out.AppendNull()
			continue
		}
		buf = append(buf, '}')
		out.AppendBytes(buf)
	}
	return out
}
