package transforms

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/shredduck/shredduck/shred"
)

// ndjsonRows appends lines to a fresh batch of NewNDJSON(depth) and
// finishes it; every line must be accepted.
func ndjsonRows(t testing.TB, depth int, lines ...string) *shred.Batch {
	t.Helper()
	tr := NewNDJSON(depth)
	b := shred.NewBatch(tr.Core())
	for _, l := range lines {
		if n, err := tr.AppendJSON(b, []byte(l)); err != nil || n != 1 {
			t.Fatalf("AppendJSON(%.80s) = %d, %v", l, n, err)
		}
	}
	if err := finishPadded(b); err != nil {
		t.Fatal(err)
	}
	checkNDJSONBatch(t, b)
	return b
}

// checkNDJSONBatch checks buffer lengths and offsets of every column, and
// that every JSON cell is JSON and every text cell UTF-8.
func checkNDJSONBatch(t testing.TB, b *shred.Batch) {
	t.Helper()
	tt, ok := t.(*testing.T)
	if !ok {
		return
	}
	checkBatch(tt, b)
	for _, d := range b.Dyn {
		checkBuffers(tt, d.Key, d.Col)
	}
}

// rowCells renders the non-NULL cells of row as key -> "TYPE text", text
// being the value's text form (shred's AppendTextAt).
func rowCells(b *shred.Batch, row int) map[string]string {
	out := map[string]string{}
	for _, d := range b.Dyn {
		if row < d.Col.Len && d.Col.IsValid(row) {
			out[d.Key] = d.Col.Type.SQL() + " " + string(d.Col.AppendTextAt(nil, row))
		}
	}
	return out
}

func sameCellMap(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	keys := map[string]bool{}
	for k := range got {
		keys[k] = true
	}
	for k := range want {
		keys[k] = true
	}
	var sorted []string
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		if got[k] != want[k] {
			t.Errorf("%s: key %q = %q, want %q", what, k, got[k], want[k])
		}
	}
}

func TestNDJSONFlatten(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		want       map[string]string
	}{
		{"nested", `{"a":1,"b":{"c":"x","d":{"e":true}},"f":false}`, map[string]string{
			"a": "BIGINT 1", "b.c": "VARCHAR x", "b.d.e": "BOOLEAN true", "f": "BOOLEAN false"}},
		{"dotted key vs nesting", `{"a.b":1,"a":{"b":2}}`, map[string]string{
			`a\.b`: "BIGINT 1", "a.b": "BIGINT 2"}},
		{"backslash in a key", `{"a\\b":1,"c\\":{".":2}}`, map[string]string{
			`a\\b`: "BIGINT 1", `c\\.\.`: "BIGINT 2"}},
		{"empty keys", `{"":1,"a":{"":2},"b":{"":{"":3}},"c":{"":{"":4}}}`, map[string]string{"c..": "BIGINT 4",
			"": "BIGINT 1", "a.": "BIGINT 2", "b..": "BIGINT 3"}},
		{"null and empty object store nothing", `{"a":null,"b":{},"c":{"d":null}}`, map[string]string{}},
		{"escaped key", `{"\u0041\n":"v\u00e9"}`, map[string]string{"A\n": "VARCHAR vé"}},
		{"timestamp", `{"t":"2021-07-21T06:00:00Z","u":"2021-07-21T06:00:00+00:00"}`, map[string]string{
			"t": "TIMESTAMPTZ 2021-07-21T06:00:00Z", "u": "VARCHAR 2021-07-21T06:00:00+00:00"}},
		{"lists of one kind", `{"i":[1,null,-2],"s":["x","y"],"t":["2015-01-01T00:00:00.5Z"],"d":[1.5,0.25],"b":[true]}`, map[string]string{
			"i": `BIGINT[] [1,null,-2]`, "s": `VARCHAR[] ["x","y"]`, "t": `TIMESTAMPTZ[] ["2015-01-01T00:00:00.5Z"]`,
			"d": `DOUBLE[] [1.5,0.25]`, "b": `BOOLEAN[] [true]`}},
		{"lists of nothing", `{"e":[],"n":[null,null]}`, map[string]string{
			"e": `"NULL"[] []`, "n": `"NULL"[] [null,null]`}},
		{"arrays that are JSON", `{"m":[1,"x"],"o":[{"a":1}],"nest":[[1]],"ts":["2015-01-01T00:00:00Z","x"],"id":[1,1.5]}`, map[string]string{
			"m": `JSON [1,"x"]`, "o": `JSON [{"a":1}]`, "nest": `JSON [[1]]`,
			"ts": `JSON ["2015-01-01T00:00:00Z","x"]`, "id": `JSON [1,1.5]`}},
		{"non-canonical elements keep their text", `{"a":[1.0, 2],"b":[ 18446744073709551616 ],"c":[-0]}`, map[string]string{
			"a": `JSON [1.0,2]`, "b": `JSON [18446744073709551616]`, "c": `JSON [-0]`}},
		{"JSON is re-encoded compactly", `{"j":[ {"b" : "\u00e9\n\/", "c":[ ]} , 1.0E2, "\u0001\b" ]}`, map[string]string{
			"j": `JSON [{"b":"é\n/","c":[]},1.0E2,"\u0001\b"]`}},
		{"escaped string list", `{"s":["a\"b","\\","\u001f"]}`, map[string]string{"s": `VARCHAR[] ["a\"b","\\","\u001F"]`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := ndjsonRows(t, 0, tc.line)
			sameCellMap(t, tc.line, rowCells(b, 0), tc.want)
		})
	}
}

