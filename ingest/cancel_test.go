package ingest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/transforms"
)

// A retention run cancelled (the server stopping) while ExpireExported's
// turn runs either deletes the hour and reports its rows, or leaves them
// all: a COMMIT interrupted after DuckDB applied it reported an error
// for rows it had deleted, which the expired-rows counter then missed.
func TestExpireExportedCancelled(t *testing.T) {
	db := openDB(t)
	const rows = 100_000
	hour := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	fill := fmt.Sprintf(`INSERT INTO m SELECT make_timestamp_ns(%d + i * 1000) AS "time", i AS v, repeat('x', 40) || i AS s FROM range(%d) t(i)`, hour, rows)
	exec := func(q string) {
		t.Helper()
		if _, err := db.SQL.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`CREATE TABLE m ("time" TIMESTAMP_NS, v BIGINT, s VARCHAR)`)
	dir := t.TempDir()
	// How long an uncancelled turn takes, to spread the cancellations over.
	var full time.Duration
	for i := range 3 {
		exec(fill)
		start := time.Now()
		n, err := db.ExpireExported(ctxFor(t), "m", transforms.OTLPMetrics, hour, filepath.Join(dir, fmt.Sprintf("f%d.parquet", i)), func(fn func() error) error {
			start = time.Now()
			return fn()
		}, "", "")
		if err != nil || n != rows {
			t.Fatalf("ExpireExported: %d rows, %v; want %d", n, err, rows)
		}
		full = max(full, time.Since(start))
	}
	t.Logf("a turn takes up to %v", full)
	cancelled := 0
	for i := range 30 {
		exec(fill)
		delay := full * time.Duration(i) / 20
		ctx, cancel := context.WithCancel(context.Background())
		n, err := db.ExpireExported(ctx, "m", transforms.OTLPMetrics, hour, filepath.Join(dir, fmt.Sprintf("c%d.parquet", i)), func(fn func() error) error {
			timer := time.AfterFunc(delay, cancel)
			defer timer.Stop()
			return fn()
		}, "", "")
		cancel()
		left := queryInt(t, db, "SELECT count(*) FROM m")
		switch {
		case err == nil && (n != rows || left != 0):
			t.Fatalf("cancelled after %v: reported %d rows expired, %d left in the table", delay, n, left)
		case err != nil && left != rows:
			t.Fatalf("cancelled after %v: %v, yet %d of %d rows left in the table", delay, err, left, rows)
		case err != nil:
			cancelled++
		}
		exec("DELETE FROM m")
	}
	t.Logf("%d of 30 runs cancelled before they committed", cancelled)
}

// A load cancelled at any point either commits whole and says so, or
// stores nothing: its COMMIT is not interrupted.
func TestLoadCancelled(t *testing.T) {
	var sb strings.Builder
	for l := range 200 {
		sb.WriteString(`{"resourceSpans":[{"scopeSpans":[{"spans":[`)
		for i := range 100 {
			if i > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, `{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"%016x","name":"s%d","startTimeUnixNano":"%d","endTimeUnixNano":"%d","attributes":[{"key":"k%d","value":{"stringValue":"v%d"}}]}`,
				l*100+i, i, 1_767_225_600_000_000_000+l*100+i, 1_767_225_600_000_001_000+l*100+i, i%7, l*100+i)
		}
		sb.WriteString("]}]}]}\n")
	}
	path := filepath.Join(t.TempDir(), "traces.jsonl")
	if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	in, err := ingest.StatInputs([]string{path})
	if err != nil {
		t.Fatal(err)
	}
	db := openDB(t)
	start := time.Now()
	if _, err := db.Load(ctxFor(t), in, ingest.Options{}); err != nil {
		t.Fatal(err)
	}
	full := time.Since(start)
	cancelled := 0
	for i := range 24 {
		if _, err := db.SQL.Exec("DELETE FROM otel_traces; DELETE FROM shredduck_sources"); err != nil {
			t.Fatal(err)
		}
		delay := full * time.Duration(i+4) / 24
		ctx, cancel := context.WithTimeout(context.Background(), delay)
		_, err := db.Load(ctx, in, ingest.Options{})
		cancel()
		n := queryInt(t, db, "SELECT count(*) FROM otel_traces")
		switch {
		case err == nil && n != 20_000:
			t.Fatalf("cancelled after %v: loaded, yet %d spans stored", delay, n)
		case err != nil && n != 0:
			t.Fatalf("cancelled after %v: %v, yet %d spans stored", delay, err, n)
		case err != nil:
			cancelled++
		}
	}
	t.Logf("a load takes %v; %d of 24 cancelled", full, cancelled)
}
