package main

import (
	"bytes"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/serve/queryhttp"
)

// queryTestServer loads the traces test data into a locked-down database
// and serves its query endpoint.
func queryTestServer(t *testing.T, cfg queryhttp.Config) (*httptest.Server, *ingest.DB) {
	t.Helper()
	db, err := ingest.Open(filepath.Join(t.TempDir(), "qs.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	in, err := ingest.StatInputs([]string{filepath.Join(otlp, "otlp2parquet", "traces.jsonl")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Load(testCtx(t), in, ingest.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := queryhttp.LockDown(db); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(queryhttp.NewHandler(db, cfg))
	t.Cleanup(ts.Close)
	return ts, db
}

// localOutput is what shredduck query --db prints for q on db.
func localOutput(t *testing.T, db *ingest.DB, q string, asCSV bool) string {
	t.Helper()
	var out bytes.Buffer
	if err := printLocal(testCtx(t), db, q, asCSV, &out); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func TestQueryServerSameOutput(t *testing.T) {
	ts, db := queryTestServer(t, queryhttp.Config{Token: "tok"})
	for _, q := range []string{
		`SELECT name, "resource.service.name", start_time, duration_ns, trace_id FROM otel_traces ORDER BY start_time, span_id LIMIT 5`,
		`SELECT 1 AS n, 'a	b
c' AS s, NULL AS z, TIMESTAMP '2024-01-02 03:04:05.5' AS ts, TIMESTAMPTZ '2024-01-02 03:04:05+02' AS tz,
		DATE '2024-02-29' AS d, '\xAB\x00'::BLOB AS b, 1.5::DOUBLE AS f, 2.25::DECIMAL(9,2) AS dec, true AS ok,
		170141183460469231731687303715884105727::HUGEINT AS h, 'x,"y"' AS q`,
		`SELECT * FROM range(0) t(i)`,
		// Nested values as JSON, doubles as plain decimals, in both.
		`SELECT [1, 2] AS l, {'a': 'x', 'b': [1.5, NULL]} AS s, MAP {'k': 'v'} AS m, 7.920703228099998e+08::DOUBLE AS p99,
		1e20::DOUBLE AS big, 1e-7::DOUBLE AS tiny, '{"j": 1}'::JSON AS j, [{'t': TIMESTAMP_NS '2024-01-02 03:04:05.123456789'}] AS lt`,
		`SELECT name, events, links, quantile_cont(duration_ns, 0.99) AS p99 FROM otel_traces GROUP BY ALL ORDER BY name LIMIT 4`,
	} {
		for _, asCSV := range []bool{false, true} {
			var out bytes.Buffer
			if err := queryServer(testCtx(t), ts.URL, "tok", q, asCSV, &out); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			if want := localOutput(t, db, q, asCSV); out.String() != want {
				t.Errorf("csv=%v %s:\nserver:\n%s\nlocal:\n%s", asCSV, q, out.String(), want)
			}
		}
	}
	// Nested values print as JSON.
	var out bytes.Buffer
	if err := queryServer(testCtx(t), strings.TrimPrefix(ts.URL, "http://")+"/", "tok", `SELECT [1, 2] AS l, {'a': 'x'} AS s`, false, &out); err != nil {
		t.Fatal(err)
	}
	if want := "l      s\n[1,2]  {\"a\":\"x\"}\n(1 rows)\n"; out.String() != want {
		t.Errorf("nested:\n%q\nwant\n%q", out.String(), want)
	}
	local := localOutput(t, db, `SELECT [1, 2] AS l, {'a': 'x'} AS s, 7.920703228099998e+08::DOUBLE AS d`, false)
	if want := "l      s          d\n[1,2]  {\"a\":\"x\"}  792070322.8099998\n(1 rows)\n"; local != want {
		t.Errorf("nested, local:\n%q\nwant\n%q", local, want)
	}
	// What is not one SELECT still runs, as the driver returns it.
	if got := localOutput(t, db, `PRAGMA database_size`, true); !strings.HasPrefix(got, "database_name,database_size") {
		t.Errorf("PRAGMA, local:\n%s", got)
	}
}

func TestQueryServerTruncated(t *testing.T) {
	ts, _ := queryTestServer(t, queryhttp.Config{MaxRows: 3})
	var out bytes.Buffer
	if err := queryServer(testCtx(t), ts.URL, "", "SELECT i FROM range(10) t(i) ORDER BY i", false, &out); err != nil {
		t.Fatal(err)
	}
	if want := "i\n0\n1\n2\n(3 rows; cut at the server's row or byte limit)\n"; out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
	var stdout, stderr bytes.Buffer
	if code := runQueryServer(testCtx(t), ts.URL, "", "SELECT i FROM range(10) t(i) ORDER BY i", true, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if stdout.String() != "i\n0\n1\n2\n" || !strings.Contains(stderr.String(), "row or byte limit") {
		t.Errorf("CSV %q, stderr %q", stdout.String(), stderr.String())
	}
}

func TestQueryServerErrors(t *testing.T) {
	ts, _ := queryTestServer(t, queryhttp.Config{Token: "tok"})
	for _, c := range []struct{ token, sql, want string }{
		{"", "SELECT 1", "401"},
		{"wrong", "SELECT 1", "bearer token"},
		{"tok", "INSERT INTO otel_traces (name) VALUES ('x')", "400 Bad Request: only SELECT statements are allowed (got INSERT)"},
		{"tok", "SELECT * FROM read_csv('/etc/passwd')", "disabled by configuration"},
		{"tok", "SELECT 1; SELECT 2", "only one statement"},
	} {
		var out bytes.Buffer
		err := queryServer(testCtx(t), ts.URL, c.token, c.sql, false, &out)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s (token %q): %v, want %q", c.sql, c.token, err, c.want)
		}
		if out.Len() != 0 {
			t.Errorf("%s: printed %q", c.sql, out.String())
		}
	}
	// Nothing listens there.
	l := httptest.NewServer(nil)
	addr := l.URL
	l.Close()
	if err := queryServer(testCtx(t), addr, "", "SELECT 1", false, &bytes.Buffer{}); err == nil {
		t.Error("closed server: no error")
	}
}

func TestRunQueryServerToken(t *testing.T) {
	ts, _ := queryTestServer(t, queryhttp.Config{Token: "tok"})
	run := func() (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := runQueryServer(testCtx(t), ts.URL, "", "SELECT 42 AS x", false, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	t.Setenv("SHREDDUCK_TOKEN", "tok")
	if code, out, errs := run(); code != exitOK || out != "x\n42\n(1 rows)\n" {
		t.Errorf("$SHREDDUCK_TOKEN: exit %d %q %q", code, out, errs)
	}
	t.Setenv("SHREDDUCK_TOKEN", "nope")
	if code, _, errs := run(); code != exitError || !strings.Contains(errs, "401") {
		t.Errorf("wrong $SHREDDUCK_TOKEN: exit %d %q", code, errs)
	}
	os.Unsetenv("SHREDDUCK_TOKEN")
	file := writeTemp(t, "token", "tok\n")
	var stdout, stderr bytes.Buffer
	if code := runQueryServer(testCtx(t), ts.URL, file, "SELECT 42 AS x", false, &stdout, &stderr); code != exitOK {
		t.Errorf("--token-file: exit %d %q", code, stderr.String())
	}
}
