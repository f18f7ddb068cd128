package shred

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// sparseBatch returns a finished batch of rows rows where key "s" has a
// value in every step-th row and key "d" in every row.
func sparseBatch(t *testing.T, rows, step int) *Batch {
	t.Helper()
	b := NewBatch(nil)
	for r := range rows {
		if r%step == 0 {
			b.SetAttr(Record, []byte("s"), r, Value{Kind: Int64, Int: int64(r)})
		}
		b.SetAttr(Record, []byte("d"), r, Value{Kind: String, Bytes: []byte("v")})
		b.EndRow()
	}
	if err := b.Finish(); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSparseColumns: a rare key stays sparse (a value and its row), a
// frequent one is padded; both read the same once padded.
func TestSparseColumns(t *testing.T) {
	b := sparseBatch(t, 1000, 100)
	s, d := b.lookup(Record, []byte("s")), b.lookup(Record, []byte("d"))
	if s.At == nil || s.Col.Len != 10 || d.At != nil || d.Col.Len != 1000 {
		t.Fatalf("s: sparse %v, %d values; d: sparse %v, %d values", s.At != nil, s.Col.Len, d.At != nil, d.Col.Len)
	}
	if got := texts(b, "s"); !strings.HasPrefix(got, "BIGINT[0 NULL") || strings.Count(got, "NULL") != 990 {
		t.Errorf("s padded: %.60s... (%d NULLs)", got, strings.Count(got, "NULL"))
	}
}

// TestSparseLastWins: the same key twice in a row keeps the last value,
// and ClearAttr and Truncate drop a sparse key's values by row.
func TestSparseLastWins(t *testing.T) {
	b := NewBatch(nil)
	for r := range 300 {
		if r == 200 {
			b.SetAttr(Record, []byte("k"), r, Value{Kind: Int64, Int: 1})
			b.SetAttr(Record, []byte("k"), r, Value{Kind: Int64, Int: 2})
		}
		if r == 250 {
			b.SetAttr(Record, []byte("k"), r, Value{Kind: Int64, Int: 3})
			b.ClearAttr(Record, []byte("k"), r)
		}
		if r == 280 {
			b.SetAttr(Record, []byte("k"), r, Value{Kind: Int64, Int: 4})
		}
		b.EndRow()
	}
	b.Truncate(270)
	b.Finish()
	d := b.Dyn[0]
	if d.At == nil || fmt.Sprint(d.At) != "[200]" || d.Col.I64[0] != 2 {
		t.Errorf("k: rows %v, values %v", d.At, d.Col.I64)
	}
}

// TestSparseRollback: a record that widens a sparse column, or makes it
// dense, is rolled back to the column as it was.
func TestSparseRollback(t *testing.T) {
	b := NewBatch(nil)
	for r := range 200 {
		if r%50 == 0 {
			b.SetAttr(Record, []byte("k"), r, Value{Kind: Int64, Int: int64(r)})
		}
		b.EndRow()
	}
	b.Mark()
	// The failed record: a resource attribute over 100 rows (dense from
	// then on) and a double value (a widening).
	for r := 200; r < 300; r++ {
		b.EndRow()
	}
	b.FillAttr(Record, []byte("k"), 200, 300, Value{Kind: Double, Float: 0.5})
	if b.Dyn[0].At != nil || len(b.Dyn) != 1 || b.Dyn[0].Col.kind() != Double {
		t.Fatal("100 doubles in 300 rows did not pad and widen the column: the test tests nothing")
	}
	b.Rollback(200)
	d := b.Dyn[0]
	if d.At == nil || d.Col.kind() != Int64 || fmt.Sprint(d.At) != "[0 50 100 150]" || fmt.Sprint(d.Col.I64) != "[0 50 100 150]" {
		t.Errorf("after rollback: kind %s, rows %v, values %v", d.Col.kind(), d.At, d.Col.I64)
	}
}

// TestSparseInvalidUTF8 names the row of a sparse column's bad value.
func TestSparseInvalidUTF8(t *testing.T) {
	b := NewBatch(nil)
	for r := range 500 {
		if r == 321 {
			b.SetAttr(Record, []byte("k"), r, Value{Kind: String, Bytes: []byte{0xff}})
		}
		b.EndRow()
	}
	var rows []int
	b.InvalidUTF8(0, nil, func(row int, err error) { rows = append(rows, row) })
	if fmt.Sprint(rows) != "[321]" {
		t.Errorf("rows reported: %v, want [321]", rows)
	}
}

// TestSparseOutput: a sparse key with a stored column is padded, one in
// the overflow goes into its map at its row.
func TestSparseOutput(t *testing.T) {
	over := [NumLevels]string{"o", "o", "o"}
	core := append([]CoreColumn{{Name: "o", Type: TJSON}}, OverflowMaps(over)...)
	s := NewSchema(core, over, 1)
	s.Density = 0
	b := NewBatch(core)
	for r := range 1000 {
		if r%100 == 7 {
			b.SetAttr(Record, []byte("stored"), r, Value{Kind: Int64, Int: int64(r)})
			b.SetAttr(Record, []byte("over"), r, Value{Kind: Double, Float: float64(r) / 2})
		}
		nullRow(b)
	}
	b.Finish()
	s.Plan(b)
	for _, o := range s.Output(core, b) {
		switch o.Name {
		case "stored":
			if o.Col.Len != 1000 || o.Col.Nulls != 990 || o.Col.I64[107] != 107 {
				t.Errorf("stored: %d rows, %d NULLs", o.Col.Len, o.Col.Nulls)
			}
		case "o_double":
			if o.Col.Len != 1000 || o.Col.Nulls != 990 || mapRow(o.Col, 907) != "over=453.5" {
				t.Errorf("o_double: %d rows, %d NULLs, row 907 %s", o.Col.Len, o.Col.Nulls, mapRow(o.Col, 907))
			}
		}
	}
}

// TestBuildMap: the maps built column by column, into reused buffers,
// hold in each row the values the columns have there, in column order,
// for dense and sparse columns with NULL values among them.
func TestBuildMap(t *testing.T) {
	sample := func(k Kind, i int) Value {
		switch k {
		case String:
			return Value{Kind: String, Bytes: []byte(strings.Repeat("v", i%5) + fmt.Sprint(i))}
		case Double:
			return Value{Kind: Double, Float: float64(i) / 4}
		case Bool:
			return Value{Kind: Bool, Int: int64(i & 1)}
		}
		return Value{Kind: Int64, Int: int64(i) * 1000}
	}
	var ix rowIndex
	var out [len(mapSuffix)]*Column
	for round, rows := range []int{300, 1000, 7, 0, 300} {
		for _, k := range MapKinds {
			b := NewBatch(nil)
			for r := range rows {
				for j := range 12 {
					// keys 0-3 in most rows (padded), the rest rarely (sparse)
					if (j < 4 && r%5 != j) || (j >= 4 && (r*7+j*13+round)%97 == 0) {
						v := sample(k, r*12+j)
						if (r+j)%11 == 0 {
							v = Value{}
						}
						b.SetAttr(Record, []byte(fmt.Sprintf("key-%d", j)), r, v)
					}
				}
				b.EndRow()
			}
			if err := b.Finish(); err != nil {
				t.Fatal(err)
			}
			var ds []*DynColumn
			for _, d := range b.Dyn {
				if d.Col.kind() == k {
					ds = append(ds, d)
				}
			}
			out[k] = buildMap(out[k], ds, k, rows, &ix)
			m := out[k]
			if m.Len != rows {
				t.Fatalf("%d rows of %s: map has %d", rows, k, m.Len)
			}
			var want []string
			for r := range rows {
				var parts []string
				for _, d := range ds {
					for i := range d.Col.Len {
						if d.row(i) == r && d.Col.IsValid(i) {
							parts = append(parts, d.Key+"="+string(d.Col.AppendTextAt(nil, i)))
						}
					}
				}
				w := strings.Join(parts, ",")
				if len(parts) == 0 {
					w = "NULL"
				}
				want = append(want, w)
			}
			nulls := 0
			for r := range rows {
				if got := mapRow(m, r); got != want[r] {
					t.Fatalf("round %d, %s, row %d: %s, want %s", round, k, r, got, want[r])
				}
				if want[r] == "NULL" {
					nulls++
				}
			}
			if m.Nulls != nulls || m.Child.Len != int(m.Offs[rows]) || m.Child.Fields[0].Len != m.Child.Len {
				t.Errorf("round %d, %s: %d NULLs (want %d), %d entries, %d keys, offsets end at %d",
					round, k, m.Nulls, nulls, m.Child.Len, m.Child.Fields[0].Len, m.Offs[rows])
			}
		}
	}
}

// TestReusedColumnNewKey: a column that a batch's new key takes over from
// a key that did not come back is planned as the new key's, not by what
// the schema said of the old one.
func TestReusedColumnNewKey(t *testing.T) {
	over := [NumLevels]string{"o", "o", "o"}
	core := append([]CoreColumn{{Name: "o", Type: TJSON}}, OverflowMaps(over)...)
	s := NewSchema(core, over, 1) // the first key gets the only column
	s.Density = 0
	b := NewBatch(core)
	use := func(key string) []OutColumn {
		b.Reset()
		b.SetAttr(Record, []byte(key), 0, Value{Kind: Int64, Int: 7})
		nullRow(b)
		if err := b.Finish(); err != nil {
			t.Fatal(err)
		}
		s.Plan(b)
		return s.Output(core, b)
	}
	use("a")
	col := b.Dyn[0].Col
	var names []string
	for _, o := range use("b") {
		if o.Col.Nulls < o.Col.Len {
			names = append(names, o.Name)
			if o.Name == "o_int" && mapRow(o.Col, 0) != "b=7" {
				t.Errorf("o_int row 0: %s, want b=7", mapRow(o.Col, 0))
			}
		}
	}
	if b.Dyn[0].Col != col {
		t.Errorf("b did not take a's column")
	}
	if fmt.Sprint(names) != "[o_int]" {
		t.Errorf("b's value went to %v, want [o_int] (a has the column)", names)
	}
}

// TestDenseRunRollback: a column whose values are rows 0 to n-1 is padded
// in place; a record that padded it so and failed is rolled back to the
// values before it, and the rows after it read their own.
func TestDenseRunRollback(t *testing.T) {
	b := NewBatch(nil)
	for r := range 37 { // a bitmap's last byte half used
		b.SetAttr(Record, []byte("k"), r, Value{Kind: Int64, Int: int64(r)})
		b.EndRow()
	}
	b.Mark()
	for r := 37; r < 80; r++ { // the failed record: padded at 64 values
		b.SetAttr(Record, []byte("k"), r, Value{Kind: Int64, Int: -1})
		b.EndRow()
	}
	if b.Dyn[0].At != nil {
		t.Fatal("64 values in 64 rows did not pad the column: the test tests nothing")
	}
	b.Rollback(37)
	b.SetAttr(Record, []byte("k"), 37, Value{}) // a NULL value where the failed record set a bit
	b.EndRow()
	for r := 38; r < 70; r++ {
		if r%2 == 0 {
			b.SetAttr(Record, []byte("k"), r, Value{Kind: Int64, Int: int64(r)})
		}
		b.EndRow()
	}
	if err := b.Finish(); err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	want.WriteString("BIGINT[")
	for r := range 70 {
		if r > 0 {
			want.WriteString(" ")
		}
		if r < 37 || r%2 == 0 {
			fmt.Fprint(&want, r)
		} else {
			want.WriteString("NULL")
		}
	}
	want.WriteString("]")
	if got := texts(b, "k"); got != want.String() {
		t.Errorf("k after rollback:\n got %s\nwant %s", got, want.String())
	}
}

// TestRollbackAfterDuplicateKeyCountsNulls: a record whose value of a key
// padded its column in place (or whose second value of it widened the
// column) and whose later duplicate of the key is NULL rewrites a bit of
// the copy Rollback restores; the rolled back column's NULL count must
// still match its bitmap, or the rows decoded after read a NULL as a value.
func TestRollbackAfterDuplicateKeyCountsNulls(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before int
		values []Value // of the failed record's row, then a NULL
	}{
		{"padded in place", 63, []Value{{Kind: Int64, Int: 5}}},
		{"widened", 3, []Value{{Kind: Int64, Int: 5}, {Kind: String, Bytes: []byte("x")}}},
	} {
		b := NewBatch(nil)
		for r := range tc.before {
			b.SetAttr(Record, []byte("k"), r, Value{Kind: Int64, Int: int64(r)})
			b.EndRow()
		}
		b.Mark()
		for _, v := range append(tc.values, Value{}) {
			b.SetAttr(Record, []byte("k"), tc.before, v)
		}
		b.EndRow()
		b.Rollback(tc.before)
		b.SetAttr(Record, []byte("k"), tc.before, Value{}) // the record again, without its value
		b.EndRow()
		if err := b.Finish(); err != nil {
			t.Fatal(err)
		}
		c := b.lookup(Record, []byte("k")).Col
		nulls := 0
		for i := range c.Len {
			if !c.IsValid(i) {
				nulls++
			}
		}
		if c.Nulls != nulls {
			t.Errorf("%s: %d NULLs counted, %d in the bitmap (%s)", tc.name, c.Nulls, nulls, texts(b, "k"))
		}
	}
}

