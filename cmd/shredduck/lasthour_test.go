package main

import (
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/serve/queryhttp"
)

// "The last hour", the first query anyone writes against telemetry, as
// written, on a machine far from UTC: through query --db and through a
// server's /v1/query (query --server), with now() and current_timestamp.
// DuckDB takes its session time zone from the process's TZ when it loads,
// so the checks run in a child process with TZ=Asia/Tokyo.
func TestLastHourInAnyTimeZone(t *testing.T) {
	if os.Getenv("SHREDDUCK_TEST_TZ_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestLastHourInAnyTimeZone$", "-test.v")
		cmd.Env = append(os.Environ(), "SHREDDUCK_TEST_TZ_CHILD=1", "TZ=Asia/Tokyo")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestLastHourInAnyTimeZone") {
			t.Fatalf("in TZ=Asia/Tokyo: %v\n%s", err, out)
		}
		return
	}
	// Spans that started 1, 30, 59, 61, 120 and 600 minutes ago.
	now := time.Now()
	var spans []string
	for i, m := range []int{1, 30, 59, 61, 120, 600} {
		start := now.Add(-time.Duration(m) * time.Minute).UnixNano()
		spans = append(spans, fmt.Sprintf(`{"name":"s%d","traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"01020304050607%02x","startTimeUnixNano":"%d","endTimeUnixNano":"%d"}`,
			m, i, start, start+1000))
	}
	file := writeTemp(t, "recent.jsonl", `{"resourceSpans":[{"scopeSpans":[{"spans":[`+strings.Join(spans, ",")+`]}]}]}`+"\n")
	path := filepath.Join(t.TempDir(), "recent.duckdb")
	if code, _, e := ingestCmd(t, "--db", path, file); code != exitOK {
		t.Fatalf("ingest: exit %d\n%s", code, e)
	}
	queries := []string{
		`SELECT count(*) AS n FROM otel_traces WHERE start_time > now() - INTERVAL 1 HOUR`,
		`SELECT count(*) AS n FROM otel_traces WHERE start_time >= current_timestamp - INTERVAL '60 minutes' AND end_time <= now()`,
	}
	for _, q := range queries {
		if code, out, e := queryCmd(t, "--db", path, "--csv", q); code != exitOK || out != "n\n3\n" {
			t.Errorf("query --db %s: exit %d, %q, want 3 rows\n%s", q, code, out, e)
		}
	}
	if code, out, _ := queryCmd(t, "--db", path, "--csv", `SELECT current_setting('TimeZone') AS z`); code != exitOK || out != "z\nAsia/Tokyo\n" {
		t.Fatalf("the session's time zone is %q, want Asia/Tokyo: the test checks nothing", out)
	}

	db, err := ingest.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := queryhttp.LockDown(db); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(queryhttp.NewHandler(db, queryhttp.Config{}))
	defer ts.Close()
	for _, q := range queries {
		if code, out, e := queryCmd(t, "--server", ts.URL, "--csv", q); code != exitOK || out != "n\n3\n" {
			t.Errorf("query --server %s: exit %d, %q, want 3 rows\n%s", q, code, out, e)
		}
	}
	// A TIMESTAMPTZ value of another kind is still refused, with what to
	// write instead.
	code, _, e := queryCmd(t, "--server", ts.URL, `SELECT count(*) FROM otel_traces WHERE start_time > TIMESTAMPTZ '2024-01-01 00:00:00+09'`)
	if code == exitOK || !strings.Contains(e, "AT TIME ZONE 'UTC'") {
		t.Errorf("TIMESTAMPTZ literal: exit %d, want a refusal saying AT TIME ZONE 'UTC':\n%s", code, e)
	}
}
