package ingest_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shredduck/shredduck/ingest"
)

// notDatabases are files a user may give as --db by mistake, each with the
// word the refusal should use for it.
func notDatabases(t *testing.T) map[string]struct {
	data []byte
	what string
} {
	t.Helper()
	sqlite := make([]byte, 4096)
	copy(sqlite, "SQLite format 3\x00")
	random := make([]byte, 1000)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	random[8] = 'X' // never "DUCK" by chance
	return map[string]struct {
		data []byte
		what string
	}{
		"events.json": {[]byte(`{"resourceSpans":[]}` + "\n"), "JSON"},
		"app.sqlite":  {sqlite, "SQLite"},
		"random.bin":  {random, "another kind"},
		"short":       {[]byte("DUCK"), "another kind"},
	}
}

// dirFiles lists the names in dir.
func dirFiles(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// A file that is not a DuckDB database is refused by Open and OpenReadOnly
// before DuckDB sees it (DuckDB would open an in-memory database in its
// place, or attach a SQLite file through an extension it downloads): the
// error names the file, and the file and its directory are unchanged.
func TestOpenRefusesOtherFiles(t *testing.T) {
	for name, f := range notDatabases(t) {
		for _, open := range []struct {
			name string
			fn   func(string) (*ingest.DB, error)
		}{{"Open", ingest.Open}, {"OpenReadOnly", ingest.OpenReadOnly}} {
			t.Run(name+"/"+open.name, func(t *testing.T) {
				dir := t.TempDir()
				path := filepath.Join(dir, name)
				if err := os.WriteFile(path, f.data, 0o644); err != nil {
					t.Fatal(err)
				}
				d, err := open.fn(path)
				if err == nil {
					d.Close()
					t.Fatalf("%s opened %s", open.name, name)
				}
				if !errors.Is(err, ingest.ErrNotDatabase) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), f.what) {
					t.Errorf("error %q: want ErrNotDatabase naming %s and saying %s", err, path, f.what)
				}
				if got, _ := os.ReadFile(path); !bytes.Equal(got, f.data) {
					t.Errorf("%s changed the file", open.name)
				}
				if got := dirFiles(t, dir); !slices.Equal(got, []string{name}) {
					t.Errorf("directory holds %v after %s, want only %s", got, open.name, name)
				}
			})
		}
	}
}

// A directory, and a write-ahead log without its database, are refused too:
// DuckDB would replay the log into a new file that is not its database.
func TestOpenRefusesDirectoryAndOrphanWAL(t *testing.T) {
	dir := t.TempDir()
	if _, err := ingest.Open(dir); !errors.Is(err, ingest.ErrNotDatabase) || !strings.Contains(err.Error(), dir) {
		t.Errorf("Open(directory): %v, want ErrNotDatabase naming it", err)
	}
	path := filepath.Join(dir, "gone.duckdb")
	if err := os.WriteFile(path+".wal", []byte("log"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, open := range []func(string) (*ingest.DB, error){ingest.Open, ingest.OpenReadOnly} {
		if d, err := open(path); err == nil || !strings.Contains(err.Error(), path+".wal") {
			if d != nil {
				d.Close()
			}
			t.Errorf("database missing beside its log: %v, want an error naming the log", err)
		}
	}
	if got := dirFiles(t, dir); !slices.Equal(got, []string{"gone.duckdb.wal"}) {
		t.Errorf("directory holds %v, want only the log", got)
	}
}

// The header check is DuckDB's own format: a file DuckDB wrote has "DUCK"
// at byte 8 and opens again, read-write and read-only; a missing or empty
// file is a new database for Open and no database for OpenReadOnly, which
// creates nothing.
func TestOpenDuckDBFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "real.duckdb")
	if _, err := ingest.OpenReadOnly(path); !errors.Is(err, ingest.ErrNoDatabase) || !strings.Contains(err.Error(), path) {
		t.Errorf("OpenReadOnly(missing): %v, want ErrNoDatabase naming it", err)
	}
	if got := dirFiles(t, dir); len(got) != 0 {
		t.Fatalf("OpenReadOnly(missing) created %v", got)
	}
	d, err := ingest.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.SQL.Exec("CREATE TABLE t AS SELECT 42 AS x"); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	head, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(head[8:12]) != "DUCK" {
		t.Fatalf("DuckDB's file has % x at byte 8, not DUCK", head[8:12])
	}
	d, err = ingest.OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	var x int
	if err := d.SQL.QueryRow("SELECT x FROM t").Scan(&x); err != nil || x != 42 {
		t.Errorf("read-only: x=%d, %v", x, err)
	}
	if _, err := d.SQL.Exec("INSERT INTO t VALUES (1)"); err == nil {
		t.Error("a read-only database took an INSERT")
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(head, after) {
		t.Error("OpenReadOnly changed the file")
	}

	empty := filepath.Join(dir, "empty.duckdb")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ingest.OpenReadOnly(empty); !errors.Is(err, ingest.ErrNoDatabase) || !strings.Contains(err.Error(), "empty") {
		t.Errorf("OpenReadOnly(empty file): %v, want ErrNoDatabase saying empty", err)
	}
	if d, err = ingest.Open(empty); err != nil {
		t.Fatalf("Open(empty file): %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if exists, err := ingest.CheckPath(empty); err != nil || !exists {
		t.Errorf("after Open the empty file is %v, %v; want a database", exists, err)
	}
}

// OpenReadOnly reads what a write-ahead log holds, leaving the log and the
// file as they were.
func TestOpenReadOnlyWAL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wal.duckdb")
	d, err := ingest.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.SQL.Exec("CREATE TABLE t AS SELECT 7 AS x"); err != nil {
		t.Fatal(err)
	}
	if err := ingest.CloseUncheckpointed(d); err != nil {
		t.Fatal(err)
	}
	db, _ := os.ReadFile(path)
	wal, err := os.ReadFile(path + ".wal")
	if err != nil || len(wal) == 0 {
		t.Fatalf("no write-ahead log to test with: %v", err)
	}
	if d, err = ingest.OpenReadOnly(path); err != nil {
		t.Fatal(err)
	}
	var x int
	if err := d.SQL.QueryRow("SELECT x FROM t").Scan(&x); err != nil || x != 7 {
		t.Errorf("x=%d, %v; want the row in the log", x, err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	db2, _ := os.ReadFile(path)
	wal2, _ := os.ReadFile(path + ".wal")
	if !bytes.Equal(db, db2) || !bytes.Equal(wal, wal2) {
		t.Error("OpenReadOnly changed the database or its log")
	}
}

// A file that needs what Open repairs (here a column a widening left) is
// opened as Open opens it, so that a query does not see the column.
func TestOpenReadOnlyRepairs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.duckdb")
	d, err := ingest.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE t (x INT, "x (before widening)" INT)`,
		`INSERT INTO shredduck_widened_columns VALUES ('t', 'x (before widening)')`,
	} {
		if _, err := d.SQL.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if d, err = ingest.OpenReadOnly(path); err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if !strings.Contains(d.Recovered, "dropped 1 columns") {
		t.Errorf("Recovered = %q, want the dropped column", d.Recovered)
	}
	var n int
	if err := d.SQL.QueryRow("SELECT count(*) FROM duckdb_columns() WHERE table_name = 't'").Scan(&n); err != nil || n != 1 {
		t.Errorf("t has %d columns (%v), want 1", n, err)
	}
}
