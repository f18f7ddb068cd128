package ingest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/shred"
	"github.com/shredduck/shredduck/transforms"
)

// scanRow reads the single row of q into a map by column name.
func scanRow(t *testing.T, db *ingest.DB, q string) map[string]any {
	t.Helper()
	rows, err := db.SQL.QueryContext(ctxFor(t), q)
	if err != nil {
		t.Fatalf("%.200s: %v", q, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	if !rows.Next() {
		t.Fatalf("%.200s: no row (%v)", q, rows.Err())
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		t.Fatal(err)
	}
	out := make(map[string]any, len(cols))
	for i, c := range cols {
		out[c] = vals[i]
	}
	return out
}

// keyRow is scanRow of the first row of table matching where, with every
// key that reads through an expression (ingest.KeyColumns) under its name.
func keyRow(t *testing.T, db *ingest.DB, table, where string) map[string]any {
	t.Helper()
	kcs, err := ingest.KeyColumns(ctxFor(t), db.SQL, table)
	if err != nil {
		t.Fatal(err)
	}
	sel := []string{"*"}
	for _, kc := range kcs {
		sel = append(sel, kc.Expr+" AS "+shred.QuoteIdent(kc.Name))
	}
	if len(kcs) > 0 { // the promoted keys' columns are replaced
		var ex []string
		for _, kc := range kcs {
			if kc.Promoted {
				ex = append(ex, shred.QuoteIdent(kc.Name))
			}
		}
		if len(ex) > 0 {
			sel[0] = "* EXCLUDE (" + strings.Join(ex, ", ") + ")"
		}
	}
	return scanRow(t, db, "SELECT "+strings.Join(sel, ", ")+" FROM "+shred.QuoteIdent(table)+" WHERE "+where)
}

// columnType returns the DuckDB type of a table column.
func columnType(t *testing.T, db *ingest.DB, table, col string) string {
	t.Helper()
	r := queryStrings(t, db, "SELECT data_type FROM duckdb_columns() WHERE table_name = ? AND column_name = ?", table, col)
	if len(r) != 1 {
		t.Fatalf("table %s has no column %q", table, col)
	}
	return r[0][0]
}

// values returns the column's values as text, ordered by span name.
func values(t *testing.T, db *ingest.DB, col string) []string {
	t.Helper()
	return queryColumn(t, db, "SELECT CAST("+quoteIdent(col)+" AS VARCHAR) FROM otel_traces ORDER BY name")
}

// strayValues is the text of column col of table in each row, ordered by
// order, or "~" and the row's stray value of the key (docs/SCHEMA.md,
// 5.6), read as its companion column col~stray (ingest.KeyColumns).
func strayValues(t *testing.T, db *ingest.DB, table, col, order string) []string {
	t.Helper()
	kcs, err := ingest.KeyColumns(ctxFor(t), db.SQL, table)
	if err != nil {
		t.Fatal(err)
	}
	stray := "CAST(NULL AS VARCHAR)"
	for _, kc := range kcs {
		if kc.Stray && kc.Name == col+ingest.StraySuffix {
			stray = kc.Expr
		}
	}
	return queryColumn(t, db, "SELECT coalesce(CAST("+quoteIdent(col)+" AS VARCHAR), '~' || ("+stray+")) FROM "+quoteIdent(table)+" ORDER BY "+order)
}

// (a) a key first seen in a later batch gets a column; earlier rows are NULL.
func TestEvolutionLateKey(t *testing.T) {
	dir := t.TempDir()
	p := ndjson(t, dir, "late.jsonl",
		traceLine(nil, span{"s1", []attr{{"early", "e1"}}}),
		traceLine(nil, span{"s2", []attr{{"early", "e2"}, {"late", "l2"}}}),
		traceLine([]attr{{"late.res", 7}}, span{"s3", nil}))
	db := openDB(t)
	res := mustLoad(t, db, ingest.Options{BatchRows: 1}, p)
	s := stats(t, res, "otel_traces")
	if s.Rows != 3 {
		t.Errorf("rows %d, want 3", s.Rows)
	}
	if s.ColumnsAdded != 4 { // early, late, resource.service.name, resource.late.res
		t.Errorf("ColumnsAdded = %d, want 4", s.ColumnsAdded)
	}
	if got := values(t, db, "early"); fmt.Sprint(got) != "[e1 e2 <NULL>]" {
		t.Errorf("early = %v", got)
	}
	if got := values(t, db, "late"); fmt.Sprint(got) != "[<NULL> l2 <NULL>]" {
		t.Errorf("late = %v", got)
	}
	if got := values(t, db, "resource.late.res"); fmt.Sprint(got) != "[<NULL> <NULL> 7]" {
		t.Errorf("resource.late.res = %v", got)
	}
	if got := columnType(t, db, "otel_traces", "resource.late.res"); got != "BIGINT" {
		t.Errorf("resource.late.res is %s, want BIGINT", got)
	}

	// the same across loads: an existing table gets the new column
	p2 := ndjson(t, dir, "later.jsonl", traceLine(nil, span{"s4", []attr{{"later", true}}}))
	res = mustLoad(t, db, ingest.Options{}, p2)
	if s := stats(t, res, "otel_traces"); s.Created || s.ColumnsAdded != 1 {
		t.Errorf("second load: %+v, want created false, 1 column added", *s)
	}
	if got := values(t, db, "later"); fmt.Sprint(got) != "[<NULL> <NULL> <NULL> true]" {
		t.Errorf("later = %v", got)
	}
	if got := values(t, db, "late"); fmt.Sprint(got) != "[<NULL> l2 <NULL> <NULL>]" {
		t.Errorf("late after second load = %v", got)
	}
}

// (b) widening: BIGINT -> DOUBLE, within a load (one batch per line) and
// across loads (ALTER of an existing table's column); a value that would
// need a lossy widening (a string under a BIGINT key) is a stray: the
// column keeps its type, the value is in the overflow under the key
// (~x below), counted in the catalog and the load's stats.
func TestEvolutionWidening(t *testing.T) {
	type step struct {
		val        any
		batchRows  int
		sameLoad   bool // load together with the previous step
		wantType   string
		wantWidens int // ColumnsWidened of the load that ends with this step
	}
	f := func(t *testing.T, steps []step, wantValues string, wantFrom string, wantStrays int64) {
		t.Helper()
		dir := t.TempDir()
		db := openDB(t)
		var lines []string
		var lastRes *ingest.Result
		flush := func(i int) {
			if len(lines) == 0 {
				return
			}
			p := ndjson(t, dir, fmt.Sprintf("part%d.jsonl", i), lines...)
			lastRes = mustLoad(t, db, ingest.Options{BatchRows: steps[i].batchRows}, p)
			lines = nil
			s := stats(t, lastRes, "otel_traces")
			if s.ColumnsWidened != steps[i].wantWidens {
				t.Errorf("load ending with step %d: ColumnsWidened = %d, want %d", i, s.ColumnsWidened, steps[i].wantWidens)
			}
			if got := columnType(t, db, "otel_traces", "v"); got != steps[i].wantType {
				t.Errorf("after step %d: column v is %s, want %s", i, got, steps[i].wantType)
			}
		}
		for i, st := range steps {
			lines = append(lines, traceLine(nil, span{fmt.Sprintf("s%d", i), []attr{{"v", st.val}}}))
			if i+1 == len(steps) || !steps[i+1].sameLoad {
				flush(i)
			}
		}
		if got := fmt.Sprint(strayValues(t, db, "otel_traces", "v", "name")); got != wantValues {
			t.Errorf("values = %s, want %s", got, wantValues)
		}
		c := catalogEntry(t, db, "otel_traces", "record", "v")
		if c.Strays != wantStrays || stats(t, lastRes, "otel_traces").Strays != wantStrays {
			t.Errorf("catalog counts %d strays, the last load %d, want %d", c.Strays, stats(t, lastRes, "otel_traces").Strays, wantStrays)
		}
		if c.Type != steps[len(steps)-1].wantType {
			t.Errorf("catalog type %s, want %s", c.Type, steps[len(steps)-1].wantType)
		}
		if (wantFrom == "" && c.WidenedFrom.Valid) || (wantFrom != "" && c.WidenedFrom.String != wantFrom) {
			t.Errorf("catalog widened_from = %v, want %q", c.WidenedFrom, wantFrom)
		}
	}
	t.Run("int then double, one load, batch per line", func(t *testing.T) {
		f(t, []step{{1, 1, false, "", 0}, {2.5, 1, true, "DOUBLE", 1}}, "[1.0 2.5]", "BIGINT", 0)
	})
	t.Run("int then string, one load, batch per line", func(t *testing.T) { // a stray
		f(t, []step{{1, 1, false, "", 0}, {"x", 1, true, "BIGINT", 0}}, "[1 ~x]", "", 1)
	})
	t.Run("int then double, one batch", func(t *testing.T) {
		f(t, []step{{1, 0, false, "", 0}, {2.5, 0, true, "DOUBLE", 0}}, "[1.0 2.5]", "", 0)
	})
	t.Run("int then string, one batch", func(t *testing.T) { // the kind of most values; a tie: the first
		f(t, []step{{1, 0, false, "", 0}, {"x", 0, true, "BIGINT", 0}}, "[1 ~x]", "", 1)
	})
	t.Run("int then double, two loads", func(t *testing.T) {
		f(t, []step{{1, 0, false, "BIGINT", 0}, {2.5, 0, false, "DOUBLE", 1}}, "[1.0 2.5]", "BIGINT", 0)
	})
	t.Run("int then string, two loads", func(t *testing.T) {
		f(t, []step{{1, 0, false, "BIGINT", 0}, {"x", 0, false, "BIGINT", 0}}, "[1 ~x]", "", 1)
	})
	t.Run("string then int, one batch", func(t *testing.T) { // the kind of most values, not the first
		f(t, []step{{"x", 0, false, "", 0}, {3, 0, true, "", 0}, {4, 0, true, "BIGINT", 0}}, "[~x 3 4]", "", 1)
	})
	t.Run("bool then int, two loads", func(t *testing.T) {
		f(t, []step{{true, 0, false, "BOOLEAN", 0}, {3, 0, false, "BOOLEAN", 0}}, "[true ~3]", "", 1)
	})
	t.Run("string then int stays VARCHAR", func(t *testing.T) {
		f(t, []step{{"x", 0, false, "VARCHAR", 0}, {3, 0, false, "VARCHAR", 0}}, "[x 3]", "", 0)
	})
	t.Run("double then int stays DOUBLE", func(t *testing.T) {
		f(t, []step{{1.5, 0, false, "DOUBLE", 0}, {3, 0, false, "DOUBLE", 0}}, "[1.5 3.0]", "", 0)
	})
}

// (c) attributes named like core columns get "~2" names.
func TestEvolutionCoreCollision(t *testing.T) {
	dir := t.TempDir()
	p := ndjson(t, dir, "collide.jsonl",
		traceLine(nil, span{"real-name", []attr{{"name", "attr-name"}, {"trace_id", "attr-trace"}, {"Kind", "attr-kind"}}}))
	db := openDB(t)
	mustLoad(t, db, ingest.Options{}, p)
	for _, want := range []catalogRow{
		{Column: "name~2", Level: "record", Key: "name", Type: "VARCHAR"},
		{Column: "trace_id~2", Level: "record", Key: "trace_id", Type: "VARCHAR"},
		{Column: "Kind~2", Level: "record", Key: "Kind", Type: "VARCHAR"},
	} {
		if got := catalogEntry(t, db, "otel_traces", want.Level, want.Key); got != want {
			t.Errorf("catalog %+v, want %+v", got, want)
		}
	}
	row := scanRow(t, db, `SELECT name, trace_id, kind, "name~2", "trace_id~2", "Kind~2" FROM otel_traces`)
	want := map[string]any{
		"name": "real-name", "kind": "INTERNAL", "name~2": "attr-name", "trace_id~2": "attr-trace", "Kind~2": "attr-kind",
	}
	for k, v := range want {
		if row[k] != v {
			t.Errorf("%s = %v, want %v", k, row[k], v)
		}
	}
	if s, _ := row["trace_id"].(string); len(s) != 32 || strings.Contains(s, "attr") {
		t.Errorf("core trace_id = %v, want a 32-digit hex id", row["trace_id"])
	}
	// a second load maps the keys to the same columns
	p2 := ndjson(t, dir, "collide2.jsonl", traceLine(nil, span{"second", []attr{{"name", "attr-2"}}}))
	res := mustLoad(t, db, ingest.Options{}, p2)
	if s := stats(t, res, "otel_traces"); s.ColumnsAdded != 0 {
		t.Errorf("second load added %d columns", s.ColumnsAdded)
	}
	if got := values(t, db, "name~2"); fmt.Sprint(got) != "[attr-name attr-2]" {
		t.Errorf("name~2 = %v", got)
	}
}

// (d) keys that differ only in case are stored apart.
func TestEvolutionCaseDistinctKeys(t *testing.T) {
	dir := t.TempDir()
	p := ndjson(t, dir, "case.jsonl",
		traceLine(nil, span{"s1", []attr{{"User-Agent", "upper"}, {"user-agent", "lower"}}}),
		traceLine(nil, span{"s2", []attr{{"user-agent", "lower-only"}}}),
		traceLine(nil, span{"s3", []attr{{"USER-AGENT", "shout"}}}))
	db := openDB(t)
	mustLoad(t, db, ingest.Options{}, p)
	cat := catalog(t, db, "otel_traces")
	cols := map[string]string{}
	seen := map[string]string{}
	for _, k := range []string{"User-Agent", "user-agent", "USER-AGENT"} {
		c, ok := cat["record\x00"+k]
		if !ok {
			t.Fatalf("no catalog row for key %q", k)
		}
		if other, dup := seen[strings.ToLower(c.Column)]; dup {
			t.Errorf("keys %q and %q share column %q", other, k, c.Column)
		}
		seen[strings.ToLower(c.Column)] = k
		cols[k] = c.Column
	}
	if cols["User-Agent"] != "User-Agent" {
		t.Errorf("first key's column %q, want User-Agent", cols["User-Agent"])
	}
	want := map[string]string{
		"User-Agent": "[upper <NULL> <NULL>]",
		"user-agent": "[lower lower-only <NULL>]",
		"USER-AGENT": "[<NULL> <NULL> shout]",
	}
	for k, w := range want {
		if got := fmt.Sprint(values(t, db, cols[k])); got != w {
			t.Errorf("key %q (column %q) = %s, want %s", k, cols[k], got, w)
		}
	}
}

// (e) beyond MaxColumns, keys go to attributes_overflow; nothing is lost.
func TestEvolutionOverflow(t *testing.T) {
	const keys = 3000
	val := func(i int) any {
		if i%3 == 0 {
			return i
		}
		return fmt.Sprintf("v%d", i)
	}
	var attrs []attr
	for i := 0; i < keys; i++ {
		attrs = append(attrs, attr{fmt.Sprintf("k%04d", i), val(i)})
	}
	dir := t.TempDir()
	p := ndjson(t, dir, "wide.jsonl",
		rawTraceLine(nil, span{"wide", attrs}, span{"narrow", []attr{{"k0001", "n1"}, {"k2999", "n2999"}}}))
	db := openDB(t)
	res := mustLoad(t, db, ingest.Options{}, p)
	t.Logf("load of %d keys took %.2fs", keys, res.Seconds)
	s := stats(t, res, "otel_traces")
	if s.KeysOverflowed != keys-ingest.DefaultMaxColumns {
		t.Errorf("KeysOverflowed = %d, want %d", s.KeysOverflowed, keys-ingest.DefaultMaxColumns)
	}
	if s.ColumnsAdded != ingest.DefaultMaxColumns {
		t.Errorf("ColumnsAdded = %d, want %d", s.ColumnsAdded, ingest.DefaultMaxColumns)
	}
	if n := queryInt(t, db, "SELECT count(*) FROM shredduck_columns WHERE table_name = 'otel_traces' AND NOT overflow"); n != ingest.DefaultMaxColumns {
		t.Errorf("%d catalog rows with columns, want %d", n, ingest.DefaultMaxColumns)
	}
	if n := queryInt(t, db, "SELECT count(*) FROM shredduck_columns WHERE table_name = 'otel_traces' AND overflow AND column_name = key AND type IN ('BIGINT', 'VARCHAR') AND level = 'record'"); n != int64(keys-ingest.DefaultMaxColumns) {
		t.Errorf("%d overflow catalog rows, want %d", n, keys-ingest.DefaultMaxColumns)
	}
	all := len(tableColumns(t, db, "otel_traces"))
	core := queryInt(t, db, "SELECT count(*) FROM duckdb_columns() WHERE table_name = 'otel_traces' AND column_name NOT IN (SELECT column_name FROM shredduck_columns WHERE table_name = 'otel_traces' AND NOT overflow)")
	// 27 core columns and the two maps the overflowed keys' kinds need.
	if all-int(core) != ingest.DefaultMaxColumns || core != 29 {
		t.Errorf("table has %d columns, %d of them core; want 29 core + %d", all, core, ingest.DefaultMaxColumns)
	}

	// Every key reads as its column, overflowed or not, typed (KeyColumns).
	cat := catalog(t, db, "otel_traces")
	check := func(spanName string, want map[string]any) {
		row := keyRow(t, db, "otel_traces", "name = '"+spanName+"'")
		set := 0
		for _, c := range cat {
			if row[c.Column] != nil {
				set++
			}
		}
		if set != len(want) {
			t.Errorf("%s: %d keys with a value, want %d", spanName, set, len(want))
		}
		for k, w := range want {
			c, ok := cat["record\x00"+k]
			if !ok {
				t.Errorf("no catalog row for key %s", k)
				continue
			}
			if wi, isInt := w.(int); isInt {
				w = int64(wi)
			}
			if got := row[c.Column]; got != w {
				t.Errorf("%s: key %s (overflow %v) = %v (%T), want %v", spanName, k, c.Overflow, got, got, w)
			}
		}
	}
	want := map[string]any{}
	for _, a := range attrs {
		want[a.key] = a.val
	}
	check("wide", want)
	check("narrow", map[string]any{"k0001": "n1", "k2999": "n2999"})
}

// (f) hostile keys are stored in their own columns, under their exact key.
func TestEvolutionHostileKeys(t *testing.T) {
	long := strings.Repeat("0123456789", 1000)
	keys := []string{
		`a"b`,
		`x'; DROP TABLE otel_traces; --`,
		`with space`,
		`semi;colon`,
		``,
		`ünïcödé`,
		long,
		`back\slash`,
		"new\nline",
		`"`,
		`resource.service.name`, // a record key that looks like a resource column
		`~empty`,                // the empty key's column name, as a key
		`name~2`,                // a name the collision rule makes, as a key
		`name`,                  // collides with the core column
		`attributes_overflow`,   // collides with the overflow column
	}
	var attrs []attr
	for i, k := range keys {
		attrs = append(attrs, attr{k, fmt.Sprintf("value-%d", i)})
	}
	dir := t.TempDir()
	p := ndjson(t, dir, "hostile.jsonl", traceLine(nil, span{"hostile", attrs}))
	db := openDB(t)
	res := mustLoad(t, db, ingest.Options{}, p)
	if s := stats(t, res, "otel_traces"); s.KeysOverflowed != 0 {
		t.Errorf("KeysOverflowed = %d", s.KeysOverflowed)
	}
	if !tableExists(t, db, "otel_traces") || rowCount(t, db, "otel_traces") != 1 {
		t.Fatal("otel_traces missing or wrong after loading hostile keys")
	}
	cat := catalog(t, db, "otel_traces")
	used := map[string]string{}
	for i, k := range keys {
		c, ok := cat["record\x00"+k]
		if !ok {
			t.Errorf("no catalog row with key %.40q (len %d)", k, len(k))
			continue
		}
		if c.Key != k {
			t.Errorf("catalog key %.40q != %.40q", c.Key, k)
		}
		if c.Overflow {
			t.Errorf("key %.40q overflowed", k)
			continue
		}
		if other, dup := used[strings.ToLower(c.Column)]; dup {
			t.Errorf("keys %.40q and %.40q share column %.40q", other, k, c.Column)
		}
		used[strings.ToLower(c.Column)] = k
		if k == "" && c.Column != "~empty" {
			t.Errorf("empty key's column is %q, want ~empty", c.Column)
		}
		var got string
		if err := db.SQL.QueryRowContext(ctxFor(t), "SELECT "+quoteIdent(c.Column)+" FROM otel_traces").Scan(&got); err != nil {
			t.Errorf("key %.40q column %.40q: %v", k, c.Column, err)
			continue
		}
		if want := fmt.Sprintf("value-%d", i); got != want {
			t.Errorf("key %.40q: value %q, want %q", k, got, want)
		}
	}
	// The record key "resource.service.name" and the resource key
	// "service.name" want the same column name; the naming rule gives one of
	// them a "~2" name. Either way they must not share a column.
	res1, rec1 := cat["resource\x00service.name"], cat["record\x00resource.service.name"]
	if res1.Column == "" || strings.EqualFold(res1.Column, rec1.Column) {
		t.Errorf("resource service.name (%q) and record key resource.service.name (%q) share a column", res1.Column, rec1.Column)
	} else if got := values(t, db, res1.Column); fmt.Sprint(got) != "[gen]" {
		t.Errorf("resource service.name in column %q = %v, want [gen]", res1.Column, got)
	}
	if n := queryInt(t, db, "SELECT count(*) FROM otel_traces WHERE name = 'hostile'"); n != 1 {
		t.Errorf("table not queryable by core column: %d", n)
	}
	// a second load of the same keys reuses every column
	res = mustLoad(t, db, ingest.Options{}, p)
	if s := stats(t, res, "otel_traces"); s.ColumnsAdded != 0 || s.Rows != 1 {
		t.Errorf("second load: %+v", *s)
	}
}

// The text a widened VARCHAR column holds for an earlier value must not
// depend on where batch and load boundaries fell: the same lines loaded as
// one batch, as a batch per line, and as a load per line give the same
// values.
func TestEvolutionWideningIndependentOfBatching(t *testing.T) {
	for _, tc := range []struct {
		name string
		vals []any
	}{
		{"int then string", []any{1, "x"}},
		{"bool then string", []any{true, "x"}},
		{"double 2.5 then string", []any{2.5, "x"}},
		{"double 1.0 then string", []any{1.0, "x"}},
		{"double 0.1 then string", []any{0.1, "x"}},
		{"double 1e21 then string", []any{1e21, "x"}},
		{"double 1e-7 then string", []any{1e-7, "x"}},
		{"double NaN then string", []any{json.RawMessage(`"NaN"`), "x"}},
		{"double Infinity then string", []any{json.RawMessage(`"Infinity"`), "x"}},
		{"double -Infinity then string", []any{json.RawMessage(`"-Infinity"`), "x"}},
		{"int then double then string", []any{1, 2.5, "x"}},
		{"int then double", []any{1, 2.5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var lines []string
			for i, v := range tc.vals {
				lines = append(lines, traceLine(nil, span{fmt.Sprintf("s%d", i), []attr{{"v", v}}}))
			}
			results := map[string]string{}
			// one batch
			db := openDB(t)
			mustLoad(t, db, ingest.Options{}, ndjson(t, dir, "all.jsonl", lines...))
			results["one batch"] = fmt.Sprint(values(t, db, "v"))
			// one batch per line
			db = openDB(t)
			mustLoad(t, db, ingest.Options{BatchRows: 1}, ndjson(t, dir, "all2.jsonl", lines...))
			results["batch per line"] = fmt.Sprint(values(t, db, "v"))
			// one load per line
			db = openDB(t)
			for i, l := range lines {
				mustLoad(t, db, ingest.Options{}, ndjson(t, dir, fmt.Sprintf("l%d.jsonl", i), l))
			}
			results["load per line"] = fmt.Sprint(values(t, db, "v"))
			if results["one batch"] != results["batch per line"] || results["one batch"] != results["load per line"] {
				t.Errorf("values of v depend on batching: one batch %s, batch per line %s, load per line %s",
					results["one batch"], results["batch per line"], results["load per line"])
			}
		})
	}
}

// Once a table has MaxColumns dynamic columns, new keys of later loads
// overflow too, at every level, and an overflowed key stays overflowed.
func TestEvolutionOverflowAcrossLoads(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t)
	opt := ingest.Options{MaxColumns: 3}
	// load 1: 2 columns (resource.service.name, a)
	r1 := mustLoad(t, db, opt, ndjson(t, dir, "1.jsonl", traceLine(nil, span{"s1", []attr{{"a", 1}}})))
	if s := stats(t, r1, "otel_traces"); s.ColumnsAdded != 2 || s.KeysOverflowed != 0 {
		t.Errorf("load 1: %+v", *s)
	}
	// load 2: b gets the last column, c and the resource key overflow
	r2 := mustLoad(t, db, opt, ndjson(t, dir, "2.jsonl",
		traceLine([]attr{{"host", "h1"}}, span{"s2", []attr{{"b", "B"}, {"c", 2.5}, {`q"uote`, "va\"l\n\u00e9"}}})))
	if s := stats(t, r2, "otel_traces"); s.ColumnsAdded != 1 || s.KeysOverflowed != 3 {
		t.Errorf("load 2: %+v, want 1 column added, 3 keys overflowed", *s)
	}
	// load 3: known overflowed keys add nothing; a value for c is still overflow
	r3 := mustLoad(t, db, opt, ndjson(t, dir, "3.jsonl",
		traceLine([]attr{{"host", "h2"}}, span{"s3", []attr{{"a", 5}, {"c", "now a string"}}})))
	if s := stats(t, r3, "otel_traces"); s.ColumnsAdded != 0 || s.KeysOverflowed != 0 || s.ColumnsWidened != 0 {
		t.Errorf("load 3: %+v, want nothing added, overflowed or widened", *s)
	}
	cat := catalog(t, db, "otel_traces")
	for key, want := range map[string]struct {
		col      string
		overflow bool
	}{
		"resource\x00service.name": {"resource.service.name", false},
		"record\x00a":              {"a", false},
		"record\x00b":              {"b", false},
		"record\x00c":              {"c", true},
		"record\x00q\"uote":        {`q"uote`, true},
		"resource\x00host":         {"resource.host", true},
	} {
		c, ok := cat[key]
		if !ok {
			t.Errorf("no catalog row for %q", key)
			continue
		}
		if c.Column != want.col || c.Overflow != want.overflow {
			t.Errorf("catalog %q: column %q overflow %v, want column %q overflow %v", key, c.Column, c.Overflow, want.col, want.overflow)
		}
	}
	// 27 core, a, b, resource.service.name, and the maps of the
	// overflowed values: attributes_double, attributes_str,
	// resource_attributes_str.
	if got := len(tableColumns(t, db, "otel_traces")); got != 27+3+3 {
		t.Errorf("table has %d columns, want 33", got)
	}
	// c was a DOUBLE, then a string: it reads as VARCHAR, the double in
	// the text a widened column would give it.
	for name, want := range map[string][]any{
		"s1": {nil, nil, nil},
		"s2": {"2.5", "va\"l\n\u00e9", "h1"},
		"s3": {"now a string", nil, "h2"},
	} {
		row := keyRow(t, db, "otel_traces", "name = '"+name+"'")
		for i, col := range []string{"c", `q"uote`, "resource.host"} {
			if row[col] != want[i] {
				t.Errorf("%s: %s = %#v, want %#v", name, col, row[col], want[i])
			}
		}
	}
}

// Strays, then a new key, in one Loader transaction, and one batch with a
// stray and a new key: the columns keep their types, the strays go to the
// overflow and the catalog's count, the new keys get columns, all in the
// transaction. (Before strays, such a string widened w to VARCHAR with an
// UPDATE of its stored values, and DuckDB cannot commit an ALTER TABLE
// after an UPDATE of the same table: the loader stored such items one by
// one, errAltersUpdated; TestKafkaCrashWithHTTP.)
func TestEvolutionWideningThenNewKeyInOneTransaction(t *testing.T) {
	db := openDB(t)
	item := func(next uint64, s span) ingest.SourceItem {
		b := shred.NewBatch(transforms.Traces.Core())
		if _, err := transforms.Traces.AppendJSON(b, []byte(traceLine(nil, s))); err != nil {
			t.Fatal(err)
		}
		return ingest.SourceItem{Table: "otel_traces", Tr: transforms.Traces, Batch: b, Next: next, Arrived: time.Now()}
	}
	src := &sliceSource{items: []ingest.SourceItem{
		item(1, span{"a", []attr{{"w", 2.0}, {"w2", 3.0}}}),
		// One transaction from here: widens w, adds k.
		item(2, span{"b", []attr{{"w", "x"}}}),
		item(3, span{"c", []attr{{"k", "v"}}}),
		// One batch that widens w2 and adds k2.
		item(4, span{"d", []attr{{"w2", "y"}, {"k2", "v2"}}}),
	}}
	for _, upTo := range []int{1, len(src.items)} { // the table first in a transaction of its own
		src := &sliceSource{items: src.items[:upTo]}
		l := db.NewLoader(src, ingest.LoaderOptions{})
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // drain: everything there in one transaction if it can
		if err := l.Run(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for col, want := range map[string]string{"w": "[2.0 ~x <NULL> <NULL>]", "k": "[<NULL> <NULL> v <NULL>]", "w2": "[3.0 <NULL> <NULL> ~y]", "k2": "[<NULL> <NULL> <NULL> v2]"} {
		if got := fmt.Sprint(strayValues(t, db, "otel_traces", col, "name")); got != want {
			t.Errorf("%s = %s, want %s", col, got, want)
		}
	}
	for _, key := range []string{"w", "w2"} {
		if c := catalogEntry(t, db, "otel_traces", "record", key); c.Type != "DOUBLE" || c.Strays != 1 {
			t.Errorf("catalog of %s: %s, %d strays; want DOUBLE, 1", key, c.Type, c.Strays)
		}
	}
	if pos, _, _ := db.StoredPosition(context.Background(), "bench"); pos != 4 {
		t.Errorf("stored position %d, want 4", pos)
	}
}
