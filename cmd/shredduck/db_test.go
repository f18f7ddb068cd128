package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shredduck/shredduck/ingest"
)

const traceJSON = otlp + "/otel-proto-examples-trace.json"

// serveCmd runs "shredduck serve args..." with no environment, listening on
// a free loopback port, for at most a few seconds: a serve that does not
// refuse its arguments is stopped and exits as on SIGTERM.
func serveCmd(t *testing.T, args ...string) (code int, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	args = append([]string{"--http", "127.0.0.1:0", "--grpc", "off"}, args...)
	code = runServeEnv(ctx, args, &out, &errb, func(string) (string, bool) { return "", false })
	return code, errb.String()
}

func listDir(t *testing.T, dir string) []string {
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

// sqliteFile makes a SQLite database with python3's sqlite3 module, or,
// without python3, a file with SQLite's header.
func sqliteFile(t *testing.T, path string) {
	t.Helper()
	py := "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('CREATE TABLE t(x)'); c.execute('INSERT INTO t VALUES (1)'); c.commit(); c.close()"
	if err := exec.Command("python3", "-c", py, path).Run(); err == nil {
		return
	}
	b := make([]byte, 4096)
	copy(b, "SQLite format 3\x00")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Every command refuses a --db that is not a DuckDB database before it does
// anything: exit 1, a message naming the file, the file byte for byte as it
// was and nothing beside it (no .wal). DuckDB alone would open an in-memory
// database in its place, and the load would be reported and lost.
func TestWrongDBFile(t *testing.T) {
	random := make([]byte, 2000)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	random[8] = 0 // not "DUCK" by chance
	files := map[string]func(t *testing.T, path string){
		"events.json": func(t *testing.T, path string) {
			b, err := os.ReadFile(traceJSON)
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(path, b, 0o644)
		},
		"app.sqlite": sqliteFile,
		"random.bin": func(t *testing.T, path string) { os.WriteFile(path, random, 0o644) },
	}
	commands := map[string]func(t *testing.T, db string) (int, string){
		"ingest": func(t *testing.T, db string) (int, string) {
			code, _, e := ingestCmd(t, "--db", db, traceJSON)
			return code, e
		},
		"query": func(t *testing.T, db string) (int, string) {
			code, _, e := queryCmd(t, "--db", db, "SELECT 1")
			return code, e
		},
		"serve": func(t *testing.T, db string) (int, string) { return serveCmd(t, "--db", db) },
	}
	for fname, mk := range files {
		for cname, cmd := range commands {
			t.Run(cname+"/"+fname, func(t *testing.T) {
				dir := t.TempDir()
				path := filepath.Join(dir, fname)
				mk(t, path)
				before, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				code, stderr := cmd(t, path)
				if code != exitError {
					t.Errorf("exit %d, want %d; stderr:\n%s", code, exitError, stderr)
				}
				if !strings.Contains(stderr, path) || !strings.Contains(stderr, "not a DuckDB database") {
					t.Errorf("stderr does not name %s as not a DuckDB database:\n%s", path, stderr)
				}
				if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
					t.Error("the file changed")
				}
				if got := listDir(t, dir); !slices.Equal(got, []string{fname}) {
					t.Errorf("directory holds %v, want only %s", got, fname)
				}
			})
		}
	}
}

// An empty --db or $SHREDDUCK_DB, which DuckDB would take for an in-memory
// database, is refused by every command: what it wrote would be lost.
func TestEmptyDBPath(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, env := range []bool{false, true} {
		var args []string
		if env {
			t.Setenv("SHREDDUCK_DB", "")
		} else {
			args = []string{"--db", ""}
		}
		code, _, e := ingestCmd(t, append(args, traceJSON)...)
		if code != exitUsage || !strings.Contains(e, "empty") {
			t.Errorf("ingest, env=%v: exit %d: %s", env, code, e)
		}
		code, _, e = queryCmd(t, append(args, "SELECT 1")...)
		if code != exitUsage || !strings.Contains(e, "empty") {
			t.Errorf("query, env=%v: exit %d: %s", env, code, e)
		}
		lookup := func(k string) (string, bool) { return "", env && k == "SHREDDUCK_DB" }
		var errb bytes.Buffer
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		code = runServeEnv(ctx, append([]string{"--http", "127.0.0.1:0", "--grpc", "off"}, args...), io.Discard, &errb, lookup)
		cancel()
		if code != exitUsage || !strings.Contains(errb.String(), "empty") {
			t.Errorf("serve, env=%v: exit %d: %s", env, code, errb.String())
		}
	}
}

// ingest and query take the database from $SHREDDUCK_DB, as serve does;
// --db wins over it. Neither falls back to ./shredduck.duckdb then.
func TestDBFromEnvironment(t *testing.T) {
	input, err := filepath.Abs(traceJSON)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	envDB := filepath.Join(dir, "env.duckdb")
	flagDB := filepath.Join(dir, "flag.duckdb")
	t.Chdir(dir) // where ./shredduck.duckdb would land
	t.Setenv("SHREDDUCK_DB", envDB)
	if code, _, e := ingestCmd(t, "--json", input); code != exitOK {
		t.Fatalf("ingest with $SHREDDUCK_DB: exit %d: %s", code, e)
	}
	if code, _, e := ingestCmd(t, "--json", "--db", flagDB, input, input); code != exitOK {
		t.Fatalf("ingest --db: exit %d: %s", code, e)
	}
	if got := listDir(t, dir); !slices.Equal(got, []string{"env.duckdb", "flag.duckdb"}) {
		t.Fatalf("directory holds %v, want env.duckdb and flag.duckdb only", got)
	}
	code, out, e := queryCmd(t, "--csv", "SELECT count(*) AS n FROM otel_traces")
	if code != exitOK || out != "n\n1\n" {
		t.Errorf("query with $SHREDDUCK_DB: exit %d, %q, %s; want the span of env.duckdb", code, out, e)
	}
	code, out, e = queryCmd(t, "--csv", "--db", flagDB, "SELECT count(*) AS n FROM otel_traces")
	if code != exitOK || out != "n\n2\n" {
		t.Errorf("query --db: exit %d, %q, %s; want the 2 spans of flag.duckdb", code, out, e)
	}
}

// query opens an existing database and creates none: a missing or empty
// file, given or the default ./shredduck.duckdb, is an error that names it.
func TestQueryCreatesNoDatabase(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("SHREDDUCK_DB", "") // restored after the test
	os.Unsetenv("SHREDDUCK_DB")
	typo := filepath.Join(dir, "typo.duckdb")
	empty := filepath.Join(dir, "empty.duckdb")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		name string
	}{
		{[]string{"--db", typo}, typo},
		{nil, defaultDB},
		{[]string{"--db", empty}, empty},
	} {
		code, out, e := queryCmd(t, append(tc.args, "SELECT 1")...)
		if code != exitError || out != "" {
			t.Errorf("%v: exit %d, stdout %q; want %d and nothing", tc.args, code, out, exitError)
		}
		if !strings.Contains(e, tc.name) || !strings.Contains(e, "--server") {
			t.Errorf("%v: stderr does not name %s and --server:\n%s", tc.args, tc.name, e)
		}
	}
	if got := listDir(t, dir); !slices.Equal(got, []string{"empty.duckdb"}) {
		t.Errorf("directory holds %v after the queries, want empty.duckdb only", got)
	}
	if b, _ := os.ReadFile(empty); len(b) != 0 {
		t.Error("query wrote to the empty file")
	}
}

