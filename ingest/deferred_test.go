package ingest_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/shred"
	"github.com/shredduck/shredduck/transforms"
)

// deferredNames lists the transform's deferred core columns in core order.
func deferredNames(tr transforms.Transform) []string {
	var out []string
	for _, c := range tr.Core() {
		if c.Deferred {
			out = append(out, c.Name)
		}
	}
	return out
}

// virtualColumns lists a table's columns that are still virtual, as the
// catalog records them, sorted.
func virtualColumns(t *testing.T, db *ingest.DB, table string) []string {
	t.Helper()
	return queryColumn(t, db, "SELECT column_name FROM shredduck_virtual_columns WHERE table_name = ? ORDER BY column_name", table)
}

// storedColumns lists the columns that have storage segments, as DuckDB's
// storage reports them (a virtual column has none), sorted.
func storedColumns(t *testing.T, db *ingest.DB, table string) []string {
	t.Helper()
	return queryColumn(t, db, "SELECT DISTINCT column_name FROM pragma_storage_info("+quoteString(table)+") ORDER BY column_name")
}

func quoteString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// spanLine is one OTLP/JSON request with one span named name whose other
// span fields are given as raw JSON members (e.g. `"traceState": "k=v"`).
func spanLine(name string, members ...string) string {
	n := spanSeq.Add(1)
	fields := append([]string{
		fmt.Sprintf(`"traceId": "%032x"`, 0xd0000+n),
		fmt.Sprintf(`"spanId": "%016x"`, 0xd0000+n),
		fmt.Sprintf(`"name": %q`, name),
		`"startTimeUnixNano": "1700000000000000000"`,
		`"endTimeUnixNano": "1700000000000000500"`,
	}, members...)
	return `{"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": [{` + strings.Join(fields, ", ") + `}]}]}]}`
}

// Deferred core columns: created virtual (no storage, the default value),
// stored with the first batch that holds another value, the rows before it
// keeping the default; the state survives reopening and a failed load.
func TestDeferredColumns(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "d.duckdb")
	db, err := ingest.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	deferred := deferredNames(transforms.Traces)
	if len(deferred) == 0 {
		t.Fatal("the traces transform defers no column")
	}
	sorted := slices.Sorted(slices.Values(deferred))

	res := mustLoad(t, db, ingest.Options{}, ndjson(t, dir, "plain.jsonl", spanLine("a1"), spanLine("a2")))
	if s := stats(t, res, "otel_traces"); !s.Created || s.ColumnsStored != 0 {
		t.Errorf("first load: %+v, want created, no column stored", *s)
	}
	if got := virtualColumns(t, db, "otel_traces"); !slices.Equal(got, sorted) {
		t.Errorf("virtual columns %v, want %v", got, sorted)
	}
	stored := storedColumns(t, db, "otel_traces")
	for _, c := range deferred {
		if slices.Contains(stored, c) {
			t.Errorf("virtual column %s has storage", c)
		}
	}
	if !slices.Contains(stored, "name") {
		t.Errorf("storage info %v has no name column: the check above proves nothing", stored)
	}
	// Every core column is there, in core order, with its type (VARCHAR
	// for JSON while virtual, walsafe.go).
	cols := tableColumns(t, db, "otel_traces")
	var core []shred.CoreColumn
	for _, c := range transforms.Traces.Core() {
		if !c.OnDemand { // the overflow maps: added with their first value
			core = append(core, c)
		}
	}
	for i, c := range core {
		if i >= len(cols) || cols[i] != c.Name {
			t.Fatalf("columns %v do not start with the core columns (%d: %s)", cols, i, c.Name)
		}
		want := c.Type.SQL()
		if c.Deferred {
			want = ingest.VirtualTypeSQL(c.Type)
		}
		if got := columnType(t, db, "otel_traces", c.Name); !sameType(got, want) {
			t.Errorf("column %s is %s, want %s", c.Name, got, want)
		}
	}
	row := scanRow(t, db, "SELECT trace_state, dropped_events_count, events, links, attributes_overflow FROM otel_traces WHERE name = 'a1'")
	if fmt.Sprint(row) != "map[attributes_overflow:<nil> dropped_events_count:0 events:<nil> links:<nil> trace_state:<nil>]" {
		t.Errorf("defaults of virtual columns: %v", row)
	}

	// The first values other than the default store their columns, also
	// after rows of the same load were appended (one batch per line).
	res = mustLoad(t, db, ingest.Options{BatchRows: 1}, ndjson(t, dir, "values.jsonl",
		spanLine("b0"),
		spanLine("b1", `"traceState": "k=v"`, `"droppedEventsCount": 3`,
			`"events": [{"timeUnixNano": "1700000000000000100", "name": "ev", "attributes": [{"key": "x", "value": {"intValue": "1"}}]}]`),
		spanLine("b2")))
	if s := stats(t, res, "otel_traces"); s.Created || s.ColumnsStored != 3 || s.ColumnsAdded != 0 {
		t.Errorf("second load: %+v, want 3 columns stored, none added", *s)
	}
	want := slices.DeleteFunc(slices.Clone(sorted), func(c string) bool {
		return c == "trace_state" || c == "dropped_events_count" || c == "events"
	})
	if got := virtualColumns(t, db, "otel_traces"); !slices.Equal(got, want) {
		t.Errorf("virtual columns after storing %v, want %v", got, want)
	}
	stored = storedColumns(t, db, "otel_traces")
	for _, c := range []string{"trace_state", "dropped_events_count", "events"} {
		if !slices.Contains(stored, c) {
			t.Errorf("column %s has no storage after its first value", c)
		}
		if got, typ := columnType(t, db, "otel_traces", c), coreType(c); !sameType(got, typ) {
			t.Errorf("stored column %s is %s, want %s", c, got, typ)
		}
	}
	check := func(expr, want string) {
		t.Helper()
		got := queryColumn(t, db, "SELECT CAST("+expr+" AS VARCHAR) FROM otel_traces ORDER BY name")
		if fmt.Sprint(got) != want {
			t.Errorf("%s = %v, want %s", expr, got, want)
		}
	}
	check("trace_state", "[<NULL> <NULL> <NULL> k=v <NULL>]")
	check("dropped_events_count", "[0 0 0 3 0]")
	check("len(events)", "[<NULL> <NULL> <NULL> 1 <NULL>]")
	check("events[1].name", "[<NULL> <NULL> <NULL> ev <NULL>]")
	check("dropped_links_count", "[0 0 0 0 0]")

	// Reopened: the catalog tells which columns are still virtual.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err = ingest.Open(path); err != nil {
		t.Fatal(err)
	}
	res = mustLoad(t, db, ingest.Options{}, ndjson(t, dir, "plain2.jsonl", spanLine("c1")))
	if s := stats(t, res, "otel_traces"); s.Created || s.ColumnsStored != 0 || s.ColumnsAdded != 0 {
		t.Errorf("load after reopening: %+v, want no schema change", *s)
	}
	check("dropped_events_count", "[0 0 0 3 0 0]")
	check("trace_state", "[<NULL> <NULL> <NULL> k=v <NULL> <NULL>]")

	// A failed load that would have stored links leaves them virtual.
	bad := ndjson(t, dir, "bad.jsonl",
		spanLine("d1", fmt.Sprintf(`"links": [{"traceId": "%032x", "spanId": "%016x"}]`, 1, 2)),
		`{"resourceSpans": [`)
	if _, err := load(t, db, ingest.Options{}, bad); err == nil {
		t.Fatal("load of a broken file succeeded")
	}
	if got := virtualColumns(t, db, "otel_traces"); !slices.Equal(got, want) {
		t.Errorf("virtual columns after a failed load %v, want %v", got, want)
	}
	if slices.Contains(storedColumns(t, db, "otel_traces"), "links") {
		t.Error("links has storage after a failed load")
	}
	if n := rowCount(t, db, "otel_traces"); n != 6 {
		t.Errorf("%d rows after a failed load, want 6", n)
	}
	mustLoad(t, db, ingest.Options{}, ndjson(t, dir, "links.jsonl",
		spanLine("d2", fmt.Sprintf(`"links": [{"traceId": "%032x", "spanId": "%016x"}]`, 1, 2))))
	check("links[1].span_id", "[<NULL> <NULL> <NULL> <NULL> <NULL> <NULL> 0000000000000002]")
}

