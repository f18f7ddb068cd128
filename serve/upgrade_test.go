package serve

import (
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/internal/duckdb15test"
)

// gunzipTo writes the gzipped file src to dst.
func gunzipTo(t *testing.T, src, dst string) {
	t.Helper()
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, zr); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// counts15 reads the three OTLP tables' row counts with DuckDB 1.5.
func counts15(t *testing.T, path string) string {
	t.Helper()
	return duckdb15test.MustQuery(t, path, "SELECT (SELECT count(*) FROM otel_traces), (SELECT count(*) FROM otel_logs), (SELECT count(*) FROM otel_metrics)")
}

// A database written by the DuckDB 1.5-based release (testdata/db,
// PROVENANCE.md: ingested and then served) is served in both ack modes and
// takes more data by serve and by a bulk load; DuckDB 1.5 still reads it
// afterwards, with every row.
func TestServeDuckDB15File(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.duckdb")
	gunzipTo(t, filepath.Join("..", "testdata", "db", "shredduck-7d0246c.duckdb.gz"), path)
	if got, want := counts15(t, path), "20\t82\t7"; got != want {
		t.Fatalf("the checked-in file reads %q with DuckDB 1.5, want %q", got, want)
	}
	spans := readTestdata(t, "traces.pb")
	traces := 20
	for _, ack := range []string{AckCommit, AckLog} {
		ts := startServerAt(t, path, Config{Ack: ack})
		wantOK(t, ts.post("/v1/traces", "application/x-protobuf", "", spans))
		traces += 19
		if n := ts.count("otel_traces"); n != traces {
			t.Errorf("--ack %s: %d spans, want %d", ack, n, traces)
		}
		ts.close()
	}
	db, err := ingest.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	in := []ingest.Input{{Name: filepath.Join(testdata, "logs.jsonl")}}
	if _, err := db.Load(t.Context(), in, ingest.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := counts15(t, path), strconv.Itoa(traces)+"\t163\t7"; got != want {
		t.Errorf("after serving and loading, DuckDB 1.5 reads %q, want %q", got, want)
	}
}

// A new file that the server writes (schema changes, checkpoints) is read
// by DuckDB 1.5 with every row: its storage format is 1.5's.
func TestNewFileReadByDuckDB15(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new.duckdb")
	ts := startServerAt(t, path, Config{})
	wantOK(t, ts.post("/v1/traces", "application/x-protobuf", "", readTestdata(t, "traces.pb")))
	wantOK(t, ts.post("/v1/logs", "application/x-protobuf", "", readTestdata(t, "logs.pb")))
	wantOK(t, ts.post("/v1/metrics", "application/x-protobuf", "", readTestdata(t, "metrics_mixed.pb")))
	ts.close()
	if got, want := counts15(t, path), "19\t81\t3"; got != want {
		t.Errorf("DuckDB 1.5 reads %q, want %q", got, want)
	}
}

func wantOK(t *testing.T, r response) {
	t.Helper()
	if r.status != 200 {
		t.Fatalf("status %d, want 200; body %q", r.status, r.body)
	}
}

// The check above can fail: DuckDB 1.5 refuses a file of 2.0's own format.
func TestDuckDB15RefusesFormat20(t *testing.T) {
	defer func(v string) { ingest.StorageVersion = v }(ingest.StorageVersion)
	ingest.StorageVersion = "v2.0.0"
	path := filepath.Join(t.TempDir(), "v2.duckdb")
	db, err := ingest.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := duckdb15test.Query(t, path, "SELECT 1"); err == nil || !strings.Contains(err.Error(), "version number") {
		t.Errorf("DuckDB 1.5 on a v2.0.0 file: %v, want a refusal naming the version", err)
	}
}
