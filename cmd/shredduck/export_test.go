package main

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shredduck/shredduck/serve"
)

func exportCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = runExport(testCtx(t), args, &out, &errb)
	return code, out.String(), errb.String()
}

// shredduck export writes Parquet that shredduck ingest loads back into
// the same tables; a second export says what it replaced.
func TestExportCommand(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src.duckdb")
	if code, _, stderr := ingestCmd(t, "--db", src, "--progress=false", filepath.Join(otlp, "otlp2parquet", "traces.jsonl"), filepath.Join(otlp, "otlp2parquet", "logs.jsonl")); code != exitOK {
		t.Fatalf("ingest: %d %s", code, stderr)
	}
	out := filepath.Join(dir, "out")
	code, stdout, stderr := exportCmd(t, "--db", src, "--out", out)
	if code != exitOK || !strings.Contains(stdout, "2 files (0 replaced), 100 rows") {
		t.Fatalf("export: %d %q %q", code, stdout, stderr)
	}
	code, stdout, _ = exportCmd(t, "--db", src, "--out", out, "--table", "otel_traces")
	if code != exitOK || !strings.Contains(stdout, "replaced ") || !strings.Contains(stdout, "1 files (1 replaced), 19 rows") {
		t.Errorf("second export: %d %q", code, stdout)
	}
	dst := filepath.Join(dir, "dst.duckdb")
	if code, stdout, stderr := ingestCmd(t, "--db", dst, out); code != exitOK {
		t.Fatalf("ingest of the export: %d %s %s", code, stdout, stderr)
	}
	for _, table := range []string{"otel_traces", "otel_logs"} {
		if a, b := dbQueryInt(t, src, "SELECT count(*) FROM "+table), dbQueryInt(t, dst, "SELECT count(*) FROM "+table); a != b || a == 0 {
			t.Errorf("%s: %d rows exported, %d loaded back", table, a, b)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--db", src}, "--out DIR is required"},
		{[]string{"--db", src, "--out", out, "--since", "yesterday"}, "is not a time"},
		{[]string{"--db", src, "--out", out, "--since", "2026-01-02", "--until", "2026-01-01"}, "--since must be before --until"},
		{[]string{"--db", src, "--out", out, "--table", "nope"}, "no table nope"},
	} {
		if code, _, stderr := exportCmd(t, c.args...); code == exitOK || !strings.Contains(stderr, c.want) {
			t.Errorf("export %v: %d %q, want %q", c.args, code, stderr, c.want)
		}
	}
	if code, _, stderr := ingestCmd(t, "--db", dst, out, filepath.Join(otlp, "otlp2parquet", "logs.jsonl")); code != exitUsage || !strings.Contains(stderr, "cannot be mixed") {
		t.Errorf("mixed ingest: %d %q", code, stderr)
	}
	// A directory without Parquet is still read as its files.
	nd := filepath.Join(dir, "nd")
	os.Mkdir(nd, 0o755)
	b, _ := os.ReadFile(filepath.Join(otlp, "otlp2parquet", "logs.jsonl"))
	os.WriteFile(filepath.Join(nd, "logs.jsonl"), b, 0o644)
	if code, _, stderr := ingestCmd(t, "--db", filepath.Join(dir, "nd.duckdb"), "--progress=false", nd); code != exitOK {
		t.Errorf("ingest of a directory of NDJSON: %d %q", code, stderr)
	}
}

func TestTimeFlag(t *testing.T) {
	for in, want := range map[string]string{
		"2026-01-02":           "2026-01-02T00:00:00Z",
		"2026-01-02T05":        "2026-01-02T05:00:00Z",
		"2026-01-02T05:30":     "2026-01-02T05:30:00Z",
		"2026-01-02T05:30:00Z": "2026-01-02T05:30:00Z",
	} {
		var f timeFlag
		if err := f.Set(in); err != nil || f.String() != want {
			t.Errorf("%s: %s %v, want %s", in, f.String(), err, want)
		}
	}
	var f timeFlag
	if err := f.Set("7d"); err != nil || time.Since(f.t).Round(time.Hour) != 7*24*time.Hour {
		t.Errorf("7d: %v %v", f.t, err)
	}
	var a age
	for in, want := range map[string]time.Duration{"7d": 7 * 24 * time.Hour, "1d12h": 36 * time.Hour, "90m": 90 * time.Minute, "off": 0} {
		if err := a.Set(in); err != nil || time.Duration(a) != want {
			t.Errorf("age %s: %v %v, want %v", in, time.Duration(a), err, want)
		}
	}
	if err := a.Set("-1h"); err == nil {
		t.Error("age -1h accepted")
	}
}

// serve takes --retention and its overrides in days, and --export-dir;
// a bad duration is a usage error naming the flag.
func TestServeRetentionFlags(t *testing.T) {
	dir := t.TempDir()
	code, stderr := serveCmd(t, "--db", filepath.Join(dir, "r.duckdb"), "--retention", "yesterday")
	if code != exitUsage || !strings.Contains(stderr, "retention") || !strings.Contains(stderr, "is not a duration") {
		t.Errorf("--retention yesterday: %d %q", code, stderr)
	}
	out := filepath.Join(dir, "parquet")
	code, stderr = serveCmd(t, "--db", filepath.Join(dir, "r.duckdb"), "--retention", "7d", "--retention-logs", "off", "--retention-metrics", "1d12h", "--export-dir", out)
	if code != exitOK {
		t.Fatalf("serve with retention and an export directory: %d %s", code, stderr)
	}
	if st, err := os.Stat(out); err != nil || !st.IsDir() {
		t.Errorf("--export-dir not created: %v", err)
	}

	// What the flags and their variables give the server: each per-table
	// flag overrides --retention for its table alone; 0 and off keep
	// rows for ever; a flag wins over its variable.
	f := func(args []string, env map[string]string, want serve.Retention, wantExport serve.Export) {
		t.Helper()
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		config := retentionFlags(fs)
		lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
		var errb bytes.Buffer
		if _, code, ok := parseFlags(fs, args, serveEnv, lookup, &errb); !ok {
			t.Fatalf("%q %v: exit %d %s", args, env, code, errb.String())
		}
		got, gotExport := config()
		if got != want || gotExport != wantExport {
			t.Errorf("%q %v:\n got %+v %+v\nwant %+v %+v", args, env, got, gotExport, want, wantExport)
		}
	}
	const day = 24 * time.Hour
	step := serve.DefaultRetentionStepRows
	delay, interval := 5*time.Minute, time.Minute
	noExport := serve.Export{Delay: delay, Interval: interval}
	f(nil, nil, serve.Retention{StepRows: step}, noExport)
	f([]string{"--retention", "7d", "--retention-logs", "off", "--retention-metrics", "1d12h"}, nil,
		serve.Retention{Traces: 7 * day, Logs: 0, Metrics: 36 * time.Hour, StepRows: step}, noExport)
	f([]string{"--retention", "7d", "--retention-traces", "0"}, nil,
		serve.Retention{Traces: 0, Logs: 7 * day, Metrics: 7 * day, StepRows: step}, noExport)
	f([]string{"--retention-logs", "2d"}, nil, serve.Retention{Logs: 2 * day, StepRows: step}, noExport)
	f([]string{"--retention", "30d", "--retention-metrics", "90m", "--retention-interval", "10s", "--retention-step-rows", "500",
		"--export-dir", "/data/pq", "--export-delay", "1m", "--export-interval", "5s"}, nil,
		serve.Retention{Traces: 30 * day, Logs: 30 * day, Metrics: 90 * time.Minute, Interval: 10 * time.Second, StepRows: 500},
		serve.Export{Dir: "/data/pq", Delay: time.Minute, Interval: 5 * time.Second})
	f(nil, map[string]string{"SHREDDUCK_RETENTION": "7d", "SHREDDUCK_RETENTION_METRICS": "off", "SHREDDUCK_RETENTION_TRACES": "1h"},
		serve.Retention{Traces: time.Hour, Logs: 7 * day, Metrics: 0, StepRows: step}, noExport)
	f([]string{"--retention-traces", "2h"}, map[string]string{"SHREDDUCK_RETENTION_TRACES": "1h", "SHREDDUCK_RETENTION_LOGS": "3h"},
		serve.Retention{Traces: 2 * time.Hour, Logs: 3 * time.Hour, StepRows: step}, noExport)
}