// TestPadFinishedAsDensify: padding a finished batch in place gives the
// columns the copying densify gives, for every kind (lists, NULL values,
// widened columns, values in the first and last rows), also when the
// batch is reused and its buffers hold an earlier use's values.
func TestPadFinishedAsDensify(t *testing.T) {
	build := func(b *Batch, seed int) {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		rows := 1 + rng.IntN(300)
		for r := range rows {
			for k := range 6 {
				if rng.IntN(9) != 0 {
					continue
				}
				var v Value
				switch rng.IntN(7) {
				case 0:
					v = Value{Kind: Int64, Int: rng.Int64()}
				case 1:
					v = Value{Kind: Double, Float: rng.Float64()}
				case 2:
					v = Value{Kind: String, Bytes: []byte(strings.Repeat("x", rng.IntN(20)))}
				case 3:
					v = Value{Kind: Bool, Int: int64(rng.IntN(2))}
				case 4:
					v = Value{Kind: Null}
				case 5:
					v = Value{Kind: ListKind(Int64), Elems: []Value{{Kind: Int64, Int: int64(r)}, {Kind: Null}}}
				default:
					v = Value{Kind: Int64, Int: int64(r)}
				}
				if k < 3 { // keys 0-2 keep one kind
					v = Value{Kind: Int64, Int: int64(r)}
					if k == 1 {
						v = Value{Kind: String, Bytes: fmt.Appendf(nil, "r%d", r)}
					}
				}
				b.SetAttr(Record, fmt.Appendf(nil, "k%d", k), r, v)
			}
			b.EndRow()
		}
	}
	for seed := range 300 {
		got, want := NewBatch(nil), NewBatch(nil)
		build(got, seed+1000) // an earlier use of the same batch
		if err := got.Finish(); err != nil {
			t.Fatal(err)
		}
		got.Reset()
		build(got, seed)
		build(want, seed)
		if err := got.Finish(); err != nil {
			t.Fatal(err)
		}
		if err := want.Finish(); err != nil {
			t.Fatal(err)
		}
		for _, d := range want.Dyn {
			if d.At != nil {
				d.densify(want.Rows)
			}
		}
		got.Pad()
		for _, w := range want.Dyn {
			g := got.lookup(w.Level, []byte(w.Key))
			if w.Stray() { // the key's stray of the same place in its family
				i := slices.Index(want.lookup(w.Level, []byte(w.Key)).Family(), w)
				if f := g.Family(); i < len(f) {
					g = f[i]
				}
			}
			if g.Col.Len != w.Col.Len || g.Col.Nulls != w.Col.Nulls || g.Col.Type.SQL() != w.Col.Type.SQL() {
				t.Fatalf("seed %d key %s: %s len %d nulls %d, want %s %d %d", seed, w.Key,
					g.Col.Type.SQL(), g.Col.Len, g.Col.Nulls, w.Col.Type.SQL(), w.Col.Len, w.Col.Nulls)
			}
			if len(g.Col.Valid) != len(w.Col.Valid) {
				t.Fatalf("seed %d key %s: bitmap of %d bytes, want %d", seed, w.Key, len(g.Col.Valid), len(w.Col.Valid))
			}
			for i := range w.Col.Len {
				gt, wt := "NULL", "NULL"
				if g.Col.IsValid(i) {
					gt = string(g.Col.AppendTextAt(nil, i))
				}
				if w.Col.IsValid(i) {
					wt = string(w.Col.AppendTextAt(nil, i))
				}
				if gt != wt {
					t.Fatalf("seed %d key %s row %d: %s, want %s", seed, w.Key, i, gt, wt)
				}
			}
		}
	}
}
