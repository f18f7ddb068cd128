package shred

import (
	"fmt"
	"strings"
	"testing"
)

func TestSchemaNaming(t *testing.T) {
	over := [NumLevels]string{"attributes_overflow", "resource_attributes_overflow", "scope_attributes_overflow"}
	core := append([]CoreColumn{{Name: "name", Type: TString}, {Name: "attributes_overflow", Type: TJSON},
		{Name: "resource_attributes_overflow", Type: TJSON}, {Name: "scope_attributes_overflow", Type: TJSON}}, OverflowMaps(over)...)
	s := NewSchema(core, over, 7)
	s.Density = 0 // every key stored while there is room
	b := NewBatch(core)
	str := Value{Kind: String, Bytes: []byte("v")}
	keys := []struct {
		level    Level
		key      string
		want     string
		overflow bool
	}{
		{Record, "http.route", "http.route", false},
		{Resource, "service.name", "resource.service.name", false},
		{Scope, "x", "scope.x", false},
		{Record, "name", "name~2", false},                   // a core column
		{Record, "NAME", "NAME~3", false},                   // case-insensitive: name and name~2 are taken
		{Record, "", "~empty", false},                       // the empty key
		{Record, "Resource.late", "Resource.late~2", false}, // another level's prefix
		{Record, "one.too.many", "one.too.many", true},      // past MaxColumns: overflowed, its name kept
		{Resource, "late", "resource.late", true},
	}
	for _, k := range keys {
		b.SetAttr(k.level, []byte(k.key), 0, str)
	}
	nullRow(b)
	if err := b.Finish(); err != nil {
		t.Fatal(err)
	}
	changes := s.Plan(b)
	if len(changes) != len(keys) {
		t.Fatalf("%d changes, want %d", len(changes), len(keys))
	}
	for i, k := range keys {
		ci := s.Lookup(k.level, k.key)
		if ci == nil || ci.Name != k.want || !changes[i].Add || ci.Overflow != k.overflow {
			t.Errorf("%s %q: got %+v, want column %q, overflow %v", k.level, k.key, ci, k.want, k.overflow)
		}
	}
	if s.Columns() != 7 {
		t.Errorf("%d dynamic columns, want 7", s.Columns())
	}
	// The overflowed keys go into their level's map of strings.
	out := s.Output(core, b)
	found := 0
	for _, o := range out {
		switch o.Name {
		case "attributes_str", "resource_attributes_str":
			found++
			key := map[string]string{"attributes_str": "one.too.many", "resource_attributes_str": "late"}[o.Name]
			if got := mapRow(o.Col, 0); got != key+"=v" {
				t.Errorf("%s = %s, want %s=v", o.Name, got, key)
			}
		case "one.too.many", "resource.late":
			t.Errorf("overflowed key has an output column %s", o.Name)
		}
	}
	if found != 2 {
		t.Errorf("%d overflow maps in the output, want 2", found)
	}
	// A second batch: a VARCHAR key gets an int (VARCHAR holds it), a new
	// key arrives at the limit and takes a name that does not collide with
	// the overflowed ones.
	b2 := NewBatch(core)
	b2.SetAttr(Record, []byte("http.route"), 0, Value{Kind: Int64, Int: 7})
	b2.SetAttr(Record, []byte("ONE.too.many"), 0, Value{Kind: Int64, Int: 1})
	b2.SetAttr(Record, []byte("nulls.only"), 0, Value{})
	nullRow(b2)
	b2.Finish()
	changes = s.Plan(b2)
	if len(changes) != 1 || !changes[0].Add || !changes[0].Col.Overflow || changes[0].Col.Name != "ONE.too.many~2" {
		t.Fatalf("changes %+v", changes)
	}
	if s.Lookup(Record, "nulls.only") != nil {
		t.Error("a key with only NULLs got a column")
	}
}

// mapRow renders row r of a map column as k=v pairs, or NULL.
func mapRow(c *Column, r int) string {
	if !c.IsValid(r) {
		return "NULL"
	}
	var parts []string
	for j := c.Offs[r]; j < c.Offs[r+1]; j++ {
		k, v := c.Child.Fields[0], c.Child.Fields[1]
		parts = append(parts, string(AppendText(nil, k.ValueAt(int(j))))+"="+string(AppendText(nil, v.ValueAt(int(j)))))
	}
	return strings.Join(parts, ",")
}

