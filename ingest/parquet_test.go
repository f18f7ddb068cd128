package ingest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/internal/parquettest"
	"github.com/shredduck/shredduck/shred"
)

// columnTypes returns "name type" per column of a relation, in order.
func columnTypes(t *testing.T, db *ingest.DB, rel string) []string {
	t.Helper()
	rows, err := db.SQL.Query("SELECT column_name, column_type FROM (DESCRIBE " + rel + ")")
	if err != nil {
		t.Fatalf("DESCRIBE %s: %v", rel, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n, ty string
		if err := rows.Scan(&n, &ty); err != nil {
			t.Fatal(err)
		}
		out = append(out, n+" "+ty)
	}
	return out
}

// sameRows fails unless relations a and b hold the same multiset of rows.
func sameRows(t *testing.T, db *ingest.DB, a, b string) {
	t.Helper()
	for _, q := range []string{
		fmt.Sprintf("SELECT count(*) FROM (SELECT * FROM %s EXCEPT ALL SELECT * FROM %s)", a, b),
		fmt.Sprintf("SELECT count(*) FROM (SELECT * FROM %s EXCEPT ALL SELECT * FROM %s)", b, a),
	} {
		if n := queryInt(t, db, q); n != 0 {
			t.Errorf("%d rows differ: %s", n, q)
		}
	}
}

// Export writes each OTLP table as Hive-partitioned Parquet that reads
// back with the same rows and types (ENUMs as VARCHAR: Parquet has none),
// attribute and overflow columns included; a second run replaces its
// files; ImportParquet makes the same table in a fresh database, and
// adds to an existing one.
func TestExportImportParquet(t *testing.T) {
	db := openDB(t)
	// Spans and log records over five hours, and log records with no time.
	var lines []string
	base := int64(1_767_225_600_000_000_000) // 2026-01-01T00:00:00Z
	for h := range int64(5) {
		ts := base + h*3_600_000_000_000 + 59*60_000_000_000
		lines = append(lines, fmt.Sprintf(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"01020304050607%02x","name":"h","kind":2,"startTimeUnixNano":"%d","endTimeUnixNano":"%d","attributes":[{"key":"n","value":{"intValue":"%d"}}]}]}]}]}`, h, ts, ts+1000, h),
			fmt.Sprintf(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"timeUnixNano":"%d","body":{"stringValue":"at %d"}},{"observedTimeUnixNano":"%d","body":{"stringValue":"observed only"}},{"body":{"stringValue":"no time"}}]}]}]}`, ts, h, ts))
	}
	hours := filepath.Join(t.TempDir(), "hours.jsonl")
	if err := os.WriteFile(hours, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Few columns: the rest of the keys go to the typed overflow maps.
	mustLoad(t, db, ingest.Options{MaxColumns: 3}, filepath.Join(o2p, "traces.jsonl"), filepath.Join(o2p, "logs.jsonl"), filepath.Join(o2p, "metrics_mixed.jsonl"), hours)
	if n := queryInt(t, db, "SELECT count(*) FROM otel_traces WHERE attributes_str IS NOT NULL"); n == 0 {
		t.Fatal("fixture has no overflowed trace attributes")
	}
	dir := t.TempDir()
	files, err := db.Export(ctxFor(t), ingest.ExportOptions{Dir: dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 3+5+5+1 {
		t.Errorf("%d files, want one per table and hour and one for the logs with no time", len(files))
	}
	tables := []string{"otel_logs", "otel_metrics", "otel_traces"}
	perTable := map[string]int64{}
	for _, f := range files {
		if f.Replaced {
			t.Errorf("first export replaced %s", f.Path)
		}
		perTable[f.Table] += f.Rows
		rel, _ := filepath.Rel(dir, f.Path)
		parts := strings.Split(filepath.ToSlash(rel), "/")
		if len(parts) != 4 || !strings.HasPrefix(parts[1], "date=") || !strings.HasPrefix(parts[2], "hour=") {
			t.Errorf("file %s is not TABLE/date=/hour=/file", rel)
		}
	}
	for _, table := range tables {
		if want := queryInt(t, db, "SELECT count(*) FROM "+table); perTable[table] != want {
			t.Errorf("%s: exported %d rows, table has %d", table, perTable[table], want)
		}
		scan := fmt.Sprintf("(SELECT * EXCLUDE (date, hour) FROM read_parquet('%s/%s/**/*.parquet', hive_partitioning = true, union_by_name = true))", dir, table)
		sameRows(t, db, scan, table)
		got, want := columnTypes(t, db, scan), columnTypes(t, db, table)
		for i := range want {
			if strings.Contains(want[i], " ENUM(") {
				want[i] = strings.SplitN(want[i], " ", 2)[0] + " VARCHAR"
			}
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: Parquet columns\n%s\nwant\n%s", table, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	if n := queryInt(t, db, fmt.Sprintf("SELECT count(*) FROM read_parquet('%s/otel_traces/**/*.parquet') WHERE attributes_str IS NOT NULL", dir)); n == 0 {
		t.Error("the overflow map column is not in the Parquet files")
	}
	parquettest.AssertZstd(t, db.SQL, dir+"/*/**/*.parquet")
	// Again: the same files, replaced, no more rows.
	again, err := db.Export(ctxFor(t), ingest.ExportOptions{Dir: dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != len(files) {
		t.Errorf("second export wrote %d files, the first %d", len(again), len(files))
	}
	for _, f := range again {
		if !f.Replaced {
			t.Errorf("second export did not replace %s", f.Path)
		}
	}
	parquet, _ := filepath.Glob(filepath.Join(dir, "*", "*", "*", "*.parquet"))
	if len(parquet) != len(files) {
		t.Errorf("%d Parquet files after two runs, want %d", len(parquet), len(files))
	}

	// A time range takes whole hours: 01:30 to 03:10 is 01:00 to 04:00.
	ranged := t.TempDir()
	part, err := db.Export(ctxFor(t), ingest.ExportOptions{Dir: ranged, Tables: []string{"otel_traces"},
		Since: time.Unix(0, base+90*60_000_000_000), Until: time.Unix(0, base+190*60_000_000_000)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(part) != 3 || part[0].Hour.Hour() != 1 || part[2].Hour.Hour() != 3 {
		t.Errorf("--since 01:30 --until 03:10 exported %+v", part)
	}
	// Log records by their time, else their observed time.
	logs, err := db.Export(ctxFor(t), ingest.ExportOptions{Dir: ranged, Tables: []string{"otel_logs"},
		Since: time.Unix(0, base+60*60_000_000_000), Until: time.Unix(0, base+180*60_000_000_000)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(logs) != 2 || logs[0].Rows != 2 || logs[1].Rows != 2 {
		t.Errorf("logs of 01:00-03:00: %+v, want 2 files of 2 rows (one by its time, one by its observed time)", logs)
	}
	if _, err := db.Export(ctxFor(t), ingest.ExportOptions{Dir: ranged, Tables: []string{"nope"}}, nil); err == nil || !strings.Contains(err.Error(), "no table nope") {
		t.Errorf("unknown table: %v", err)
	}

	// Into a fresh database: the same tables.
	fresh, err := ingest.Open(filepath.Join(t.TempDir(), "fresh.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	res, err := fresh.ImportParquet(ctxFor(t), []string{dir}, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tables) != 3 {
		t.Fatalf("imported %+v", res.Tables)
	}
	for _, table := range tables {
		if got, want := strings.Join(columnTypes(t, fresh, table), "\n"), strings.Join(columnTypes(t, db, table), "\n"); got != want {
			t.Errorf("%s imported with columns\n%s\nwant\n%s", table, got, want)
		}
		scan := fmt.Sprintf("(SELECT * EXCLUDE (date, hour) FROM read_parquet('%s/%s/**/*.parquet', hive_partitioning = true, union_by_name = true))", dir, table)
		sameRows(t, fresh, scan, table)
		for _, q := range []string{"SELECT count(*) FROM shredduck_columns WHERE table_name = '" + table + "'", "SELECT count(*) FROM shredduck_tables WHERE table_name = '" + table + "'"} {
			if a, b := queryInt(t, fresh, q), queryInt(t, db, q); a != b {
				t.Errorf("%s: %d in the import, %d in the original", q, a, b)
			}
		}
	}

	// Into a table that exists with other columns: loaded with the rest
	// of its rows, the missing attribute columns added.
	other := openDB(t)
	mustLoad(t, other, ingest.Options{}, filepath.Join(o2p, "trace.json"))
	before := queryInt(t, other, "SELECT count(*) FROM otel_traces")
	if _, err := other.ImportParquet(ctxFor(t), []string{filepath.Join(dir, "otel_traces")}, "", 0); err != nil {
		t.Fatal(err)
	}
	if got, want := queryInt(t, other, "SELECT count(*) FROM otel_traces"), before+perTable["otel_traces"]; got != want {
		t.Errorf("existing table has %d rows after the import, want %d", got, want)
	}
	// A file that is not Parquet fails the whole import.
	bad := filepath.Join(dir, "otel_logs", "date=2000-01-01", "hour=00")
	os.MkdirAll(bad, 0o755)
	os.WriteFile(filepath.Join(bad, "x.parquet"), []byte("not parquet"), 0o644)
	if _, err := other.ImportParquet(ctxFor(t), []string{dir}, "", 0); err == nil {
		t.Error("import of a broken file succeeded")
	}
	if got := queryInt(t, other, "SELECT count(*) FROM otel_traces"); got != before+perTable["otel_traces"] {
		t.Errorf("a failed import changed otel_traces: %d rows", got)
	}

	// After rows of an hour are deleted (as retention does), a re-run
	// keeps that hour's file: it holds rows the table no longer has; an
	// hour with no rows left is not written at all.
	hour21 := time.Date(2025, 10, 17, 21, 0, 0, 0, time.UTC)
	if _, err := db.SQL.Exec(fmt.Sprintf("DELETE FROM otel_traces WHERE rowid IN (SELECT rowid FROM otel_traces WHERE start_time >= make_timestamp_ns(%d) LIMIT 1)", hour21.UnixNano())); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SQL.Exec(fmt.Sprintf("DELETE FROM otel_traces WHERE start_time >= make_timestamp_ns(%d) AND start_time < make_timestamp_ns(%d)", base, base+3_600_000_000_000)); err != nil {
		t.Fatal(err)
	}
	kept, err := db.Export(ctxFor(t), ingest.ExportOptions{Dir: dir, Tables: []string{"otel_traces"}, Since: hour21, Until: time.Unix(0, base+3_600_000_000_000)}, nil)
	if err != nil || len(kept) != 1 || !kept[0].Kept || kept[0].Rows != 19 {
		t.Errorf("re-export after deletes: %+v %v; want the 21:00 file kept with its 19 rows, nothing for 00:00", kept, err)
	}
	if n := queryInt(t, db, fmt.Sprintf("SELECT count(*) FROM read_parquet('%s/otel_traces/date=2026-01-01/hour=00/*.parquet')", dir)); n != 1 {
		t.Errorf("the 00:00 file has %d rows after its rows were deleted, want 1", n)
	}
}

// An hour exported before an attribute column existed (and before
// another was widened from BIGINT to DOUBLE) and an hour exported after
// read back together, by name, as the table: the same rows, the same
// column types.
func TestExportAcrossSchemaChange(t *testing.T) {
	db := openDB(t)
	// Every key gets a column.
	db.ColumnDensity = 0
	base := int64(1_767_225_600_000_000_000) // 2026-01-01T00:00:00Z
	span := func(h, i int64, attrs string) string {
		ts := base + h*3_600_000_000_000 + i*60_000_000_000
		return fmt.Sprintf(`{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"svc"}}]},"scopeSpans":[{"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405%02x%02x01","name":"op","kind":2,"startTimeUnixNano":"%d","endTimeUnixNano":"%d","attributes":[%s]}]}]}]}`,
			h, i, ts, ts+1000, attrs)
	}
	file := func(name string, lines []string) string {
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var before, after []string
	for i := range int64(5) {
		before = append(before, span(0, i, fmt.Sprintf(`{"key":"a","value":{"stringValue":"x%d"}},{"key":"num","value":{"intValue":"%d"}}`, i, i)))
		after = append(after, span(1, i, fmt.Sprintf(`{"key":"a","value":{"stringValue":"y%d"}},{"key":"num","value":{"doubleValue":%d.5}},{"key":"b","value":{"intValue":"%d"}}`, i, i, 10+i)))
	}
	dir := t.TempDir()
	hour := func(h int64) ingest.ExportOptions {
		return ingest.ExportOptions{Dir: dir, Tables: []string{"otel_traces"},
			Since: time.Unix(0, base+h*3_600_000_000_000), Until: time.Unix(0, base+(h+1)*3_600_000_000_000)}
	}
	mustLoad(t, db, ingest.Options{}, file("before.jsonl", before))
	if files, err := db.Export(ctxFor(t), hour(0), nil); err != nil || len(files) != 1 || files[0].Rows != 5 {
		t.Fatalf("export of hour 0: %+v %v", files, err)
	}
	mustLoad(t, db, ingest.Options{}, file("after.jsonl", after))
	if files, err := db.Export(ctxFor(t), hour(1), nil); err != nil || len(files) != 1 || files[0].Rows != 5 {
		t.Fatalf("export of hour 1: %+v %v", files, err)
	}
	types := map[string]string{}
	var cols []string
	for _, ct := range columnTypes(t, db, "otel_traces") {
		name, typ, _ := strings.Cut(ct, " ")
		if strings.HasPrefix(typ, "ENUM(") {
			typ = "VARCHAR" // Parquet has no ENUM
		}
		types[name] = typ
		cols = append(cols, shred.QuoteIdent(name))
	}
	if types["b"] != "BIGINT" || types["num"] != "DOUBLE" {
		t.Fatalf("the second load did not add b BIGINT and widen num to DOUBLE: %v", types)
	}
	if n := queryInt(t, db, fmt.Sprintf(`SELECT count(*) FROM parquet_schema('%s/otel_traces/date=2026-01-01/hour=00/data.parquet') WHERE name = 'b'`, dir)); n != 0 {
		t.Fatal("the hour exported before b existed has it")
	}
	// The table's columns in its order, from the files read by name.
	scan := fmt.Sprintf("(SELECT %s FROM read_parquet('%s/otel_traces/**/*.parquet', hive_partitioning = true, union_by_name = true))", strings.Join(cols, ", "), dir)
	sameRows(t, db, scan, "otel_traces")
	if n := queryInt(t, db, "SELECT count(*) FROM "+scan); n != 10 {
		t.Errorf("the two hours' files hold %d rows, want 10", n)
	}
	got := map[string]string{}
	for _, ct := range columnTypes(t, db, fmt.Sprintf("(SELECT * EXCLUDE (date, hour) FROM read_parquet('%s/otel_traces/**/*.parquet', hive_partitioning = true, union_by_name = true))", dir)) {
		name, typ, _ := strings.Cut(ct, " ")
		got[name] = typ
	}
	for name, typ := range types {
		if got[name] != typ {
			t.Errorf("column %s reads back as %q, the table has %s", name, got[name], typ)
		}
	}
	if len(got) != len(types) {
		t.Errorf("the files read back with %d columns, the table has %d", len(got), len(types))
	}
	if n := queryInt(t, db, "SELECT count(*) FROM "+scan+" WHERE b IS NULL AND a LIKE 'x%'"); n != 5 {
		t.Errorf("%d rows of the first hour read b as NULL, want 5", n)
	}
	parquettest.AssertZstd(t, db.SQL, dir+"/otel_traces/**/*.parquet")
}
