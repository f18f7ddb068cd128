package shred

import (
	"slices"
	"strings"
	"sync"
)

// The overflow: keys without a stored column keep their values in typed
// maps, one MAP(VARCHAR, T) per level and value kind (MapKinds), so that a
// value keeps its kind and a lookup reads one small map instead of parsing
// JSON (docs/SPARSE.md measured both). Values of the other kinds (lists,
// blobs, timestamps, JSON) go to the level's JSON overflow column as
// members of an object, as do all values of keys that an earlier release
// overflowed (ColInfo.Legacy). A map is added to its table with its first
// value (CoreColumn.OnDemand).

// MapKinds are the value kinds with an overflow map of their own.
var MapKinds = [...]Kind{String, Int64, Double, Bool}

var mapSuffix = [...]string{String: "str", Int64: "int", Double: "double", Bool: "bool"}

// MapColumnName names the overflow map of kind k beside the JSON overflow
// column overflow: "attributes_overflow" has "attributes_str",
// "attributes_int", ...; any other name (NDJSON's "_overflow") gets the
// suffix: "_overflow_str".
func MapColumnName(overflow string, k Kind) string {
	if base, ok := strings.CutSuffix(overflow, "_overflow"); ok && base != "" {
		return base + "_" + mapSuffix[k]
	}
	return overflow + "_" + mapSuffix[k]
}

// mapKind reports whether values of kind k go to an overflow map.
func mapKind(k Kind) bool { return k == String || k == Int64 || k == Double || k == Bool }

// OverflowMaps returns the overflow maps of the given JSON overflow
// columns as on-demand core columns (added to a table with their first
// value), once per distinct overflow column.
func OverflowMaps(overflow [NumLevels]string) []CoreColumn {
	var out []CoreColumn
	seen := map[string]bool{}
	for _, o := range overflow {
		if seen[o] {
			continue
		}
		seen[o] = true
		for _, k := range MapKinds {
			out = append(out, CoreColumn{Name: MapColumnName(o, k), Type: MapOf(TString, ScalarType(k)), OnDemand: true})
		}
	}
	return out
}

// buildMap fills out (nil: a new column), a MAP(VARCHAR, kind) column,
// with rows rows whose row r holds the values that the columns ds (all of
// that kind, dense or sparse) have in row r, under their keys; a row
// without any is NULL. It returns out. It reads the columns one after the
// other, not row by row (which would visit every column's buffers in
// every row): a pass counts each row's entries and bytes, a second puts
// each value and its key in place.
func buildMap(out *Column, ds []*DynColumn, kind Kind, rows int, ix *rowIndex) *Column {
	if out == nil {
		out = NewColumn(MapOf(TString, ScalarType(kind)))
	}
	ix.pos = resize(ix.pos, rows)
	pos := ix.pos
	clear(pos)
	for _, d := range ds {
		c, kl := d.Col, int32(len(d.Key))
		rs, idx := ix.valueRows(d)
		for j, r := range rs {
			p := &pos[r]
			p.entry++
			p.key += kl
			if kind == String {
				i := int32(j)
				if idx != nil {
					i = idx[j]
				}
				p.val += c.Offs[i+1] - c.Offs[i]
			}
		}
	}
	// Each row's counts become where its entries and bytes start.
	out.Offs = resize(out.Offs, rows+1)
	out.Valid = resize(out.Valid, (rows+7)/8)
	clear(out.Valid)
	out.Len, out.Nulls = rows, 0
	var at rowPos
	for r := range pos {
		p := &pos[r]
		out.Offs[r] = at.entry
		if p.entry == 0 {
			out.Nulls++
		} else {
			out.Valid[r>>3] |= 1 << (r & 7)
		}
		at, *p = rowPos{at.entry + p.entry, at.key + p.key, at.val + p.val}, at
	}
	n := int(at.entry)
	out.Offs[rows] = at.entry
	entries, keys, vals := out.Child, out.Child.Fields[0], out.Child.Fields[1]
	keys.Offs = resize(keys.Offs, n+1)
	keys.Offs[0] = 0
	keys.Data = resize(keys.Data, int(at.key))
	switch kind {
	case String:
		vals.Offs = resize(vals.Offs, n+1)
		vals.Offs[0] = 0
		vals.Data = resize(vals.Data, int(at.val))
	case Double:
		vals.F64 = resize(vals.F64, n)
	default:
		vals.I64 = resize(vals.I64, n)
	}
	for _, d := range ds {
		c, key := d.Col, d.Key
		rs, idx := ix.valueRows(d)
		for j, r := range rs {
			i := int32(j)
			if idx != nil {
				i = idx[j]
			}
			p := &pos[r]
			copy(keys.Data[p.key:], key)
			p.key += int32(len(key))
			keys.Offs[p.entry+1] = p.key
			switch kind {
			case String:
				v := c.Data[c.Offs[i]:c.Offs[i+1]]
				copy(vals.Data[p.val:], v)
				p.val += int32(len(v))
				vals.Offs[p.entry+1] = p.val
			case Double:
				vals.F64[p.entry] = c.F64[i]
			default:
				vals.I64[p.entry] = c.I64[i]
			}
			p.entry++
		}
	}
	for _, c := range []*Column{keys, vals, entries} {
		c.setValid(n)
	}
	return out
}

