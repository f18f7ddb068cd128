package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shredduck/shredduck/ingest"
)

const otlp = "../../testdata/otlp"

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// ingestCmd runs "shredduck ingest args..." and returns its exit code and output.
func ingestCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = runIngest(testCtx(t), args, &out, &errb)
	return code, out.String(), errb.String()
}

// queryCmd runs "shredduck query args...".
func queryCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = runQuery(testCtx(t), args, &out, &errb)
	return code, out.String(), errb.String()
}

// captureStd runs f with os.Stdout and os.Stderr redirected to files and
// returns what was written there (for run, which writes to them).
func captureStd(t *testing.T, f func()) (stdout, stderr string) {
	t.Helper()
	dir := t.TempDir()
	o, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	e, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	oldOut, oldErr := os.Stdout, os.Stderr
	os.Stdout, os.Stderr = o, e
	defer func() {
		os.Stdout, os.Stderr = oldOut, oldErr
		o.Close()
		e.Close()
	}()
	f()
	ob, _ := os.ReadFile(o.Name())
	eb, _ := os.ReadFile(e.Name())
	return string(ob), string(eb)
}

// dbQueryInt opens the database file and runs a counting query.
func dbQueryInt(t *testing.T, path, q string) int64 {
	t.Helper()
	d, err := ingest.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var n int64
	if err := d.SQL.QueryRow(q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// decodeSummary parses the --json summary: exactly one JSON object.
func decodeSummary(t *testing.T, stdout string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(stdout))
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("--json output is not a JSON object: %v\n%s", err, stdout)
	}
	if dec.More() {
		t.Errorf("--json output holds more than one JSON value:\n%s", stdout)
	}
	return m
}

func field(t *testing.T, m map[string]any, name string) any {
	t.Helper()
	v, ok := m[name]
	if !ok {
		t.Fatalf("summary has no field %q: %v", name, m)
	}
	return v
}

func num(t *testing.T, m map[string]any, name string) float64 {
	t.Helper()
	f, ok := field(t, m, name).(float64)
	if !ok {
		t.Fatalf("summary field %q is %T, not a number", name, m[name])
	}
	return f
}

