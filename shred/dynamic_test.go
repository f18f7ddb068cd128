package shred

import (
	"fmt"
	"strings"
	"testing"
)

var allDynamic = append([]Kind{Null}, dynamicKinds[:]...)

func TestWidenLattice(t *testing.T) {
	f := func(a, b, want Kind) {
		t.Helper()
		if got := Widen(a, b); got != want {
			t.Errorf("Widen(%v, %v) = %v, want %v", a, b, got, want)
		}
	}
	f(TimestampTZ, TimestampTZ, TimestampTZ)
	f(Null, TimestampTZ, TimestampTZ)
	f(TimestampTZ, String, String)
	f(TimestampTZ, Int64, String)
	f(TimestampTZ, JSON, String)
	f(ListNull, ListInt64, ListInt64)
	f(ListNull, ListTimestampTZ, ListTimestampTZ)
	f(ListInt64, ListDouble, JSON)
	f(ListString, ListTimestampTZ, JSON)
	f(ListBool, JSON, JSON)
	f(ListNull, JSON, JSON)
	f(ListInt64, Int64, String)
	f(ListNull, String, String)
	f(ListString, String, String)
	f(JSON, String, String)
	// A lattice: the join is commutative, associative and idempotent, so
	// a column's type does not depend on the order its values come in.
	for _, a := range allDynamic {
		if Widen(a, a) != a {
			t.Errorf("Widen(%v, %v) != %v", a, a, a)
		}
		for _, b := range allDynamic {
			if Widen(a, b) != Widen(b, a) {
				t.Errorf("Widen(%v, %v) = %v but Widen(%v, %v) = %v", a, b, Widen(a, b), b, a, Widen(b, a))
			}
			for _, c := range allDynamic {
				if l, r := Widen(Widen(a, b), c), Widen(a, Widen(b, c)); l != r {
					t.Errorf("(%v ∨ %v) ∨ %v = %v but %v ∨ (%v ∨ %v) = %v", a, b, c, l, a, b, c, r)
				}
			}
		}
	}
}

func TestDynamicKindNames(t *testing.T) {
	for _, k := range dynamicKinds {
		if got := KindFromSQL(k.String()); got != k {
			t.Errorf("KindFromSQL(%q) = %v, want %v", k.String(), got, k)
		}
		typ := ScalarType(k)
		if typ.SQL() != k.String() || typ.DynKind() != k {
			t.Errorf("%v: type %s (dynamic kind %v)", k, typ.SQL(), typ.DynKind())
		}
	}
	if got := ScalarType(ListNull).SQL(); got != `"NULL"[]` {
		t.Errorf("ListNull is %s", got)
	}
	if KindFromSQL("STRUCT") != Null || ListOf(StructOf()).DynKind() != List {
		t.Error("non-dynamic kinds parse")
	}
}

func TestAppendJSONString(t *testing.T) {
	f := func(in, want string) {
		t.Helper()
		if got := string(AppendJSONString(nil, []byte(in))); got != want {
			t.Errorf("AppendJSONString(%q) = %s, want %s", in, got, want)
		}
	}
	// as DuckDB's to_json escapes (checked in ingest's TestWidenSQLMatchesGo)
	f("a\"b\\c/d", `"a\"b\\c/d"`)
	f("\b\f\n\r\t", `"\b\f\n\r\t"`)
	f("\x00\x01\x1f\x7f", `"\u0000\u0001\u001F`+"\x7f"+`"`)
	f("é\u2028", "\"é\u2028\"")
	f("\xff", `"\ufffd"`)
}

// AppendNulls fills the buffers in bulk; the column must look as if the
// NULLs were appended one by one.
func TestAppendNulls(t *testing.T) {
	for _, k := range append(allDynamic, Struct) {
		typ := ScalarType(k)
		if k == Struct {
			typ = StructOf(Field{Name: "x", Type: TInt64})
		}
		bulk, one := NewColumn(typ), NewColumn(typ)
		for i, n := range []int{0, 3, 1, 9, 0, 16, 2} {
			bulk.AppendNulls(n)
			for j := 0; j < n; j++ {
				one.AppendNull()
			}
			if i%2 == 1 && k != Struct && k != Null {
				bulk.appendValue(sample(k), nil)
				one.appendValue(sample(k), nil)
			}
		}
		if bulk.Len != one.Len || bulk.Nulls != one.Nulls || fmt.Sprint(bulk.Valid) != fmt.Sprint(one.Valid) ||
			fmt.Sprint(bulk.Offs) != fmt.Sprint(one.Offs) || fmt.Sprint(bulk.I64) != fmt.Sprint(one.I64) ||
			fmt.Sprint(bulk.F64) != fmt.Sprint(one.F64) || string(bulk.Data) != string(one.Data) {
			t.Errorf("%v: bulk %+v\none by one %+v", k, *bulk, *one)
		}
		nulls := 0
		for i := 0; i < bulk.Len; i++ {
			if !bulk.IsValid(i) {
				nulls++
			}
		}
		if nulls != bulk.Nulls || len(bulk.Valid) != (bulk.Len+7)/8 {
			t.Errorf("%v: %d nulls counted, %d recorded; %d validity bytes for %d rows", k, nulls, bulk.Nulls, len(bulk.Valid), bulk.Len)
		}
	}
}

