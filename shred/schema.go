package shred

import (
	"slices"
	"strconv"
	"strings"
)

// ColInfo describes where one attribute key's values live in a table.
type ColInfo struct {
	Name  string // column name (unquoted); an overflowed key keeps the name it reads as
	Level Level
	Key   string
	// Kind is the column's kind or, for an overflowed key, the narrowest
	// kind that holds all its values (the type it reads as); Null for a
	// Legacy key.
	Kind     Kind
	Overflow bool // the key has no stored column: its values go to the level's overflow
	// Legacy: overflowed by a release before the typed maps; all its
	// values are in the level's JSON overflow column, and it stays there.
	Legacy bool
	// Promoted: the key got its stored column after values of it had gone
	// to the overflow, where those values stay.
	Promoted bool
	// BeyondDouble: the key's BIGINT column holds an integer a DOUBLE
	// cannot hold exactly (the caller found it before a widening): its
	// doubles are strays.
	BeyondDouble bool
	count        *keyCount // its density count, while it has no column
	added        uint64    // the plan (Schema.plans) that added the key
}

// Change is one schema change a batch needs before it can be inserted.
//
// A widening from Int64 to Double is planned from the batch's values only:
// before applying it to a stored column the caller must check the values
// already in the table and, if one is beyond ±MaxExactInt, set Col.Kind to
// String instead (the batch is converted to Col.Kind by Output).
type Change struct {
	Col *ColInfo
	Add bool // a new key: a new column, or with Col.Overflow a new overflowed key
	// Promote: an overflowed key gets its stored column (of Col.Kind).
	Promote bool
	From    Kind // for a widening: the previous kind (of an overflowed key: only the catalog's)
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
//   - while the table has fewer than Young dynamic columns, every key
//     gets a stored column at once: a young table reads as typed columns
//     in any DuckDB or Parquet reader (the official OTLP examples, a
//     3-span file, a one-row NDJSON post), not as overflow maps;
//   - beyond that, a key gets a stored column when it is dense: carried by at least
//     Density of the table's recent records (a window of Window records,
//     and at least MinRecords in the denominator, so that a handful of
//     records does not decide), while the table has fewer than MaxColumns
//     dynamic columns. Other keys are overflowed (overflow.go) under the
//     name they would have had, which stays reserved for them; one that
//     turns dense later is promoted, from then on.
//
// With PathKeys (NDJSON tables: one level, keys are escaped paths, see
// PathColumnName) the name is PathColumnName(key) and no prefix is
// reserved; the case and overflow rules are the same.
//
// The mapping is recorded in the catalog; it changes only by promotion.
// A Schema is used by one goroutine.
type Schema struct {
	MaxColumns int
	// Density, Window and MinRecords decide which keys are stored (see
	// above); Density <= 0 stores every key while there is room.
	Density    float64
	Window     int
	MinRecords int
	// Young is the number of dynamic columns below which every key gets
	// one, whatever its density.
	Young    int
	PathKeys bool
	overflow [NumLevels]string
	cols     map[levelKey]*ColInfo
	taken    map[string]bool // lower-cased column names in use
	dyn      int
	// Counts are the density counts of the table's keys (NewSchema makes
	// them; a caller may share one KeyCounts among the schemas it makes of
	// a table over time).
	Counts *KeyCounts
	plans  uint64 // Plan calls
}

// Defaults of the density rule: a key on 1% of the last 100,000 records
// (and on at least 20 records) gets a column. With 1,000 records in the
// denominator, 2,000 keys each on 0.5% of 1,600 spans got 80 columns by
// chance (serve's TestSparseKeysServer): a key must show more before a
// young table gives it a column for good.
//
// DefaultYoung: a young column of a rare key costs DuckDB about 0.65 bytes
// a row for good (its dictionary indexes and validity, NULL or not). On
// 200,000 spans with 5,000 keys on 0.2% of them each, a budget of 16 kept
// the file at 1.26x the 20-key file's (22.8 MB against 18.1), 32 gave
// 1.94x and 64 2.33x (docs/SPARSE.md).
const (
	DefaultDensity    = 0.01
	DefaultWindow     = 100_000
	DefaultMinRecords = 2000
	DefaultYoung      = 16
)

// NewSchema returns the schema of a table with the given core columns and
// per-level overflow columns (which must be among the core columns, with
// their maps: OverflowMaps), with the default density rule.
func NewSchema(core []CoreColumn, overflow [NumLevels]string, maxColumns int) *Schema {
	s := &Schema{
		MaxColumns: maxColumns,
		Density:    DefaultDensity,
		Window:     DefaultWindow,
		MinRecords: DefaultMinRecords,
		Young:      DefaultYoung,
		overflow:   overflow,
		cols:       make(map[levelKey]*ColInfo),
		taken:      make(map[string]bool),
		Counts:     new(KeyCounts),
	}
	for _, c := range core {
		s.taken[strings.ToLower(c.Name)] = true
	}
	return s
}

// Load registers an existing mapping (read back from the catalog), before
// the schema plans a batch.
func (s *Schema) Load(ci ColInfo) {
	c := ci
	s.cols[levelKey{c.Level, c.Key}] = &c
	if !c.Legacy {
		s.taken[strings.ToLower(c.Name)] = true
	}
	if !c.Overflow {
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

// StraySuffix ends the name a key's stray values (docs/SCHEMA.md 5.6)
// read as in shredduck's query paths, after its stored column's name:
// "http.status_code~stray". It is no column of the table.
const StraySuffix = "~stray"

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
// names and a stored column or the overflow, dense overflowed keys are
// promoted, kinds that b needs wider are widened. It updates the schema
// and returns the changes to apply before inserting b.
func (s *Schema) Plan(b *Batch) []Change {
	var changes []Change
	s.plans++
	s.Counts.mu.Lock()
	defer s.Counts.mu.Unlock()
	s.Counts.addRows(b.Rows, s.Window)
	for _, d := range b.Dyn {
		k := d.Col.kind()
		n := d.Col.Len - d.Col.Nulls
		if k == Null || n == 0 {
			continue // all NULL: fixes nothing, stores nothing
		}
		ci := s.planned(d)
		if d.lead() == d { // the key's first column with values decides for all of them
			var ch *Change
			ci, ch = s.planKey(d, ci)
			if ch != nil {
				changes = append(changes, *ch)
			}
		}
		if ci == nil || ci.Legacy || ci.Overflow {
			continue // the key's values all go to the overflow, as they are
		}
		w := widenExact(ci.Kind, k, k == Int64 && d.Col.beyondExactInt())
		if w == Double && ci.Kind == Int64 && (ci.BeyondDouble || d.familyBeyond()) {
			// The column holds (or this batch brings it) an integer a
			// DOUBLE cannot hold exactly: the doubles are strays.
			ci.BeyondDouble, w = true, String
		}
		switch {
		case w == ci.Kind:
		case !Lossless(ci.Kind, w):
			// A stray: its values go to the overflow under the key, and
			// the column keeps its type (Output, StrayCounts).
		case ci.added == s.plans:
			ci.Kind = w // a column this plan adds is added at w
		default:
			changes = append(changes, Change{Col: ci, From: ci.Kind})
			ci.Kind = w
		}
	}
	return changes
}

// planKey plans the key of d, the first of its key's batch columns (its
// primary and strays) with values: a new key gets a name and a stored
// column of the kind most of its values have (the others are strays) or
// the overflow, reading as the widening of them all; an overflowed key is
// promoted when dense, or its reading kind widened.
func (s *Schema) planKey(d *DynColumn, ci *ColInfo) (*ColInfo, *Change) {
	major, join, n := d.family()
	lk := levelKey{d.Level, d.Key}
	if ci == nil {
		ci = &ColInfo{Level: d.Level, Key: d.Key, Kind: major}
		if s.PathKeys {
			ci.Name = s.freeName(PathColumnName(d.Key), false)
		} else {
			ci.Name = s.freeName(ColumnName(d.Level, d.Key), d.Level == Record && levelPrefixed(d.Key))
		}
		s.taken[strings.ToLower(ci.Name)] = true
		if s.dense(ci, lk, n) {
			s.dyn++
		} else {
			ci.Overflow, ci.Kind = true, join
		}
		s.cols[lk] = ci
		d.planned, d.plannedWith = ci, s
		ci.added = s.plans
		for _, m := range d.members() {
			m.planned, m.plannedWith = ci, s
		}
		return ci, &Change{Col: ci, Add: true}
	}
	if !ci.Overflow || ci.Legacy {
		return ci, nil
	}
	w := Widen(ci.Kind, join)
	if s.dense(ci, lk, n) {
		ci.Overflow, ci.Promoted, ci.Kind = false, true, w
		s.dyn++
		return ci, &Change{Col: ci, Promote: true}
	}
	if w != ci.Kind {
		ch := &Change{Col: ci, From: ci.Kind}
		ci.Kind = w
		return ci, ch
	}
	return ci, nil
}

// widenExact is Widen(a, k) for values of kind k, String where the result
// is DOUBLE and beyond says that one of them is an integer a DOUBLE cannot
// hold exactly.
func widenExact(a, k Kind, beyond bool) Kind {
	w := Widen(a, k)
	if w == Double && k == Int64 && beyond {
		return String
	}
	return w
}

// planned returns the schema's entry of d's key, or nil. A batch keeps a
// key's column from one use to the next, and the column the entry: with
// thousands of keys per batch, Plan and Output look up each key once.
func (s *Schema) planned(d *DynColumn) *ColInfo {
	if d.plannedWith != s || d.planned == nil {
		d.planned, d.plannedWith = s.cols[levelKey{d.Level, d.Key}], s
	}
	return d.planned
}

// dense counts n more records carrying key lk (ci) and reports whether
// the key is now dense enough for a stored column, with room for one.
// Plan holds s.Counts.mu.
func (s *Schema) dense(ci *ColInfo, lk levelKey, n int) bool {
	if s.dyn >= s.MaxColumns {
		return false
	}
	if s.Density <= 0 || s.dyn < s.Young {
		return true
	}
	c, count, rows := s.Counts.add(lk, ci.count, n)
	ci.count = c
	// The count stays until it ages out of the window: a transaction that
	// fails after this (one pipelined behind a commit may not change the
	// schema) is planned again from the catalog and must find the key
	// dense again, or the column waits for as many records once more.
	return float64(count) >= s.Density*float64(max(rows, s.MinRecords))
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
// their level's overflow maps and JSON column. core names the core columns
// in order. b must have been planned and finished. The columns alias b's
// memory: they stay valid until b is reset or output again.
func (s *Schema) Output(core []CoreColumn, b *Batch) []OutColumn {
	ob := &b.out
	ob.reset()
	out := ob.cols
	json, maps := &ob.json, &ob.maps
	for i, c := range core {
		out = append(out, OutColumn{Name: c.Name, Col: b.Core[i]})
	}
	for _, d := range b.Dyn {
		ci := s.planned(d)
		if ci == nil {
			continue // only NULLs
		}
		if ci.Overflow || ci.strays(d) {
			if k := d.Col.kind(); !ci.Legacy && mapKind(k) {
				maps[d.Level][k] = append(maps[d.Level][k], d)
			} else if d.Col.Nulls < d.Col.Len {
				json[d.Level] = append(json[d.Level], d)
			}
			continue
		}
		d.densifyInPlace(b.Rows) // a stored column has a value per row
		if d.Col.kind() != ci.Kind {
			if d.Col.Nulls == d.Col.Len { // only NULLs: any kind will do
				n := d.Col.Len
				d.Col.resetAs(ScalarType(ci.Kind))
				d.Col.AppendNulls(n)
			} else {
				d.Col.Convert(ci.Kind)
			}
		}
		if d.primary != nil || len(d.strays) > 0 {
			// Two columns of one key that the stored column both takes
			// (a VARCHAR column takes integers and strings): one output.
			if i := slices.IndexFunc(out[len(core):], func(o OutColumn) bool { return o.Name == ci.Name }); i >= 0 {
				o := &out[len(core)+i]
				o.Col = mergeRows(o.Col, d.Col, b.Rows)
				continue
			}
		}
		out = append(out, OutColumn{Name: ci.Name, Col: d.Col})
	}
	coreCol := func(name string) *OutColumn {
		for i := range out[:len(core)] {
			if out[i].Name == name {
				return &out[i]
			}
		}
		return nil
	}
	for level := range NumLevels {
		if ds := json[level]; len(ds) > 0 {
			if o := coreCol(s.overflow[level]); o != nil {
				o.Col = foldOverflow(o.Col, ds, b.Rows)
			}
		}
		for _, k := range MapKinds {
			if ds := maps[level][k]; len(ds) > 0 {
				if o := coreCol(MapColumnName(s.overflow[level], k)); o != nil {
					// the transform leaves it NULL; the batch keeps the map's buffers
					m := &ob.built[level][k]
					*m = buildMap(*m, ds, k, b.Rows, &ob.ix)
					o.Col = *m
				}
			}
		}
	}
	ob.cols = out
	return out
}

// outBuffers are the buffers Output builds a batch's output in, kept
// with the batch: the output aliases its memory anyway.
type outBuffers struct {
	cols  []OutColumn
	json  [NumLevels][]*DynColumn
	maps  [NumLevels][len(mapSuffix)][]*DynColumn
	built [NumLevels][len(mapSuffix)]*Column // the overflow maps
	ix    rowIndex
}

// reset empties the buffers, keeping their capacity.
func (ob *outBuffers) reset() {
	clear(ob.cols)
	ob.cols = ob.cols[:0]
	for l := range NumLevels {
		for _, c := range ob.built[l] {
			if c != nil {
				c.Reset()
			}
		}
		clear(ob.json[l])
		ob.json[l] = ob.json[l][:0]
		for k := range ob.maps[l] {
			clear(ob.maps[l][k])
			ob.maps[l][k] = ob.maps[l][k][:0]
		}
	}
}

// foldOverflow builds a JSON column whose row i is an object of the
// overflowed keys that have a value in row i, merged with what the
// transform already put into the overflow column.
func foldOverflow(prev *Column, ds []*DynColumn, rows int) *Column {
	start, entries := rowEntries(ds, rows)
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
		for _, e := range entries[start[r]:start[r+1]] {
			d := ds[e.d]
			if n == 0 {
				buf = append(buf, '{')
			} else {
				buf = append(buf, ',')
			}
			n++
			buf = AppendJSONString(buf, []byte(d.Key))
			buf = append(buf, ':')
			buf = d.Col.AppendJSONAt(buf, int(e.i))
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

// strays reports whether d's values are strays of ci's stored column:
// their kind needs a widening that is not Lossless.
func (ci *ColInfo) strays(d *DynColumn) bool {
	k := d.Col.kind()
	if k == Null || ci.Legacy {
		return false
	}
	w := widenExact(ci.Kind, k, k == Int64 && d.Col.beyondExactInt())
	return w != ci.Kind
}

// mergeRows returns a column of rows rows holding a's value in each row
// where a has one and b's elsewhere; both are padded and of one kind. The
// columns of one key never both hold a value in a row (cutFamily).
func mergeRows(a, b *Column, rows int) *Column {
	out := NewColumn(a.Type)
	var scratch []byte
	for r := range rows {
		switch {
		case a.IsValid(r):
			scratch = out.appendValue(a.ValueAt(r), scratch)
		case b.IsValid(r):
			scratch = out.appendValue(b.ValueAt(r), scratch)
		default:
			out.AppendNull()
		}
	}
	return out
}

// StrayCount is how many stray values of one key some rows of a batch
// hold.
type StrayCount struct {
	Col *ColInfo
	N   int
}

// StrayCounts returns, by key, the stray values in rows [from, to) of b,
// planned by s: the values Output sends to the overflow under their key
// because the key's stored column would take them only by a lossy
// widening (docs/SCHEMA.md, 5.6).
func (s *Schema) StrayCounts(b *Batch, from, to int) []StrayCount {
	var out []StrayCount
	for _, d := range b.Dyn {
		ci := s.planned(d)
		if ci == nil || ci.Overflow || !ci.strays(d) {
			continue
		}
		n := d.valuesIn(from, to)
		if n == 0 {
			continue
		}
		if i := slices.IndexFunc(out, func(c StrayCount) bool { return c.Col == ci }); i >= 0 {
			out[i].N += n
		} else {
			out = append(out, StrayCount{Col: ci, N: n})
		}
	}
	return out
}