// holdEnv names the database a child process of this test binary holds
// open (TestHoldDatabase), as a running server does.
const holdEnv = "SHREDDUCK_TEST_HOLD_DB"

// TestHoldDatabase is not a test: run by TestDatabaseLocked in a child
// process, it opens the database, says "ready" and keeps it open until its
// stdin closes.
func TestHoldDatabase(t *testing.T) {
	path := os.Getenv(holdEnv)
	if path == "" {
		t.Skip("the child process of TestDatabaseLocked")
	}
	d, err := ingest.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	os.Stdout.WriteString("ready\n")
	io.Copy(io.Discard, os.Stdin)
}

// A database another process holds (a running server) is an error saying
// so: query names --server and the default server URL, ingest the
// server's endpoints.
func TestDatabaseLocked(t *testing.T) {
	db := filepath.Join(t.TempDir(), "held.duckdb")
	if code, _, e := ingestCmd(t, "--json", "--db", db, traceJSON); code != exitOK {
		t.Fatalf("ingest: exit %d: %s", code, e)
	}
	child := exec.Command(os.Args[0], "-test.run=^TestHoldDatabase$")
	child.Env = append(os.Environ(), holdEnv+"="+db)
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		child.Wait()
	}()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("the child holding the database said %q, %v", line, err)
	}
	code, _, e := queryCmd(t, "--db", db, "SELECT count(*) FROM otel_traces")
	if code != exitError || !strings.Contains(e, db) || !strings.Contains(e, "another process") ||
		!strings.Contains(e, "--server") || !strings.Contains(e, defaultServerURL) {
		t.Errorf("query: exit %d; stderr should name the file, another process, --server and %s:\n%s", code, defaultServerURL, e)
	}
	code, _, e = ingestCmd(t, "--db", db, traceJSON)
	if code != exitError || !strings.Contains(e, "another process") || !strings.Contains(e, "/v1/traces") {
		t.Errorf("ingest: exit %d; stderr should say another process holds it and name the server's endpoints:\n%s", code, e)
	}
}
