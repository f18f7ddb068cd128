package shred

import (
	"strings"
	"testing"
)

func TestSchemaNaming(t *testing.T) {
	core := []CoreColumn{{Name: "name", Type: TString}, {Name: "attributes_overflow", Type: TJSON},
		{Name: "resource_attributes_overflow", Type: TJSON}, {Name: "scope_attributes_overflow", Type: TJSON}}
	over := [NumLevels]string{"attributes_overflow", "resource_attributes_overflow", "scope_attributes_overflow"}
	s := NewSchema(core, over, 7)
	b := NewBatch(core)
	str := Value{Kind: String, Bytes: []byte("v")}
	keys := []struct {
		level Level
		key   string
		want  string
	}{
		{Record, "http.route", "http.route"},
		{Resource, "service.name", "resource.service.name"},
		{Scope, "x", "scope.x"},
		{Record, "name", "name~2"},                   // a core column
		{Record, "NAME", "NAME~3"},                   // case-insensitive: name and name~2 are taken
		{Record, "", "~empty"},                       // the empty key
		{Record, "Resource.late", "Resource.late~2"}, // another level's prefix
		{Record, "one.too.many", "attributes_overflow"},
		{Resource, "late", "resource_attributes_overflow"},
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
		if ci == nil || ci.Name != k.want || !changes[i].Add {
			t.Errorf("%s %q: got %+v, want column %q", k.level, k.key, ci, k.want)
		}
		if wantOver := strings.HasSuffix(k.want, "_overflow"); ci != nil && ci.Overflow != wantOver {
			t.Errorf("%q: overflow %v", k.key, ci.Overflow)
		}
	}
	if s.Columns() != 7 {
		t.Errorf("%d dynamic columns, want 7", s.Columns())
	}
	// The overflowed keys fold into one JSON object per row.
	out := s.Output(core, b)
	for _, o := range out {
		if o.Name == "attributes_overflow" {
			if got := string(o.Col.Data[o.Col.Offs[0]:o.Col.Offs[1]]); got != `{"one.too.many":"v"}` {
				t.Errorf("overflow = %s", got)
			}
		}
	}
	// A second batch: a VARCHAR key gets an int (VARCHAR holds it), a new
	// key arrives at the limit.
	b2 := NewBatch(core)
	b2.SetAttr(Record, []byte("http.route"), 0, Value{Kind: Int64, Int: 7})
	b2.SetAttr(Record, []byte("fresh"), 0, Value{Kind: Int64, Int: 1})
	b2.SetAttr(Record, []byte("nulls.only"), 0, Value{})
	nullRow(b2)
	b2.Finish()
	changes = s.Plan(b2)
	if len(changes) != 1 || !changes[0].Add || changes[0].Col.Name != "attributes_overflow" {
		t.Fatalf("changes %+v", changes)
	}
	if s.Lookup(Record, "nulls.only") != nil {
		t.Error("a key with only NULLs got a column")
	}
}

func TestSchemaWidening(t *testing.T) {
	s := NewSchema(nil, [NumLevels]string{}, 10)
	plan := func(v Value) []Change {
		b := NewBatch(nil)
		b.SetAttr(Record, []byte("n"), 0, v)
		b.EndRow()
		b.Finish()
		return s.Plan(b)
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
	if ch := plan(Value{Kind: Bool, Int: 1}); len(ch) != 1 || ch[0].From != Double || ch[0].Col.Kind != String {
		t.Fatalf("to varchar: %+v", ch)
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
