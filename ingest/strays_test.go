package ingest_test

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/internal/duckdb15test"
)

// The case of issue 30: 20,000 spans with an integer http.status_code and
// one with "notanint". The stray does not retype the column: it stays
// BIGINT, so that the README's WHERE "http.status_code" >= 500 works in
// plain DuckDB (1.5, the readers' release, too); the string is in
// attributes_str under the key; column and map together hold all 20,001
// values; the catalog and the load count the stray; shredduck's readers
// show it as "http.status_code~stray". Whether the string comes in a load
// of its own, after the table has its column, or amid the integers, in the
// first batch.
func TestStrayKeepsColumnType(t *testing.T) {
	const spans, per = 20_000, 1_000
	status := func(i int) int { return []int{200, 200, 404, 500, 503}[i%5] }
	request := func(from, to int, stray int) string {
		var ss []string
		for i := from; i < to; i++ {
			v := fmt.Sprintf(`{"intValue": "%d"}`, status(i))
			if i == stray {
				v = `{"stringValue": "notanint"}`
			}
			ss = append(ss, fmt.Sprintf(`{"traceId": "%032x", "spanId": "%016x", "name": "s%d", "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000000000000500", "attributes": [{"key": "http.status_code", "value": %s}]}`, i+1, i+1, i, v))
		}
		return `{"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": [` + strings.Join(ss, ", ") + `]}]}]}`
	}
	for _, c := range []struct {
		name  string
		stray int // the span that sends "notanint"
	}{
		{"in a later load", spans},
		{"amid the integers", 7_777},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			db, err := ingest.Open(filepath.Join(dir, "strays.duckdb"))
			if err != nil {
				t.Fatal(err)
			}
			var lines []string
			for from := 0; from < spans; from += per {
				lines = append(lines, request(from, from+per, c.stray))
			}
			var strays int64
			res := mustLoad(t, db, ingest.Options{}, ndjson(t, dir, "ints.jsonl", lines...))
			strays += stats(t, res, "otel_traces").Strays
			want5xx, total := int64(0), spans
			for i := range spans {
				if status(i) >= 500 && i != c.stray {
					want5xx++
				}
			}
			if c.stray == spans {
				res = mustLoad(t, db, ingest.Options{}, ndjson(t, dir, "stray.jsonl", request(spans, spans+1, spans)))
				strays += stats(t, res, "otel_traces").Strays
				total++
			}
			if strays != 1 {
				t.Errorf("the loads counted %d strays, want 1", strays)
			}
			if got := columnType(t, db, "otel_traces", "http.status_code"); got != "BIGINT" {
				t.Errorf("http.status_code is %s, want BIGINT", got)
			}
			if c := catalogEntry(t, db, "otel_traces", "record", "http.status_code"); c.Type != "BIGINT" || c.Strays != 1 || c.WidenedFrom.Valid {
				t.Errorf("catalog: %+v, want BIGINT, 1 stray, never widened", c)
			}
			if got := fmt.Sprint(strayValues(t, db, "otel_traces", "http.status_code", "name")); !strings.Contains(got, "~notanint") {
				t.Errorf("the stray does not read as http.status_code~stray: %.200s", got)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			// Plain DuckDB, as a user's reader: no shredduck view.
			queries := []struct{ q, want string }{
				{`SELECT count(*) FROM otel_traces WHERE "http.status_code" >= 500`, fmt.Sprint(want5xx)},
				{`SELECT typeof(any_value("http.status_code")) FROM otel_traces`, "BIGINT"},
				{`SELECT name FROM otel_traces WHERE attributes_str['http.status_code'] = 'notanint'`, fmt.Sprint("s", c.stray)},
				{`SELECT count("http.status_code") + count(attributes_str['http.status_code']) FROM otel_traces`, fmt.Sprint(total)},
				{`SELECT count(*) FROM otel_traces WHERE "http.status_code" IS NULL AND attributes_str['http.status_code'] IS NULL`, "0"},
				{`SELECT strays FROM shredduck_columns WHERE key = 'http.status_code'`, "1"},
			}
			for _, q := range queries {
				if got := plainQuery(t, db.Path, q.q); got != q.want {
					t.Errorf("plain DuckDB: %s = %s, want %s", q.q, got, q.want)
				}
				if got, err := duckdb15test.Query(t, db.Path, q.q); err != nil || got != q.want {
					t.Errorf("DuckDB 1.5: %s = %q (%v), want %s", q.q, got, err, q.want)
				}
			}
		})
	}
}

// plainQuery runs q on the file at path with this module's DuckDB, opened
// as any program would: no shredduck view, no catalog lookup.
func plainQuery(t *testing.T, path, q string) string {
	t.Helper()
	db, err := sql.Open("duckdb", path+"?access_mode=read_only")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var out sql.NullString
	if err := db.QueryRow("SELECT CAST((" + q + ") AS VARCHAR)").Scan(&out); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out.String
}