func near(a, b float64) bool {
	return math.Abs(a-b) <= 1e-9*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

func writeTemp(t *testing.T, name, data string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// brokenNDJSON is three trace requests whose 3rd line is cut off.
func brokenNDJSON(t *testing.T) string {
	t.Helper()
	line := func(name string) string {
		return `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"svc"}}]},"scopeSpans":[{"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","name":"` + name + `","startTimeUnixNano":"1700000000000000000","endTimeUnixNano":"1700000000000001000"}]}]}]}`
	}
	return writeTemp(t, "broken.jsonl", line("one")+"\n"+line("two")+"\n"+`{"resourceSpans":[{"scopeSpans":[`+"\n"+line("four")+"\n")
}

func TestIngestJSONSummary(t *testing.T) {
	db := filepath.Join(t.TempDir(), "s.duckdb")
	file := filepath.Join(otlp, "otlp2parquet", "traces.jsonl")
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}

	check := func(t *testing.T, stdout string, wantCreated bool) map[string]any {
		t.Helper()
		m := decodeSummary(t, stdout)
		if n := num(t, m, "errors"); n != 0 {
			t.Errorf("errors = %v, want 0", n)
		}
		if n := num(t, m, "records"); n != 19 {
			t.Errorf("records = %v, want 19", n)
		}
		secs := num(t, m, "seconds")
		if secs <= 0 || secs > 60 {
			t.Errorf("seconds = %v", secs)
		}
		bytesRead := num(t, m, "bytes")
		if bytesRead != float64(fi.Size()) {
			t.Errorf("bytes = %v, want the file size %d", bytesRead, fi.Size())
		}
		tables, ok := field(t, m, "tables").([]any)
		if !ok || len(tables) != 1 {
			t.Fatalf("tables = %v, want one table", m["tables"])
		}
		tb := tables[0].(map[string]any)
		if tb["table"] != "otel_traces" || tb["transform"] != "otlp-traces" {
			t.Errorf("table %v transform %v, want otel_traces otlp-traces", tb["table"], tb["transform"])
		}
		if n := num(t, tb, "rows"); n != 19 {
			t.Errorf("tables[0].rows = %v, want 19", n)
		}
		if c, ok := field(t, tb, "created").(bool); !ok || c != wantCreated {
			t.Errorf("tables[0].created = %v, want %v", tb["created"], wantCreated)
		}
		if n := num(t, tb, "columns_widened"); n != 0 {
			t.Errorf("columns_widened = %v, want 0", n)
		}
		if n := num(t, tb, "keys_overflowed"); n != 0 {
			t.Errorf("keys_overflowed = %v, want 0", n)
		}
		ts := num(t, tb, "seconds")
		if !near(ts, secs) {
			t.Errorf("tables[0].seconds = %v, top-level seconds %v", ts, secs)
		}
		if rps := num(t, tb, "records_per_sec"); !near(rps, 19/secs) {
			t.Errorf("records_per_sec = %v, want rows/seconds = %v", rps, 19/secs)
		}
		tbytes := num(t, tb, "bytes")
		if mbps := num(t, tb, "mb_per_sec"); !near(mbps, tbytes/1e6/secs) || mbps <= 0 {
			t.Errorf("mb_per_sec = %v, want bytes/1e6/seconds = %v", mbps, tbytes/1e6/secs)
		}
		return tb
	}

	// Every key a column (its 19 spans are too few for the density rule).
	code, out, errOut := ingestCmd(t, "--db", db, "--json", "--column-density", "0", file)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	tb := check(t, out, true)
	cols := dbQueryInt(t, db, "SELECT count(*) FROM shredduck_columns WHERE table_name = 'otel_traces' AND NOT overflow")
	if n := num(t, tb, "columns_added"); n != float64(cols) || n == 0 {
		t.Errorf("columns_added = %v, catalog has %d columns", n, cols)
	}
	if errOut != "" {
		t.Errorf("stderr not empty with --json:\n%s", errOut)
	}

	// again: same table, no new columns, rows doubled
	code, out, errOut = ingestCmd(t, "--db", db, "--json", "--column-density", "0", file)
	if code != 0 {
		t.Fatalf("second ingest: exit %d, stderr:\n%s", code, errOut)
	}
	tb = check(t, out, false)
	if n := num(t, tb, "columns_added"); n != 0 {
		t.Errorf("second ingest: columns_added = %v, want 0", n)
	}
	if n := dbQueryInt(t, db, "SELECT count(*) FROM otel_traces"); n != 38 {
		t.Errorf("otel_traces has %d rows after two ingests, want 38", n)
	}
}

// The summary counts a lossless widening (BIGINT to DOUBLE) in
// columns_widened, and a value the column would take only by a lossy one
// (a string) in strays: the column keeps its type (docs/SCHEMA.md 5.6).
func TestIngestJSONSummaryWidening(t *testing.T) {
	db := filepath.Join(t.TempDir(), "w.duckdb")
	span := func(v string) string {
		return `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","name":"s","attributes":[{"key":"n","value":` + v + `}]}]}]}]}` + "\n"
	}
	a := writeTemp(t, "a.jsonl", span(`{"intValue":"1"}`))
	b := writeTemp(t, "b.jsonl", span(`{"doubleValue":2.5}`))
	c := writeTemp(t, "c.jsonl", span(`{"stringValue":"x"}`))
	if code, _, e := ingestCmd(t, "--db", db, "--json", "--column-density", "0", a); code != 0 {
		t.Fatalf("exit %d: %s", code, e)
	}
	code, out, e := ingestCmd(t, "--db", db, "--json", "--column-density", "0", b)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, e)
	}
	tb := decodeSummary(t, out)["tables"].([]any)[0].(map[string]any)
	if n := num(t, tb, "columns_widened"); n != 1 {
		t.Errorf("columns_widened = %v, want 1", n)
	}
	if n := num(t, tb, "columns_added"); n != 0 {
		t.Errorf("columns_added = %v, want 0", n)
	}
	if n := num(t, tb, "strays"); n != 0 {
		t.Errorf("strays = %v, want 0", n)
	}
	code, out, e = ingestCmd(t, "--db", db, "--json", "--column-density", "0", c)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, e)
	}
	tb = decodeSummary(t, out)["tables"].([]any)[0].(map[string]any)
	if w, s := num(t, tb, "columns_widened"), num(t, tb, "strays"); w != 0 || s != 1 {
		t.Errorf("a string under a DOUBLE key: columns_widened = %v, strays = %v; want 0, 1", w, s)
	}
	if n := dbQueryInt(t, db, `SELECT count(*) FROM otel_traces WHERE typeof(n) = 'DOUBLE'`); n != 3 {
		t.Errorf("%d rows of n as DOUBLE, want 3", n)
	}
}

