package ingest_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/internal/duckdb15test"
	"github.com/shredduck/shredduck/shred"
)

// A young table reads as typed columns in plain DuckDB and in its Parquet
// export, under the default density rule: every key of the official OTLP
// log example, of a 3-span file and of a one-row NDJSON object gets its
// stored column (shred.Schema.Young).
func TestYoungTablesTyped(t *testing.T) {
	dir := t.TempDir()
	db, err := ingest.Open(filepath.Join(dir, "young.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	db.ColumnDensity = shred.DefaultDensity
	mustLoad(t, db, ingest.Options{}, filepath.Join(fixtures, "otel-proto-examples-logs.json"))
	spans := []string{
		spanLine("a", `"attributes": [{"key": "k.int", "value": {"intValue": "7"}}]`),
		spanLine("b", `"attributes": [{"key": "k.str", "value": {"stringValue": "x"}}]`),
		spanLine("c", `"attributes": [{"key": "k.bool", "value": {"boolValue": true}}]`),
	}
	mustLoad(t, db, ingest.Options{}, ndjson(t, dir, "three.jsonl", spans...))
	mustLoad(t, db, ingest.Options{Transform: "none", Table: "one"}, ndjson(t, dir, "one.jsonl", `{"a":1,"b":{"c":"x"}}`))
	out := filepath.Join(dir, "export")
	if _, err := db.Export(ctxFor(t), ingest.ExportOptions{Dir: out, Tables: []string{"otel_logs", "otel_traces"}}, nil); err != nil {
		t.Fatal(err)
	}
	checks := []struct{ table, column, typ, value string }{
		{"otel_logs", "int.attribute", "BIGINT", "10"},
		{"otel_logs", "double.attribute", "DOUBLE", "637.704"},
		{"otel_logs", "boolean.attribute", "BOOLEAN", "true"},
		{"otel_logs", "string.attribute", "VARCHAR", "some string"},
		{"otel_traces", "k.int", "BIGINT", "7"},
		{"otel_traces", "k.str", "VARCHAR", "x"},
		{"otel_traces", "k.bool", "BOOLEAN", "true"},
		{"one", "a", "BIGINT", "1"},
		{"one", "b.c", "VARCHAR", "x"},
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range checks {
		q := `SELECT typeof(max("` + c.column + `")) || '=' || max("` + c.column + `")::VARCHAR FROM ` + c.table
		got, err := duckdb15test.Query(t, db.Path, q)
		if want := c.typ + "=" + c.value; err != nil || got != want {
			t.Errorf("plain DuckDB, %s.%q: %q %v, want %q", c.table, c.column, got, err, want)
		}
		if c.table == "one" {
			continue // not an OTLP table: not in the export
		}
		pq := strings.Replace(q, c.table, "read_parquet('"+filepath.Join(out, c.table)+"/**/*.parquet')", 1)
		got, err = duckdb15test.Query(t, db.Path, pq)
		if want := c.typ + "=" + c.value; err != nil || got != want {
			t.Errorf("Parquet, %s.%q: %q %v, want %q", c.table, c.column, got, err, want)
		}
	}
}