// rowIndex is buildMap's buffer: per row, the next entry and the next
// byte of keys and of values.
type rowIndex struct {
	pos       []rowPos
	idx, rows []int32 // valueRows' buffers
}

// valueRows returns the rows of d's non-NULL values and, unless value i
// is the i-th of them (a sparse column without NULLs, whose rows are At),
// their indexes, built in ix's buffers: buildMap's loops need no call per
// value.
func (ix *rowIndex) valueRows(d *DynColumn) (rows, idx []int32) {
	if d.At != nil && d.Col.Nulls == 0 {
		return d.At, nil
	}
	ix.idx, ix.rows = ix.idx[:0], ix.rows[:0]
	for i, r := range d.values {
		ix.idx = append(ix.idx, int32(i))
		ix.rows = append(ix.rows, int32(r))
	}
	return ix.rows, ix.idx
}

type rowPos struct{ entry, key, val int32 }

// setValid makes c's first n rows valid and its length n (the values are
// in place).
func (c *Column) setValid(n int) {
	c.Len, c.Nulls = n, 0
	c.Valid = resize(c.Valid, (n+7)/8)
	for i := range c.Valid {
		c.Valid[i] = 0xff
	}
	if n&7 != 0 {
		c.Valid[n>>3] = 1<<(n&7) - 1 // bits past Len stay clear
	}
}

// resize returns s with length n, reusing its capacity; the contents are
// not kept.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// entry is value i of column d of the columns given to rowEntries.
type entry struct{ d, i int32 }

// rowEntries returns the non-NULL values of the columns ds (dense or
// sparse) grouped by row: those of row r are entries[start[r]:start[r+1]],
// in the order of ds.
func rowEntries(ds []*DynColumn, rows int) (start []int32, entries []entry) {
	start = make([]int32, rows+1)
	for _, d := range ds {
		for _, r := range d.values {
			start[r+1]++
		}
	}
	for r := range rows {
		start[r+1] += start[r]
	}
	next := slices.Clone(start[:rows])
	entries = make([]entry, start[rows])
	for j, d := range ds {
		for i, r := range d.values {
			entries[next[r]] = entry{int32(j), int32(i)}
			next[r]++
		}
	}
	return start, entries
}

// KeyCounts estimates how many of a table's recent records carry each key
// that has no stored column: counts over the current and the previous
// half of a window of records (an epoch each), so that keys no longer seen
// drop out. It outlives a Schema (a server rebuilds a table's schema from
// the catalog after a failed transaction; the counts stay), and is safe
// for concurrent use: Plan holds its lock while it counts a batch.
type KeyCounts struct {
	mu               sync.Mutex
	epoch            int32
	counts           map[levelKey]*keyCount
	curRows, prevRow int
}

// keyCount is one key's count in its last epoch and the one before.
type keyCount struct {
	cur, prev int
	epoch     int32
	dropped   bool // no longer in KeyCounts.counts: look it up again
}

// maxTracked bounds the keys counted: past it, keys not yet counted wait
// until stale ones are dropped (a flood of unique keys costs no more
// memory).
const maxTracked = 1 << 17

// addRows counts n more records; a half window full starts an epoch.
// The caller holds k.mu.
func (k *KeyCounts) addRows(n, window int) {
	if k.counts == nil {
		k.counts = make(map[levelKey]*keyCount)
	}
	if k.curRows >= max(window/2, 1) {
		k.epoch++
		k.prevRow, k.curRows = k.curRows, 0
		for lk, c := range k.counts {
			if c.epoch < k.epoch-1 { // counts nothing any more
				c.dropped = true
				delete(k.counts, lk)
			}
		}
	}
	k.curRows += n
}

// add counts n more records carrying the key of c (nil: look it up by lk)
// and returns its entry, its count and the records counted, over the
// window. The caller holds k.mu.
func (k *KeyCounts) add(lk levelKey, c *keyCount, n int) (*keyCount, int, int) {
	rows := k.curRows + k.prevRow
	if c == nil || c.dropped {
		if c = k.counts[lk]; c == nil {
			if len(k.counts) >= maxTracked {
				return nil, 0, rows
			}
			c = &keyCount{epoch: k.epoch}
			k.counts[lk] = c
		}
	}
	if c.epoch != k.epoch {
		if c.epoch == k.epoch-1 {
			c.prev = c.cur
		} else {
			c.prev = 0
		}
		c.cur, c.epoch = 0, k.epoch
	}
	c.cur += n
	return c, c.cur + c.prev, rows
}
