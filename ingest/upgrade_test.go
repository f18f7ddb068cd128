package ingest_test

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/internal/keyview"
)

// docQueries returns the SQL blocks of docs/SCHEMA.md's example queries
// (section 7).
func docQueries(t *testing.T) []string {
	t.Helper()
	doc := string(readFile(t, filepath.Join("..", "docs", "SCHEMA.md")))
	start, end := strings.Index(doc, "\n## 7. "), strings.Index(doc, "\n## 8. ")
	if start < 0 || end < start {
		t.Fatal("docs/SCHEMA.md has no section 7")
	}
	var qs []string
	for _, m := range regexp.MustCompile("(?s)```sql\n(.*?)```").FindAllStringSubmatch(doc[start:end], -1) {
		qs = append(qs, m[1])
	}
	if len(qs) < 4 {
		t.Fatalf("%d queries in section 7", len(qs))
	}
	return qs
}

// docQuery runs q as shredduck query does: keys read as columns and the
// clocks in UTC (keyview).
func docQuery(t *testing.T, db *ingest.DB, q string) error {
	t.Helper()
	c, err := db.SQL.Conn(t.Context())
	if err != nil {
		return err
	}
	defer c.Close()
	v, err := keyview.Create(t.Context(), c, q)
	if err != nil {
		return err
	}
	defer v.Drop(context.WithoutCancel(t.Context()))
	_, err = c.ExecContext(t.Context(), q)
	return err
}

// A database made by an earlier release (testdata/db, PROVENANCE.md)
// opens, is brought to the current schema version, takes new data,
// answers the documented queries, and survives a crash after its next
// schema change.
func TestOpenEarlierRelease(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "old.duckdb")
	in, err := os.Open(filepath.Join("..", "testdata", "db", "shredduck-34ec44b.duckdb.gz"))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, zr); err != nil {
		t.Fatal(err)
	}
	out.Close()
	in.Close()

	db, err := ingest.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(db.Recovered, "virtual JSON columns") {
		t.Errorf("Recovered = %q, want the earlier release's JSON virtual columns stored", db.Recovered)
	}
	if v := queryStrings(t, db, "SELECT value FROM shredduck_meta WHERE key = 'schema_version'"); len(v) != 1 || v[0][0] != fmt.Sprint(ingest.SchemaVersion) {
		t.Errorf("schema version %v, want %d", v, ingest.SchemaVersion)
	}
	before := map[string]int64{}
	for _, tb := range []string{"otel_traces", "otel_logs", "otel_metrics"} {
		before[tb] = rowCount(t, db, tb)
		if before[tb] == 0 {
			t.Fatalf("%s is empty in the fixture", tb)
		}
	}
	dir2 := t.TempDir()
	mustLoad(t, db, ingest.Options{}, ndjson(t, dir2, "new.jsonl",
		spanLine("new", `"attributes": [{"key": "http.status_code", "value": {"intValue": "503"}}]`, `"traceState": "k=v"`)),
		filepath.Join("..", "testdata", "otlp", "otel-proto-examples-logs.json"))
	if n := rowCount(t, db, "otel_traces"); n != before["otel_traces"]+1 {
		t.Errorf("otel_traces has %d rows, want %d", n, before["otel_traces"]+1)
	}
	for _, q := range docQueries(t) {
		if err := docQuery(t, db, q); err != nil {
			t.Errorf("documented query fails on the upgraded file: %v\n%s", err, q)
		}
	}
	mustLoad(t, db, ingest.Options{}, ndjson(t, dir2, "late.jsonl", spanLine("late", `"attributes": [{"key": "late.key", "value": {"stringValue": "x"}}]`)))
	if err := ingest.CloseUncheckpointed(db); err != nil {
		t.Fatal(err)
	}
	if n, err := openPlain(path, "otel_traces"); err != nil || n != before["otel_traces"]+2 {
		t.Errorf("DuckDB alone after a crash: %d rows, %v", n, err)
	}
	db, err = ingest.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if db.Recovered != "" {
		t.Errorf("a second open did %q", db.Recovered)
	}
	db.Close()
}

// A file of a later schema version is refused, read-write and read-only.
func TestOpenNewerVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new.duckdb")
	db, err := ingest.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.SQL.Exec("UPDATE shredduck_meta SET value = '99' WHERE key = 'schema_version'"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	for name, open := range map[string]func(string) (*ingest.DB, error){"Open": ingest.Open, "OpenReadOnly": ingest.OpenReadOnly} {
		d, err := open(path)
		if !errors.Is(err, ingest.ErrNewerVersion) || !strings.Contains(err.Error(), "schema version 99") {
			t.Errorf("%s: %v, want ErrNewerVersion naming version 99", name, err)
		}
		if d != nil {
			d.Close()
		}
	}
}

// A table from a release with fewer core columns gets the missing ones
// when the file is upgraded, with their default for the rows there.
func TestUpgradeAddsCoreColumns(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "u.duckdb")
	db, err := ingest.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	mustLoad(t, db, ingest.Options{}, ndjson(t, dir, "a.jsonl", spanLine("a")))
	// As an earlier release would have left it: no flags column (a stored
	// core column) and no dropped_links_count (a virtual one), no version.
	execAll(t, db.SQL, "ALTER TABLE otel_traces DROP COLUMN flags", "ALTER TABLE otel_traces DROP COLUMN dropped_links_count",
		"DELETE FROM shredduck_virtual_columns WHERE column_name = 'dropped_links_count'", "DELETE FROM shredduck_meta")
	db.Close()
	db, err = ingest.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, c := range []string{"flags", "dropped_links_count"} {
		if !strings.Contains(db.Recovered, "added core column "+c+" to otel_traces") {
			t.Errorf("Recovered = %q, want %s added", db.Recovered, c)
		}
	}
	if got := queryStrings(t, db, "SELECT flags IS NULL, dropped_links_count FROM otel_traces"); len(got) != 1 || got[0][0] != "true" || got[0][1] != "0" {
		t.Errorf("the old row reads %v, want [true 0]", got)
	}
	mustLoad(t, db, ingest.Options{}, ndjson(t, dir, "b.jsonl", spanLine("b", `"flags": 1`)))
	if n := queryInt(t, db, "SELECT count(*) FROM otel_traces WHERE flags = 1"); n != 1 {
		t.Errorf("%d rows with flags 1 after the upgrade, want 1", n)
	}
}
