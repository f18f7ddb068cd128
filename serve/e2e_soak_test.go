//go:build e2e

package serve

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// soakRequest is n spans started now, shaped like the benchmark's
// (a route, a status code, a service, a 16-byte random-looking payload).
func soakRequest(seq, n int) []byte {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", fmt.Sprintf("svc-%d", seq%7))
	ss := rs.ScopeSpans().AppendEmpty()
	now := time.Now()
	for i := range n {
		s := ss.Spans().AppendEmpty()
		s.SetName(fmt.Sprintf("GET /api/%d", i%40))
		s.SetTraceID(pcommon.TraceID{0xe0, byte(seq >> 24), byte(seq >> 16), byte(seq >> 8), byte(seq), byte(i), 7, 7, 7, 7, 7, 7, 7, 7, 7, 7})
		s.SetSpanID(pcommon.SpanID{0xe1, byte(seq >> 16), byte(seq >> 8), byte(seq), byte(i >> 8), byte(i), 1, 1})
		s.SetKind(ptrace.SpanKindServer)
		s.SetStartTimestamp(pcommon.NewTimestampFromTime(now))
		s.SetEndTimestamp(pcommon.NewTimestampFromTime(now.Add(time.Duration(i) * time.Millisecond)))
		s.Attributes().PutStr("http.route", fmt.Sprintf("/api/%d", i%40))
		s.Attributes().PutInt("http.status_code", int64(200+100*(i%4)))
		s.Attributes().PutStr("soak.payload", fmt.Sprintf("%016x", uint64(seq)*2654435761+uint64(i)))
	}
	b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		panic(err)
	}
	return b
}

// TestSoakRetention streams spans at a constant rate to shredduck serve
// with a short retention and samples the database file's size: once the
// first expired row groups are freed and reused, the file stops growing.
// SHREDDUCK_SOAK sets the length (default 2m; .ci/run runs 60s). For
// measuring throughput (docs/RETENTION.md): SHREDDUCK_SOAK_RATE=0 sends as
// fast as 8 workers go, SHREDDUCK_SOAK_RETENTION=off turns retention off
// (and the plateau check with it).
func TestSoakRetention(t *testing.T) {
	env := func(name string, def time.Duration) time.Duration {
		v := os.Getenv(name)
		if v == "" {
			return def
		}
		if v == "off" {
			return 0
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("$%s: %v", name, err)
		}
		return d
	}
	length := env("SHREDDUCK_SOAK", 2*time.Minute)
	retention := env("SHREDDUCK_SOAK_RETENTION", 10*time.Second)
	rate, workers := 10000, 4 // spans/s
	if v := os.Getenv("SHREDDUCK_SOAK_RATE"); v != "" {
		fmt.Sscan(v, &rate)
	}
	if rate == 0 {
		workers = 8
	}
	const perReq = 100
	bin := e2eBuildShredduck(t)
	db := filepath.Join(t.TempDir(), "soak.duckdb")
	// A small threshold checkpoints (and so frees expired row groups)
	// every second or so at 10,000 spans/s; at full speed the default does.
	var flags []string
	if rate > 0 {
		flags = append(flags, "--checkpoint-threshold", "4MB")
	}
	if retention > 0 {
		flags = append(flags, "--retention-traces", retention.String(), "--retention-interval", "1s")
	}
	child := e2eStartChild(t, bin, db, flags...)
	ctx, cancel := context.WithTimeout(context.Background(), length)
	defer cancel()
	var sent, failed, refused atomic.Int64
	var seq atomic.Int64
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 30 * time.Second}
	every := time.Hour
	if rate > 0 {
		every = time.Duration(float64(time.Second) * perReq * float64(workers) / float64(rate))
	}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(every)
			defer tick.Stop()
			for {
				if rate > 0 {
					select {
					case <-ctx.Done():
						return
					case <-tick.C:
					}
				} else if ctx.Err() != nil {
					return
				}
				resp, err := client.Post(child.url+"/v1/traces", "application/x-protobuf", bytes.NewReader(soakRequest(int(seq.Add(1)), perReq)))
				if err != nil {
					failed.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusOK:
					sent.Add(perReq)
				case http.StatusServiceUnavailable, http.StatusTooManyRequests:
					refused.Add(1) // full queue: retried later, as an exporter would
					time.Sleep(20 * time.Millisecond)
				default:
					failed.Add(1)
				}
			}
		}()
	}
	type sample struct {
		at   time.Duration
		size int64
	}
	var samples []sample
	start := time.Now()
	for ctx.Err() == nil {
		time.Sleep(time.Second)
		if st, err := os.Stat(db); err == nil {
			samples = append(samples, sample{time.Since(start), st.Size()})
		}
	}
	wg.Wait()
	rows := e2eQueryInt(t, child, "SELECT count(*) FROM otel_traces")
	expired := e2eMetric(child, `shredduck_retention_rows_expired_total{table="otel_traces"}`)
	child.stop()
	if failed.Load() > 0 {
		t.Errorf("%d requests failed", failed.Load())
	}
	// The plateau: the largest size in the last third against the
	// largest in the middle third.
	var mid, last int64
	for _, s := range samples {
		switch {
		case s.at > length*2/3:
			last = max(last, s.size)
		case s.at > length/3:
			mid = max(mid, s.size)
		}
	}
	for i, s := range samples {
		if i%5 == 0 || i == len(samples)-1 {
			t.Logf("%5.0fs  %6.1f MB", s.at.Seconds(), float64(s.size)/1e6)
		}
	}
	t.Logf("%d requests refused with 503", refused.Load())
	t.Logf("%d spans sent (%.0f/s), %d in the table, %.0f expired; largest file in the middle third %.1f MB, in the last third %.1f MB (%.1f bytes per span sent)",
		sent.Load(), float64(sent.Load())/length.Seconds(), rows, expired, float64(mid)/1e6, float64(last)/1e6, float64(last)/float64(sent.Load()))
	if retention == 0 {
		return
	}
	if expired == 0 {
		t.Fatal("nothing expired")
	}
	// The size swings by some blocks around the plateau (each checkpoint
	// frees a row group and allocates the next): 8.4-11.3 MB at 10,000
	// spans/s for 60 s. Without retention the file grows with every span
	// sent, 51 bytes each with these small checkpoints, 18.9 MB in the
	// middle third and 29.4 MB in the last. At full speed the size swings
	// by a checkpoint's worth (128MB of WAL): a 40 s run is for the
	// throughput.
	if rate > 0 && float64(last) > 1.25*float64(mid) {
		t.Errorf("the file grew from %d to %d bytes between the middle and the last third of the soak: no plateau", mid, last)
	}
	if rate > 0 && float64(last) > 0.5*51*float64(sent.Load()) {
		t.Errorf("the file has %d bytes, more than half the %d the %d spans sent take without retention", last, 51*sent.Load(), sent.Load())
	}
}
