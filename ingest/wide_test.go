package ingest

import (
	"context"
	"path/filepath"
	"testing"
)

// A wide table loaded twice into one database with the CLI's default
// memory limit: the second load's commit and the final checkpoint used to
// fail ("could not allocate block") once the raised limit was restored.
func TestWideReingestCheckpoints(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.duckdb")
	in, err := StatInputs([]string{"../testdata/gharchive/pinot-2021-07-21-few-hours.json"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		db, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Load(context.Background(), in, Options{Transform: "none", Table: "gh", MemoryLimit: "256MB"}); err != nil {
			t.Fatalf("load %d: %v", i, err)
		}
		if err := db.Close(); err != nil {
			t.Fatalf("close after load %d: %v", i, err)
		}
	}
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.SQL.QueryRow("SELECT count(*) FROM gh").Scan(&n); err != nil || n != 1600 {
		t.Fatalf("rows %d, %v; want 1600", n, err)
	}
}

// A server locks DuckDB's configuration; FitMemoryLimit sizes the limit
// beforehand for the widest table in the database.
func TestFitMemoryLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.duckdb")
	in, err := StatInputs([]string{"../testdata/gharchive/pinot-2021-07-21-few-hours.json"})
	if err != nil {
		t.Fatal(err)
	}
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// No wide table: the limit stays.
	if _, err := db.SQL.Exec("SET memory_limit = '256MB'"); err != nil {
		t.Fatal(err)
	}
	if err := db.FitMemoryLimit(context.Background()); err != nil {
		t.Fatal(err)
	}
	limit := func() int64 {
		var s string
		if err := db.SQL.QueryRow("SELECT current_setting('memory_limit')").Scan(&s); err != nil {
			t.Fatal(err)
		}
		return parseSize(s)
	}
	if got := limit(); got > 256e6 {
		t.Fatalf("limit %d without a wide table", got)
	}
	if _, err := db.Load(context.Background(), in, Options{Transform: "none", Table: "gh"}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SQL.Exec("SET memory_limit = '256MB'"); err != nil {
		t.Fatal(err)
	}
	if err := db.FitMemoryLimit(context.Background()); err != nil {
		t.Fatal(err)
	}
	var cols int
	db.SQL.QueryRow("SELECT count(*) FROM duckdb_columns() WHERE table_name = 'gh'").Scan(&cols)
	if want := memoryNeed(cols, true); limit() < want-want/100 {
		t.Fatalf("limit %d after FitMemoryLimit, want at least %d (%d columns)", limit(), want, cols)
	}
}
