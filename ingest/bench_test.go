//go:build duckdb_arrow

package ingest_test

import (
	"bufio"
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/shred"
	"github.com/shredduck/shredduck/transforms"
)

// benchIngestSpans is the size of the BenchmarkIngestTraces input.
const benchIngestSpans = 100_000

// writeBenchTraces writes spans spans as NDJSON OTLP/JSON traces requests of
// 80 spans each, in the shape bench/gen writes (resource attributes
// service.name, deployment.environment, cloud.region, host.name; span
// attributes http.method, http.route, http.status_code, retry; hex ids;
// 64-bit integers as strings), from a fixed seed.
func writeBenchTraces(tb testing.TB, path string, spans int, seed uint64) int64 {
	tb.Helper()
	services := []string{"checkout", "cart", "payments", "search", "auth", "inventory", "shipping", "frontend"}
	environments := []string{"production", "staging"}
	regions := []string{"us-east-1", "us-west-2", "eu-west-1", "ap-south-1"}
	routes := []string{"/api/v1/orders", "/api/v1/cart", "/api/v1/pay", "/api/v1/search", "/login", "/health"}
	methods := []string{"GET", "POST", "PUT", "DELETE"}
	codes := []int64{200, 200, 200, 201, 400, 404, 500}
	const baseTime = 1767225600000000000 // 2026-01-01T00:00:00Z

	r := rand.New(rand.NewPCG(seed, 0x5348524544445543))
	pick := func(l []string) string { return l[r.IntN(len(l))] }
	hex64 := func(b []byte, v uint64) []byte {
		const digits = "0123456789abcdef"
		for i := 60; i >= 0; i -= 4 {
			b = append(b, digits[(v>>uint(i))&0xf])
		}
		return b
	}
	strAttr := func(b []byte, k, v string) []byte {
		return append(append(append(append(b, `{"key":"`...), k...), `","value":{"stringValue":"`...), v+`"}}`...)
	}

	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var size int64
	var b []byte
	for first := 0; first < spans; first += 80 {
		b = append(b[:0], `{"resourceSpans":[{"resource":{"attributes":[`...)
		b = strAttr(b, "service.name", pick(services))
		b = append(b, ',')
		b = strAttr(b, "deployment.environment", pick(environments))
		b = append(b, ',')
		b = strAttr(b, "cloud.region", pick(regions))
		b = append(b, ',')
		b = strAttr(b, "host.name", "pod-"+strconv.Itoa(r.IntN(400)+1))
		b = append(b, `]},"scopeSpans":[{"scope":{"name":"shredduck-gen","version":"1.0.0"},"spans":[`...)
		for i := first; i < min(first+80, spans); i++ {
			if i > first {
				b = append(b, ',')
			}
			b = append(b, `{"traceId":"`...)
			b = hex64(hex64(b, r.Uint64()), r.Uint64())
			b = append(b, `","spanId":"`...)
			b = append(hex64(b, r.Uint64()), '"')
			if r.IntN(5) != 0 {
				b = append(b, `,"parentSpanId":"`...)
				b = append(hex64(b, r.Uint64()), '"')
			}
			route := pick(routes)
			b = append(append(append(b, `,"name":"`...), route...), `","kind":`...)
			b = strconv.AppendInt(b, int64(r.IntN(5)+1), 10)
			start := baseTime + int64(i)*1_000_000 + r.Int64N(1_000_000)
			b = append(b, `,"startTimeUnixNano":"`...)
			b = strconv.AppendInt(b, start, 10)
			b = append(b, `","endTimeUnixNano":"`...)
			b = strconv.AppendInt(b, start+200_000+r.Int64N(800_000_000), 10)
			b = append(b, `","attributes":[`...)
			b = strAttr(b, "http.method", pick(methods))
			b = append(b, ',')
			b = strAttr(b, "http.route", route)
			code := codes[r.IntN(len(codes))]
			b = append(b, `,{"key":"http.status_code","value":{"intValue":"`...)
			b = strconv.AppendInt(b, code, 10)
			b = append(b, `"}},{"key":"retry","value":{"boolValue":`...)
			b = strconv.AppendBool(b, r.IntN(10) == 0)
			b = append(b, `}}],"status":{"code":`...)
			if code >= 500 {
				b = append(b, '2')
			} else {
				b = append(b, '1')
			}
			b = append(b, `}}`...)
		}
		b = append(b, "]}]}]}\n"...)
		if _, err := w.Write(b); err != nil {
			tb.Fatal(err)
		}
		size += int64(len(b))
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	return size
}

// BenchmarkIngestTraces loads 100k spans of NDJSON into a new database file
// per iteration: open, Load (decode, shred, Arrow insert, commit) and
// Close (checkpoint).
func BenchmarkIngestTraces(b *testing.B) {
	input := filepath.Join(b.TempDir(), "traces.ndjson")
	size := writeBenchTraces(b, input, benchIngestSpans, 1)
	in, err := ingest.StatInputs([]string{input})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		db, err := ingest.Open(filepath.Join(b.TempDir(), "bench.duckdb"))
		if err != nil {
			b.Fatal(err)
		}
		res, err := db.Load(ctx, in, ingest.Options{MemoryLimit: "300MB"})
		if err != nil {
			b.Fatal(err)
		}
		if res.Records != benchIngestSpans || res.Errors != 0 {
			b.Fatalf("loaded %d records with %d errors, want %d", res.Records, res.Errors, benchIngestSpans)
		}
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(benchIngestSpans)*float64(b.N)/b.Elapsed().Seconds(), "spans/s")
}

