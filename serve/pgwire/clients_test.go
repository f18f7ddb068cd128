package pgwire

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shredduck/shredduck/serve/sqlpolicy"
)

// clientTable is the table the real clients query.
const clientTable = `CREATE TABLE t AS SELECT i::INTEGER AS i, 'n' || i AS name, TIMESTAMP_NS '2026-01-01' + i * INTERVAL 1 HOUR AS ts FROM range(10) r(i)`

// psql (Debian's postgresql-client; .ci/run installs it) runs queries in
// the simple protocol and, with \bind, in the extended one; refusals are
// errors and the session goes on.
func TestPGPsql(t *testing.T) {
	psql, err := exec.LookPath("psql")
	if err != nil {
		t.Skip("psql is not installed (apt-get install postgresql-client)")
	}
	p := startPG(t, Config{Token: "tok"}, sqlpolicy.Config{}, clientTable)
	copyFile := filepath.Join(t.TempDir(), "copy.csv")
	// \bind (the extended protocol) came with psql 16; Debian 12 has 15,
	// whose queries are all simple ones (pgx covers the extended protocol).
	version, _ := exec.Command(psql, "--version").Output()
	bind := `SELECT $1::int + 1 AS two \bind 41 \g
SELECT name FROM t WHERE i = $1 AND name LIKE $2 \bind 3 'n%' \g
`
	major := 0
	if f := strings.Fields(string(version)); len(f) >= 3 {
		major, _ = strconv.Atoi(strings.Split(f[2], ".")[0])
	}
	if major < 16 {
		t.Logf("%s has no \\bind: the extended protocol is left to the pgx tests", bytes.TrimSpace(version))
		bind = "SELECT 41 + 1 AS two;\nSELECT name FROM t WHERE i = 3 AND name LIKE 'n%';\n"
	}
	script := `SELECT 1 AS one;
` + bind + `DELETE FROM t;
SELECT count(*) FROM t;
SET application_name = 'psql-test';
SHOW server_version;
SELECT ts FROM t WHERE i = 2;
\dt
\copy (SELECT i, name FROM t WHERE i < 3 ORDER BY i) TO '` + copyFile + `' WITH CSV HEADER
`
	cmd := exec.Command(psql, "-X", "-A", "-t", "-v", "ON_ERROR_STOP=0", p.url("", ""))
	cmd.Env = append(os.Environ(), "PGPASSWORD=tok", "PGCONNECT_TIMEOUT=10")
	cmd.Stdin = strings.NewReader(script)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("psql: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	// \dt lists the catalog's tables too (shredduck_columns, ...).
	want := "1\n42\nn3\n10\nSET\n" + ServerVersion + " (shredduck)\n2026-01-01 02:00:00\n"
	if got := stdout.String(); !strings.HasPrefix(got, want) || !strings.Contains(got, "\nmain|t|table|shredduck\n") {
		t.Errorf("psql printed\n%s\nwant\n%s\n(stderr %s)", got, want, stderr.String())
	}
	if !strings.Contains(stderr.String(), "only SELECT statements are allowed (got DELETE)") {
		t.Errorf("stderr: %s", stderr.String())
	}
	if b, err := os.ReadFile(copyFile); err != nil || string(b) != "i,name\n0,n0\n1,n1\n2,n2\n" {
		t.Errorf("\\copy wrote %q %v", b, err)
	}

	// Ctrl-C: psql sends a CancelRequest, which interrupts DuckDB.
	cmd = exec.Command(psql, "-X", "-A", "-t", "-c", "SELECT count(*) FROM range(1000000000000) a(i) WHERE i % 7 = 3", p.url("", ""))
	cmd.Env = append(os.Environ(), "PGPASSWORD=tok", "PGCONNECT_TIMEOUT=10")
	var cancelOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &cancelOut, &cancelOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Signal once the query runs: before that SIGINT just ends psql.
	for deadline := time.Now().Add(20 * time.Second); !p.srv.queryRunning() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	cmd.Process.Signal(os.Interrupt)
	if err := cmd.Wait(); err == nil || !strings.Contains(cancelOut.String(), "canceling statement due to user request") {
		t.Errorf("psql after SIGINT: %v %s", err, cancelOut.String())
	}

	// A wrong password.
	cmd = exec.Command(psql, "-X", "-A", "-t", "-c", "SELECT 1", p.url("", ""))
	cmd.Env = append(os.Environ(), "PGPASSWORD=nope", "PGCONNECT_TIMEOUT=10")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "password authentication failed") {
		t.Errorf("wrong password: %v %s", err, out)
	}
}

// psycopg2 (Debian's python3-psycopg2): its session setup, parameters
// (interpolated by the client), the Python types of the values, a
// refusal as psycopg2.errors.InsufficientPrivilege.
func TestPGPsycopg2(t *testing.T) {
	python := ""
	for _, c := range []string{"python3", "/usr/bin/python3"} {
		if path, err := exec.LookPath(c); err == nil && exec.Command(path, "-c", "import psycopg2").Run() == nil {
			python = path
			break
		}
	}
	if python == "" {
		t.Skip("no python3 with psycopg2 (apt-get install python3-psycopg2)")
	}
	p := startPG(t, Config{}, sqlpolicy.Config{}, clientTable)
	script := `
import sys, json, psycopg2, psycopg2.errors
conn = psycopg2.connect(sys.argv[1])
cur = conn.cursor()
out = {}
cur.execute("SELECT count(*), max(name) FROM t WHERE i >= %s AND name <> %s", (5, "n9"))
out["count"] = list(cur.fetchone())
cur.execute("SELECT ts, 1.5::DECIMAL(4,2), [1, 2], 2.5::DOUBLE, true, '{\"a\": 1}'::JSON, 'x', i FROM t WHERE i = 1")
r = cur.fetchone()
out["types"] = [type(v).__name__ for v in r]
out["ts"] = r[0].isoformat()
out["json"] = r[5]
import io
buf = io.StringIO()
cur.copy_expert("COPY (SELECT i, name FROM t WHERE i < 2 ORDER BY i) TO STDOUT WITH CSV HEADER", buf)
out["copy"] = buf.getvalue()
try:
    cur.execute("DELETE FROM t")
except psycopg2.errors.InsufficientPrivilege as e:
    out["refused"] = e.pgcode
conn.rollback()
cur.execute("SELECT 1")
out["after"] = cur.fetchone()[0]
out["server_version"] = conn.server_version
conn.close()
print(json.dumps(out))
`
	cmd := exec.Command(python, "-c", script, "host=127.0.0.1 port="+p.addr[strings.LastIndexByte(p.addr, ':')+1:]+" user=tester dbname=shredduck sslmode=disable")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := map[string]any{
		"count": []any{4.0, "n8"},
		"types": []any{"datetime", "Decimal", "list", "float", "bool", "dict", "str", "int"},
		"ts":    "2026-01-01T01:00:00", "json": map[string]any{"a": 1.0},
		"refused": "42501", "after": 1.0, "server_version": 150000.0, "copy": "i,name\n0,n0\n1,n1\n",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %v\nwant %v", got, want)
	}
}
