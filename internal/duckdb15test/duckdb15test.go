// Package duckdb15test runs queries with a plain DuckDB 1.5 reader
// (tools/duckdb15), so that tests check what the users' CLIs and notebooks
// on the LTS release see in shredduck's files.
package duckdb15test

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/shredduck/shredduck/internal/toolbin"
)

var (
	once   sync.Once
	bin    string
	binErr error
)

// reader returns the reader's binary: $SHREDDUCK_DUCKDB15 if set, else one
// built from tools/duckdb15 (a module of its own, which links DuckDB 1.5)
// into the user's cache directory (toolbin).
func reader() (string, error) {
	once.Do(func() {
		if p := os.Getenv("SHREDDUCK_DUCKDB15"); p != "" {
			bin = p
			return
		}
		bin, binErr = toolbin.Build("duckdb15", ".", "CGO_ENABLED=1")
	})
	return bin, binErr
}

// Query runs q on the database file at path with DuckDB 1.5 (read-only) and
// returns its rows, one line each, tab-separated; err holds DuckDB's
// message when it refuses the file or the query.
func Query(t testing.TB, path, q string) (string, error) {
	t.Helper()
	b, err := reader()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(b, path, q).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

// MustQuery is Query that fails the test on an error.
func MustQuery(t testing.TB, path, q string) string {
	t.Helper()
	out, err := Query(t, path, q)
	if err != nil {
		t.Fatalf("DuckDB 1.5 on %s: %s: %v", path, q, err)
	}
	return out
}
