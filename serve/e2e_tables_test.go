//go:build e2e

package serve

import (
	"bytes"
	"io"
	"net/http"
	"path/filepath"
	"testing"
)

// e2ePost posts body to the child and returns the status and answer.
func (c *e2eChild) post(path, contentType string, body []byte) (int, string) {
	c.t.Helper()
	resp, err := http.Post(c.url+path, contentType, bytes.NewReader(body))
	if err != nil {
		c.t.Fatalf("POST %s: %v\n%s", path, err, c.log())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestE2ETablesRestart: what a client sends to /v1/ndjson cannot make an
// OTLP table the wrong kind, nor keep `shredduck serve` from starting
// again. Before the names were reserved, traces posted to
// /v1/ndjson/otel_logs made every later start exit with "logs table: table
// otel_logs holds otlp-traces data", and /v1/ndjson/Otel_Traces made
// every trace request fail with 500, across restarts.
func TestE2ETablesRestart(t *testing.T) {
	bin := e2eBuildShredduck(t)
	db := filepath.Join(t.TempDir(), "tables.duckdb")
	traces := readTestdata(t, "traces.jsonl")
	otlp := func(c *e2eChild) {
		t.Helper()
		for _, r := range []struct{ path, file string }{{"/v1/logs", "logs.pb"}, {"/v1/traces", "traces.pb"}, {"/v1/metrics", "metrics_sum.pb"}} {
			if st, body := c.post(r.path, "application/x-protobuf", readTestdata(t, r.file)); st != http.StatusOK {
				t.Fatalf("%s: %d %s", r.path, st, body)
			}
		}
	}
	child := e2eStartChild(t, bin, db)
	for _, table := range []string{"otel_logs", "OTEL_METRICS", "sqlite_master", "shredduck_tables"} {
		if st, body := child.post("/v1/ndjson/"+table, "application/x-ndjson", traces); st != http.StatusBadRequest {
			t.Errorf("traces to /v1/ndjson/%s: %d %s, want 400", table, st, body)
		}
	}
	if st, body := child.post("/v1/ndjson/Otel_Traces", "application/x-ndjson", traces); st != http.StatusOK {
		t.Errorf("traces to /v1/ndjson/Otel_Traces: %d %s", st, body)
	}
	// A clean stop: after a SIGKILL the WAL of the schema changes above
	// cannot be replayed by DuckDB 1.5.6 (issue #14, item 1).
	child.stop()
	child = e2eStartChild(t, bin, db) // fails the test if the child exits
	otlp(child)
	child.stop()
	child = e2eStartChild(t, bin, db)
	otlp(child)
	if st, body := child.post("/v1/ndjson/OTEL_TRACES", "application/x-ndjson", traces); st != http.StatusOK {
		t.Errorf("traces to /v1/ndjson/OTEL_TRACES: %d %s", st, body)
	}
	child.stop()
}
