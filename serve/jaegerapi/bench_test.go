package jaegerapi_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/shredduck/shredduck/serve"
)

// benchServer is a server (--ack commit) with 200 generated traces of 7
// spans each: small, so that what a request costs is mostly the fixed
// cost of its queries, not the scan (bench/run_jaeger.sh measures that
// at 1M spans and more).
func benchServer(b *testing.B) (*server, time.Time) {
	b.Helper()
	s := startServer(b, serve.AckCommit, "")
	base := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	for _, td := range genTraces(base, 200) {
		postTraces(b, s.url, "", td)
	}
	return s, base
}

// BenchmarkTraceByID is GET /api/traces/{id} end to end over HTTP.
func BenchmarkTraceByID(b *testing.B) {
	s, _ := benchServer(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		id := traceID(i % 200)
		if code, body := get(b, s.url, "", "/api/traces/"+id.String()); code != http.StatusOK {
			b.Fatalf("%d: %s", code, body)
		}
		i++
	}
}

// BenchmarkSearch is GET /api/traces?service=...&limit=20 over the whole
// data, as Grafana sends it.
func BenchmarkSearch(b *testing.B) {
	s, base := benchServer(b)
	q := fmt.Sprintf("/api/traces?service=frontend&limit=20&start=%d&end=%d", base.UnixMicro(), base.Add(300*time.Minute).UnixMicro())
	b.ReportAllocs()
	for b.Loop() {
		if code, body := get(b, s.url, "", q); code != http.StatusOK {
			b.Fatalf("%d: %s", code, body)
		}
	}
}
