package serve

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/shredduck/shredduck/ingest"
)

// otlpOK sends one OTLP/HTTP protobuf request from testdata and wants 200.
func (ts *testServer) otlpOK(path, file string) {
	ts.t.Helper()
	r := ts.post(path, "application/x-protobuf", "", readTestdata(ts.t, file))
	if r.status != http.StatusOK {
		ts.t.Fatalf("%s after the NDJSON request: %d %s", path, r.status, r.body)
	}
}

// restart closes ts and starts a server on the same file, as a restarted
// process would; it fails the test if the server does not start.
func (ts *testServer) restart(cfg Config) *testServer {
	ts.t.Helper()
	path := ts.db.Path
	ts.close()
	return startServerAt(ts.t, path, cfg)
}

// tableTransforms returns the catalog's tables that hold rows: table
// name -> transform (the server creates its routing tables empty at
// start; a routing table of the wrong transform could not take a row).
func tableTransforms(t *testing.T, db *ingest.DB) map[string]string {
	t.Helper()
	rows, err := db.SQL.Query("SELECT table_name, transform FROM shredduck_tables")
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]string)
	for rows.Next() {
		var name, tr string
		if err := rows.Scan(&name, &tr); err != nil {
			t.Fatal(err)
		}
		out[name] = tr
	}
	rows.Close()
	for name := range out {
		if countRows(t, db, name) == 0 {
			delete(out, name)
		}
	}
	return out
}

// NDJSON of one signal posted to another signal's routing table, before
// that signal's first request, made the table the wrong kind: every OTLP
// request of the signal then failed with 500 and the next start failed.
func TestNDJSONCannotTakeRoutingTable(t *testing.T) {
	f := func(cfg Config, table, file string) {
		t.Helper()
		ts := startServerAt(t, filepath.Join(t.TempDir(), "r.duckdb"), cfg)
		r := ts.post("/v1/ndjson/"+table, "application/x-ndjson", "", readTestdata(t, file))
		st := wantStatus(t, r, http.StatusBadRequest, formatJSON, codeInvalidArgument)
		if !strings.Contains(st.Message, "reserved") {
			t.Errorf("%s: message %q does not say the name is reserved", table, st.Message)
		}
		if got := tableTransforms(t, ts.db); len(got) != 0 {
			t.Errorf("%s: catalog %v after a refused request", table, got)
		}
		ts.otlpOK("/v1/logs", "logs.pb")
		ts.otlpOK("/v1/traces", "traces.pb")
		ts.otlpOK("/v1/metrics", "metrics_sum.pb")
		ts = ts.restart(cfg)
		ts.otlpOK("/v1/logs", "logs.pb")
	}
	f(Config{}, "otel_logs", "traces.jsonl")
	f(Config{}, "OTEL_LOGS", "traces.jsonl")
	f(Config{}, "otel_traces", "logs.jsonl")
	f(Config{}, "Otel_Metrics", "traces.jsonl")
	f(Config{}, "otel_traces?transform=otlp-logs", "logs.jsonl")
	// Configured routing tables, in any case; the default names stay
	// reserved for their signal too, for `shredduck ingest`.
	f(Config{LogsTable: "app_logs"}, "App_Logs", "traces.jsonl")
	f(Config{TracesTable: "spans"}, "SPANS", "logs.jsonl")
	f(Config{TracesTable: "spans"}, "otel_traces", "logs.jsonl")
}

// A routing table's own signal may come as NDJSON, spelled in any case:
// it lands in the routing table. "Otel_Traces" used to be created as a
// second name for the table that OTLP traces then could not create
// (500 "already exists", across restarts).
func TestNDJSONRoutingTableAnyCase(t *testing.T) {
	traces := readTestdata(t, "traces.jsonl") // 19 spans
	ts := startServer(t, Config{})
	for i, table := range []string{"Otel_Traces", "OTEL_TRACES", "otel_traces"} {
		r := ts.post("/v1/ndjson/"+table, "application/x-ndjson", "", traces)
		if r.status != http.StatusOK || !strings.Contains(string(r.body), `"table":"otel_traces"`) {
			t.Fatalf("%s: %d %s", table, r.status, r.body)
		}
		ts.otlpOK("/v1/traces", "traces.pb")
		if i == 0 {
			ts = ts.restart(Config{})
		}
	}
	if got := tableTransforms(t, ts.db); len(got) != 1 || got["otel_traces"] != "otlp-traces" {
		t.Errorf("catalog %v, want only otel_traces", got)
	}
	one := ts.count("otel_traces") / 3
	if one == 0 || ts.count("otel_traces") != 3*one {
		t.Errorf("otel_traces has %d rows", ts.count("otel_traces"))
	}
}

