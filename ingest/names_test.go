package ingest_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/transforms"
)

func TestCheckTable(t *testing.T) {
	f := func(name, transform string, ok bool) {
		t.Helper()
		err := ingest.CheckTable(name, transform)
		if ok != (err == nil) || (err != nil && !errors.Is(err, ingest.ErrReservedTable)) {
			t.Errorf("CheckTable(%q, %q) = %v", name, transform, err)
		}
	}
	f("otel_traces", transforms.OTLPTraces, true)
	f("OTEL_TRACES", transforms.OTLPTraces, true)
	f("Otel_Traces", transforms.OTLPLogs, false)
	f("otel_logs", transforms.OTLPTraces, false)
	f("otel_metrics", transforms.None, false)
	f("otel_spans", transforms.None, true)
	f("ndjson", transforms.OTLPTraces, true)
	for _, name := range []string{"shredduck_tables", "Shredduck_Columns", "sqlite_master", "pg_class", "DUCKDB_TABLES", "pragma_database_list", "information_schema", "main", "Temp", "system", "pg_catalog"} {
		f(name, transforms.None, false)
		f(name, transforms.OTLPTraces, false)
	}
}

// `shredduck ingest --table` writes the spelling a table was created with,
// and refuses reserved names for a transform that does not own them.
func TestLoadTableNames(t *testing.T) {
	dir := t.TempDir()
	traces := ndjson(t, dir, "t.jsonl", traceLine(nil, span{"s", nil}))
	other := ndjson(t, dir, "o.jsonl", `{"a":1}`)
	db := openDB(t)
	for _, c := range []struct {
		opt  ingest.Options
		path string
		want string
	}{
		{ingest.Options{Table: "otel_logs"}, traces, "otel_logs is the table of transform otlp-logs"},
		{ingest.Options{Table: "OTEL_METRICS", Transform: transforms.OTLPTraces}, traces, "the table of transform otlp-metrics"},
		{ingest.Options{Table: "otel_traces"}, other, "the table of transform otlp-traces, not none"},
		{ingest.Options{Table: "sqlite_master"}, other, "shadow DuckDB's system views"},
		{ingest.Options{Table: "Shredduck_Tables"}, traces, "catalog"},
	} {
		if _, err := load(t, db, c.opt, c.path); err == nil || !errors.Is(err, ingest.ErrReservedTable) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.opt, err, c.want)
		}
	}
	if got := queryStrings(t, db, "SELECT count(*) FROM shredduck_tables"); fmt.Sprint(got) != "[[0]]" {
		t.Errorf("tables after refused loads: %v", got)
	}
	// Any spelling of a routing table is that table.
	mustLoad(t, db, ingest.Options{Table: "Otel_Traces"}, traces)
	mustLoad(t, db, ingest.Options{}, traces)
	mustLoad(t, db, ingest.Options{Table: "OTEL_TRACES"}, traces)
	// Other tables keep the spelling they were created with.
	mustLoad(t, db, ingest.Options{Table: "My_Events"}, other)
	mustLoad(t, db, ingest.Options{Table: "my_events"}, other)
	if _, err := load(t, db, ingest.Options{Table: "MY_EVENTS"}, traces); err == nil || !strings.Contains(err.Error(), "My_Events holds none data") {
		t.Errorf("traces into a none table: %v", err)
	}
	got := queryStrings(t, db, "SELECT table_name, transform FROM shredduck_tables ORDER BY 1")
	if fmt.Sprint(got) != "[[My_Events none] [otel_traces otlp-traces]]" {
		t.Errorf("catalog %v", got)
	}
	if n := rowCount(t, db, "otel_traces"); n != 3 {
		t.Errorf("otel_traces: %d rows, want 3", n)
	}
	if n := rowCount(t, db, "My_Events"); n != 2 {
		t.Errorf("My_Events: %d rows, want 2", n)
	}
	if name, tr, err := db.StoredTable(ctxFor(t), "MY_events"); err != nil || name != "My_Events" || tr != transforms.None {
		t.Errorf("StoredTable = %q, %q, %v", name, tr, err)
	}
}
