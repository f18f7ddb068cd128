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
// overflowed (ColInfo.Legacy).

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
// columns as deferred core columns (virtual until a value comes), once per
// distinct overflow column.
func OverflowMaps(overflow [NumLevels]string) []CoreColumn {
	var out []CoreColumn
	seen := map[string]bool{}
	for _, o := range overflow {
		if seen[o] {
			continue
		}
		seen[o] = true
		for _, k := range MapKinds {
			out = append(out, CoreColumn{Name: MapColumnName(o, k), Type: MapOf(TString, ScalarType(k)), Deferred: true})
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
// half of a window of records, so that keys no longer seen drop out. It
// outlives a Schema (a server rebuilds a table's schema from the catalog
// after a failed transaction; the counts stay), and is safe for
// concurrent use.
type KeyCounts struct {
	mu              sync.Mutex
	half            int
	cur, prev       map[levelKey]int
	curRows, prevRs int
}

// maxTracked bounds the keys counted per half window: past it, keys not
// yet counted wait for the next half (a flood of unique keys costs no
// more memory).
const maxTracked = 1 << 16

func (k *KeyCounts) addRows(n, window int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cur == nil {
		k.cur, k.prev = make(map[levelKey]int), make(map[levelKey]int)
	}
	k.half = max(window/2, 1)
	if k.curRows >= k.half {
		k.prev, k.cur = k.cur, k.prev
		clear(k.cur)
		k.prevRs, k.curRows = k.curRows, 0
	}
	k.curRows += n
}

func (k *KeyCounts) add(lk levelKey, n int) (count, rows int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.cur[lk]; ok || len(k.cur) < maxTracked {
		k.cur[lk] += n
	}
	return k.cur[lk] + k.prev[lk], k.curRows + k.prevRs
}

func (k *KeyCounts) forget(lk levelKey) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.cur, lk)
	delete(k.prev, lk)
}