// Numbers are typed only when the type renders them back exactly as
// written (docs/SCHEMA.md, "Canonical forms"); the rest keep their text.
func TestNDJSONCanonicalNumbers(t *testing.T) {
	f := func(raw, want string) {
		t.Helper()
		b := ndjsonRows(t, 0, `{"n":`+raw+`}`)
		if got := rowCells(b, 0)["n"]; got != want {
			t.Errorf("%s: %q, want %q", raw, got, want)
		}
	}
	f("1", "BIGINT 1")
	f("-1", "BIGINT -1")
	f("0", "BIGINT 0")
	f("-0", "VARCHAR -0")
	f("9223372036854775807", "BIGINT 9223372036854775807")
	f("-9223372036854775808", "BIGINT -9223372036854775808")
	f("9223372036854775808", "VARCHAR 9223372036854775808")
	f("-9223372036854775809", "VARCHAR -9223372036854775809")
	f("123456789012345678901234567890", "VARCHAR 123456789012345678901234567890")
	f("1.5", "DOUBLE 1.5")
	f("-2.5", "DOUBLE -2.5")
	f("0.1", "DOUBLE 0.1")
	f("0.0001", "DOUBLE 0.0001")
	f("1e-05", "DOUBLE 1e-05")
	f("1e+16", "DOUBLE 1e+16")
	f("1.2345678901234568e+17", "DOUBLE 1.2345678901234568e+17")
	f("1000000000000000.5", "DOUBLE 1000000000000000.5")
	f("9007199254740994.0", "DOUBLE 9007199254740994.0")
	f("1.0", "VARCHAR 1.0")
	f("1.50", "VARCHAR 1.50")
	f("1e2", "VARCHAR 1e2")
	f("1E-05", "VARCHAR 1E-05")
	f("1e16", "VARCHAR 1e16")
	f("0.10000000000000001", "VARCHAR 0.10000000000000001")
	f("1e400", "VARCHAR 1e400")
	f("-1e400", "VARCHAR -1e400")
	f("1e-400", "VARCHAR 1e-400")
	f("true", "BOOLEAN true")
}

func TestNDJSONCanonicalTimestamps(t *testing.T) {
	for s, ts := range map[string]bool{
		"2015-01-01T00:00:00Z":           true,
		"2015-02-01T00:00:00.00001Z":     true,
		"1000-01-01T00:00:00Z":           true,
		"9999-12-31T23:59:59.999999Z":    true,
		"2016-02-29T12:00:00.1Z":         true,
		"1969-12-31T23:59:59.999999Z":    true,
		"2015-02-01T00:00:00.000010Z":    false, // trailing zero
		"2015-02-01T00:00:00.0Z":         false,
		"2015-02-01T00:00:00.Z":          false,
		"2015-01-01T01:00:00+02:00":      false,
		"2015-01-01T00:00:00+00:00":      false,
		"2015-01-01t00:00:00z":           false,
		"2015-01-01 00:00:00Z":           false,
		"2015-01-01T00:00:00.123456789Z": false,
		"0999-12-31T23:59:59Z":           false,
		"2015-02-29T00:00:00Z":           false,
		"2015-13-01T00:00:00Z":           false,
		"2015-01-01T24:00:00Z":           false,
		"2015-01-01T00:00:60Z":           false,
		"2015-01-01T00:00:00":            false,
		"+2015-01-01T00:00:00Z":          false,
	} {
		b := ndjsonRows(t, 0, `{"t":"`+s+`"}`)
		want := "VARCHAR " + s
		if ts {
			want = "TIMESTAMPTZ " + s
		}
		if got := rowCells(b, 0)["t"]; got != want {
			t.Errorf("%s: %q, want %q", s, got, want)
		}
	}
}

