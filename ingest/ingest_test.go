package ingest_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/transforms"
)

const (
	fixtures = "../testdata/otlp"
	o2p      = "../testdata/otlp/otlp2parquet"
)

// ---------------------------------------------------------------------------
// helpers shared by ingest_test.go and evolution_test.go

// openDB opens a fresh database file in a temporary directory.
func openDB(t *testing.T) *ingest.DB {
	t.Helper()
	db, err := ingest.Open(filepath.Join(t.TempDir(), "test.duckdb"))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return db
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// load loads paths in one Load call.
func load(t *testing.T, db *ingest.DB, opt ingest.Options, paths ...string) (*ingest.Result, error) {
	t.Helper()
	in, err := ingest.StatInputs(paths)
	if err != nil {
		t.Fatalf("StatInputs(%v): %v", paths, err)
	}
	return db.Load(ctxFor(t), in, opt)
}

// mustLoad is load that fails the test on an error.
func mustLoad(t *testing.T, db *ingest.DB, opt ingest.Options, paths ...string) *ingest.Result {
	t.Helper()
	res, err := load(t, db, opt, paths...)
	if err != nil {
		t.Fatalf("Load(%v, %+v): %v", paths, opt, err)
	}
	return res
}

// stats returns the statistics of table name in res.
func stats(t *testing.T, res *ingest.Result, name string) *ingest.TableStats {
	t.Helper()
	for _, s := range res.Tables {
		if s.Table == name {
			return s
		}
	}
	var names []string
	for _, s := range res.Tables {
		names = append(names, s.Table)
	}
	t.Fatalf("result has no stats for table %s (has %v)", name, names)
	return nil
}

func queryInt(t *testing.T, db *ingest.DB, q string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := db.SQL.QueryRowContext(ctxFor(t), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func rowCount(t *testing.T, db *ingest.DB, table string) int64 {
	t.Helper()
	return queryInt(t, db, "SELECT count(*) FROM "+quoteIdent(table))
}

func tableExists(t *testing.T, db *ingest.DB, table string) bool {
	t.Helper()
	return queryInt(t, db, "SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", table) > 0
}

// userTables lists the tables that are not shredduck's catalog.
func userTables(t *testing.T, db *ingest.DB) []string {
	t.Helper()
	rows, err := db.SQL.QueryContext(ctxFor(t), "SELECT table_name FROM duckdb_tables() WHERE table_name NOT LIKE 'shredduck%' ORDER BY table_name")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// quoteIdent quotes a DuckDB identifier (independently of shred.QuoteIdent).
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// queryStrings runs q and returns every row with every value cast to text by
// database/sql; NULL is "<NULL>".
func queryStrings(t *testing.T, db *ingest.DB, q string, args ...any) [][]string {
	t.Helper()
	rows, err := db.SQL.QueryContext(ctxFor(t), q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatalf("%s: scan: %v", q, err)
		}
		rec := make([]string, len(cols))
		for i, v := range vals {
			if v.Valid {
				rec[i] = v.String
			} else {
				rec[i] = "<NULL>"
			}
		}
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out
}

// queryColumn is queryStrings for a query of one column.
func queryColumn(t *testing.T, db *ingest.DB, q string, args ...any) []string {
	t.Helper()
	var out []string
	for _, r := range queryStrings(t, db, q, args...) {
		out = append(out, r[0])
	}
	return out
}

// tableColumns returns a table's column names in table order.
func tableColumns(t *testing.T, db *ingest.DB, table string) []string {
	t.Helper()
	return queryColumn(t, db, "SELECT column_name FROM duckdb_columns() WHERE table_name = ? ORDER BY column_index", table)
}

// catalogRow is one row of shredduck_columns.
type catalogRow struct {
	Column, Level, Key, Type string
	Overflow, Promoted       bool
	WidenedFrom              sql.NullString
	Strays                   int64
}

func catalog(t *testing.T, db *ingest.DB, table string) map[string]catalogRow {
	t.Helper()
	rows, err := db.SQL.QueryContext(ctxFor(t), `SELECT column_name, level, key, type, overflow, promoted IS NOT NULL, widened_from, coalesce(strays, 0)
		FROM shredduck_columns WHERE table_name = ?`, table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := make(map[string]catalogRow)
	for rows.Next() {
		var c catalogRow
		if err := rows.Scan(&c.Column, &c.Level, &c.Key, &c.Type, &c.Overflow, &c.Promoted, &c.WidenedFrom, &c.Strays); err != nil {
			t.Fatal(err)
		}
		out[c.Level+"\x00"+c.Key] = c
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// catalogEntry returns the catalog row of (level, key) or fails.
func catalogEntry(t *testing.T, db *ingest.DB, table, level, key string) catalogRow {
	t.Helper()
	c, ok := catalog(t, db, table)[level+"\x00"+key]
	if !ok {
		t.Fatalf("catalog of %s has no row for level %s key %q", table, level, key)
	}
	return c
}

// dumpTable renders every row of a table as text: columns in name order
// (so that tables whose columns were added in another order compare), every
// value cast to VARCHAR by DuckDB, rows ordered by every column.
func dumpTable(t *testing.T, db *ingest.DB, table string) (cols []string, rows []string) {
	t.Helper()
	cols = tableColumns(t, db, table)
	sort.Strings(cols)
	sel := make([]string, len(cols))
	for i, c := range cols {
		sel[i] = "CAST(" + quoteIdent(c) + " AS VARCHAR) AS " + quoteIdent(c)
	}
	q := "SELECT " + strings.Join(sel, ", ") + " FROM " + quoteIdent(table) + " ORDER BY ALL"
	for _, r := range queryStrings(t, db, q) {
		rows = append(rows, strings.Join(r, "\x1f"))
	}
	return cols, rows
}

// dumpCatalog renders a table's catalog rows (without timestamps) as text.
func dumpCatalog(t *testing.T, db *ingest.DB, table string) []string {
	t.Helper()
	var out []string
	for _, r := range queryStrings(t, db, `SELECT column_name, level, key, type, overflow, widened_from
		FROM shredduck_columns WHERE table_name = ? ORDER BY level, key`, table) {
		out = append(out, strings.Join(r, "|"))
	}
	return out
}

// compareTables reports every difference between two tables' contents.
func compareTables(t *testing.T, db *ingest.DB, a, b string) {
	t.Helper()
	ca, ra := dumpTable(t, db, a)
	cb, rb := dumpTable(t, db, b)
	if strings.Join(ca, ",") != strings.Join(cb, ",") {
		t.Errorf("columns differ:\n%s: %v\n%s: %v", a, ca, b, cb)
		return
	}
	if len(ra) != len(rb) {
		t.Errorf("%s has %d rows, %s has %d", a, len(ra), b, len(rb))
	}
	reported := 0
	for i := 0; i < len(ra) && i < len(rb); i++ {
		if ra[i] == rb[i] {
			continue
		}
		va, vb := strings.Split(ra[i], "\x1f"), strings.Split(rb[i], "\x1f")
		for j := range va {
			if va[j] != vb[j] && reported < 10 {
				reported++
				t.Errorf("row %d (sorted) column %s differs:\n  %s: %.300s\n  %s: %.300s", i, ca[j], a, va[j], b, vb[j])
			}
		}
	}
	if x, y := dumpCatalog(t, db, a), dumpCatalog(t, db, b); strings.Join(x, "\n") != strings.Join(y, "\n") {
		t.Errorf("catalog rows differ:\n%s:\n  %s\n%s:\n  %s", a, strings.Join(x, "\n  "), b, strings.Join(y, "\n  "))
	}
}

// writeFile writes data into a new file in dir and returns its path.
func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ---------------------------------------------------------------------------
// generated OTLP/JSON traces

// attr is one attribute: val is a string, int, float64, bool or a raw
// json.RawMessage doubleValue.
type attr struct {
	key string
	val any
}

func anyValue(v any) map[string]any {
	switch x := v.(type) {
	case string:
		return map[string]any{"stringValue": x}
	case int:
		return map[string]any{"intValue": strconv.Itoa(x)}
	case float64:
		return map[string]any{"doubleValue": x}
	case bool:
		return map[string]any{"boolValue": x}
	case json.RawMessage: // a raw doubleValue, e.g. "NaN"
		return map[string]any{"doubleValue": x}
	}
	panic(fmt.Sprintf("anyValue: %T", v))
}

func kvs(as []attr) []any {
	out := make([]any, 0, len(as))
	for _, a := range as {
		out = append(out, map[string]any{"key": a.key, "value": anyValue(a.val)})
	}
	return out
}

// span describes one generated span.
type span struct {
	name  string
	attrs []attr
}

var spanSeq atomic.Int64

// traceLine renders one OTLP/JSON ExportTraceServiceRequest on one line,
// with a resource (service.name "gen" plus res) and one scope holding spans.
func traceLine(res []attr, spans ...span) string {
	return rawTraceLine(append([]attr{{"service.name", "gen"}}, res...), spans...)
}

// rawTraceLine is traceLine with exactly the resource attributes res.
func rawTraceLine(res []attr, spans ...span) string {
	var ss []any
	for _, s := range spans {
		n := spanSeq.Add(1)
		ss = append(ss, map[string]any{
			"traceId":           fmt.Sprintf("%032x", 0xabc0000+n),
			"spanId":            fmt.Sprintf("%016x", 0xdef0000+n),
			"name":              s.name,
			"kind":              1,
			"startTimeUnixNano": strconv.FormatInt(1_700_000_000_000_000_000+n*1000, 10),
			"endTimeUnixNano":   strconv.FormatInt(1_700_000_000_000_000_000+n*1000+500, 10),
			"attributes":        kvs(s.attrs),
		})
	}
	req := map[string]any{"resourceSpans": []any{map[string]any{
		"resource":   map[string]any{"attributes": kvs(res)},
		"scopeSpans": []any{map[string]any{"scope": map[string]any{"name": "gen-scope"}, "spans": ss}},
	}}}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(req); err != nil {
		panic(err)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// ndjson writes lines as an NDJSON file in dir.
func ndjson(t *testing.T, dir, name string, lines ...string) string {
	t.Helper()
	return writeFile(t, dir, name, []byte(strings.Join(lines, "\n")+"\n"))
}

// ---------------------------------------------------------------------------
// independent record counts

// countJSONRequest counts the records of one OTLP/JSON request decoded into
// generic maps, and names the table they belong in.
func countJSONRequest(req map[string]any) (table string, n int) {
	arr := func(v any, keys ...string) ([]any, bool) {
		m, _ := v.(map[string]any)
		for _, k := range keys {
			if a, ok := m[k]; ok {
				s, _ := a.([]any)
				return s, true
			}
		}
		return nil, false
	}
	if rs, ok := arr(req, "resourceSpans", "resource_spans"); ok {
		for _, r := range rs {
			ss, _ := arr(r, "scopeSpans", "scope_spans")
			for _, s := range ss {
				sp, _ := arr(s, "spans")
				n += len(sp)
			}
		}
		return "otel_traces", n
	}
	if rl, ok := arr(req, "resourceLogs", "resource_logs"); ok {
		for _, r := range rl {
			sl, _ := arr(r, "scopeLogs", "scope_logs")
			for _, s := range sl {
				lr, _ := arr(s, "logRecords", "log_records")
				n += len(lr)
			}
		}
		return "otel_logs", n
	}
	if rm, ok := arr(req, "resourceMetrics", "resource_metrics"); ok {
		for _, r := range rm {
			sm, _ := arr(r, "scopeMetrics", "scope_metrics")
			for _, s := range sm {
				ms, _ := arr(s, "metrics")
				for _, m := range ms {
					mm, _ := m.(map[string]any)
					for _, kind := range []string{"gauge", "sum", "histogram", "exponentialHistogram", "exponential_histogram", "summary"} {
						if d, ok := mm[kind]; ok {
							dp, _ := arr(d, "dataPoints", "data_points")
							n += len(dp)
						}
					}
				}
			}
		}
		return "otel_metrics", n
	}
	return "", 0
}

// countFile counts a fixture's records without the code under test.
func countFile(t *testing.T, path string) (table string, n int) {
	t.Helper()
	data := readFile(t, path)
	base := strings.ToLower(filepath.Base(path))
	if strings.HasSuffix(base, ".pb") {
		switch {
		case strings.Contains(base, "trace"):
			td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(data)
			if err != nil {
				t.Fatal(err)
			}
			return "otel_traces", td.SpanCount()
		case strings.Contains(base, "log"):
			ld, err := (&plog.ProtoUnmarshaler{}).UnmarshalLogs(data)
			if err != nil {
				t.Fatal(err)
			}
			return "otel_logs", ld.LogRecordCount()
		case strings.Contains(base, "metric"):
			md, err := (&pmetric.ProtoUnmarshaler{}).UnmarshalMetrics(data)
			if err != nil {
				t.Fatal(err)
			}
			return "otel_metrics", md.DataPointCount()
		}
		t.Fatalf("%s: cannot tell the signal", path)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		var req map[string]any
		err := dec.Decode(&req)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		tb, k := countJSONRequest(req)
		if table != "" && tb != table {
			t.Fatalf("%s mixes %s and %s", path, table, tb)
		}
		table = tb
		n += k
	}
	return table, n
}

func fixtureFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(fixtures, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() && (strings.HasSuffix(p, ".json") || strings.HasSuffix(p, ".jsonl") || strings.HasSuffix(p, ".pb")) {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 29 {
		t.Fatalf("found only %d fixture files under %s", len(files), fixtures)
	}
	return files
}

// ---------------------------------------------------------------------------
// 1. every fixture loads, with the right number of rows

func TestLoadFixturesRowCounts(t *testing.T) {
	for _, path := range fixtureFiles(t) {
		name, _ := filepath.Rel(fixtures, path)
		t.Run(name, func(t *testing.T) {
			table, want := countFile(t, path)
			if table == "" || want == 0 {
				t.Fatalf("independent count found no records in %s", path)
			}
			db := openDB(t)
			res := mustLoad(t, db, ingest.Options{}, path)
			if got := userTables(t, db); len(got) != 1 || got[0] != table {
				t.Errorf("tables after load: %v, want [%s]", got, table)
			}
			if !tableExists(t, db, table) {
				return
			}
			if got := rowCount(t, db, table); got != int64(want) {
				t.Errorf("%s has %d rows, want %d", table, got, want)
			}
			if res.Records != int64(want) {
				t.Errorf("Result.Records = %d, want %d", res.Records, want)
			}
			if s := stats(t, res, table); s.Rows != int64(want) || !s.Created {
				t.Errorf("stats: rows %d created %v, want %d true", s.Rows, s.Created, want)
			}
			if res.Errors != 0 {
				t.Errorf("Result.Errors = %d: %v", res.Errors, res.ErrorSamples)
			}
			// The Arrow scans' views are dropped in the load's transaction.
			if n := queryInt(t, db, "SELECT count(*) FROM duckdb_views() WHERE NOT internal"); n != 0 {
				t.Errorf("%d views left behind", n)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// 2. field checks on the official trace example

func TestTraceExampleFields(t *testing.T) {
	db := openDB(t)
	mustLoad(t, db, ingest.Options{}, filepath.Join(fixtures, "otel-proto-examples-trace.json"))

	var (
		traceID, spanID, parentID, name, kind, service, scopeName, scopeVersion string
		spanAttr, resService, scopeAttr, startType                              string
		start, end                                                              time.Time
		startNS, durationNS                                                     int64
	)
	err := db.SQL.QueryRowContext(ctxFor(t), `SELECT trace_id, span_id, parent_span_id, name, kind,
		start_time, end_time, epoch_ns(start_time), typeof(start_time), duration_ns,
		service_name, scope_name, scope_version,
		"my.span.attr", "resource.service.name", "scope.my.scope.attribute"
		FROM otel_traces WHERE trace_id = '5b8efff798038103d269b633813fc60c'`).Scan(
		&traceID, &spanID, &parentID, &name, &kind, &start, &end, &startNS, &startType, &durationNS,
		&service, &scopeName, &scopeVersion, &spanAttr, &resService, &scopeAttr)
	if err != nil {
		t.Fatalf("query the span by its lower-case trace id: %v", err)
	}
	if n := rowCount(t, db, "otel_traces"); n != 1 {
		t.Errorf("otel_traces has %d rows, want 1", n)
	}
	wantStart := time.Date(2018, 12, 13, 14, 51, 0, 0, time.UTC)
	checks := []struct {
		what      string
		got, want any
	}{
		{"trace_id", traceID, "5b8efff798038103d269b633813fc60c"},
		{"span_id", spanID, "eee19b7ec3c1b174"},
		{"parent_span_id", parentID, "eee19b7ec3c1b173"},
		{"name", name, "I'm a server span"},
		{"kind", kind, "SERVER"},
		{"typeof(start_time)", startType, "TIMESTAMP_NS"},
		{"epoch_ns(start_time)", startNS, wantStart.UnixNano()},
		{"start_time", start.UTC(), wantStart},
		{"end_time", end.UTC(), wantStart.Add(time.Second)},
		{"duration_ns", durationNS, int64(1e9)},
		{"service_name", service, "my.service"},
		{"scope_name", scopeName, "my.library"},
		{"scope_version", scopeVersion, "1.0.0"},
		{`"my.span.attr"`, spanAttr, "some value"},
		{`"resource.service.name"`, resService, "my.service"},
		{`"scope.my.scope.attribute"`, scopeAttr, "some scope attribute"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
	if n := queryInt(t, db, `SELECT count(*) FROM otel_traces WHERE start_time = TIMESTAMP_NS '2018-12-13 14:51:00'
		AND end_time = TIMESTAMP_NS '2018-12-13 14:51:01'`); n != 1 {
		t.Errorf("SQL comparison of start_time/end_time with timestamp literals matched %d rows, want 1", n)
	}

	for _, want := range []catalogRow{
		{Column: "my.span.attr", Level: "record", Key: "my.span.attr", Type: "VARCHAR"},
		{Column: "resource.service.name", Level: "resource", Key: "service.name", Type: "VARCHAR"},
		{Column: "scope.my.scope.attribute", Level: "scope", Key: "my.scope.attribute", Type: "VARCHAR"},
	} {
		got := catalogEntry(t, db, "otel_traces", want.Level, want.Key)
		if got != want {
			t.Errorf("catalog row for %s %q = %+v, want %+v", want.Level, want.Key, got, want)
		}
	}
	if n := queryInt(t, db, "SELECT count(*) FROM shredduck_tables WHERE table_name = 'otel_traces' AND transform = 'otlp-traces'"); n != 1 {
		t.Errorf("shredduck_tables has %d rows for otel_traces/otlp-traces, want 1", n)
	}
}

// ---------------------------------------------------------------------------
// 3. the same data as .json, .jsonl and .pb gives identical tables

// hexIDs rewrites base64 trace/span ids (as protojson writes them) to hex,
// which pdata's JSON decoder requires.
func hexIDs(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && (k == "traceId" || k == "spanId" || k == "parentSpanId") {
				if raw, err := base64.StdEncoding.DecodeString(s); err == nil && (len(s) == 24 || len(s) == 12) {
					x[k] = hex.EncodeToString(raw)
				}
				continue
			}
			hexIDs(e)
		}
	case []any:
		for _, e := range x {
			hexIDs(e)
		}
	}
}

// pdataCanonical decodes a fixture with pdata (every JSON request of it,
// merged) and returns its protobuf encoding, to tell whether two files hold
// the same data.
func pdataCanonical(t *testing.T, path string) []byte {
	t.Helper()
	data := readFile(t, path)
	var reqs [][]byte
	if !strings.HasSuffix(path, ".pb") {
		dec := json.NewDecoder(bytes.NewReader(data))
		for {
			var v any
			if err := dec.Decode(&v); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			hexIDs(v)
			b, _ := json.Marshal(v)
			reqs = append(reqs, b)
		}
	}
	base := filepath.Base(path)
	var out []byte
	var err error
	switch {
	case strings.Contains(base, "trace"):
		td := ptrace.NewTraces()
		if reqs == nil {
			td, err = (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(data)
		}
		for _, r := range reqs {
			x, e := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(r)
			if e != nil {
				err = e
				break
			}
			x.ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
		}
		if err == nil {
			out, err = (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
		}
	case strings.Contains(base, "log"):
		ld := plog.NewLogs()
		if reqs == nil {
			ld, err = (&plog.ProtoUnmarshaler{}).UnmarshalLogs(data)
		}
		for _, r := range reqs {
			x, e := (&plog.JSONUnmarshaler{}).UnmarshalLogs(r)
			if e != nil {
				err = e
				break
			}
			x.ResourceLogs().MoveAndAppendTo(ld.ResourceLogs())
		}
		if err == nil {
			out, err = (&plog.ProtoMarshaler{}).MarshalLogs(ld)
		}
	default:
		md := pmetric.NewMetrics()
		if reqs == nil {
			md, err = (&pmetric.ProtoUnmarshaler{}).UnmarshalMetrics(data)
		}
		for _, r := range reqs {
			x, e := (&pmetric.JSONUnmarshaler{}).UnmarshalMetrics(r)
			if e != nil {
				err = e
				break
			}
			x.ResourceMetrics().MoveAndAppendTo(md.ResourceMetrics())
		}
		if err == nil {
			out, err = (&pmetric.ProtoMarshaler{}).MarshalMetrics(md)
		}
	}
	if err != nil {
		t.Fatalf("pdata cannot read %s: %v", path, err)
	}
	return out
}

// equivalentGroups lists files that hold the same data (checked with pdata
// in the test). log.json has no .pb or .jsonl twin: it holds 1 record,
// logs.jsonl/logs.pb 81.
var equivalentGroups = []struct {
	name  string
	files []string
}{
	{"trace", []string{"trace.json", "trace.pb"}},
	{"traces", []string{"traces.jsonl", "traces.pb"}},
	{"logs", []string{"logs.jsonl", "logs.pb"}},
	{"metrics_gauge", []string{"metrics_gauge.json", "metrics_gauge.jsonl", "metrics_gauge.pb"}},
	{"metrics_sum", []string{"metrics_sum.json", "metrics_sum.jsonl", "metrics_sum.pb"}},
	{"metrics_histogram", []string{"metrics_histogram.json", "metrics_histogram.jsonl", "metrics_histogram.pb"}},
	{"metrics_exponential_histogram", []string{"metrics_exponential_histogram.json", "metrics_exponential_histogram.jsonl", "metrics_exponential_histogram.pb"}},
	{"metrics_summary", []string{"metrics_summary.json", "metrics_summary.jsonl", "metrics_summary.pb"}},
	{"metrics_mixed", []string{"metrics_mixed.json", "metrics_mixed.jsonl", "metrics_mixed.pb"}},
}

func TestSameDataAcrossEncodings(t *testing.T) {
	db := openDB(t)
	for _, g := range equivalentGroups {
		t.Run(g.name, func(t *testing.T) {
			ref := pdataCanonical(t, filepath.Join(o2p, g.files[0]))
			for _, f := range g.files[1:] {
				if !bytes.Equal(ref, pdataCanonical(t, filepath.Join(o2p, f))) {
					t.Fatalf("pdata says %s and %s hold different data; the group is wrong", g.files[0], f)
				}
			}
			var tables []string
			for _, f := range g.files {
				table := strings.NewReplacer(".", "_").Replace(f)
				tables = append(tables, table)
				res := mustLoad(t, db, ingest.Options{Table: table}, filepath.Join(o2p, f))
				if s := stats(t, res, table); s.Rows == 0 {
					t.Errorf("%s: no rows", f)
				}
			}
			for _, other := range tables[1:] {
				compareTables(t, db, tables[0], other)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// 4. transaction semantics and bad input

func TestBadLineRollsBackEverything(t *testing.T) {
	dir := t.TempDir()
	good := ndjson(t, dir, "good.jsonl",
		traceLine(nil, span{"g1", []attr{{"only.in.good", "x"}}}),
		traceLine(nil, span{"g2", nil}))
	lines := []string{
		traceLine(nil, span{"b1", []attr{{"only.in.bad", "y"}}}),
		traceLine(nil, span{"b2", nil}),
		`{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "broken"`,
		traceLine(nil, span{"b4", nil}),
		traceLine(nil, span{"b5", nil}),
	}
	bad := ndjson(t, dir, "bad.jsonl", lines...)

	checkErr := func(t *testing.T, err error) {
		t.Helper()
		if err == nil {
			t.Fatal("Load of a file with a broken line and MaxErrors 0 succeeded")
		}
		if !strings.Contains(err.Error(), bad+":3") {
			t.Errorf("error %q does not name %s:3", err, bad)
		}
		var re *ingest.RecordError
		if !errors.As(err, &re) {
			t.Errorf("error %q is not a *RecordError", err)
		} else if re.Input != bad || re.Line != 3 {
			t.Errorf("RecordError input %q line %d, want %q line 3", re.Input, re.Line, bad)
		}
	}

	t.Run("new table", func(t *testing.T) {
		db := openDB(t)
		_, err := load(t, db, ingest.Options{}, bad)
		checkErr(t, err)
		if tableExists(t, db, "otel_traces") {
			t.Errorf("otel_traces exists after a failed load (%d rows)", rowCount(t, db, "otel_traces"))
		}
		if n := queryInt(t, db, "SELECT count(*) FROM shredduck_tables"); n != 0 {
			t.Errorf("shredduck_tables has %d rows after a failed load", n)
		}
		if n := queryInt(t, db, "SELECT count(*) FROM shredduck_columns"); n != 0 {
			t.Errorf("shredduck_columns has %d rows after a failed load", n)
		}
	})

	t.Run("new table, good file first in the same load", func(t *testing.T) {
		db := openDB(t)
		_, err := load(t, db, ingest.Options{}, good, bad)
		checkErr(t, err)
		if tableExists(t, db, "otel_traces") {
			t.Errorf("otel_traces exists after a failed load (%d rows)", rowCount(t, db, "otel_traces"))
		}
		if n := queryInt(t, db, "SELECT count(*) FROM shredduck_tables"); n != 0 {
			t.Errorf("shredduck_tables has %d rows after a failed load", n)
		}
		if n := queryInt(t, db, "SELECT count(*) FROM shredduck_columns"); n != 0 {
			t.Errorf("shredduck_columns has %d rows after a failed load", n)
		}
	})

	t.Run("existing table", func(t *testing.T) {
		db := openDB(t)
		mustLoad(t, db, ingest.Options{}, filepath.Join(o2p, "traces.jsonl"))
		before := rowCount(t, db, "otel_traces")
		colsBefore := tableColumns(t, db, "otel_traces")
		catBefore := dumpCatalog(t, db, "otel_traces")
		for _, paths := range [][]string{{bad}, {good, bad}} {
			_, err := load(t, db, ingest.Options{}, paths...)
			checkErr(t, err)
			if got := rowCount(t, db, "otel_traces"); got != before {
				t.Errorf("load of %v: otel_traces has %d rows after a failed load, had %d", paths, got, before)
			}
			if got := tableColumns(t, db, "otel_traces"); strings.Join(got, ",") != strings.Join(colsBefore, ",") {
				t.Errorf("load of %v: columns changed by a failed load:\nbefore %v\nafter  %v", paths, colsBefore, got)
			}
			if got := dumpCatalog(t, db, "otel_traces"); strings.Join(got, "\n") != strings.Join(catBefore, "\n") {
				t.Errorf("load of %v: catalog changed by a failed load", paths)
			}
		}
		// the database is still usable
		res := mustLoad(t, db, ingest.Options{}, good)
		if got := rowCount(t, db, "otel_traces"); got != before+2 || stats(t, res, "otel_traces").Rows != 2 {
			t.Errorf("after a good load: %d rows, want %d", got, before+2)
		}
	})

	t.Run("max errors 5", func(t *testing.T) {
		db := openDB(t)
		res, err := load(t, db, ingest.Options{MaxErrors: 5}, bad)
		if err != nil {
			t.Fatalf("Load with MaxErrors 5: %v", err)
		}
		if res.Errors != 1 {
			t.Errorf("Result.Errors = %d, want 1", res.Errors)
		}
		if len(res.ErrorSamples) != 1 || !strings.Contains(res.ErrorSamples[0], bad+":3") {
			t.Errorf("ErrorSamples = %q, want one naming %s:3", res.ErrorSamples, bad)
		}
		if got := rowCount(t, db, "otel_traces"); got != 4 {
			t.Errorf("otel_traces has %d rows, want 4", got)
		}
		if res.Records != 4 {
			t.Errorf("Result.Records = %d, want 4", res.Records)
		}
		got := queryStrings(t, db, "SELECT name FROM otel_traces ORDER BY name")
		if fmt.Sprint(got) != "[[b1] [b2] [b4] [b5]]" {
			t.Errorf("names = %v, want b1 b2 b4 b5", got)
		}
	})

	// A line whose request has one span that no column can take (a kind
	// outside the enum): with MaxErrors 0 the load fails, naming the line
	// and the span; with MaxErrors 1 the line's other span is loaded and
	// the rejection is reported as the line's error.
	t.Run("rejected span", func(t *testing.T) {
		dir := t.TempDir()
		mixed := ndjson(t, dir, "mixed.jsonl",
			traceLine(nil, span{"m1", nil}),
			`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"m2"},{"name":"bad","kind":17,"attributes":[{"key":"only.in.bad","value":{"intValue":"1"}}]}]}]}]}`,
			traceLine(nil, span{"m3", nil}))
		db := openDB(t)
		_, err := load(t, db, ingest.Options{}, mixed)
		if err == nil || !strings.Contains(err.Error(), mixed+":2") || !strings.Contains(err.Error(), "span 2 of the request: field kind: 17") {
			t.Fatalf("MaxErrors 0: %v, want an error naming %s:2 and the span", err, mixed)
		}
		if tableExists(t, db, "otel_traces") {
			t.Errorf("otel_traces exists after a failed load")
		}
		res, err := load(t, db, ingest.Options{MaxErrors: 1}, mixed)
		if err != nil {
			t.Fatalf("MaxErrors 1: %v", err)
		}
		if res.Errors != 1 || res.Records != 3 {
			t.Errorf("Result.Errors = %d, Records = %d; want 1, 3", res.Errors, res.Records)
		}
		got := queryStrings(t, db, "SELECT name FROM otel_traces ORDER BY name")
		if fmt.Sprint(got) != "[[m1] [m2] [m3]]" {
			t.Errorf("names = %v, want m1 m2 m3", got)
		}
		if cols := tableColumns(t, db, "otel_traces"); slices.Contains(cols, "only.in.bad") {
			t.Errorf("the rejected span's attribute made a column: %v", cols)
		}
	})

	t.Run("max errors 1 with 2 bad lines", func(t *testing.T) {
		db := openDB(t)
		two := ndjson(t, t.TempDir(), "two.jsonl", lines[0], "{not json", lines[1], "[1,2]", lines[3])
		_, err := load(t, db, ingest.Options{MaxErrors: 1}, two)
		if !errors.Is(err, ingest.ErrTooManyErrors) {
			t.Errorf("Load with 2 bad lines and MaxErrors 1: err = %v, want ErrTooManyErrors", err)
		}
		if tableExists(t, db, "otel_traces") {
			t.Errorf("otel_traces exists after a failed load")
		}
	})
}

func TestWrongTransformIsAnError(t *testing.T) {
	for _, f := range []string{"trace.json", "traces.jsonl", "traces.pb"} {
		t.Run(f, func(t *testing.T) {
			db := openDB(t)
			res, err := load(t, db, ingest.Options{Transform: transforms.OTLPLogs}, filepath.Join(o2p, f))
			if err == nil {
				n := int64(-1)
				if tableExists(t, db, "otel_logs") {
					n = rowCount(t, db, "otel_logs")
				}
				t.Fatalf("loading traces with transform otlp-logs succeeded: records %d, otel_logs rows %d (-1: no table)", res.Records, n)
			}
			t.Logf("error: %v", err)
			if tableExists(t, db, "otel_logs") {
				t.Errorf("otel_logs exists after the failed load")
			}
		})
	}
	t.Run("unknown transform", func(t *testing.T) {
		db := openDB(t)
		if _, err := load(t, db, ingest.Options{Transform: "otlp-spans"}, filepath.Join(o2p, "trace.json")); err == nil {
			t.Error("unknown transform name accepted")
		}
	})
}

func TestEmptyInputs(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, data, transform string
	}{
		{"empty.jsonl", "", ""},
		{"blank.jsonl", "\n \n\t\n", ""},
		{"empty-object.json", "{}", ""},
		{"empty-object-nl.jsonl", "{}\n{}\n", ""},
		{"empty-object-traces.json", "{}", transforms.OTLPTraces},
		{"empty-resource-spans.json", `{"resourceSpans": []}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openDB(t)
			p := writeFile(t, dir, tc.name, []byte(tc.data))
			res, err := load(t, db, ingest.Options{Transform: tc.transform}, p)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if res.Records != 0 || res.Errors != 0 {
				t.Errorf("Records %d Errors %d, want 0 0", res.Records, res.Errors)
			}
			for _, tb := range userTables(t, db) {
				if n := rowCount(t, db, tb); n != 0 {
					t.Errorf("table %s has %d rows", tb, n)
				}
			}
		})
	}
}

// JSON that is not an object is an error with transform auto; objects that
// are not OTLP requests go to the none transform (TestAutoSendsOtherJSONToNone).
func TestNotAnObjectIsAnError(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, data string }{
		{"array.jsonl", `[{"resourceSpans": []}]` + "\n"},
		{"scalar-after-good.jsonl", traceLine(nil, span{"ok", nil}) + "\n" + `"push"` + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openDB(t)
			p := writeFile(t, dir, tc.name, []byte(tc.data))
			_, err := load(t, db, ingest.Options{}, p)
			if err == nil {
				t.Fatal("Load of JSON that is not an object succeeded")
			}
			if !strings.Contains(err.Error(), p+":") || !strings.Contains(err.Error(), "not a JSON object") {
				t.Errorf("error %q does not name the file and line", err)
			}
			if tableExists(t, db, "otel_traces") {
				t.Error("otel_traces exists after the failed load")
			}
		})
	}
}

// ---------------------------------------------------------------------------
// 5. compression and concatenated documents

func TestCompressedInputs(t *testing.T) {
	dir := t.TempDir()
	gz := func(b []byte) []byte {
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		w.Write(b)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	zst := func(b []byte) []byte {
		w, err := zstd.NewWriter(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		return w.EncodeAll(b, nil)
	}
	jsonl := readFile(t, filepath.Join(o2p, "traces.jsonl"))
	pb := readFile(t, filepath.Join(o2p, "traces.pb"))
	db := openDB(t)
	mustLoad(t, db, ingest.Options{Table: "plain"}, filepath.Join(o2p, "traces.jsonl"))
	for _, tc := range []struct {
		table, file string
		data        []byte
	}{
		{"gz", "traces.jsonl.gz", gz(jsonl)},
		{"zst", "traces.jsonl.zst", zst(jsonl)},
		{"gz_noext", "traces-gz", gz(jsonl)},
		{"zst_noext", "traces-zst", zst(jsonl)},
		{"pb_gz", "traces.pb.gz", gz(pb)},
		{"pb_zst", "traces.pb.zst", zst(pb)},
	} {
		t.Run(tc.file, func(t *testing.T) {
			p := writeFile(t, dir, tc.file, tc.data)
			res := mustLoad(t, db, ingest.Options{Table: tc.table}, p)
			if s := stats(t, res, tc.table); s.Rows != 19 {
				t.Errorf("%d rows, want 19", s.Rows)
			}
			compareTables(t, db, "plain", tc.table)
		})
	}
}

// Input that cannot be read (a vanished file, a truncated compressed
// stream) fails the load, naming the input; nothing is committed.
func TestUnreadableInputs(t *testing.T) {
	dir := t.TempDir()
	jsonl := readFile(t, filepath.Join(o2p, "traces.jsonl"))
	var gzbuf bytes.Buffer
	w := gzip.NewWriter(&gzbuf)
	w.Write(jsonl)
	w.Close()
	truncGz := writeFile(t, dir, "trunc.jsonl.gz", gzbuf.Bytes()[:gzbuf.Len()/2])
	zw, _ := zstd.NewWriter(nil)
	zst := zw.EncodeAll(jsonl, nil)
	zw.Close()
	truncZst := writeFile(t, dir, "trunc.jsonl.zst", zst[:len(zst)/2])
	good := filepath.Join(o2p, "trace.json")
	goodFi, _ := os.Stat(good)
	for _, tc := range []struct {
		name string
		in   []ingest.Input
		want string
	}{
		{"vanished file", []ingest.Input{{Name: good, Size: goodFi.Size()}, {Name: filepath.Join(dir, "gone.jsonl"), Size: 10}}, "gone.jsonl"},
		{"truncated gzip", []ingest.Input{{Name: good, Size: goodFi.Size()}, {Name: truncGz, Size: 1}}, "trunc.jsonl.gz"},
		{"truncated zstd", []ingest.Input{{Name: good, Size: goodFi.Size()}, {Name: truncZst, Size: 1}}, "trunc.jsonl.zst"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openDB(t)
			// MaxErrors only excuses bad records, not a damaged input
			res, err := db.Load(ctxFor(t), tc.in, ingest.Options{MaxErrors: 100})
			if err == nil {
				t.Fatalf("load succeeded: otel_traces rows %d (2 from trace.json; the damaged file holds 19), Errors %d %q",
					rowCount(t, db, "otel_traces"), res.Errors, res.ErrorSamples)
			}
			t.Logf("error: %v", err)
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name %s", err, tc.want)
			}
			if tableExists(t, db, "otel_traces") {
				t.Errorf("otel_traces exists after the failed load (%d rows)", rowCount(t, db, "otel_traces"))
			}
		})
	}
}

// A compressed NDJSON stream cut off right after a line end is still a
// damaged input: the load must fail instead of committing the lines before
// the cut. (Flushing the compressor after 10 lines makes the cut fall on a
// line boundary, so no line is malformed.)
func TestTruncatedCompressedStreamAtLineBoundary(t *testing.T) {
	dir := t.TempDir()
	lines := bytes.SplitAfter(readFile(t, filepath.Join(o2p, "traces.jsonl")), []byte("\n"))
	head, tail := bytes.Join(lines[:10], nil), bytes.Join(lines[10:], nil)

	var gzbuf bytes.Buffer
	gw := gzip.NewWriter(&gzbuf)
	gw.Write(head)
	gw.Flush()
	cutGz := gzbuf.Len()
	gw.Write(tail)
	gw.Close()

	var zbuf bytes.Buffer
	zw, err := zstd.NewWriter(&zbuf)
	if err != nil {
		t.Fatal(err)
	}
	zw.Write(head)
	zw.Flush()
	cutZst := zbuf.Len()
	zw.Write(tail)
	zw.Close()

	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"cut.jsonl.gz", gzbuf.Bytes()[:cutGz]},
		{"cut.jsonl.zst", zbuf.Bytes()[:cutZst]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, dir, tc.name, tc.data)
			db := openDB(t)
			res, err := load(t, db, ingest.Options{}, p)
			if err == nil {
				t.Fatalf("load of a truncated stream succeeded: Records %d, Errors %d, otel_traces rows %d (the file holds 19)",
					res.Records, res.Errors, rowCount(t, db, "otel_traces"))
			}
			t.Logf("error: %v", err)
			if tableExists(t, db, "otel_traces") {
				t.Errorf("otel_traces exists after the failed load")
			}
		})
	}
}

func TestConcatenatedPrettyRequests(t *testing.T) {
	dir := t.TempDir()
	a := readFile(t, filepath.Join(o2p, "trace.json"))                          // 2 spans
	b := readFile(t, filepath.Join(fixtures, "otel-proto-examples-trace.json")) // 1 span
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"newline.json", bytes.Join([][]byte{a, b}, []byte("\n"))},
		{"adjacent.json", append(append(bytes.TrimSpace(a), bytes.TrimSpace(b)...), '\n')},
		{"three.json", bytes.Join([][]byte{b, a, b}, []byte("\n\n"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := 3
			if tc.name == "three.json" {
				want = 4
			}
			db := openDB(t)
			p := writeFile(t, dir, tc.name, tc.data)
			res := mustLoad(t, db, ingest.Options{}, p)
			if got := rowCount(t, db, "otel_traces"); got != int64(want) || res.Records != int64(want) {
				t.Errorf("rows %d, Records %d, want %d", got, res.Records, want)
			}
			if n := queryInt(t, db, "SELECT count(*) FROM otel_traces WHERE trace_id = '5b8efff798038103d269b633813fc60c'"); n != int64(want-2) {
				t.Errorf("%d rows of the example span, want %d", n, want-2)
			}
			if n := queryInt(t, db, `SELECT count(*) FROM otel_traces WHERE "resource.service.name" = 'frontend-proxy'`); n != 2 {
				t.Errorf("%d rows of trace.json's service, want 2", n)
			}
		})
	}
}

// A bad document after a good pretty-printed one is reported at a line of
// the bad document, and nothing is loaded.
func TestConcatenatedPrettyRequestsBadSecond(t *testing.T) {
	dir := t.TempDir()
	a := bytes.TrimSpace(readFile(t, filepath.Join(o2p, "trace.json")))
	first := bytes.Count(a, []byte("\n")) + 1 // lines of the first document
	for _, tc := range []struct{ name, second string }{
		{"truncated.json", "{\n  \"resourceSpans\": [\n    {\"scopeSpans\": [\n"},
		{"array.json", "[\n  {\"resourceSpans\": []}\n]\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, dir, tc.name, append(append(a, '\n'), tc.second...))
			last := first + strings.Count(tc.second, "\n")
			db := openDB(t)
			_, err := load(t, db, ingest.Options{}, p)
			var re *ingest.RecordError
			if !errors.As(err, &re) {
				t.Fatalf("err = %v, want a *RecordError", err)
			}
			t.Logf("error: %v", err)
			if re.Input != p || re.Line <= first || re.Line > last+1 {
				t.Errorf("error at %s:%d, want a line of the second document (%d..%d)", re.Input, re.Line, first+1, last)
			}
			if tableExists(t, db, "otel_traces") {
				t.Error("otel_traces exists after the failed load")
			}
		})
	}
}

// ---------------------------------------------------------------------------
// 6. loading the same file twice

func TestReingest(t *testing.T) {
	for _, f := range []string{"traces.jsonl", "logs.pb", "metrics_mixed.json"} {
		t.Run(f, func(t *testing.T) {
			db := openDB(t)
			p := filepath.Join(o2p, f)
			table, n := countFile(t, p)
			r1 := mustLoad(t, db, ingest.Options{}, p)
			s1 := stats(t, r1, table)
			if !s1.Created || s1.ColumnsAdded == 0 || s1.Rows != int64(n) {
				t.Errorf("first load: %+v", *s1)
			}
			cols := tableColumns(t, db, table)
			r2 := mustLoad(t, db, ingest.Options{}, p)
			s2 := stats(t, r2, table)
			if s2.Created || s2.ColumnsAdded != 0 || s2.ColumnsWidened != 0 || s2.Rows != int64(n) {
				t.Errorf("second load: %+v, want created false, 0 columns added/widened, %d rows", *s2, n)
			}
			if got := rowCount(t, db, table); got != 2*int64(n) {
				t.Errorf("%s has %d rows, want %d", table, got, 2*n)
			}
			if got := tableColumns(t, db, table); strings.Join(got, ",") != strings.Join(cols, ",") {
				t.Errorf("columns changed on re-ingest:\n%v\n%v", cols, got)
			}
			// every row appears exactly twice
			_, rows := dumpTable(t, db, table)
			for i := 0; i+1 < len(rows); i += 2 {
				if rows[i] != rows[i+1] {
					t.Errorf("sorted row %d has no twin:\n%.300s\n%.300s", i, rows[i], rows[i+1])
					break
				}
			}
		})
	}
}

// ---------------------------------------------------------------------------
// more input shapes

// Lines longer than the reader's 4 MB chunks, and line numbers after many
// chunks, are handled.
func TestLongLinesAndLineNumbers(t *testing.T) {
	dir := t.TempDir()
	big := strings.Repeat("0123456789abcdef", 5<<20/16) // 5 MB
	small := func(name string) string { return traceLine(nil, span{name, nil}) }
	lines := []string{small("a"), traceLine(nil, span{"big", []attr{{"blob", big}}}), small("c"), `{"resourceSpans": [`, small("e")}
	p := ndjson(t, dir, "long.jsonl", lines...)

	db := openDB(t)
	_, err := load(t, db, ingest.Options{}, p)
	if err == nil || !strings.Contains(err.Error(), p+":4") {
		t.Errorf("error %v, want one naming %s:4", err, p)
	}
	res := mustLoad(t, db, ingest.Options{MaxErrors: 1}, p)
	if res.Records != 4 || res.Errors != 1 {
		t.Errorf("Records %d Errors %d, want 4 1", res.Records, res.Errors)
	}
	if n := queryInt(t, db, "SELECT length(blob) FROM otel_traces WHERE name = 'big'"); n != int64(len(big)) {
		t.Errorf("big value has %d bytes, want %d", n, len(big))
	}

	// ~9 MB of small lines: the bad line's number survives chunking
	var many []string
	for i := 0; i < 40000; i++ {
		many = append(many, small(fmt.Sprintf("m%05d", i)))
	}
	many[38000] = `{"resourceSpans": "not an array"}`
	p2 := ndjson(t, dir, "many.jsonl", many...)
	if fi, _ := os.Stat(p2); fi.Size() < 8<<20 {
		t.Fatalf("generated file is only %d bytes", fi.Size())
	}
	db2 := openDB(t)
	_, err = load(t, db2, ingest.Options{}, p2)
	if err == nil || !strings.Contains(err.Error(), p2+":38001") {
		t.Errorf("error %v, want one naming %s:38001", err, p2)
	}
	res = mustLoad(t, db2, ingest.Options{MaxErrors: 1}, p2)
	if res.Records != 39999 || rowCount(t, db2, "otel_traces") != 39999 {
		t.Errorf("Records %d, rows %d, want 39999", res.Records, rowCount(t, db2, "otel_traces"))
	}
}

// CRLF line ends, no final newline and blank lines change nothing.
func TestLineEndings(t *testing.T) {
	dir := t.TempDir()
	src := readFile(t, filepath.Join(o2p, "traces.jsonl"))
	db := openDB(t)
	mustLoad(t, db, ingest.Options{Table: "plain"}, filepath.Join(o2p, "traces.jsonl"))
	for _, tc := range []struct {
		table string
		data  []byte
	}{
		{"crlf", bytes.ReplaceAll(src, []byte("\n"), []byte("\r\n"))},
		{"no_final_newline", bytes.TrimRight(src, "\n")},
		{"blank_lines", bytes.ReplaceAll(src, []byte("\n"), []byte("\n\n  \n"))},
	} {
		t.Run(tc.table, func(t *testing.T) {
			p := writeFile(t, dir, tc.table+".jsonl", tc.data)
			mustLoad(t, db, ingest.Options{Table: tc.table}, p)
			compareTables(t, db, "plain", tc.table)
		})
	}
}

// A directory loads every file under it; each signal goes to its table.
func TestLoadDirectory(t *testing.T) {
	want := map[string]int{}
	for _, p := range fixtureFiles(t) {
		tb, n := countFile(t, p)
		want[tb] += n
	}
	db := openDB(t)
	res := mustLoad(t, db, ingest.Options{}, fixtures)
	var total int
	for tb, n := range want {
		total += n
		if got := rowCount(t, db, tb); got != int64(n) {
			t.Errorf("%s has %d rows, want %d", tb, got, n)
		}
		if s := stats(t, res, tb); s.Rows != int64(n) {
			t.Errorf("stats of %s: %d rows, want %d", tb, s.Rows, n)
		}
	}
	if res.Records != int64(total) {
		t.Errorf("Records %d, want %d", res.Records, total)
	}
}

// One load that writes two tables commits both or neither.
func TestMultiTableLoad(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t)
	badLogs := writeFile(t, dir, "bad-logs.jsonl", []byte(`{"resourceLogs": [{"scopeLogs": [{"logRecords": [{"body": {"stringValue": "ok"}}]}]}]}`+"\n"+`{"resourceLogs": [`+"\n"))
	_, err := load(t, db, ingest.Options{}, filepath.Join(o2p, "traces.jsonl"), filepath.Join(o2p, "metrics_sum.pb"), badLogs)
	if err == nil {
		t.Fatal("load with a bad logs file succeeded")
	}
	if got := userTables(t, db); len(got) != 0 {
		t.Errorf("tables after a failed multi-table load: %v", got)
	}
	mixed := writeFile(t, dir, "mixed.jsonl", []byte(traceLine(nil, span{"t", nil})+"\n"+
		`{"resourceLogs": [{"scopeLogs": [{"logRecords": [{"body": {"stringValue": "ok"}}]}]}]}`+"\n"))
	res := mustLoad(t, db, ingest.Options{}, filepath.Join(o2p, "traces.jsonl"), filepath.Join(o2p, "metrics_sum.pb"), filepath.Join(o2p, "logs.pb"), mixed)
	for tb, n := range map[string]int64{"otel_traces": 20, "otel_metrics": 4, "otel_logs": 82} {
		if s := stats(t, res, tb); s.Rows != n || !s.Created {
			t.Errorf("%s: %+v, want %d rows, created", tb, *s, n)
		}
		if got := rowCount(t, db, tb); got != n {
			t.Errorf("%s has %d rows, want %d", tb, got, n)
		}
	}
}

// A table keeps its transform; a hostile table name is just a name.
func TestTableOption(t *testing.T) {
	db := openDB(t)
	mustLoad(t, db, ingest.Options{Table: "t"}, filepath.Join(o2p, "logs.pb"))
	if _, err := load(t, db, ingest.Options{Table: "t"}, filepath.Join(o2p, "trace.json")); err == nil {
		t.Error("traces loaded into a logs table")
	}
	if n := rowCount(t, db, "t"); n != 81 {
		t.Errorf("t has %d rows, want 81", n)
	}
	// a pinned transform with Options.Table
	mustLoad(t, db, ingest.Options{Table: "t", Transform: transforms.OTLPLogs}, filepath.Join(o2p, "logs.jsonl"))
	if n := rowCount(t, db, "t"); n != 162 {
		t.Errorf("t has %d rows, want 162", n)
	}

	name := `x"; DROP TABLE t; --`
	res := mustLoad(t, db, ingest.Options{Table: name}, filepath.Join(o2p, "trace.json"))
	if s := stats(t, res, name); s.Rows != 2 {
		t.Errorf("stats: %+v", *s)
	}
	if n := rowCount(t, db, name); n != 2 {
		t.Errorf("%q has %d rows", name, n)
	}
	if n := rowCount(t, db, "t"); n != 162 {
		t.Errorf("t has %d rows after loading into %q", n, name)
	}
	if n := queryInt(t, db, "SELECT count(*) FROM shredduck_columns WHERE table_name = ?", name); n == 0 {
		t.Errorf("no catalog rows for table %q", name)
	}
}