func TestIngestMaxErrors(t *testing.T) {
	db := filepath.Join(t.TempDir(), "m.duckdb")
	file := brokenNDJSON(t)
	code, out, errOut := ingestCmd(t, "--db", db, "--json", "--max-errors", "5", file)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	m := decodeSummary(t, out)
	if n := num(t, m, "errors"); n != 1 {
		t.Errorf("errors = %v, want 1", n)
	}
	samples, _ := m["error_samples"].([]any)
	if len(samples) != 1 || !strings.Contains(samples[0].(string), file+":3") {
		t.Errorf("error_samples = %v, want one naming %s:3", m["error_samples"], file)
	}
	if n := num(t, m["tables"].([]any)[0].(map[string]any), "rows"); n != 3 {
		t.Errorf("rows = %v, want 3", n)
	}

	// the text summary reports skipped records on stderr
	code, out, errOut = ingestCmd(t, "--db", db, "--max-errors", "5", file)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	if !strings.Contains(errOut, "skipped: "+file+":3") {
		t.Errorf("stderr does not report the skipped line:\n%s", errOut)
	}
	if !strings.Contains(out, "otel_traces") {
		t.Errorf("text summary lacks the table:\n%s", out)
	}
}

func TestIngestTextSummary(t *testing.T) {
	db := filepath.Join(t.TempDir(), "t.duckdb")
	code, out, errOut := ingestCmd(t, "--db", db, filepath.Join(otlp, "otlp2parquet", "logs.pb"), filepath.Join(otlp, "otlp2parquet", "trace.json"))
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("want a header and 2 table lines, got:\n%s", out)
	}
	hdr := strings.Fields(lines[0])
	if len(hdr) < 3 || hdr[0] != "table" || hdr[1] != "rows" || hdr[2] != "created" {
		t.Errorf("header = %q", lines[0])
	}
	for i, want := range [][]string{{"otel_logs", "81", "true"}, {"otel_traces", "2", "true"}} {
		f := strings.Fields(lines[i+1])
		if len(f) != len(hdr) || f[0] != want[0] || f[1] != want[1] || f[2] != want[2] {
			t.Errorf("line %q, want %v and %d fields", lines[i+1], want, len(hdr))
		}
	}
	// right-aligned columns: every line has the same width
	for _, l := range lines[1:] {
		if len(l) != len(lines[0]) {
			t.Errorf("summary lines are not aligned:\n%s", out)
			break
		}
	}
}

func TestQueryCSV(t *testing.T) {
	db := filepath.Join(t.TempDir(), "q.duckdb")
	if code, _, e := ingestCmd(t, "--db", db, "--json", filepath.Join(otlp, "otel-proto-examples-trace.json"), filepath.Join(otlp, "otlp2parquet", "trace.json")); code != 0 {
		t.Fatalf("ingest: exit %d: %s", code, e)
	}
	code, out, errOut := queryCmd(t, "--db", db, "--csv",
		`SELECT name, kind, "my.span.attr", duration_ns FROM otel_traces ORDER BY name`)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatalf("output is not CSV: %v\n%s", err, out)
	}
	if len(recs) != 4 {
		t.Fatalf("want a header and 3 rows, got %d records:\n%s", len(recs), out)
	}
	if strings.Join(recs[0], ",") != "name,kind,my.span.attr,duration_ns" {
		t.Errorf("header = %v", recs[0])
	}
	var found bool
	for _, r := range recs[1:] {
		if r[0] == "I'm a server span" {
			found = true
			if r[1] != "SERVER" || r[2] != "some value" || r[3] != "1000000000" {
				t.Errorf("row %v, want [I'm a server span SERVER some value 1000000000]", r)
			}
		} else if r[2] != "" {
			t.Errorf("row %v: NULL my.span.attr should be an empty field", r)
		}
	}
	if !found {
		t.Errorf("no row for the example span:\n%s", out)
	}
	if strings.Contains(out, "rows)") {
		t.Errorf("CSV output has a row-count footer:\n%s", out)
	}
}

func TestQueryAlignedTable(t *testing.T) {
	code, out, errOut := queryCmd(t, "--db", ":memory:",
		`SELECT * FROM (VALUES ('a', 1, NULL), ('bbbbbbbb', 22, 'z'), ('ccc', 333, 'yy')) v(x, yy, z) ORDER BY x`)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	want := "" +
		"x         yy   z\n" +
		"a         1    NULL\n" +
		"bbbbbbbb  22   z\n" +
		"ccc       333  yy\n" +
		"(3 rows)\n"
	// trailing blanks are tabwriter's business; compare without them
	var got []string
	for _, l := range strings.Split(out, "\n") {
		got = append(got, strings.TrimRight(l, " "))
	}
	if strings.Join(got, "\n") != want {
		t.Errorf("aligned table:\n%s\nwant:\n%s", out, want)
	}
}

