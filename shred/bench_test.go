package shred

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// benchKeyRows is the rows of one benchmark batch: the spans of a 4 MiB
// NDJSON chunk of bench/gen traces, which ingest's workers batch on their
// own.
const benchKeyRows = 3920

// BenchmarkBatchKeys shreds benchKeyRows rows of 10 string attributes
// drawn uniformly from 20 keys (each stored) or 5,000 (each overflowed,
// as bench/gen -keys writes them), then plans and outputs the batch for a
// table that has seen them before, and resets it: the per-batch work of a
// load besides decoding and DuckDB.
func BenchmarkBatchKeys(b *testing.B) {
	for _, keys := range []int{20, 5000} {
		b.Run("keys="+strconv.Itoa(keys), func(b *testing.B) {
			benchBatchKeys(b, keys)
		})
	}
}

func benchBatchKeys(b *testing.B, keys int) {
	over := [NumLevels]string{"attributes_overflow", "resource_attributes_overflow", "scope_attributes_overflow"}
	var core []CoreColumn
	for _, o := range over {
		core = append(core, CoreColumn{Name: o, Type: TJSON})
	}
	core = append(core, OverflowMaps(over)...)
	s := NewSchema(core, over, 2000)
	r := rand.New(rand.NewPCG(1, 2))
	// The keys and values lie in one buffer in row order, as decoders find
	// them in a request.
	type span struct{ k0, k1, v1 int }
	var input []byte
	spans := make([][]span, benchKeyRows)
	var seen []int
	for i := range spans {
		seen = seen[:0]
		for len(seen) < 10 {
			k := r.IntN(keys)
			if !containsInt(seen, k) {
				seen = append(seen, k)
				sp := span{k0: len(input)}
				input = append(input, "app.header.x-"+strconv.Itoa(k)...)
				sp.k1 = len(input)
				input = append(input, "v"+strconv.Itoa(r.IntN(100))...)
				sp.v1 = len(input)
				spans[i] = append(spans[i], sp)
			}
		}
	}
	type attr struct{ key, val []byte }
	rows := make([][]attr, benchKeyRows)
	for i, row := range spans {
		for _, sp := range row {
			rows[i] = append(rows[i], attr{input[sp.k0:sp.k1], input[sp.k1:sp.v1]})
		}
	}
	batch := NewBatch(core)
	fill := func() {
		for i, row := range rows {
			for _, a := range row {
				batch.SetAttr(Record, a.key, i, Value{Kind: String, Bytes: a.val})
			}
			for _, c := range batch.Core {
				c.AppendNull()
			}
			batch.EndRow()
		}
		if err := batch.Finish(); err != nil {
			b.Fatal(err)
		}
		s.Plan(batch)
		s.Output(core, batch)
		batch.Reset()
	}
	for range 30 { // the keys' density counts settle: 20 keys stored, 5,000 not
		fill()
	}
	b.ReportAllocs()
	for b.Loop() {
		fill()
	}
	b.ReportMetric(float64(benchKeyRows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