// sameType compares DuckDB type names, which quote STRUCT field names
// only where needed.
func sameType(a, b string) bool {
	return strings.ReplaceAll(a, `"`, "") == strings.ReplaceAll(b, `"`, "")
}

func coreType(name string) string {
	for _, c := range transforms.Traces.Core() {
		if c.Name == name {
			return c.Type.SQL()
		}
	}
	return ""
}

// A table made before deferred columns existed stores every core column
// and has no catalog rows for virtual ones: loads into it append to them
// as before.
func TestDeferredColumnsOldTable(t *testing.T) {
	db := openDB(t)
	var defs []string
	for _, c := range transforms.Traces.Core() {
		defs = append(defs, quoteIdent(c.Name)+" "+c.Type.SQL())
	}
	for _, q := range []string{
		"CREATE TABLE otel_traces (" + strings.Join(defs, ", ") + ")",
		"INSERT INTO shredduck_tables (table_name, transform) VALUES ('otel_traces', 'otlp-traces')",
	} {
		if _, err := db.SQL.ExecContext(ctxFor(t), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	dir := t.TempDir()
	res := mustLoad(t, db, ingest.Options{}, ndjson(t, dir, "old.jsonl", spanLine("a", `"traceState": "t"`), spanLine("b")))
	if s := stats(t, res, "otel_traces"); s.Created || s.ColumnsStored != 0 {
		t.Errorf("load into an old table: %+v, want no column stored", *s)
	}
	if got := fmt.Sprint(values(t, db, "trace_state")); got != "[t <NULL>]" {
		t.Errorf("trace_state = %s", got)
	}
	if got := fmt.Sprint(values(t, db, "dropped_events_count")); got != "[0 0]" {
		t.Errorf("dropped_events_count = %s", got)
	}
	if got := virtualColumns(t, db, "otel_traces"); len(got) != 0 {
		t.Errorf("virtual columns %v in an old table", got)
	}
}

// A database file is created in DuckDB's v1.5.0 storage format (DICT_FSST
// string compression); a file made before keeps its format.
func TestStorageVersion(t *testing.T) {
	db := openDB(t)
	dir := t.TempDir()
	mustLoad(t, db, ingest.Options{}, ndjson(t, dir, "a.jsonl", spanLine("a")))
	got := queryColumn(t, db, "SELECT CAST(tags AS VARCHAR) FROM duckdb_databases() WHERE database_name = current_database()")
	if len(got) != 1 || !strings.Contains(got[0], "storage_version="+ingest.StorageVersion) {
		t.Errorf("database tags %v, want storage_version %s", got, ingest.StorageVersion)
	}
}