func TestQueryErrors(t *testing.T) {
	db := ":memory:"
	if code, _, e := queryCmd(t, "--db", db, "SELECT * FROM no_such_table"); code != exitError || !strings.Contains(e, "no_such_table") {
		t.Errorf("bad SQL: exit %d, stderr %q; want %d and a message", code, e, exitError)
	}
	if code, _, _ := queryCmd(t, "--db", db); code != exitUsage {
		t.Errorf("no SQL: exit %d, want %d", code, exitUsage)
	}
	if code, _, _ := queryCmd(t, "--db", db, "SELECT 1", "SELECT 2"); code != exitUsage {
		t.Errorf("two SQL arguments: exit %d, want %d", code, exitUsage)
	}
}

func TestBadFlagsAndCommands(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
		msg  string
	}{
		{[]string{"ingest", "--no-such-flag", "x.json"}, exitUsage, "no-such-flag"},
		{[]string{"ingest", "--batch-rows", "many", "x.json"}, exitUsage, "batch-rows"},
		{[]string{"query", "--bogus", "SELECT 1"}, exitUsage, "bogus"},
		{[]string{"ingest", "--db", filepath.Join(t.TempDir(), "x.duckdb")}, exitUsage, "no input"},
		{[]string{}, exitUsage, "Usage"},
		{[]string{"frobnicate"}, exitUsage, "frobnicate"},
		{[]string{"help"}, exitOK, ""},
		{[]string{"ingest", "--help"}, exitOK, ""},
	} {
		var code int
		out, errOut := captureStd(t, func() { code = run(tc.args) })
		if code != tc.want {
			t.Errorf("run(%q) = %d, want %d; stderr:\n%s", tc.args, code, tc.want, errOut)
		}
		if tc.msg != "" && !strings.Contains(errOut, tc.msg) {
			t.Errorf("run(%q): stderr does not mention %q:\n%s", tc.args, tc.msg, errOut)
		}
		if tc.want == exitOK && out == "" && errOut == "" {
			t.Errorf("run(%q) printed nothing", tc.args)
		}
	}
	// the same through runIngest with buffers
	code, _, errOut := ingestCmd(t, "--frob")
	if code != exitUsage || !strings.Contains(errOut, "frob") {
		t.Errorf("runIngest(--frob) = %d, stderr %q", code, errOut)
	}
}

func TestRunIngestJSONThroughDispatch(t *testing.T) {
	db := filepath.Join(t.TempDir(), "d.duckdb")
	var code int
	out, errOut := captureStd(t, func() {
		code = run([]string{"ingest", "--db", db, "--json", filepath.Join(otlp, "otlp2parquet", "metrics_mixed.pb")})
	})
	if code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	m := decodeSummary(t, out)
	tb := m["tables"].([]any)[0].(map[string]any)
	if tb["table"] != "otel_metrics" || num(t, tb, "rows") != 3 {
		t.Errorf("summary table %v rows %v, want otel_metrics 3", tb["table"], tb["rows"])
	}
	out, errOut = captureStd(t, func() {
		code = run([]string{"query", "--db", db, "--csv", "SELECT count(*) AS n FROM otel_metrics"})
	})
	if code != exitOK || out != "n\n3\n" {
		t.Errorf("query: exit %d, stdout %q, stderr %q; want n\\n3\\n", code, out, errOut)
	}
}

func TestIngestMissingFile(t *testing.T) {
	db := filepath.Join(t.TempDir(), "m.duckdb")
	missing := filepath.Join(t.TempDir(), "does-not-exist.jsonl")
	code, _, errOut := ingestCmd(t, "--db", db, missing)
	if code == exitOK {
		t.Fatal("ingest of a missing file exited 0")
	}
	if !strings.Contains(errOut, missing) {
		t.Errorf("stderr does not name the missing file:\n%s", errOut)
	}
	// a missing file among good ones loads nothing
	code, _, _ = ingestCmd(t, "--db", db, filepath.Join(otlp, "otlp2parquet", "trace.json"), missing)
	if code == exitOK {
		t.Error("ingest with one missing file exited 0")
	}
	if code, _, _ := queryCmd(t, "--db", db, "SELECT count(*) FROM otel_traces"); code == exitOK {
		t.Error("otel_traces exists after an ingest with a missing file")
	}
}