// TestSchemaYoung: a table with fewer than Young dynamic columns gives
// every key a column at once, however rare; past the budget the density
// rule decides.
func TestSchemaYoung(t *testing.T) {
	over := [NumLevels]string{"attributes_overflow", "resource_attributes_overflow", "scope_attributes_overflow"}
	core := append([]CoreColumn{{Name: "attributes_overflow", Type: TJSON},
		{Name: "resource_attributes_overflow", Type: TJSON}, {Name: "scope_attributes_overflow", Type: TJSON}}, OverflowMaps(over)...)
	s := NewSchema(core, over, 1000)
	b := NewBatch(core)
	for r := range 3 { // three records, DefaultYoung + 10 keys
		for k := range DefaultYoung + 10 {
			if k%3 == r {
				b.SetAttr(Record, []byte(fmt.Sprintf("k%d", k)), r, Value{Kind: Int64, Int: int64(k)})
			}
		}
		nullRow(b)
	}
	if err := b.Finish(); err != nil {
		t.Fatal(err)
	}
	cols, over2 := 0, 0
	for _, c := range s.Plan(b) {
		if c.Col.Overflow {
			over2++
		} else {
			cols++
		}
	}
	if cols != DefaultYoung || over2 != 10 {
		t.Errorf("%d columns and %d overflowed keys, want %d and 10", cols, over2, DefaultYoung)
	}
}

// TestSchemaDensity: with the default rule, a key gets a column once 1% of
// the recent records (and at least 20) carry it; rare keys stay in the
// maps with their own kinds, and the column budget is not spent on them.
func TestSchemaDensity(t *testing.T) {
	over := [NumLevels]string{"attributes_overflow", "resource_attributes_overflow", "scope_attributes_overflow"}
	core := append([]CoreColumn{{Name: "attributes_overflow", Type: TJSON},
		{Name: "resource_attributes_overflow", Type: TJSON}, {Name: "scope_attributes_overflow", Type: TJSON}}, OverflowMaps(over)...)
	s := NewSchema(core, over, 100)
	s.Young = 0 // the density rule alone: TestSchemaYoung has the budget
	batch := func(rows int, set func(b *Batch, r int)) (*Batch, []Change) {
		b := NewBatch(core)
		for r := range rows {
			set(b, r)
			nullRow(b)
		}
		if err := b.Finish(); err != nil {
			t.Fatal(err)
		}
		return b, s.Plan(b)
	}
	// A few records: every key waits in the overflow, typed.
	b, ch := batch(5, func(b *Batch, r int) {
		b.SetAttr(Record, []byte("dense"), r, Value{Kind: Int64, Int: int64(r)})
		b.SetAttr(Record, []byte("rare"), r, Value{Kind: Bool, Int: 1})
	})
	if len(ch) != 2 || !ch[0].Col.Overflow || !ch[1].Col.Overflow || ch[0].Col.Kind != Int64 {
		t.Fatalf("first batch: %+v", ch)
	}
	out := s.Output(core, b)
	for _, o := range out {
		if o.Name == "attributes_int" && mapRow(o.Col, 4) != "dense=4" {
			t.Errorf("attributes_int row 4 = %s", mapRow(o.Col, 4))
		}
		if o.Name == "attributes_bool" && mapRow(o.Col, 0) != "rare=true" {
			t.Errorf("attributes_bool row 0 = %s", mapRow(o.Col, 0))
		}
	}
	// 5,000 more records, "dense" on every one, "sparse-N" each on one,
	// "rare" on 1 in 200: only "dense" is promoted, with the kind its
	// overflowed values read as.
	_, ch = batch(5000, func(b *Batch, r int) {
		b.SetAttr(Record, []byte("dense"), r, Value{Kind: Double, Float: 0.5})
		b.SetAttr(Record, []byte("sparse-"+strings.Repeat("x", r%7)+string(rune('a'+r%26))), r, Value{Kind: String, Bytes: []byte("v")})
		if r%200 == 0 {
			b.SetAttr(Record, []byte("rare"), r, Value{Kind: Bool})
		}
	})
	var promoted []string
	for _, c := range ch {
		if c.Promote {
			promoted = append(promoted, c.Col.Key)
			if c.Col.Kind != Double || c.Col.Overflow || !c.Col.Promoted {
				t.Errorf("promoted %+v", c.Col)
			}
		}
	}
	if len(promoted) != 1 || promoted[0] != "dense" {
		t.Errorf("promoted %v, want [dense]", promoted)
	}
	if s.Columns() != 1 {
		t.Errorf("%d stored columns, want 1", s.Columns())
	}
	for _, k := range []string{"rare", "sparse-a", "sparse-xxxxxxg"} {
		if ci := s.Lookup(Record, k); ci == nil || !ci.Overflow {
			t.Errorf("%s: %+v, want overflowed", k, ci)
		}
	}
}

