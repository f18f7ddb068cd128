//go:build duckdb_arrow

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
