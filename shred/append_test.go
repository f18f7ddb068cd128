package shred

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// appendRecord sets record i's attributes into b: keys of several kinds,
// some on every row, some rare, some over a range (a resource's), some
// changing kind from record to record, some NULL.
func appendRecord(b *Batch, rng *rand.Rand, rows int) {
	from := b.Rows
	for r := range rows {
		row := from + r
		b.Core[0].AppendInt(int64(rng.IntN(1000)))
		if rng.IntN(4) == 0 {
			b.Core[1].AppendNull()
		} else {
			b.Core[1].AppendString(fmt.Sprint("core-", rng.IntN(50)))
		}
		b.SetAttr(Record, []byte("every"), row, Value{Kind: String, Bytes: []byte(fmt.Sprint("v", r%7))})
		if r%2 == 0 {
			b.SetAttr(Record, []byte("even"), row, Value{Kind: Int64, Int: int64(r)})
		}
		if rng.IntN(40) == 0 {
			b.SetAttr(Record, []byte(fmt.Sprint("rare", rng.IntN(30))), row, Value{Kind: Double, Float: float64(r) / 4})
		}
		switch rng.IntN(6) {
		case 0:
			b.SetAttr(Record, []byte("mixed"), row, Value{Kind: Int64, Int: int64(r)})
		case 1:
			b.SetAttr(Record, []byte("mixed"), row, Value{Kind: Double, Float: 0.5})
		case 2:
			b.SetAttr(Record, []byte("mixed"), row, Value{Kind: Bool, Int: 1})
		case 3:
			b.SetAttr(Record, []byte("mixed"), row, Value{})
		case 4:
			b.SetAttr(Record, []byte("big"), row, Value{Kind: Int64, Int: 1 << 60})
		}
		if rng.IntN(3) == 0 {
			b.SetAttr(Record, []byte("list"), row, Value{Kind: ListInt64, Elems: []Value{{Kind: Int64, Int: 1}, {}, {Kind: Int64, Int: int64(r)}}})
		}
		if rng.IntN(5) == 0 {
			b.SetAttr(Record, []byte("big"), row, Value{Kind: Double, Float: 2.5})
		}
		b.EndRow()
	}
	b.FillAttr(Resource, []byte("service"), from, from+rows, Value{Kind: String, Bytes: []byte(fmt.Sprint("svc", rng.IntN(3)))})
	if rng.IntN(2) == 0 {
		b.FillAttr(Scope, []byte("sometimes"), from, from+rows, Value{Kind: Int64, Int: int64(rows)})
	}
}

var appendCore = []CoreColumn{{Name: "n", Type: ScalarType(Int64)}, {Name: "s", Type: ScalarType(String)}}

// columnText renders every row of a finished, padded column.
func columnText(c *Column) string {
	var sb strings.Builder
	sb.WriteString(c.Type.SQL())
	for i := range c.Len {
		sb.WriteByte(' ')
		if !c.IsValid(i) {
			sb.WriteString("NULL")
			continue
		}
		sb.Write(c.AppendTextAt(nil, i))
	}
	return sb.String()
}

// batchText renders a batch: its rows, core columns and every dynamic
// column that holds a value, by key.
func batchText(b *Batch) []string {
	b.Finish()
	b.Pad()
	out := []string{fmt.Sprint("rows ", b.Rows)}
	for i, c := range b.Core {
		out = append(out, fmt.Sprintf("core %d: %s", i, columnText(c)))
	}
	var dyn []string
	for _, d := range b.Dyn {
		if d.Col.Nulls < d.Col.Len {
			dyn = append(dyn, fmt.Sprintf("%d/%s: %s", d.Level, d.Key, columnText(d.Col)))
		}
	}
	slices.Sort(dyn)
	return append(out, dyn...)
}

// TestAppendAsDecoded: records decoded into batches of their own and
// appended to one give the batch that decoding them all into it gives,
// whatever the sizes, kinds, widenings and sparse keys.
func TestAppendAsDecoded(t *testing.T) {
	for seed := range uint64(60) {
		rng := rand.New(rand.NewPCG(seed, 1))
		sizes := make([]int, 1+rng.IntN(12))
		for i := range sizes {
			sizes[i] = []int{1, 3, 7, 8, 9, 64, 80, 200}[rng.IntN(8)]
		}
		ref := NewBatch(appendCore)
		for _, n := range sizes {
			appendRecord(ref, rand.New(rand.NewPCG(seed, uint64(n))), n)
		}
		dst := NewBatch(appendCore)
		for i, n := range sizes {
			record := func() *Batch {
				src := NewBatch(appendCore)
				appendRecord(src, rand.New(rand.NewPCG(seed, uint64(n))), n)
				if i%2 == 0 {
					src.Finish() // finished or not, as the door hands them over
				}
				return src
			}
			src := record()
			if i == 0 && seed%3 == 0 {
				dst = src // the first item's own batch takes the rest
				continue
			}
			if err := dst.Append(src); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(batchText(src), batchText(record())) {
				t.Fatalf("seed %d: Append changed its source", seed)
			}
		}
		want, got := batchText(ref), batchText(dst)
		if !slices.Equal(want, got) {
			for i := range max(len(want), len(got)) {
				w, g := "", ""
				if i < len(want) {
					w = want[i]
				}
				if i < len(got) {
					g = got[i]
				}
				if w != g {
					t.Fatalf("seed %d, sizes %v: line %d\n got %s\nwant %s", seed, sizes, i, g, w)
				}
			}
		}
	}
}

// TestAppendRefuses batches of other core columns, or incomplete ones.
func TestAppendRefuses(t *testing.T) {
	b := NewBatch(appendCore)
	if err := b.Append(NewBatch(nil)); err == nil {
		t.Error("a batch of other core columns was appended")
	}
	src := NewBatch(appendCore)
	src.Core[0].AppendInt(1)
	src.Rows = 1
	if err := b.Append(src); err == nil || b.Rows != 0 {
		t.Errorf("a batch whose core column misses a row was appended: %v, %d rows", err, b.Rows)
	}
}