// Keys repeated in one object: the last wins, as in encoding/json's
// map[string]any, whatever the kinds of the values.
func TestNDJSONDuplicateKeys(t *testing.T) {
	for _, tc := range []struct {
		line string
		want map[string]string
	}{
		{`{"a":1,"a":2}`, map[string]string{"a": "BIGINT 2"}},
		{`{"a":1,"a":"x"}`, map[string]string{"a": "VARCHAR x"}}, // the last wins, whatever its kind (a stray beside the 1's column)
		{`{"a":"x","a":1}`, map[string]string{"a": "BIGINT 1"}},
		{`{"a":1,"a":null}`, map[string]string{}},
		{`{"a":{"b":1},"a":{"c":2}}`, map[string]string{"a.c": "BIGINT 2"}},
		{`{"a":{"b":1},"a":null}`, map[string]string{}},
		{`{"a":{"b":1},"a":5}`, map[string]string{"a": "BIGINT 5"}},
		{`{"a":5,"a":{"b":1}}`, map[string]string{"a.b": "BIGINT 1"}},
		{`{"a":[1],"a":{"b":1}}`, map[string]string{"a.b": "BIGINT 1"}},
		{`{"a":{"b":1},"a":[2]}`, map[string]string{"a": "BIGINT[] [2]"}},
		{`{"a":{"b":1,"b":2}}`, map[string]string{"a.b": "BIGINT 2"}},
		{`{"a":{"b":{"c":1}},"a":{"b":{"d":2}}}`, map[string]string{"a.b.d": "BIGINT 2"}},
		{`{"a":{"b":{"c":1}},"x":0,"a":{"e":3}}`, map[string]string{"a.e": "BIGINT 3", "x": "BIGINT 0"}},
		{`{"a.b":1,"a":{"b":2},"a":{"c":3}}`, map[string]string{`a\.b`: "BIGINT 1", "a.c": "BIGINT 3"}},
		{`{"a":{"b":1},"ab":2,"a":{}}`, map[string]string{"ab": "BIGINT 2"}},
	} {
		b := ndjsonRows(t, 0, `{"z":0}`, tc.line)
		tc.want["z"] = ""
		delete(tc.want, "z")
		sameCellMap(t, tc.line, rowCells(b, 1), tc.want)
		sameCellMap(t, tc.line+" (row before)", rowCells(b, 0), map[string]string{"z": rowCells(b, 0)["z"]})
	}
	// A cleared subtree leaves the earlier rows alone.
	b := ndjsonRows(t, 0, `{"a":{"b":1}}`, `{"a":{"b":2},"a":{"c":3}}`)
	sameCellMap(t, "row 0", rowCells(b, 0), map[string]string{"a.b": "BIGINT 1"})
	sameCellMap(t, "row 1", rowCells(b, 1), map[string]string{"a.c": "BIGINT 3"})
}

func TestNDJSONMaxDepth(t *testing.T) {
	tr := NewNDJSON(2)
	b := shred.NewBatch(tr.Core())
	if _, err := tr.AppendJSON(b, []byte(`{"a":{"b":{"c": 1, "d":[1]}},"x":{"y":1},"l":[{"m":{"n":{}}}]}`)); err != nil {
		t.Fatal(err)
	}
	finishPadded(b)
	sameCellMap(t, "depth 2", rowCells(b, 0), map[string]string{
		"a.b": `JSON {"c":1,"d":[1]}`, "x.y": "BIGINT 1", "l": `JSON [{"m":{"n":{}}}]`})
	if b.Truncated != 1 {
		t.Errorf("Truncated = %d, want 1", b.Truncated)
	}
	// depth 1: only top-level keys
	b = ndjsonRows(t, 1, `{"a":{"b":1},"c":2}`)
	sameCellMap(t, "depth 1", rowCells(b, 0), map[string]string{"a": `JSON {"b":1}`, "c": "BIGINT 2"})
	// the default, 16: the 16th key holds the rest as JSON
	deep := strings.Repeat(`{"k":`, 20) + "1" + strings.Repeat("}", 20)
	b = ndjsonRows(t, 0, deep)
	path := strings.TrimSuffix(strings.Repeat("k.", 16), ".")
	sameCellMap(t, "default depth", rowCells(b, 0), map[string]string{path: `JSON {"k":{"k":{"k":{"k":1}}}}`})
	if b.Truncated != 1 {
		t.Errorf("Truncated = %d, want 1", b.Truncated)
	}
	if got := NewNDJSON(0).(interface{ MaxDepth() int }).MaxDepth(); got != DefaultMaxDepth {
		t.Errorf("default MaxDepth %d", got)
	}
	if tr, err := Lookup(None); err != nil || tr.Name() != None || tr.Table() != "ndjson" || tr.(interface{ MaxDepth() int }).MaxDepth() != 16 {
		t.Errorf("Lookup(none) = %v, %v", tr, err)
	}
}