// One bad request must cost that request (a record error, within
// MaxErrors) or load with its values cleaned, never the whole load. Each of
// these got through the transforms and failed later, inside DuckDB, taking
// every good row of the load with it (found while fuzzing the transforms).
// The JSON and UTF-8 cases are fixed (c9fa5e5); the NUL key still fails:
// the column is named after the key, and DuckDB's parser stops at the NUL.
func TestLoadHostileRequests(t *testing.T) {
	const good = `{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"good","attributes":[{"key":"a","value":{"intValue":"1"}}]}]}]}]}`
	td := ptrace.NewTraces()
	td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty().SetName("not \xffUTF-8")
	badUTF8, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, file string
		data       []byte
	}{
		// shred names the column after the key; DuckDB's parser stops at
		// the NUL: "unterminated quoted identifier".
		{"NUL in an attribute key", "bad.ndjson",
			[]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"bad","attributes":[{"key":"a\u0000b","value":{"intValue":"1"}}]}]}]}]}` + "\n")},
		// the JSON column holds ["x"1]: "Malformed JSON".
		{"two values in an array element", "bad.ndjson",
			[]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"bad","attributes":[{"key":"j","value":{"arrayValue":{"values":[{"stringValue":"x","intValue":"1"}]}}}]}]}]}]}` + "\n")},
		// "Invalid unicode (byte sequence mismatch) detected in segment
		// statistics update".
		{"invalid UTF-8 in a protobuf string", "bad.pb", badUTF8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			goodPath := filepath.Join(dir, "good.ndjson")
			badPath := filepath.Join(dir, tc.file)
			if err := os.WriteFile(goodPath, []byte(good+"\n"+good+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(badPath, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			db, err := ingest.Open(filepath.Join(dir, "test.duckdb"))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			in, err := ingest.StatInputs([]string{goodPath, badPath})
			if err != nil {
				t.Fatal(err)
			}
			res, err := db.Load(context.Background(), in, ingest.Options{MaxErrors: 1})
			if err != nil {
				t.Fatalf("one bad request failed the load: %v", err)
			}
			var n int
			if err := db.SQL.QueryRow(`SELECT count(*) FROM otel_traces WHERE name = 'good'`).Scan(&n); err != nil || n != 2 {
				t.Fatalf("%d good rows (%v), want 2; result %+v", n, err, res)
			}
		})
	}
}

// BenchmarkCommitterStream measures the server's write path without HTTP:
// 16 goroutines decode OTLP/JSON requests of 480 spans into batches and
// Submit them to one Committer on a database file, each waiting for its
// commit as a server request does. One iteration streams 200k spans into a
// new file and closes it (checkpoint).
func BenchmarkCommitterStream(b *testing.B) {
	const spans, perReq, workers = 200_000, 480, 16
	input := filepath.Join(b.TempDir(), "traces.ndjson")
	writeBenchTraces(b, input, spans, 1)
	data, err := os.ReadFile(input)
	if err != nil {
		b.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(data), []byte("\n"))
	per := perReq / 80
	ctx := context.Background()
	for b.Loop() {
		db, err := ingest.Open(filepath.Join(b.TempDir(), "bench.duckdb"))
		if err != nil {
			b.Fatal(err)
		}
		var durs []time.Duration
		c := db.NewCommitter(ingest.CommitOptions{OnCommit: func(ci ingest.CommitInfo) { durs = append(durs, ci.Duration) }})
		defer func() {
			slices.Sort(durs)
			n := len(durs)
			b.Logf("commits %d p50 %v p90 %v max %v", n, durs[n/2], durs[n*9/10], durs[n-1])
		}()
		var next atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				batch := shred.NewBatch(transforms.Traces.Core())
				for {
					first := int(next.Add(int64(per))) - per
					if first >= len(lines) {
						return
					}
					batch.Reset()
					var n int64
					for _, l := range lines[first:min(first+per, len(lines))] {
						if _, err := transforms.Traces.AppendJSON(batch, l); err != nil {
							errs <- err
							return
						}
						n += int64(len(l))
					}
					if err := c.Submit(ctx, "otel_traces", transforms.Traces, batch, n); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		c.Close()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		var rows int
		if err := db.SQL.QueryRow("SELECT count(*) FROM otel_traces").Scan(&rows); err != nil || rows != spans {
			b.Fatalf("%d rows (%v), want %d", rows, err, spans)
		}
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(spans)*float64(b.N)/b.Elapsed().Seconds(), "spans/s")

}
