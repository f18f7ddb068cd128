// Package duckdb15test runs queries with a plain DuckDB 1.5 reader
// (tools/duckdb15), so that tests check what the users' CLIs and notebooks
// on the LTS release see in shredduck's files.
package duckdb15test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

var (
	once   sync.Once
	bin    string
	binErr error
)

// reader returns the reader's binary: $SHREDDUCK_DUCKDB15 if set, else one
// built from tools/duckdb15 (a module of its own, which links DuckDB 1.5)
// into the user's cache directory, one path for every test binary, so that
// test runs leave no copies of a 100 MB binary behind.
func reader() (string, error) {
	once.Do(func() {
		if p := os.Getenv("SHREDDUCK_DUCKDB15"); p != "" {
			bin = p
			return
		}
		_, self, _, _ := runtime.Caller(0)
		src := filepath.Join(filepath.Dir(self), "..", "..", "tools", "duckdb15")
		cache, err := os.UserCacheDir()
		if err != nil {
			cache = os.TempDir()
		}
		dir := filepath.Join(cache, "shredduck-test")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			binErr = err
			return
		}
		// Built beside and renamed into place: test binaries of several
		// packages build at once, and a rename never shows half a file.
		bin = filepath.Join(dir, "duckdb15")
		tmp := fmt.Sprintf("%s.%d", bin, os.Getpid())
		cmd := exec.Command("go", "build", "-o", tmp, ".")
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1", "GOFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			os.Remove(tmp)
			binErr = fmt.Errorf("building tools/duckdb15: %v\n%s", err, out)
			return
		}
		binErr = os.Rename(tmp, bin)
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