// A promotion planned in a transaction that then fails is planned again,
// at once, by the schema read back from the catalog (sharing the table's
// counts): under load every promotion of a pipelined transaction failed
// once, and counting again from zero meant never.
func TestSchemaPromotionAfterRollback(t *testing.T) {
	over := [NumLevels]string{"attributes_overflow", "resource_attributes_overflow", "scope_attributes_overflow"}
	core := append([]CoreColumn{{Name: "attributes_overflow", Type: TJSON},
		{Name: "resource_attributes_overflow", Type: TJSON}, {Name: "scope_attributes_overflow", Type: TJSON}}, OverflowMaps(over)...)
	counts := new(KeyCounts)
	fromCatalog := func() *Schema {
		s := NewSchema(core, over, 100)
		s.Counts = counts
		s.Load(ColInfo{Level: Record, Key: "k", Name: "k", Kind: Int64, Overflow: true})
		return s
	}
	plan := func(s *Schema) []Change {
		b := NewBatch(core)
		b.SetAttr(Record, []byte("k"), 0, Value{Kind: Int64, Int: 1})
		nullRow(b)
		if err := b.Finish(); err != nil {
			t.Fatal(err)
		}
		return s.Plan(b)
	}
	s := fromCatalog()
	n := 0
	for ; n < 1000; n++ {
		if ch := plan(s); len(ch) == 1 && ch[0].Promote {
			break
		}
	}
	if n == 1000 {
		t.Fatal("k never promoted")
	}
	// That transaction rolled back: the next one starts from the catalog.
	if ch := plan(fromCatalog()); len(ch) != 1 || !ch[0].Promote {
		t.Fatalf("after %d records and a rollback, the next record planned %+v; want k promoted", n+1, ch)
	}
}

// TestSchemaBudget: a table at MaxColumns overflows even dense keys.
func TestSchemaBudget(t *testing.T) {
	s := NewSchema(nil, [NumLevels]string{}, 2)
	b := NewBatch(nil)
	for r := range 2000 {
		for k := range 4 {
			b.SetAttr(Record, []byte{'k', byte('0' + k)}, r, Value{Kind: Int64, Int: 1})
		}
		b.EndRow()
	}
	b.Finish()
	s.Plan(b)
	if s.Columns() != 2 || !s.Lookup(Record, "k2").Overflow || s.Lookup(Record, "k1").Overflow {
		t.Errorf("%d columns; k1 %+v, k2 %+v", s.Columns(), s.Lookup(Record, "k1"), s.Lookup(Record, "k2"))
	}
}

func TestSchemaWidening(t *testing.T) {
	s := NewSchema(nil, [NumLevels]string{}, 10)
	s.Density = 0
	strays := 0
	plan := func(v Value) []Change {
		b := NewBatch(nil)
		b.SetAttr(Record, []byte("n"), 0, v)
		b.EndRow()
		b.Finish()
		ch := s.Plan(b)
		for _, c := range s.StrayCounts(b, 0, b.Rows) {
			strays += c.N
		}
		return ch
	}
	if ch := plan(Value{Kind: Int64, Int: 1}); len(ch) != 1 || !ch[0].Add || ch[0].Col.Kind != Int64 {
		t.Fatalf("first: %+v", ch)
	}
	if ch := plan(Value{Kind: Double, Float: 1.5}); len(ch) != 1 || ch[0].Add || ch[0].From != Int64 || ch[0].Col.Kind != Double {
		t.Fatalf("to double: %+v", ch)
	}
	if ch := plan(Value{Kind: Int64, Int: 2}); len(ch) != 0 {
		t.Fatalf("int into double: %+v", ch)
	}
	if ch := plan(Value{Kind: Bool, Int: 1}); len(ch) != 0 || s.Lookup(Record, "n").Kind != Double || strays != 1 {
		t.Fatalf("a bool into DOUBLE: %+v, %d strays; want a stray, no change", ch, strays)
	}
	if ch := plan(Value{Kind: String, Bytes: []byte("x")}); len(ch) != 0 || s.Lookup(Record, "n").Kind != Double || strays != 2 {
		t.Fatalf("a string into DOUBLE: %+v, %d strays; want a stray, no change", ch, strays)
	}
}

func TestWiden(t *testing.T) {
	f := func(a, b, want Kind) {
		t.Helper()
		if got := Widen(a, b); got != want {
			t.Errorf("Widen(%v, %v) = %v, want %v", a, b, got, want)
		}
		if got := Widen(b, a); got != want {
			t.Errorf("Widen(%v, %v) = %v, want %v", b, a, got, want)
		}
	}
	f(Null, Int64, Int64)
	f(Int64, Int64, Int64)
	f(Int64, Double, Double)
	f(Double, String, String)
	f(Bool, Int64, String)
	f(Blob, String, String)
	f(JSON, Int64, String)
}