// sample returns a value of kind k.
func sample(k Kind) Value {
	switch k {
	case Double:
		return Value{Kind: k, Float: 1.5}
	case String, Blob, JSON:
		return Value{Kind: k, Bytes: []byte(`"s"`)}
	}
	if k.IsList() {
		if e := k.Elem(); e != Null {
			return Value{Kind: k, Elems: []Value{sample(e), {}}}
		}
		return Value{Kind: k, Elems: []Value{{}}}
	}
	return Value{Kind: k, Int: 1}
}

// texts renders every row of each of key's batch columns (the key's
// column, then its strays) as text ("NULL" for NULL).
func texts(b *Batch, key string) string {
	b.Pad()
	var cols []string
	for _, d := range b.lookup(Record, []byte(key)).Family() {
		var out []string
		for i := 0; i < d.Col.Len; i++ {
			if !d.Col.IsValid(i) {
				out = append(out, "NULL")
				continue
			}
			out = append(out, string(d.Col.AppendTextAt(nil, i)))
		}
		cols = append(cols, d.Col.Type.SQL()+fmt.Sprint(out))
	}
	return strings.Join(cols, " ")
}

// TestBatchWideningKeepsText: a batch widens a key's column only where
// nothing is lost (Lossless: to DOUBLE for exact integers, from a list of
// NULLs); a value that would need more is a stray, in a column of its own
// kind beside the key's, in its own row.
func TestBatchWideningKeepsText(t *testing.T) {
	ts, _ := ParseTimestamp([]byte("2015-01-01T01:00:00.25Z"))
	for _, tc := range []struct {
		vals []Value
		want string
	}{
		{[]Value{{Kind: Int64, Int: 1}, {Kind: Double, Float: 2.5}}, "DOUBLE[1 2.5]"},
		{[]Value{{Kind: Int64, Int: 1}, {Kind: Double, Float: 2.5}, {Kind: String, Bytes: []byte("x")}}, "DOUBLE[1 2.5 NULL] VARCHAR[NULL NULL x]"},
		{[]Value{{Kind: Int64, Int: 1 << 60}, {Kind: Double, Float: 2.5}}, "BIGINT[1152921504606846976 NULL] DOUBLE[NULL 2.5]"},
		{[]Value{{Kind: Double, Float: 2.5}, {Kind: Int64, Int: -(1 << 53) - 1}}, "DOUBLE[2.5 NULL] BIGINT[NULL -9007199254740993]"},
		{[]Value{{Kind: Double, Float: 2.5}, {Kind: Int64, Int: 1 << 53}}, "DOUBLE[2.5 9007199254740992]"},
		{[]Value{{Kind: TimestampTZ, Int: ts}, {Kind: String, Bytes: []byte("x")}}, "TIMESTAMPTZ[2015-01-01T01:00:00.25Z NULL] VARCHAR[NULL x]"},
		{[]Value{{Kind: ListNull, Elems: []Value{}}, {Kind: ListInt64, Elems: []Value{{Kind: Int64, Int: 3}, {}}}}, "BIGINT[][[] [3,null]]"},
		{[]Value{{Kind: ListInt64, Elems: []Value{{Kind: Int64, Int: 3}}}, {Kind: ListNull, Elems: []Value{{}}}}, "BIGINT[][[3] [null]]"},
		{[]Value{{Kind: ListDouble, Elems: []Value{{Kind: Double, Float: 0.5}}}, {Kind: ListString, Elems: []Value{{Kind: String, Bytes: []byte("\"")}}}}, `DOUBLE[][[0.5] NULL] VARCHAR[][NULL ["\""]]`},
		{[]Value{{Kind: ListTimestampTZ, Elems: []Value{{Kind: TimestampTZ, Int: ts}}}, {Kind: Bool, Int: 1}}, `TIMESTAMPTZ[][["2015-01-01T01:00:00.25Z"] NULL] BOOLEAN[NULL true]`},
		{[]Value{{Kind: ListNull, Elems: []Value{{}}}, {Kind: JSON, Bytes: []byte(`{"a":1}`)}}, `JSON[[null] {"a":1}]`},
	} {
		b := NewBatch(nil)
		for i, v := range tc.vals {
			b.SetAttr(Record, []byte("v"), i, v)
			b.EndRow()
		}
		b.Finish()
		if got := texts(b, "v"); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.vals, got, tc.want)
		}
	}
}