// Other tables compare case-insensitively too: the name a table was
// created with is the one that is written, even when two requests that
// create it race with different spellings.
func TestNDJSONTableNameCase(t *testing.T) {
	traces := readTestdata(t, "traces.jsonl")
	ts := startServer(t, Config{})
	for _, table := range []string{"My_Spans", "MY_SPANS", "my_spans"} {
		if r := ts.post("/v1/ndjson/"+table, "", "", traces); r.status != http.StatusOK || !strings.Contains(string(r.body), `"table":"My_Spans"`) {
			t.Fatalf("%s: %d %s", table, r.status, r.body)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan string, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			table := []string{"Raced", "RACED", "raced", "rAcEd"}[i%4]
			if r := ts.post("/v1/ndjson/"+table, "", "", traces); r.status != http.StatusOK {
				errs <- fmt.Sprintf("%s: %d %s", table, r.status, r.body)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	got := tableTransforms(t, ts.db)
	if len(got) != 2 || got["My_Spans"] == "" {
		t.Errorf("catalog %v, want My_Spans and one spelling of raced", got)
	}
	ts.restart(Config{})
}

// Names of DuckDB's system views and schemas would shadow them in every
// query; shredduck_ names are the catalog's.
func TestNDJSONSystemNames(t *testing.T) {
	ts := startServer(t, Config{})
	body := []byte(`{"a":1}` + "\n")
	for _, table := range []string{
		"sqlite_master", "SQLITE_MASTER", "sqlite_schema", "pg_class", "Pg_Tables", "duckdb_tables", "DuckDB_Columns",
		"pragma_database_list", "information_schema", "pg_catalog", "main", "temp", "system",
		"shredduck_tables", "Shredduck_Columns", "SHREDDUCK_VIRTUAL_COLUMNS", "shredduck_anything",
	} {
		r := ts.post("/v1/ndjson/"+table, "", "", body)
		st := wantStatus(t, r, http.StatusBadRequest, formatJSON, codeInvalidArgument)
		if !strings.Contains(st.Message, "reserved") {
			t.Errorf("%s: message %q", table, st.Message)
		}
	}
	if got := tableTransforms(t, ts.db); len(got) != 0 {
		t.Errorf("catalog %v", got)
	}
	// Every internal view DuckDB resolves without a schema is covered,
	// whatever DuckDB version this runs with.
	rows, err := ts.db.SQL.Query("SELECT view_name FROM duckdb_views() WHERE internal AND schema_name IN ('main', 'pg_catalog')")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		n++
		if err := checkTableName(name); err == nil {
			t.Errorf("system view %s is not reserved", name)
		}
	}
	if n < 10 {
		t.Errorf("only %d system views", n)
	}
}

// A routing table that already holds another signal's data (a database
// from before the names were reserved, or a changed --logs-table) does not
// stop the server: that signal is answered 503 with the reason, and the
// others work.
func TestRoutingTableHeldByOtherTransform(t *testing.T) {
	ts := startServer(t, Config{TracesTable: "mixed"})
	ts.otlpOK("/v1/traces", "traces.pb")
	ts = ts.restart(Config{LogsTable: "mixed", TracesTable: "spans"})
	r := ts.post("/v1/logs", "application/x-protobuf", "", readTestdata(t, "logs.pb"))
	st := wantStatus(t, r, http.StatusServiceUnavailable, formatProto, codeUnavailable)
	if !strings.Contains(st.Message, "mixed") || !strings.Contains(st.Message, "otlp-traces") || r.header.Get("Retry-After") == "" {
		t.Errorf("message %q, Retry-After %q", st.Message, r.header.Get("Retry-After"))
	}
	ts.otlpOK("/v1/traces", "traces.pb")
	ts.otlpOK("/v1/metrics", "metrics_sum.pb")
	if n := ts.count("spans"); n == 0 {
		t.Error("no spans")
	}
}

// A routing table may not be another signal's default table: `shredduck
// ingest` writes that signal there.
func TestRoutingTableConfig(t *testing.T) {
	newServer := func(cfg Config) error {
		t.Helper()
		db, err := ingest.Open(filepath.Join(t.TempDir(), "c.duckdb"))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		s, err := New(db, cfg)
		if err == nil {
			s.Close()
		}
		return err
	}
	for _, cfg := range []Config{
		{LogsTable: "otel_traces"}, {TracesTable: "OTEL_METRICS"}, {MetricsTable: "shredduck_x"}, {LogsTable: "pg_class"},
		{TracesTable: "a", LogsTable: "A"},
	} {
		if err := newServer(cfg); err == nil {
			t.Errorf("%+v: New succeeded", cfg)
		}
	}
	if err := newServer(Config{TracesTable: "Otel_Traces", LogsTable: "spans"}); err != nil {
		t.Error(err)
	}
}