func TestQuoteIdent(t *testing.T) {
	for in, want := range map[string]string{
		`a`: `"a"`, `a"b`: `"a""b"`, `x"; DROP TABLE t; --`: `"x""; DROP TABLE t; --"`, ``: `""`,
	} {
		if got := QuoteIdent(in); got != want {
			t.Errorf("QuoteIdent(%q) = %s, want %s", in, got, want)
		}
	}
}

// nullRow ends a row whose core columns are all NULL.
func nullRow(b *Batch) {
	for _, c := range b.Core {
		c.AppendNull()
	}
	b.EndRow()
}

// TestStrays: a value whose kind the key's column takes only by a lossy
// widening is a stray: a new key's column gets the kind most of its values
// have, whichever came first; the strays go to the overflow map (or JSON
// overflow) of their kind under the key, in their rows; a later batch
// neither retypes the column; StrayCounts counts them by rows; a column that takes two
// of a batch's columns of the key (a VARCHAR one) gets both, merged.
func TestStrays(t *testing.T) {
	over := [NumLevels]string{"o", "o", "o"}
	core := append([]CoreColumn{{Name: "o", Type: TJSON}}, OverflowMaps(over)...)
	s := NewSchema(core, over, 10)
	strays := 0
	output := func(vals ...Value) map[string]string {
		t.Helper()
		b := NewBatch(core)
		for r, v := range vals {
			b.SetAttr(Record, []byte("k"), r, v)
			nullRow(b)
		}
		b.Finish()
		s.Plan(b)
		for _, c := range s.StrayCounts(b, 1, b.Rows) { // rows from 1 on
			strays += c.N
		}
		got := map[string]string{}
		for _, o := range s.Output(core, b) {
			if o.Col.Nulls == o.Col.Len {
				continue
			}
			var rows []string
			for r := range b.Rows {
				if o.Col.Type.Map {
					rows = append(rows, mapRow(o.Col, r))
				} else if o.Col.IsValid(r) {
					rows = append(rows, string(o.Col.AppendTextAt(nil, r)))
				} else {
					rows = append(rows, "NULL")
				}
			}
			got[o.Name] = strings.Join(rows, " ")
		}
		return got
	}
	str := func(x string) Value { return Value{Kind: String, Bytes: []byte(x)} }
	i64 := func(n int64) Value { return Value{Kind: Int64, Int: n} }
	got := output(str("notanint"), i64(200), i64(500), i64(404))
	if want := "NULL 200 500 404"; got["k"] != want || got["o_str"] != "k=notanint NULL NULL NULL" {
		t.Fatalf("first batch: %v; want k = %s and the string in o_str", got, want)
	}
	if ci := s.Lookup(Record, "k"); ci.Kind != Int64 || ci.Overflow || strays != 0 {
		t.Fatalf("k: %+v, %d strays in rows 1-3", ci, strays)
	}
	got = output(i64(1), Value{Kind: Double, Float: 2.5}, Value{Kind: Bool, Int: 1}, Value{Kind: Blob, Bytes: []byte{1, 2, 3}})
	if got["k"] != "1 2.5 NULL NULL" || got["o_bool"] != "NULL NULL k=true NULL" || got["o"] != `NULL NULL NULL {"k":"AQID"}` {
		t.Fatalf("second batch: %v", got)
	}
	if ci := s.Lookup(Record, "k"); ci.Kind != Double || strays != 2 {
		t.Fatalf("k after a double (lossless) and two strays: %+v, %d strays in rows 1-3", ci, strays)
	}
	// An existing VARCHAR column (an earlier release widened it) takes
	// every scalar: no strays, one column.
	s.Load(ColInfo{Name: "v", Level: Record, Key: "v", Kind: String})
	b := NewBatch(core)
	b.SetAttr(Record, []byte("v"), 0, i64(7))
	nullRow(b)
	b.SetAttr(Record, []byte("v"), 1, str("x"))
	nullRow(b)
	b.Finish()
	if n := len(b.lookup(Record, []byte("v")).Family()); n != 2 {
		t.Fatalf("v: %d batch columns, want the int and the string apart", n)
	}
	s.Plan(b)
	if sc := s.StrayCounts(b, 0, b.Rows); len(sc) != 0 {
		t.Errorf("strays %+v after a VARCHAR column took an int and a string", sc)
	}
	for _, o := range s.Output(core, b) {
		if o.Name == "v" && (o.Col.Len != 2 || o.Col.Nulls != 0 || string(o.Col.AppendTextAt(nil, 0)) != "7" || string(o.Col.AppendTextAt(nil, 1)) != "x") {
			t.Errorf("v: %d rows, %d NULLs", o.Col.Len, o.Col.Nulls)
		}
	}
}