// Rollback restores a widened column exactly, including the validity bits
// the failed record set past the restored length.
func TestRollbackRestoresColumn(t *testing.T) {
	b := NewBatch(nil)
	b.SetAttr(Record, []byte("a"), 0, Value{Kind: Int64, Int: 1})
	b.EndRow()
	b.SetAttr(Record, []byte("b"), 1, Value{Kind: Int64, Int: 1})
	b.EndRow()
	b.Mark()
	b.SetAttr(Record, []byte("a"), 2, Value{Kind: String, Bytes: []byte("x")})
	b.SetAttr(Record, []byte("new"), 2, Value{Kind: String, Bytes: []byte("y")})
	b.EndRow()
	b.Rollback(2)
	b.SetAttr(Record, []byte("b"), 2, Value{Kind: Int64, Int: 2})
	b.EndRow()
	b.SetAttr(Record, []byte("a"), 3, Value{Kind: Int64, Int: 5})
	b.EndRow()
	b.Finish()
	if got := texts(b, "a"); got != "BIGINT[1 NULL NULL 5]" {
		t.Errorf("a = %s", got)
	}
	if got := texts(b, "new"); got != `"NULL"[NULL NULL NULL NULL]` {
		t.Errorf("new = %s", got)
	}
}

// A batch reused after Reset gives a key its own column back.
func TestBatchReusesColumnsByKey(t *testing.T) {
	b := NewBatch(nil)
	b.SetAttr(Record, []byte("a"), 0, Value{Kind: Int64, Int: 1})
	b.SetAttr(Record, []byte("b"), 0, Value{Kind: String, Bytes: []byte("long text")})
	b.EndRow()
	b.Finish()
	cols := map[string]*Column{}
	for _, d := range b.Dyn {
		cols[d.Key] = d.Col
	}
	b.Reset()
	b.SetAttr(Record, []byte("b"), 0, Value{Kind: String, Bytes: []byte("x")})
	b.SetAttr(Record, []byte("c"), 0, Value{Kind: Bool, Int: 1})
	b.EndRow()
	b.Finish()
	if b.Dyn[0].Col != cols["b"] || b.Dyn[1].Col != cols["a"] || b.Dyn[1].Key != "c" {
		t.Errorf("columns not reused by key")
	}
	if got := texts(b, "c"); got != "BOOLEAN[true]" {
		t.Errorf("c = %s", got)
	}
}

func TestSchemaPathKeys(t *testing.T) {
	core := []CoreColumn{{Name: "_overflow", Type: TJSON}}
	s := NewSchema(core, [NumLevels]string{"_overflow", "_overflow", "_overflow"}, 100)
	s.PathKeys = true
	b := NewBatch(core)
	keys := []struct{ key, want string }{
		{"a.b", "a.b"},
		{`a\.b`, "a.b~2"},
		{`a\\b`, `a\b`},
		{"resource.x", "resource.x"},
		{"", "~empty"},
		{"a.", "a."},
		{"A.B", "A.B~3"},
		{"nul\x00", "nul\uFFFD"},
		{"_overflow", "_overflow~2"},
	}
	for _, k := range keys {
		b.SetAttr(Record, []byte(k.key), 0, Value{Kind: Int64, Int: 1})
	}
	nullRow(b)
	b.Finish()
	s.Plan(b)
	for _, k := range keys {
		if ci := s.Lookup(Record, k.key); ci == nil || ci.Name != k.want {
			t.Errorf("key %q: %+v, want column %q", k.key, ci, k.want)
		}
	}
}

// A batch of integers beyond ±2^53 leaves a DOUBLE column DOUBLE: they
// are strays.
func TestPlanExactInts(t *testing.T) {
	s := NewSchema(nil, [NumLevels]string{}, 10)
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
	plan(Value{Kind: Double, Float: 0.5})
	if ch := plan(Value{Kind: Int64, Int: 1 << 53}); len(ch) != 0 {
		t.Errorf("2^53 into DOUBLE: %+v", ch)
	}
	if ch := plan(Value{Kind: Int64, Int: 1<<53 + 1}); len(ch) != 0 || s.Lookup(Record, "n").Kind != Double || strays != 1 {
		t.Errorf("2^53+1 into DOUBLE: %+v, %v, %d strays", ch, s.Lookup(Record, "n").Kind, strays)
	}
}