func TestIngestFailingLoad(t *testing.T) {
	db := filepath.Join(t.TempDir(), "f.duckdb")
	file := brokenNDJSON(t)
	for _, args := range [][]string{{"--db", db, file}, {"--db", db, "--json", file}} {
		code, out, errOut := ingestCmd(t, args...)
		if code != exitError {
			t.Errorf("%v: exit %d, want %d", args, code, exitError)
		}
		if !strings.Contains(errOut, "nothing was committed") {
			t.Errorf("%v: stderr lacks \"nothing was committed\":\n%s", args, errOut)
		}
		if !strings.Contains(errOut, file+":3") {
			t.Errorf("%v: stderr does not name %s:3:\n%s", args, file, errOut)
		}
		if strings.TrimSpace(out) != "" {
			t.Errorf("%v: stdout not empty on failure:\n%s", args, out)
		}
	}
	if n := dbQueryInt(t, db, "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'otel_traces'"); n != 0 {
		t.Error("otel_traces exists after a failed ingest")
	}
}

func TestVersion(t *testing.T) {
	var out bytes.Buffer
	if code := runVersion(testCtx(t), &out); code != exitOK {
		t.Fatalf("exit %d", code)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "shredduck ") || !strings.HasPrefix(lines[1], "commit ") ||
		!strings.HasPrefix(lines[2], "go1.") || !strings.HasPrefix(lines[3], "DuckDB v2.") ||
		lines[4] != "new files: storage v1.5.0, read by DuckDB 1.5 and later" {
		t.Errorf("version output:\n%s", out.String())
	}
}

// Within --max-errors, a load in which every record was bad stored
// nothing: it exits non-zero and says so.
func TestIngestAllBad(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(file, []byte("{\"resourceSpans\": 5}\nnot json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--max-errors", "5"}, {"--max-errors", "5", "--json"}} {
		code, _, errOut := ingestCmd(t, append([]string{"--db", filepath.Join(dir, "b.duckdb")}, append(args, file)...)...)
		if code != exitError {
			t.Errorf("%v: exit %d, want %d", args, code, exitError)
		}
		if !slices.Contains(args, "--json") && !strings.Contains(errOut, "all 2 records were bad: nothing was stored") {
			t.Errorf("%v: stderr does not say nothing was stored:\n%s", args, errOut)
		}
	}
}

// Text that is neither JSON nor OTLP protobuf is called what it is.
func TestIngestNotJSON(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "events.csv")
	if err := os.WriteFile(file, []byte("time,level,message\n2024-01-01,info,hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := ingestCmd(t, "--db", filepath.Join(dir, "c.duckdb"), file)
	if code != exitError || !strings.Contains(errOut, `line 1 is not JSON and the input is not OTLP protobuf (it starts "time,level,message")`) {
		t.Errorf("exit %d, stderr:\n%s", code, errOut)
	}
	if strings.Contains(errOut, "--transform") {
		t.Errorf("the message points to --transform, which cannot help:\n%s", errOut)
	}
}

// --table refuses the names reserved for another transform (the OTLP
// routing tables), shredduck's catalog and DuckDB's system views, in any
// case; a routing table's own signal may name it in any case.
func TestIngestReservedTable(t *testing.T) {
	db := filepath.Join(t.TempDir(), "r.duckdb")
	traces := filepath.Join(otlp, "otlp2parquet", "traces.jsonl")
	other := writeTemp(t, "o.jsonl", `{"a":1}`+"\n")
	for _, args := range [][]string{
		{"--table", "otel_logs", traces},
		{"--table", "OTEL_METRICS", "--transform", "otlp-traces", traces},
		{"--table", "otel_traces", other},
		{"--table", "sqlite_master", other},
		{"--table", "PG_CLASS", "--transform", "none", other},
		{"--table", "shredduck_columns", traces},
	} {
		code, _, errOut := ingestCmd(t, append([]string{"--db", db}, args...)...)
		if code != exitError || !strings.Contains(errOut, "reserved table name") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
	if n := dbQueryInt(t, db, "SELECT count(*) FROM shredduck_tables"); n != 0 {
		t.Errorf("%d tables after refused loads", n)
	}
	for _, args := range [][]string{{"--table", "Otel_Traces", traces}, {traces}} {
		if code, _, errOut := ingestCmd(t, append([]string{"--db", db}, args...)...); code != exitOK {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
	if n := dbQueryInt(t, db, "SELECT count(*) FROM shredduck_tables WHERE table_name = 'otel_traces'"); n != 1 {
		t.Errorf("otel_traces is not the one table: %d", n)
	}
}
