package queryhttp

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/shred"
	"github.com/shredduck/shredduck/transforms"
)

const queryTraces = "../../testdata/otlp/otlp2parquet/traces.jsonl"

// queryDB opens a database in a temporary directory, loads the traces test
// data and locks it down, as the server does.
func queryDB(t *testing.T) *ingest.DB {
	t.Helper()
	db, err := ingest.Open(filepath.Join(t.TempDir(), "q.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.ColumnDensity = 0 // every key a column: these tests read some straight from DuckDB
	in, err := ingest.StatInputs([]string{queryTraces})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Load(context.Background(), in, ingest.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SQL.Exec("CREATE SEQUENCE query_test_seq"); err != nil {
		t.Fatal(err)
	}
	if err := LockDown(db); err != nil {
		t.Fatal(err)
	}
	return db
}

type queryResponse struct {
	status int
	header http.Header
	body   string
}

func postQuery(t *testing.T, h http.Handler, target, contentType, body string, header ...string) queryResponse {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, target, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return queryResponse{w.Code, w.Header(), w.Body.String()}
}

// rawResult is a JSON result with its cells as raw JSON.
type rawResult struct {
	Columns   []string            `json:"columns"`
	Types     []string            `json:"types"`
	Rows      [][]json.RawMessage `json:"rows"`
	Truncated bool                `json:"truncated"`
}

func decodeResult(t *testing.T, r queryResponse) rawResult {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	var res rawResult
	if err := json.Unmarshal([]byte(r.body), &res); err != nil {
		t.Fatalf("%v: %s", err, r.body)
	}
	return res
}

func TestQueryLockDownKeepsIngest(t *testing.T) {
	db, err := ingest.Open(filepath.Join(t.TempDir(), "l.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.ColumnDensity = 0 // the new key below gets a column at once (ALTER TABLE)
	// The server's own SETs come first.
	if _, err := db.SQL.Exec("SET memory_limit = '1GB'"); err != nil {
		t.Fatal(err)
	}
	if err := LockDown(db); err != nil {
		t.Fatal(err)
	}
	if err := LockDown(db); err != nil {
		t.Fatalf("second LockDown: %v", err)
	}
	ctx := context.Background()

	// The settings are database-wide: every pooled connection has them.
	conns := make([]interface{ Close() error }, 3)
	for i := range conns {
		c, err := db.SQL.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c
		var locked, external bool
		if err := c.QueryRowContext(ctx, `SELECT current_setting('lock_configuration'), current_setting('enable_external_access')`).Scan(&locked, &external); err != nil {
			t.Fatal(err)
		}
		if !locked || external {
			t.Errorf("connection %d: lock_configuration %v, enable_external_access %v", i, locked, external)
		}
		if _, err := c.ExecContext(ctx, "SET memory_limit = '2GB'"); err == nil || !strings.Contains(err.Error(), "locked") {
			t.Errorf("connection %d: SET after LockDown: %v", i, err)
		}
	}
	for _, c := range conns {
		c.Close()
	}

	// A file load: decoding in Go, Arrow scan into DuckDB.
	in, err := ingest.StatInputs([]string{queryTraces})
	if err != nil {
		t.Fatal(err)
	}
	res, err := db.Load(ctx, in, ingest.Options{})
	if err != nil {
		t.Fatalf("Load after LockDown: %v", err)
	}
	if res.Records == 0 {
		t.Fatal("Load after LockDown loaded nothing")
	}
	var loaded int64
	if err := db.SQL.QueryRow("SELECT count(*) FROM otel_traces").Scan(&loaded); err != nil {
		t.Fatal(err)
	}

	// A group commit whose batch adds a column (ALTER TABLE).
	c := db.NewCommitter(ingest.CommitOptions{})
	req := `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"svc"}}]},"scopeSpans":[{"spans":[` +
		`{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","name":"after-lockdown","startTimeUnixNano":"1","endTimeUnixNano":"2",` +
		`"attributes":[{"key":"query.test.new","value":{"intValue":"7"}}]}]}]}]}`
	b := shred.NewBatch(transforms.Traces.Core())
	if _, err := transforms.Traces.AppendJSON(b, []byte(req)); err != nil {
		t.Fatal(err)
	}
	if err := c.Submit(ctx, "otel_traces", transforms.Traces, b, int64(len(req))); err != nil {
		t.Fatalf("Submit after LockDown: %v", err)
	}
	c.Close()
	var n, added int64
	if err := db.SQL.QueryRow(`SELECT count(*), count("query.test.new") FROM otel_traces`).Scan(&n, &added); err != nil {
		t.Fatal(err)
	}
	if n != loaded+1 || added != 1 {
		t.Errorf("after Submit: %d rows (%d with the new column), want %d (1)", n, added, loaded+1)
	}

	// A load that sets memory_limit cannot run any more.
	if _, err := db.Load(ctx, in, ingest.Options{MemoryLimit: "300MB"}); err == nil || !strings.Contains(err.Error(), "locked") {
		t.Errorf("Load with MemoryLimit after LockDown: %v, want a locked-configuration error", err)
	}
	if _, err := db.SQL.Exec("CHECKPOINT"); err != nil {
		t.Errorf("CHECKPOINT after LockDown: %v", err)
	}
}

func TestQueryNeedsLockDown(t *testing.T) {
	db, err := ingest.Open(filepath.Join(t.TempDir(), "n.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	h := NewHandler(db, Config{})
	r := postQuery(t, h, "/v1/query", "text/plain", "SELECT * FROM read_text('/etc/hostname')")
	if r.status != http.StatusInternalServerError || !strings.Contains(r.body, "LockDown") {
		t.Fatalf("before LockDown: %d %s", r.status, r.body)
	}
	if err := LockDown(db); err != nil {
		t.Fatal(err)
	}
	if r := postQuery(t, h, "/v1/query", "text/plain", "SELECT 1"); r.status != http.StatusOK {
		t.Errorf("after LockDown: %d %s", r.status, r.body)
	}
}

func TestQuerySelect(t *testing.T) {
	db := queryDB(t)
	h := NewHandler(db, Config{})
	var want int64
	if err := db.SQL.QueryRow(`SELECT count(*) FROM otel_traces WHERE "resource.service.name" = 'product-catalog'`).Scan(&want); err != nil {
		t.Fatal(err)
	}
	if want == 0 {
		t.Fatal("test data has no product-catalog spans")
	}
	q := `SELECT "resource.service.name" AS service, count(*) AS spans
	      FROM otel_traces GROUP BY ALL ORDER BY spans DESC, service`
	for _, r := range []queryResponse{
		postQuery(t, h, "/v1/query", "text/plain", q),
		postQuery(t, h, "/v1/query", "application/sql", q+";"),
		postQuery(t, h, "/v1/query", "", q+"\n-- trailing comment"),
		postQuery(t, h, "/v1/query", "application/json; charset=utf-8", `{"sql": `+jsonString(q)+`}`),
	} {
		res := decodeResult(t, r)
		if strings.Join(res.Columns, ",") != "service,spans" || strings.Join(res.Types, ",") != "VARCHAR,BIGINT" {
			t.Errorf("columns %v %v", res.Columns, res.Types)
		}
		if res.Truncated || len(res.Rows) == 0 {
			t.Fatalf("rows %d, truncated %v", len(res.Rows), res.Truncated)
		}
		found := false
		for _, row := range res.Rows {
			if string(row[0]) == `"product-catalog"` {
				found = string(row[1]) == jsonString(want)
			}
		}
		if !found {
			t.Errorf("product-catalog with %d spans missing from %s", want, r.body)
		}
		if r.header.Get("Content-Type") != "application/json" {
			t.Errorf("Content-Type %q", r.header.Get("Content-Type"))
		}
	}

	// SHOW, DESCRIBE and SUMMARIZE are SELECTs.
	for _, q := range []string{"SHOW TABLES", "DESCRIBE otel_traces", "SUMMARIZE SELECT duration_ns FROM otel_traces", "FROM otel_traces SELECT name LIMIT 1"} {
		if r := postQuery(t, h, "/v1/query", "text/plain", q); r.status != http.StatusOK {
			t.Errorf("%s: %d %s", q, r.status, r.body)
		}
	}
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestQueryCSV(t *testing.T) {
	db := queryDB(t)
	h := NewHandler(db, Config{})
	q := `SELECT 1 AS n, 'a,b' AS s, NULL AS z, [1, 2] AS l, TIMESTAMP '2024-01-02 03:04:05.5' AS ts UNION ALL SELECT 2, 'x"y', 'q', [], NULL ORDER BY n`
	want := [][]string{{"n", "s", "z", "l", "ts"}, {"1", "a,b", "", "[1,2]", "2024-01-02T03:04:05.5Z"}, {"2", `x"y`, "q", "[]", ""}}
	for _, r := range []queryResponse{
		postQuery(t, h, "/v1/query", "text/plain", q, "Accept", "text/csv"),
		postQuery(t, h, "/v1/query", "text/plain", q, "Accept", "text/html, text/csv;q=0.9"),
		postQuery(t, h, "/v1/query?format=csv", "text/plain", q),
	} {
		if r.status != http.StatusOK {
			t.Fatalf("%d %s", r.status, r.body)
		}
		if !strings.HasPrefix(r.header.Get("Content-Type"), "text/csv") {
			t.Errorf("Content-Type %q", r.header.Get("Content-Type"))
		}
		got, err := csv.NewReader(strings.NewReader(r.body)).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if jsonString(got) != jsonString(want) {
			t.Errorf("CSV\n%v\nwant\n%v", got, want)
		}
		if r.header.Get("X-Shredduck-Truncated") != "false" {
			t.Errorf("X-Shredduck-Truncated %q", r.header.Get("X-Shredduck-Truncated"))
		}
	}
	// ?format=json wins over Accept.
	if r := postQuery(t, h, "/v1/query?format=json", "text/plain", q, "Accept", "text/csv"); !strings.HasPrefix(r.body, "{") {
		t.Errorf("format=json: %s", r.body)
	}
	if r := postQuery(t, h, "/v1/query?format=xml", "text/plain", q); r.status != http.StatusBadRequest {
		t.Errorf("format=xml: %d", r.status)
	}
}

func TestQueryRowLimit(t *testing.T) {
	db := queryDB(t)
	h := NewHandler(db, Config{MaxRows: 5})
	res := decodeResult(t, postQuery(t, h, "/v1/query", "text/plain", "SELECT i FROM range(1000) t(i) ORDER BY i DESC"))
	if !res.Truncated || len(res.Rows) != 5 {
		t.Fatalf("truncated %v, %d rows", res.Truncated, len(res.Rows))
	}
	for k, row := range res.Rows {
		if want := jsonString(999 - k); string(row[0]) != want {
			t.Errorf("row %d = %s, want %s (the limit must keep the query's order)", k, row[0], want)
		}
	}
	res = decodeResult(t, postQuery(t, h, "/v1/query", "text/plain", "SELECT * FROM range(5)"))
	if res.Truncated || len(res.Rows) != 5 {
		t.Errorf("5 rows: truncated %v, %d rows", res.Truncated, len(res.Rows))
	}
	r := postQuery(t, h, "/v1/query", "text/plain", "SELECT * FROM range(5)", "Accept", "text/csv")
	if r.header.Get("X-Shredduck-Truncated") != "false" || r.header.Get("X-Shredduck-Rows") != "5" {
		t.Errorf("CSV headers %v", r.header)
	}
	// The limit is part of the query: DuckDB does not produce the rest.
	start := time.Now()
	res = decodeResult(t, postQuery(t, h, "/v1/query", "text/plain", "SELECT * FROM range(10000000000000)"))
	if !res.Truncated || len(res.Rows) != 5 || time.Since(start) > 5*time.Second {
		t.Errorf("huge range: truncated %v, %d rows, %v", res.Truncated, len(res.Rows), time.Since(start))
	}
	// Duplicate column names stay as the query wrote them.
	res = decodeResult(t, postQuery(t, h, "/v1/query", "text/plain", "SELECT 1 AS a, 2 AS a"))
	if strings.Join(res.Columns, ",") != "a,a" {
		t.Errorf("columns %v", res.Columns)
	}
}

func TestQueryTimeout(t *testing.T) {
	db := queryDB(t)
	h := NewHandler(db, Config{Timeout: 300 * time.Millisecond, MaxConcurrent: 2})
	for i := 0; i < 3; i++ {
		start := time.Now()
		r := postQuery(t, h, "/v1/query", "text/plain", "SELECT count(*) FROM range(10000000000)")
		if r.status != http.StatusGatewayTimeout || !strings.Contains(r.body, "timed out") {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("timeout answered after %v", d)
		}
	}
	// DuckDB really stopped: the slots are free again and the connections
	// work.
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := postQuery(t, h, "/v1/query", "text/plain", "SELECT 42 AS x")
		if r.status == http.StatusOK {
			if res := decodeResult(t, r); string(res.Rows[0][0]) != "42" {
				t.Errorf("after timeouts: %s", r.body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after timeouts: %d %s", r.status, r.body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var n int
	if err := db.SQL.QueryRow("SELECT count(*) FROM otel_traces").Scan(&n); err != nil {
		t.Errorf("database after timeouts: %v", err)
	}
}

func TestQueryAuth(t *testing.T) {
	db := queryDB(t)
	h := NewHandler(db, Config{Token: "s3cret"})
	for _, auth := range []string{"", "s3cret", "Bearer", "Bearer wrong", "Bearer s3cret2", "Basic czNjcmV0", "Bearer s3cre"} {
		r := postQuery(t, h, "/v1/query", "text/plain", "SELECT 1", "Authorization", auth)
		if r.status != http.StatusUnauthorized || r.header.Get("WWW-Authenticate") == "" {
			t.Errorf("Authorization %q: %d %v", auth, r.status, r.header)
		}
		if !strings.Contains(r.body, `"error"`) {
			t.Errorf("Authorization %q: body %s", auth, r.body)
		}
	}
	for _, auth := range []string{"Bearer s3cret", "bearer s3cret"} {
		if r := postQuery(t, h, "/v1/query", "text/plain", "SELECT 1", "Authorization", auth); r.status != http.StatusOK {
			t.Errorf("Authorization %q: %d %s", auth, r.status, r.body)
		}
	}
	// No token configured: open.
	if r := postQuery(t, NewHandler(db, Config{}), "/v1/query", "text/plain", "SELECT 1"); r.status != http.StatusOK {
		t.Errorf("no token: %d", r.status)
	}
}

func TestQueryRequestErrors(t *testing.T) {
	db := queryDB(t)
	h := NewHandler(db, Config{Token: "t"})
	auth := []string{"Authorization", "Bearer t"}
	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
		req := httptest.NewRequest(m, "/v1/query?sql=SELECT+1", nil)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != http.MethodPost {
			t.Errorf("%s: %d %v", m, w.Code, w.Header())
		}
	}
	cases := []struct {
		ct, body string
		status   int
	}{
		{"text/plain", "", http.StatusBadRequest},
		{"text/plain", "  \n", http.StatusBadRequest},
		{"text/plain", ";", http.StatusBadRequest},
		{"text/plain", "-- nothing", http.StatusBadRequest},
		{"application/json", `{"query": "SELECT 1"}`, http.StatusBadRequest},
		{"application/json", `{"sql": 1}`, http.StatusBadRequest},
		{"application/json", `SELECT 1`, http.StatusBadRequest},
		{"application/octet-stream", "SELECT 1", http.StatusUnsupportedMediaType},
		{"text/plain", "SELECT 1 -- " + strings.Repeat("x", maxQueryBytes), http.StatusRequestEntityTooLarge},
		{"text/plain", "SELEC 1", http.StatusBadRequest},
		{"text/plain", "SELECT no_such_column FROM otel_traces", http.StatusBadRequest},
		{"text/plain", "SELECT $1", http.StatusBadRequest},
		{"text/plain", "PRAGMA table_info('otel_traces')", http.StatusBadRequest},
	}
	for _, c := range cases {
		r := postQuery(t, h, "/v1/query", c.ct, c.body, auth...)
		if r.status != c.status {
			t.Errorf("%s %.60q: %d, want %d (%s)", c.ct, c.body, r.status, c.status, r.body)
			continue
		}
		var e struct{ Error string }
		if err := json.Unmarshal([]byte(r.body), &e); err != nil || e.Error == "" {
			t.Errorf("%.60q: error body %s", c.body, r.body)
		}
	}
	if r := postQuery(t, h, "/v1/query", "text/plain", "PRAGMA table_info('otel_traces')", auth...); !strings.Contains(r.body, "pragma_") {
		t.Errorf("PRAGMA: %s", r.body)
	}
	if r := postQuery(t, h, "/v1/query", "text/plain", "SELECT * FROM pragma_table_info('otel_traces')", auth...); r.status != http.StatusOK {
		t.Errorf("pragma_table_info(): %d %s", r.status, r.body)
	}
}

// TestQueryEscapes tries to write, reach the host or change settings
// through the query endpoint; each must fail with a 4xx and change nothing.
func TestQueryEscapes(t *testing.T) {
	db := queryDB(t)
	dir := filepath.Dir(db.Path)
	h := NewHandler(db, Config{})
	before := dbState(t, db)
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.csv")
	if err := os.WriteFile(secret, []byte("a,b\n1,2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(outside, "out")
	cases := []struct{ sql, why string }{
		{"INSERT INTO otel_traces (name) VALUES ('x')", "got INSERT"},
		{"UPDATE otel_traces SET name = 'x'", "got UPDATE"},
		{"DELETE FROM otel_traces", "got DELETE"},
		{"CREATE TABLE x (a INT)", "got CREATE"},
		{"CREATE TEMP TABLE x AS SELECT 1", "got CREATE"},
		{"CREATE VIEW v AS SELECT 1", "got CREATE"},
		{"CREATE MACRO m() AS 1", "got CREATE"},
		{"DROP TABLE otel_traces", "got DROP"},
		{"ALTER TABLE otel_traces ADD COLUMN x INT", "got ALTER"},
		{"TRUNCATE otel_traces", "got TRUNCATE"},
		{"COPY otel_traces TO '" + out + ".csv'", ""},
		{"COPY (SELECT 1) TO '" + out + ".parquet' (FORMAT parquet)", ""},
		{"COPY otel_traces FROM '" + secret + "'", ""},
		{"EXPORT DATABASE '" + out + "'", ""},
		{"ATTACH ':memory:' AS m", "got ATTACH"},
		{"ATTACH '" + out + ".duckdb' AS m", ""},
		{"DETACH q", "got DETACH"},
		{"INSTALL httpfs", "got INSTALL"},
		{"LOAD httpfs", "got LOAD"},
		{"LOAD '" + secret + "'", "got LOAD"},
		{"SET enable_external_access = true", "got SET"},
		{"SET lock_configuration = false", "got SET"},
		{"RESET lock_configuration", "got RESET"},
		{"SET threads = 1", "got SET"},
		{"SET VARIABLE x = 1", "got SET"},
		{"USE memory", "got USE"},
		{"PRAGMA threads = 1", "got PRAGMA"},
		{"PRAGMA enable_profiling", "got PRAGMA"},
		{"PRAGMA force_checkpoint", "got PRAGMA"},
		{"CHECKPOINT", "got CHECKPOINT"},
		{"FORCE CHECKPOINT", "got FORCE"},
		{"CALL checkpoint()", "got CALL"},
		{"CALL enable_logging()", "got CALL"},
		{"VACUUM", "got VACUUM"},
		{"ANALYZE", "got ANALYZE"},
		{"BEGIN TRANSACTION", "got BEGIN"},
		{"COMMIT", "got COMMIT"},
		{"PREPARE p AS SELECT 1", "got PREPARE"},
		{"EXPLAIN ANALYZE INSERT INTO otel_traces (name) VALUES ('x')", "got EXPLAIN"},
		{"SELECT * FROM read_csv('/etc/passwd')", "disabled by configuration"},
		{"SELECT * FROM read_csv_auto('" + secret + "')", "disabled by configuration"},
		{"SELECT * FROM '" + secret + "'", "disabled by configuration"},
		{"SELECT * FROM read_text('/etc/passwd')", "disabled by configuration"},
		{"SELECT * FROM read_blob('" + secret + "')", "disabled by configuration"},
		{"SELECT * FROM read_json('/etc/hostname')", "disabled by configuration"},
		{"SELECT * FROM read_parquet('" + secret + "')", "disabled by configuration"},
		{"SELECT * FROM sniff_csv('/etc/passwd')", "disabled by configuration"},
		{"SELECT * FROM glob('/*')", "disabled by configuration"},
		{"SELECT * FROM glob('" + dir + "/*')", "disabled by configuration"},
		{"SELECT * FROM read_csv('https://example.com/x.csv')", "disabled by configuration"},
		{"SELECT * FROM duckdb_extensions()", "disabled by configuration"},
		{"WITH x AS (INSERT INTO otel_traces (name) VALUES ('x') RETURNING *) SELECT * FROM x", ""},
		{"WITH x AS (DELETE FROM otel_traces RETURNING *) SELECT count(*) FROM x", ""},
		{"SELECT 1; DROP TABLE otel_traces", "only one statement"},
		{"DROP TABLE otel_traces; SELECT 1", "only one statement"},
		{"SELECT 1; SELECT 2", "only one statement"},
		{"SELECT 1) ; DROP TABLE otel_traces; SELECT (1", ""},
		{"SELECT * FROM otel_traces\n) LIMIT 1; DROP TABLE otel_traces; SELECT * FROM (SELECT 1", ""},
		{"SELECT nextval('query_test_seq')", "read-only"},
		{"SELECT * FROM checkpoint()", "checkpoint() is not allowed"},
		{"SELECT * FROM force_checkpoint()", "force_checkpoint() is not allowed"},
		{"SELECT * FROM enable_logging(storage = 'file', storage_path = '" + out + "')", "enable_logging() is not allowed"},
		{"SELECT * FROM query('SELECT * FROM enable_logging()')", "enable_logging() is not allowed"},
		{"SELECT count(*) FROM otel_traces WHERE EXISTS (SELECT * FROM truncate_duckdb_logs())", "truncate_duckdb_logs() is not allowed"},
		{"SELECT * FROM enable_profiling()", "enable_profiling() is not allowed"},
		{"SELECT * FROM disable_optimizer()", ""},
		{"SELECT * FROM json_execute_serialized_sql(json_serialize_sql('SELECT 1'))", "json_execute_serialized_sql() is not allowed"},
		{"SELECT * FROM arrow_scan(1, 2, 3)", ""},
		{"SELECT * FROM query_table('enable_logging')", ""},
		{"SELECT * FROM query_table(['checkpoint'])", ""},
	}
	for _, c := range cases {
		r := postQuery(t, h, "/v1/query", "text/plain", c.sql)
		t.Logf("%d %.70s => %.150s", r.status, c.sql, r.body)
		if r.status < 400 || r.status >= 500 {
			t.Errorf("%s: %d %s", c.sql, r.status, r.body)
			continue
		}
		var e struct{ Error string }
		if err := json.Unmarshal([]byte(r.body), &e); err != nil || e.Error == "" {
			t.Errorf("%s: body %s", c.sql, r.body)
		} else if !strings.Contains(e.Error, c.why) {
			t.Errorf("%s: error %q, want it to say %q", c.sql, e.Error, c.why)
		}
	}
	if after := dbState(t, db); after != before {
		t.Errorf("database changed:\n%s\nwas\n%s", after, before)
	}
	entries, _ := os.ReadDir(outside)
	if len(entries) != 1 {
		t.Errorf("files written: %v", entries)
	}
	// Still serving (enable_logging to a file would have broken every query).
	if r := postQuery(t, h, "/v1/query", "text/plain", "SELECT count(*) FROM otel_traces"); r.status != http.StatusOK {
		t.Errorf("after escapes: %d %s", r.status, r.body)
	}
	if _, err := db.SQL.Exec("CHECKPOINT"); err != nil {
		t.Errorf("CHECKPOINT after escapes: %v", err)
	}
}

// dbState summarizes what the escapes must not change.
func dbState(t *testing.T, db *ingest.DB) string {
	t.Helper()
	var s string
	err := db.SQL.QueryRow(`SELECT
		(SELECT string_agg(database_name || ':' || coalesce(path, ''), ',' ORDER BY database_name) FROM duckdb_databases()) || ' | ' ||
		(SELECT string_agg(table_name || ':' || column_count || ':' || estimated_size, ',' ORDER BY table_name) FROM duckdb_tables()) || ' | ' ||
		(SELECT count(*) FROM otel_traces) || ' | ' ||
		(SELECT string_agg(name || '=' || value, ',' ORDER BY name) FROM duckdb_settings() WHERE name IN ('enable_external_access', 'lock_configuration', 'threads', 'enable_profiling', 'memory_limit')) || ' | ' ||
		(SELECT count(*) FROM duckdb_views() WHERE NOT internal) || ' | ' ||
		(SELECT count(*) FROM duckdb_functions() WHERE function_type = 'macro' AND NOT internal)`).Scan(&s)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestQueryValues(t *testing.T) {
	db := queryDB(t)
	h := NewHandler(db, Config{})
	cols := []struct{ expr, typ, want string }{
		{"true", "BOOLEAN", `true`},
		{"NULL::INTEGER", "INTEGER", `null`},
		{"42::TINYINT", "TINYINT", `42`},
		{"9007199254740991::BIGINT", "BIGINT", `9007199254740991`},
		{"9007199254740993::BIGINT", "BIGINT", `"9007199254740993"`},
		{"'-9223372036854775808'::BIGINT", "BIGINT", `"-9223372036854775808"`},
		{"18446744073709551615::UBIGINT", "UBIGINT", `"18446744073709551615"`},
		{"12::HUGEINT", "HUGEINT", `12`},
		{"170141183460469231731687303715884105727::HUGEINT", "HUGEINT", `"170141183460469231731687303715884105727"`},
		{"340282366920938463463374607431768211455::UHUGEINT", "UHUGEINT", `"340282366920938463463374607431768211455"`},
		{"1.50::DECIMAL(10,2)", "DECIMAL(10,2)", `1.5`},
		{"-0.001::DECIMAL(18,3)", "DECIMAL(18,3)", `-0.001`},
		{"12345678901234567.891::DECIMAL(38,3)", "DECIMAL(38,3)", `"12345678901234567.891"`},
		{"0.1::DOUBLE", "DOUBLE", `0.1`},
		{"0.1::FLOAT", "FLOAT", `0.1`},
		{"'nan'::DOUBLE", "DOUBLE", `"NaN"`},
		{"'inf'::DOUBLE", "DOUBLE", `"Infinity"`},
		{"'-inf'::FLOAT", "FLOAT", `"-Infinity"`},
		{"'a\"<b>\n🦆'", "VARCHAR", `"a\"<b>\n🦆"`},
		{"'\\x00\\xFF'::BLOB", "BLOB", `"AP8="`},
		{"'4ac7a9e9-607c-4c8a-84f3-843f0191e3fd'::UUID", "UUID", `"4ac7a9e9-607c-4c8a-84f3-843f0191e3fd"`},
		{"DATE '2024-02-29'", "DATE", `"2024-02-29"`},
		{"TIME '12:34:56.789'", "TIME", `"12:34:56.789"`},
		{"TIMETZ '12:34:56+02:00'", "TIMETZ", `"12:34:56+02:00"`},
		{"TIMESTAMP '2024-01-02 03:04:05.123456'", "TIMESTAMP", `"2024-01-02T03:04:05.123456Z"`},
		{"TIMESTAMP_NS '2024-01-02 03:04:05.123456789'", "TIMESTAMP_NS", `"2024-01-02T03:04:05.123456789Z"`},
		{"TIMESTAMP_S '2024-01-02 03:04:05'", "TIMESTAMP_S", `"2024-01-02T03:04:05Z"`},
		{"TIMESTAMPTZ '2024-01-02 03:04:05.5+01:00'", "TIMESTAMPTZ", `"2024-01-02T02:04:05.5Z"`},
		{"INTERVAL 1 MONTH + INTERVAL 2 DAY + INTERVAL 3 SECOND", "INTERVAL", `{"months":1,"days":2,"micros":3000000}`},
		{"[1, NULL, 3]", "INTEGER[]", `[1,null,3]`},
		{"[[TIMESTAMP '2024-01-02 03:04:05']]", "TIMESTAMP[][]", `[["2024-01-02T03:04:05Z"]]`},
		{"[9007199254740993]::BIGINT[]", "BIGINT[]", `["9007199254740993"]`},
		{"['4ac7a9e9-607c-4c8a-84f3-843f0191e3fd'::UUID]", "UUID[]", `["4ac7a9e9-607c-4c8a-84f3-843f0191e3fd"]`},
		{"[1, 2]::INTEGER[2]", "INTEGER[2]", `[1,2]`},
		{"{'z': 1, 'a': 'x', 'm': [DATE '2024-01-01']}", `STRUCT("z" INTEGER, "a" VARCHAR, "m" DATE[])`, `{"z":1,"a":"x","m":["2024-01-01"]}`},
		{"MAP {'b': 1, 'a': 2}", "MAP(VARCHAR, INTEGER)", `{"b":1,"a":2}`},
		{"MAP {2: 'x', 1: 'y'}", "MAP(INTEGER, VARCHAR)", `{"2":"x","1":"y"}`},
		{"'{\"k\": 12345678901234567890, \"a\": [1.50]}'::JSON", "JSON", `{"k":12345678901234567890,"a":[1.50]}`},
		{"'\"s\"'::JSON", "JSON", `"s"`},
		{"union_value(k := 2)", `UNION("k" INTEGER)`, `2`},
		{"'b'::ENUM('a', 'b')", "ENUM", `"b"`},
		{"'101'::BIT", "BIT", `"101"`},
		{"TIME_NS '12:00:00.123456789'", "TIME_NS", `"12:00:00.123456789"`},
		{"{'a': 1, 'b': [true]}::VARIANT", "VARIANT", `{"a":1,"b":[true]}`},
	}
	var exprs []string
	for i, c := range cols {
		exprs = append(exprs, c.expr+" AS c"+jsonString(i))
	}
	r := postQuery(t, h, "/v1/query", "text/plain", "SELECT "+strings.Join(exprs, ", "))
	res := decodeResult(t, r)
	if len(res.Rows) != 1 {
		t.Fatalf("%d rows", len(res.Rows))
	}
	for i, c := range cols {
		var got bytes.Buffer
		json.Compact(&got, res.Rows[0][i])
		if got.String() != c.want {
			t.Errorf("%s: %s, want %s", c.expr, got.String(), c.want)
		}
		if res.Types[i] != c.typ {
			t.Errorf("%s: type %s, want %s", c.expr, res.Types[i], c.typ)
		}
	}
	if strings.Contains(r.body, `\u003c`) {
		t.Errorf("HTML-escaped output: %s", r.body)
	}
}

func TestQueryConcurrent(t *testing.T) {
	db := queryDB(t)
	h := NewHandler(db, Config{MaxConcurrent: 2})
	var wg sync.WaitGroup
	errs := make(chan string, 16)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := postQuery(t, h, "/v1/query", "text/plain", "SELECT count(*) FROM otel_traces, range(20000)")
			if r.status != http.StatusOK {
				errs <- r.body
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// Queries and group commits share the database.
func TestQueryWhileIngesting(t *testing.T) {
	db := queryDB(t)
	h := NewHandler(db, Config{})
	c := db.NewCommitter(ingest.CommitOptions{})
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 10; j++ {
				req := `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"concurrent"}}]},"scopeSpans":[{"spans":[` +
					`{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","name":"s","startTimeUnixNano":"1","endTimeUnixNano":"2",` +
					`"attributes":[{"key":"writer.` + string(rune('a'+i)) + `","value":{"intValue":"1"}}]}]}]}]}`
				b := shred.NewBatch(transforms.Traces.Core())
				if _, err := transforms.Traces.AppendJSON(b, []byte(req)); err != nil {
					errs <- err
					return
				}
				if err := c.Submit(ctx, "otel_traces", transforms.Traces, b, int64(len(req))); err != nil {
					errs <- err
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	queries := 0
	for running := true; running; queries++ {
		select {
		case <-done:
			running = false
		default:
		}
		r := postQuery(t, h, "/v1/query", "text/plain", `SELECT count(*) FROM otel_traces WHERE "resource.service.name" = 'concurrent'`)
		if r.status != http.StatusOK {
			t.Fatalf("query while ingesting: %d %s", r.status, r.body)
		}
	}
	c.Close()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	res := decodeResult(t, postQuery(t, h, "/v1/query", "text/plain", `SELECT count(*) FROM otel_traces WHERE "resource.service.name" = 'concurrent'`))
	if string(res.Rows[0][0]) != "40" {
		t.Errorf("%s concurrent spans after %d queries, want 40", res.Rows[0][0], queries)
	}
}
