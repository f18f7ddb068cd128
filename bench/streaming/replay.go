package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/shredduck/shredduck/bench/internal/httppost"
	"github.com/shredduck/shredduck/internal/benchtraces"
)

// The light sender (-sender replay): the run's requests are built and
// encoded before the clock starts (OTLP/HTTP protobuf, -batch spans each,
// the attributes generate sets), then W workers POST them, retrying a
// 503 or 429 after its Retry-After. Its own CPU is a fraction of the
// SDK's, so the ceiling it is measured against is the server's, not the
// sender's.

// encodeRequests builds the run's requests: records spans, batch a
// request.
func encodeRequests(records int64, batch int, gz bool) ([][]byte, []int, error) {
	var bodies [][]byte
	var spans []int
	for start := int64(0); start < records; start += int64(batch) {
		n := int(min(int64(batch), records-start))
		td := benchtraces.StreamingRequest(start, n, int(start/int64(batch))%16, time.Now().UnixNano())
		b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
		if err != nil {
			return nil, nil, err
		}
		if gz {
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			zw.Write(b)
			zw.Close()
			b = buf.Bytes()
		}
		bodies = append(bodies, b)
		spans = append(spans, n)
	}
	return bodies, spans, nil
}

// replayOnce is runOnce with the light sender.
func replayOnce(ctx context.Context, tgt *target, cfg config) Sample {
	s := Sample{Target: tgt.name, Spans: cfg.records}
	fail := func(format string, a ...any) Sample {
		s.Failure = fmt.Sprintf(format, a...)
		return s
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	bodies, spans, err := encodeRequests(cfg.records, cfg.batch, cfg.gzip)
	if err != nil {
		return fail("encode: %v", err)
	}
	before, err := tgt.count(ctx)
	if err != nil {
		return fail("count before: %v", err)
	}
	s.PeakRSSPerRun = resetPeakRSS(tgt.pid)
	tr := &http.Transport{MaxIdleConns: 2 * cfg.workers, MaxIdleConnsPerHost: 2 * cfg.workers, IdleConnTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: time.Minute}
	var (
		next, exported, retries atomic.Int64
		lat                     latencies
		firstErr                atomic.Pointer[string]
	)
	encoding := ""
	if cfg.gzip {
		encoding = "gzip"
	}
	clock := startCPU(tgt.pid)
	start := time.Now()
	var wg sync.WaitGroup
	for range cfg.workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(bodies) || ctx.Err() != nil {
					return
				}
				for {
					t := time.Now()
					code, wait, err := httppost.Post(ctx, client, tgt.httpURL+"/v1/traces", "application/x-protobuf", encoding, bodies[i])
					d := time.Since(t)
					if err == nil && (code == http.StatusServiceUnavailable || code == http.StatusTooManyRequests) {
						retries.Add(1)
						select {
						case <-time.After(wait):
							continue
						case <-ctx.Done():
							return
						}
					}
					if err == nil && code != http.StatusOK {
						err = fmt.Errorf("status %d", code)
					}
					if err != nil {
						msg := err.Error()
						firstErr.CompareAndSwap(nil, &msg)
						return
					}
					lat.add(d)
					exported.Add(int64(spans[i]))
					break
				}
			}
		})
	}
	wg.Wait()
	clock.sent()
	s.Seconds = time.Since(start).Seconds()
	s.SpansPerSec = float64(cfg.records) / s.Seconds
	s.Exported = exported.Load()
	s.PeakRSS = peakRSS(tgt.pid)
	s.Retries = retries.Load()
	if err := s.measure(ctx, tgt, before, &lat); err != nil {
		return fail("%v", err)
	}
	clock.fill(&s)
	var problems []string
	if p := firstErr.Load(); p != nil {
		problems = append(problems, "request failed: "+*p)
	}
	problems = append(problems, countProblems(s)...)
	if len(problems) > 0 {
		return fail("%s", strings.Join(problems, "; "))
	}
	s.OK = true
	return s
}

// waitRows waits (up to a minute) until tgt's count has grown by want
// since before: with --ack log rows become visible after the answers. It
// returns the count and how long the wait took.
func waitRows(ctx context.Context, tgt *target, before, want int64) (int64, time.Duration, error) {
	start := time.Now()
	for {
		after, err := tgt.count(ctx)
		if err != nil || after-before >= want || time.Since(start) > time.Minute {
			return after, time.Since(start), err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// countProblems checks that every span was counted and exported once.
func countProblems(s Sample) []string {
	var problems []string
	if s.RowsIngested != s.Spans {
		problems = append(problems, fmt.Sprintf("rows_ingested %d != spans_sent %d", s.RowsIngested, s.Spans))
	}
	if s.Exported != s.Spans {
		problems = append(problems, fmt.Sprintf("spans_exported %d != spans_sent %d", s.Exported, s.Spans))
	}
	return problems
}

// measure fills in s's latency percentiles from lat and, once every span
// is counted (waitRows), the rows ingested and how long they took to be
// visible.
func (s *Sample) measure(ctx context.Context, tgt *target, before int64, lat *latencies) error {
	lat.mu.Lock()
	d := slices.Clone(lat.d)
	lat.mu.Unlock()
	slices.Sort(d)
	s.Requests = len(d)
	if len(d) > 0 {
		s.P50ms = ms(percentile(d, 0.50))
		s.P99ms = ms(percentile(d, 0.99))
		s.MaxMs = ms(d[len(d)-1])
	}
	after, visible, err := waitRows(ctx, tgt, before, s.Spans)
	if err != nil {
		return fmt.Errorf("count after: %w", err)
	}
	s.VisibleSeconds = visible.Seconds()
	s.RowsIngested = after - before
	return nil
}
