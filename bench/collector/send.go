package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// signal is one OTLP signal: its path, its table and how to build a
// request of records [from, to).
type signal struct {
	table string
	path  string
	build func(from, to int) ([]byte, error)
}

var signals = []signal{
	{"otel_traces", "/v1/traces", tracesRequest},
	{"otel_logs", "/v1/logs", logsRequest},
	{"otel_metrics", "/v1/metrics", metricsRequest},
}

const base = 1_700_000_000_000_000_000 // a time in ns

func resource(r pcommon.Resource) {
	r.Attributes().PutStr("service.name", "collector-bench")
	r.Attributes().PutStr("host.name", "bench")
}

func tracesRequest(from, to int) ([]byte, error) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	resource(rs.Resource())
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("collector-bench")
	for i := from; i < to; i++ {
		s := ss.Spans().AppendEmpty()
		s.SetName("op " + strconv.Itoa(i%10))
		s.SetTraceID(pcommon.TraceID{0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)})
		s.SetSpanID(pcommon.SpanID{0xcb, 0, 0, 0, byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)})
		s.SetKind(ptrace.SpanKindServer)
		s.SetStartTimestamp(pcommon.Timestamp(base + int64(i)*1000))
		s.SetEndTimestamp(pcommon.Timestamp(base + int64(i)*1000 + 500))
		s.Attributes().PutInt("bench.id", int64(i))
		s.Attributes().PutStr("http.route", "/items/{id}")
	}
	return ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
}

func logsRequest(from, to int) ([]byte, error) {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	resource(rl.Resource())
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName("collector-bench")
	for i := from; i < to; i++ {
		l := sl.LogRecords().AppendEmpty()
		l.SetTimestamp(pcommon.Timestamp(base + int64(i)*1000))
		l.SetSeverityNumber(plog.SeverityNumberInfo)
		l.SetSeverityText("INFO")
		l.Body().SetStr("log record " + strconv.Itoa(i))
		l.Attributes().PutInt("bench.id", int64(i))
	}
	return plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
}

// metricsRequest: data points [from, to) spread over a gauge, a sum and a
// histogram.
func metricsRequest(from, to int) ([]byte, error) {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	resource(rm.Resource())
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName("collector-bench")
	gauge := sm.Metrics().AppendEmpty()
	gauge.SetName("bench.gauge")
	gauge.SetEmptyGauge()
	sum := sm.Metrics().AppendEmpty()
	sum.SetName("bench.sum")
	sum.SetEmptySum().SetIsMonotonic(true)
	sum.Sum().SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	hist := sm.Metrics().AppendEmpty()
	hist.SetName("bench.histogram")
	hist.SetEmptyHistogram().SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	for i := from; i < to; i++ {
		ts := pcommon.Timestamp(base + int64(i)*1000)
		switch i % 3 {
		case 0:
			p := gauge.Gauge().DataPoints().AppendEmpty()
			p.SetTimestamp(ts)
			p.SetDoubleValue(float64(i) / 2)
			p.Attributes().PutInt("bench.id", int64(i))
		case 1:
			p := sum.Sum().DataPoints().AppendEmpty()
			p.SetStartTimestamp(base)
			p.SetTimestamp(ts)
			p.SetIntValue(int64(i))
			p.Attributes().PutInt("bench.id", int64(i))
		default:
			p := hist.Histogram().DataPoints().AppendEmpty()
			p.SetStartTimestamp(ts - 1000)
			p.SetTimestamp(ts)
			p.SetCount(3)
			p.SetSum(12)
			p.ExplicitBounds().FromRaw([]float64{1, 5, 10})
			p.BucketCounts().FromRaw([]uint64{1, 1, 1, 0})
			p.Attributes().PutInt("bench.id", int64(i))
		}
	}
	// No metric without points (a small last request may lack a kind).
	sm.Metrics().RemoveIf(func(m pmetric.Metric) bool {
		switch m.Type() {
		case pmetric.MetricTypeGauge:
			return m.Gauge().DataPoints().Len() == 0
		case pmetric.MetricTypeSum:
			return m.Sum().DataPoints().Len() == 0
		default:
			return m.Histogram().DataPoints().Len() == 0
		}
	})
	return pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
}

// sender posts one signal's records to the collector, o.workers requests
// at a time, retrying what the collector refuses (its queue full, 503/429).
type sender struct {
	sig      signal
	records  atomic.Int64 // accepted by the collector
	requests atomic.Int64
	retries  atomic.Int64
}

func (s *sender) send(ctx context.Context, client *http.Client, url string, o options) error {
	next := make(chan int)
	errc := make(chan error, o.workers)
	var wg sync.WaitGroup
	for range o.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for from := range next {
				to := min(from+o.batch, o.n)
				body, err := s.sig.build(from, to)
				if err != nil {
					errc <- err
					return
				}
				if err := s.post(ctx, client, url+s.sig.path, body); err != nil {
					errc <- err
					return
				}
				s.records.Add(int64(to - from))
			}
		}()
	}
	var err error
feed:
	for from := 0; from < o.n; from += o.batch {
		select {
		case next <- from:
		case err = <-errc:
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errc:
		default:
		}
	}
	return err
}

func (s *sender) post(ctx context.Context, client *http.Client, url string, body []byte) error {
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/x-protobuf")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		s.requests.Add(1)
		switch {
		case resp.StatusCode == http.StatusOK:
			return nil
		case (resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusTooManyRequests) && attempt < 100:
			s.retries.Add(1)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(min(attempt+1, 10)) * 50 * time.Millisecond):
			}
		default:
			return fmt.Errorf("POST %s: %s: %.200q", url, resp.Status, b)
		}
	}
}
