package shred

import (
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

// buildMap returns a MAP(VARCHAR, kind) column of rows rows whose row r
// holds the values that the columns ds (all of that kind, padded to rows)
// have in row r, under their keys; a row without any is NULL.
func buildMap(ds []*DynColumn, kind Kind, rows int) *Column {
	out := NewColumn(MapOf(TString, ScalarType(kind)))
	start, entries := rowEntries(ds, rows)
	keys, vals := out.Child.Fields[0], out.Child.Fields[1]
	for r := 0; r < rows; r++ {
		if start[r] == start[r+1] {
			out.AppendNull()
			continue
		}
		for _, e := range entries[start[r]:start[r+1]] {
			d := ds[e.d]
			keys.AppendString(d.Key)
			switch c := d.Col; kind {
			case String:
				vals.AppendBytes(c.Data[c.Offs[e.i]:c.Offs[e.i+1]])
			case Double:
				vals.AppendFloat(c.F64[e.i])
			default:
				vals.AppendInt(c.I64[e.i])
			}
			out.Child.EndStruct()
		}
		out.EndList()
	}
	return out
}

// entry is value i of column d of the columns given to rowEntries.
type entry struct{ d, i int32 }

// rowEntries returns the non-NULL values of the columns ds (dense or
// sparse) grouped by row: those of row r are entries[start[r]:start[r+1]],
// in the order of ds. Each column's values are visited once, not every
// row of every column.
func rowEntries(ds []*DynColumn, rows int) (start []int32, entries []entry) {
	start = make([]int32, rows+1)
	for _, d := range ds {
		d.eachValue(func(r, _ int) { start[r+1]++ })
	}
	for r := 0; r < rows; r++ {
		start[r+1] += start[r]
	}
	next := make([]int32, rows)
	copy(next, start[:rows])
	entries = make([]entry, start[rows])
	for j, d := range ds {
		d.eachValue(func(r, i int) {
			entries[next[r]] = entry{int32(j), int32(i)}
			next[r]++
		})
	}
	return start, entries
}

// eachValid calls fn for every non-NULL row of c, in order.
func eachValid(c *Column, fn func(r int)) {
	for i, b := range c.Valid {
		for b != 0 {
			j := 0
			for b&(1<<j) == 0 {
				j++
			}
			b &^= 1 << j
			if r := i<<3 + j; r < c.Len {
				fn(r)
			}
		}
	}
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

// forget stops counting lk (it has a column now). The caller holds k.mu.
func (k *KeyCounts) forget(lk levelKey) {
	if c := k.counts[lk]; c != nil {
		c.dropped = true
		delete(k.counts, lk)
	}
}