// Keys are untrusted: every byte sequence is a key, kept exactly, one
// column per distinct path.
func TestNDJSONHostileKeys(t *testing.T) {
	long := strings.Repeat("0123456789", 1000)
	keys := []string{`a"b`, `x'; DROP TABLE t; --`, "new\nline", "nul\x00", "ünï", long, "A", "a", "_overflow", `\`, `.`, `..`, ""}
	var sb strings.Builder
	sb.WriteString("{")
	for i, k := range keys {
		if i > 0 {
			sb.WriteString(",")
		}
		sb.Write(shred.AppendJSONString(nil, []byte(k)))
		fmt.Fprintf(&sb, ":%d", i)
	}
	sb.WriteString("}")
	b := ndjsonRows(t, 0, sb.String())
	want := map[string]string{}
	for i, k := range keys {
		want[string(appendSegment(nil, []byte(k)))] = fmt.Sprintf("BIGINT %d", i)
	}
	sameCellMap(t, "hostile", rowCells(b, 0), want)
}

func TestNDJSONBadLines(t *testing.T) {
	tr := NewNDJSON(0)
	for _, bad := range []string{
		`[{"a":1}]`, `"x"`, `42`, `null`, `true`, ``, `   `,
		`{"a":1`, `{"a":}`, `{"a":1}x`, `{"a":1} {"b":2}`, `{"a":[1,}`, `{a:1}`,
		"{\"a\":\"\xff\"}", "{\"\xfe\":1}", `{"a":"\x"}`, `{"a":01}`, `{"a":1.}`, `{"a":NaN}`,
	} {
		b := ndjsonRows(t, 0, `{"a":1,"b":{"c":"x"},"l":[1]}`)
		b.Rows = 1 // undo Finish's padding: the batch takes more rows
		for _, d := range b.Dyn {
			if d.Col.Len > 1 {
				t.Fatal("padded")
			}
		}
		before := rowCells(b, 0)
		kinds := map[string]string{}
		for _, d := range b.Dyn {
			kinds[d.Key] = d.Col.Type.SQL()
		}
		n, err := tr.AppendJSON(b, []byte(bad))
		if err == nil || n != 0 {
			t.Errorf("%q: accepted (%d rows)", bad, n)
			continue
		}
		if b.Rows != 1 {
			t.Errorf("%q: %d rows after the error", bad, b.Rows)
		}
		finishPadded(b)
		checkNDJSONBatch(t, b)
		sameCellMap(t, bad, rowCells(b, 0), before)
		for _, d := range b.Dyn {
			if k, ok := kinds[d.Key]; ok && k != d.Col.Type.SQL() {
				t.Errorf("%q: column %s is %s after the error, was %s", bad, d.Key, d.Col.Type.SQL(), k)
			}
		}
	}
	// A failed line leaves no widening behind.
	b := ndjsonRows(t, 0, `{"a":1,"l":[1],"t":"2015-01-01T00:00:00Z","e":[]}`)
	b.Rows = 1
	if _, err := tr.AppendJSON(b, []byte(`{"a":"x","l":["s"],"t":"x","e":[1],"new":1,"bad":}`)); err == nil {
		t.Fatal("accepted")
	}
	if _, err := tr.AppendJSON(b, []byte(`{"a":2}`)); err != nil {
		t.Fatal(err)
	}
	finishPadded(b)
	checkNDJSONBatch(t, b)
	sameCellMap(t, "row 0", rowCells(b, 0), map[string]string{"a": "BIGINT 1", "l": "BIGINT[] [1]", "t": "TIMESTAMPTZ 2015-01-01T00:00:00Z", "e": `"NULL"[] []`})
	sameCellMap(t, "row 1", rowCells(b, 1), map[string]string{"a": "BIGINT 2"})
	if _, err := tr.AppendProto(b, nil); err == nil {
		t.Error("AppendProto accepted")
	}
}

// Values of one key across rows widen the batch column where nothing is
// lost (shred.Lossless); a value of a kind it would take only by a lossy
// widening is a stray, in a column of its own kind (typs: each row's).
// Every cell keeps its text (the same text the column would have in
// DuckDB).
func TestNDJSONWideningInBatch(t *testing.T) {
	for _, tc := range []struct {
		vals []string
		typs []string
	}{
		{[]string{`1`, `2.5`, `"x"`}, []string{"DOUBLE", "DOUBLE", "VARCHAR"}},
		{[]string{`1`, `2.5`}, []string{"DOUBLE", "DOUBLE"}},
		{[]string{`9007199254740993`, `2.5`}, []string{"BIGINT", "DOUBLE"}},
		{[]string{`2.5`, `-9007199254740993`}, []string{"DOUBLE", "BIGINT"}},
		{[]string{`9007199254740992`, `0.5`}, []string{"DOUBLE", "DOUBLE"}},
		{[]string{`"2015-01-01T01:00:00Z"`, `"x"`}, []string{"TIMESTAMPTZ", "VARCHAR"}},
		{[]string{`"2015-01-01T01:00:00Z"`, `1`}, []string{"TIMESTAMPTZ", "BIGINT"}},
		{[]string{`[1,2]`, `["x"]`}, []string{"BIGINT[]", "VARCHAR[]"}},
		{[]string{`[]`, `[1]`}, []string{"BIGINT[]", "BIGINT[]"}},
		{[]string{`[1]`, `[]`, `[null]`}, []string{"BIGINT[]", "BIGINT[]", "BIGINT[]"}},
		{[]string{`[1]`, `[{"b":2}]`, `[]`}, []string{"BIGINT[]", "JSON", "BIGINT[]"}},
		{[]string{`[]`, `[{"b":2}]`}, []string{"JSON", "JSON"}},
		{[]string{`[1.5]`, `"x"`}, []string{"DOUBLE[]", "VARCHAR"}},
		{[]string{`["2015-01-01T00:00:00.25Z"]`, `[true]`}, []string{"TIMESTAMPTZ[]", "BOOLEAN[]"}},
		{[]string{`true`, `1`}, []string{"BOOLEAN", "BIGINT"}},
		{[]string{`1.0`, `1`}, []string{"VARCHAR", "BIGINT"}},
		{[]string{`12345678901234567890`, `1`}, []string{"VARCHAR", "BIGINT"}},
	} {
		var lines []string
		for _, v := range tc.vals {
			lines = append(lines, `{"v":`+v+`}`)
		}
		b := ndjsonRows(t, 0, lines...)
		for i, v := range tc.vals {
			got := rowCells(b, i)["v"]
			want := tc.typs[i] + " " + canonicalText(t, v)
			if got != want {
				t.Errorf("%v row %d: %q, want %q", tc.vals, i, got, want)
			}
		}
	}
}

// canonicalText is the text of a JSON value as a widened column holds it.
func canonicalText(t *testing.T, v string) string {
	t.Helper()
	if strings.HasPrefix(v, `"`) {
		b := ndjsonRows(t, 0, `{"s":`+v+`}`)
		return strings.SplitN(rowCells(b, 0)["s"], " ", 2)[1]
	}
	if strings.HasPrefix(v, "[") || strings.HasPrefix(v, "{") {
		return string(appendCompactJSON(nil, new(jsonIter), []byte(v)))
	}
	return v
}

func readGHArchive(tb testing.TB) [][]byte {
	tb.Helper()
	var lines [][]byte
	for _, name := range []string{"pinot-2021-07-21-few-hours.json", "quickwit-gharchive-100.derived.ndjson"} {
		f, err := os.Open("../testdata/gharchive/" + name)
		if err != nil {
			tb.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines = append(lines, bytes.Clone(sc.Bytes()))
		}
		f.Close()
		if err := sc.Err(); err != nil {
			tb.Fatal(err)
		}
	}
	return lines
}

// BenchmarkNDJSONFlatten flattens the GH Archive samples into batches of
// 2048 rows (a do-nothing sink: no DuckDB).
func BenchmarkNDJSONFlatten(b *testing.B) {
	lines := readGHArchive(b)
	var size int64
	for _, l := range lines {
		size += int64(len(l)) + 1
	}
	tr := NewNDJSON(0)
	batch := shred.NewBatch(tr.Core())
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		for _, l := range lines {
			if _, err := tr.AppendJSON(batch, l); err != nil {
				b.Fatal(err)
			}
			if batch.Rows == 2048 {
				finishPadded(batch)
				batch.Reset()
			}
		}
	}
	b.ReportMetric(float64(len(lines))*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
