package serve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shredduck/shredduck/internal/kafkatest"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/shredduck/shredduck/ingest"
)

// waitSpans waits until table holds want rows, and returns its count of
// distinct test.id values and of rows.
func waitSpans(t *testing.T, ts *testServer, want int, within time.Duration) (distinct, rows int) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := ts.db.SQL.QueryRow(`SELECT count(DISTINCT span_id), count(*) FROM otel_traces`).Scan(&distinct, &rows)
		if err == nil && rows >= want || time.Now().After(deadline) {
			return distinct, rows
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func kafkaMetric(t *testing.T, ts *testServer, pattern string) float64 {
	t.Helper()
	resp, err := http.Get(ts.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + pattern + ` (\S+)$`).FindSubmatch(b)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

// One node consumes a stream keyed by trace id over 6 partitions, with
// bad records among it: every span stored once, the bad records skipped
// and counted, the other signals' topics consumed too; a restart of the
// node (a clean one) resumes where it stopped.
func TestKafkaOneNode(t *testing.T) {
	c := kafkatest.Cluster(t, DefaultKafkaTopics[:]...)
	prod := kafkatest.Producer(t, c)
	const n, spans = 300, 3
	kafkatest.Produce(t, prod, 0, n/2, spans)
	bad := []*kgo.Record{
		{Topic: "otlp_spans", Key: []byte("x"), Value: []byte("not OTLP at all")},
		{Topic: "otlp_spans", Key: []byte("y"), Value: []byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":"a log"}}]}]}]}`)},
	}
	ld := plog.NewLogs()
	ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty().Body().SetStr("hello")
	lv, _ := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
	bad = append(bad, &kgo.Record{Topic: "otlp_logs", Key: []byte("l"), Value: lv})
	if err := prod.ProduceSync(context.Background(), bad...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	path := t.TempDir() + "/kafka.duckdb"
	cfg := Config{Kafka: KafkaConfig{Brokers: c.ListenAddrs(), Topics: DefaultKafkaTopics, SessionTimeout: 2 * time.Second},
		MaxVisibilityLag: 100 * time.Millisecond}
	ts := startServerAt(t, path, cfg)
	kafkatest.Produce(t, prod, n/2, n, spans)
	distinct, rows := waitSpans(t, ts, n*spans, 30*time.Second)
	if distinct != n*spans || rows != n*spans {
		t.Fatalf("otel_traces holds %d rows, %d distinct spans; want %d of each", rows, distinct, n*spans)
	}
	// The logs topic's partition is loaded on its own: its record may
	// come after the spans.
	for deadline := time.Now().Add(10 * time.Second); ts.count("otel_logs") != 1 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if got := ts.count("otel_logs"); got != 1 {
		t.Errorf("otel_logs holds %d rows, want 1", got)
	}
	for _, reason := range []string{"bad_data", "wrong_signal"} {
		if v := kafkaMetric(t, ts, `shredduck_kafka_bad_records_total\{reason="`+reason+`",topic="otlp_spans"\}`); v != 1 {
			t.Errorf("bad records counted as %s: %v, want 1", reason, v)
		}
	}
	if v := kafkaMetric(t, ts, `shredduck_kafka_records_total\{topic="otlp_spans"\}`); v != n+2 {
		t.Errorf("records consumed: %v, want %d", v, n+2)
	}
	ts.close()

	// A clean restart: the node releases its partitions on the way out
	// and takes them back at its stored offsets.
	ts = startServerAt(t, path, cfg)
	kafkatest.Produce(t, prod, n, n+50, spans)
	distinct, rows = waitSpans(t, ts, (n+50)*spans, 30*time.Second)
	if distinct != (n+50)*spans || rows != (n+50)*spans {
		t.Fatalf("after a restart otel_traces holds %d rows, %d distinct spans; want %d of each", rows, distinct, (n+50)*spans)
	}
	// A tend round sets the lag gauges from the stored offsets: each
	// reads 0 once it has run (-1: not set yet).
	lags := func() (out [6]float64) {
		for p := range out {
			out[p] = kafkaMetric(t, ts, fmt.Sprintf(`shredduck_kafka_lag_records\{partition="%d",topic="otlp_spans"\}`, p))
		}
		return out
	}
	for deadline := time.Now().Add(10 * time.Second); lags() != [6]float64{}; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("lags of otlp_spans/0..5 after 10 s: %v, want 0 each", lags())
		}
	}
}

// A partition's fetched records are decoded into shared items (a record
// each cost ~300 us of CPU): one partition of 80 one-span records with a
// bad and a wrong-signal record among them goes to DuckDB in a few items,
// every span once, the two bad records skipped and counted.
func TestKafkaRecordsShareItems(t *testing.T) {
	c := kafkatest.Cluster(t, DefaultKafkaTopics[:]...)
	prod := kafkatest.Producer(t, c)
	var recs []*kgo.Record
	add := func(from, to int) {
		for i := from; i < to; i++ {
			_, req := kafkatest.Traces(i, 1, 1_700_000_000_000_000_000)
			v, err := req.MarshalProto()
			if i%3 == 0 {
				v, err = req.MarshalJSON()
			}
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, &kgo.Record{Topic: "otlp_spans", Key: []byte("one partition"), Value: v})
		}
	}
	add(0, 40)
	recs = append(recs, &kgo.Record{Topic: "otlp_spans", Key: []byte("one partition"), Value: []byte("not OTLP at all")},
		&kgo.Record{Topic: "otlp_spans", Key: []byte("one partition"), Value: []byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":"a log"}}]}]}]}`)})
	add(40, 80)
	if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Kafka: KafkaConfig{Brokers: c.ListenAddrs(), Topics: DefaultKafkaTopics, SessionTimeout: 2 * time.Second},
		MaxVisibilityLag: 100 * time.Millisecond}
	ts := startServer(t, cfg)
	distinct, rows := waitSpans(t, ts, 80, 30*time.Second)
	if distinct != 80 || rows != 80 {
		t.Fatalf("otel_traces holds %d rows, %d distinct spans; want 80 of each", rows, distinct)
	}
	for _, reason := range []string{"bad_data", "wrong_signal"} {
		if v := kafkaMetric(t, ts, `shredduck_kafka_bad_records_total\{reason="`+reason+`",topic="otlp_spans"\}`); v != 1 {
			t.Errorf("bad records counted as %s: %v, want 1", reason, v)
		}
	}
	if v := kafkaMetric(t, ts, `shredduck_kafka_records_total\{topic="otlp_spans"\}`); v != 82 {
		t.Errorf("records consumed: %v, want 82", v)
	}
	// A pipelined COMMIT is counted once the loader notes its end, a moment
	// after its rows are visible.
	v := kafkaMetric(t, ts, `shredduck_commit_requests_sum`)
	for deadline := time.Now().Add(5 * time.Second); v < 1 && time.Now().Before(deadline); v = kafkaMetric(t, ts, `shredduck_commit_requests_sum`) {
		time.Sleep(10 * time.Millisecond)
	}
	if v < 1 || v > 10 {
		t.Errorf("the loader took %v items for 82 records of one partition, want a few", v)
	}
}

// BenchmarkKafkaCatchUp: one node catching up on a backlog of 2,000
// requests of 50 spans (100,000 spans) over 6 partitions; reports the
// spans per second from its start to the last one stored.
func BenchmarkKafkaCatchUp(b *testing.B) {
	const reqs, spans = 2000, 50
	for range b.N {
		b.StopTimer()
		c := kafkatest.Cluster(b, DefaultKafkaTopics[:]...)
		prod := kafkatest.Producer(b, c)
		kafkatest.Produce(b, prod, 0, reqs, spans)
		db, err := ingest.Open(filepath.Join(b.TempDir(), "bench.duckdb"))
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		srv, err := New(db, Config{MemoryLimit: "256MB", Kafka: KafkaConfig{Brokers: c.ListenAddrs(), Topics: DefaultKafkaTopics, SessionTimeout: 2 * time.Second}})
		if err != nil {
			b.Fatal(err)
		}
		for {
			var n int
			if db.SQL.QueryRow(`SELECT count(*) FROM otel_traces`).Scan(&n); n >= reqs*spans {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		el := time.Since(start)
		b.StopTimer()
		b.ReportMetric(float64(reqs*spans)/el.Seconds(), "spans/s")
		b.ReportMetric(float64(reqs)/el.Seconds(), "records/s")
		srv.Close()
		db.Close()
	}
}

// A broker outage (every request's connection closed for 1.5 s, as when
// the brokers are down) mid-stream: the node keeps serving, reconnects,
// and stores every record once.
func TestKafkaOutage(t *testing.T) {
	for _, tc := range []struct {
		name            string
		session, outage time.Duration
	}{
		{"within the session", 5 * time.Second, 1500 * time.Millisecond},
		// The group drops the member meanwhile: back, the node joins
		// again and claims its partitions again at its stored offsets.
		{"past the session", time.Second, 4 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := kafkatest.Cluster(t, DefaultKafkaTopics[:]...)
			prod := kafkatest.Producer(t, c)
			ts := startServer(t, Config{Kafka: KafkaConfig{Brokers: c.ListenAddrs(), Topics: DefaultKafkaTopics, SessionTimeout: tc.session},
				MaxVisibilityLag: 100 * time.Millisecond})
			const spans = 3
			kafkatest.Produce(t, prod, 0, 100, spans)
			var down atomic.Bool
			c.Control(func(kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				if down.Load() {
					return nil, errors.New("outage"), true
				}
				return nil, nil, false
			})
			kafkatest.Produce(t, prod, 100, 200, spans)
			gen := ts.srv.kafka.Generation()
			down.Store(true)
			time.Sleep(tc.outage)
			if r := ts.do(http.MethodGet, "/healthz", "", "", nil); r.status != http.StatusOK {
				t.Errorf("/healthz during the outage: %d", r.status)
			}
			down.Store(false)
			kafkatest.Produce(t, prod, 200, 300, spans)
			distinct, rows := waitSpans(t, ts, 300*spans, 30*time.Second)
			if distinct != 300*spans || rows != 300*spans {
				t.Fatalf("after the outage otel_traces holds %d rows, %d distinct spans; want %d of each", rows, distinct, 300*spans)
			}
			if after := ts.srv.kafka.Generation(); tc.outage > tc.session && after <= gen {
				t.Errorf("the group's generation stayed %d over an outage past the session: the test did not drop the member", gen)
			}
		})
	}
}

// Retention takes its turns with the Kafka loader too: the spans consumed
// from Kafka that are past it (produceTraces's are from 2023) are
// deleted, a current one stays, and the consumer goes on.
func TestKafkaRetention(t *testing.T) {
	c := kafkatest.Cluster(t, DefaultKafkaTopics[:]...)
	prod := kafkatest.Producer(t, c)
	ts := startServer(t, Config{Kafka: KafkaConfig{Brokers: c.ListenAddrs(), Topics: DefaultKafkaTopics, SessionTimeout: 2 * time.Second},
		MaxVisibilityLag: 100 * time.Millisecond, Retention: Retention{Traces: time.Hour, Interval: 20 * time.Millisecond}})
	produce := func(key string, body []byte) {
		t.Helper()
		if err := prod.ProduceSync(context.Background(), &kgo.Record{Topic: "otlp_spans", Key: []byte(key), Value: body}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	const spans = 3
	kafkatest.Produce(t, prod, 0, 50, spans)
	produce("aged", agedTraces(t, time.Now(), []aged{{"old", 2 * time.Hour}, {"current", 0}}))
	wait := func(want map[string]int, expired float64) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			if kafkaMetric(t, ts, `shredduck_retention_rows_expired_total{table="otel_traces"}`) == expired && ts.count("otel_traces") == len(want) {
				if got := ts.ids("otel_traces"); maps.Equal(got, want) {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("otel_traces holds %d rows, %g expired; want %v, %g expired", ts.count("otel_traces"),
					kafkaMetric(t, ts, `shredduck_retention_rows_expired_total{table="otel_traces"}`), want, expired)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	wait(map[string]int{"current": 1}, 50*spans+1)
	produce("later", agedTraces(t, time.Now(), []aged{{"later", 0}}))
	wait(map[string]int{"current": 1, "later": 1}, 50*spans+1)
}

// keyedTraces is an export request of spans spans with span ids
// {tag, i, j}; each span carries test.id, num, and the attribute keys
// of keys (with a value of each span's own), so that new keys in a
// stream add columns, and num's type changes, while the other stream
// writes the same table.
func keyedTraces(tag byte, i, spans int, keys ...string) (trace []byte, req ptraceotlp.ExportRequest) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "mixed")
	ss := rs.ScopeSpans().AppendEmpty()
	tid := pcommon.TraceID{tag, byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)}
	for j := range spans {
		s := ss.Spans().AppendEmpty()
		s.SetName("op")
		s.SetTraceID(tid)
		s.SetSpanID(pcommon.SpanID{tag, byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i), byte(j)})
		s.SetStartTimestamp(1_700_000_000_000_000_000)
		s.SetEndTimestamp(1_700_000_000_001_000_000)
		s.Attributes().PutStr("test.id", fmt.Sprintf("%c%d-%d", tag, i, j))
		// num widens from BIGINT to DOUBLE halfway through a stream.
		if i < 100 {
			s.Attributes().PutInt("num", int64(i))
		} else {
			s.Attributes().PutDouble("num", float64(i)+0.5)
		}
		for k, key := range keys {
			if k%2 == 0 {
				s.Attributes().PutStr(key, fmt.Sprintf("v%d", i))
			} else {
				s.Attributes().PutInt(key, int64(i))
			}
		}
	}
	return tid[:], ptraceotlp.NewExportRequestFromTraces(td)
}

// streamKeys are the attribute keys of request i of a stream tagged
// tag: a key of its own that changes every 15 requests, and one both
// streams share that changes every 20, so that both add columns, and
// sometimes the same column, while the other writes.
func streamKeys(tag byte, i int) []string {
	return []string{fmt.Sprintf("own.%c%d", tag, i/15), fmt.Sprintf("shared.%d", i/20), "n." + strconv.Itoa(i/30)}
}

// OTLP/HTTP and Kafka write the same table at once, both with keys that
// appear mid-stream: every span is stored once, and HTTP answers only 200
// or 503 with Retry-After (retried), never an error that drops data.
func TestKafkaWithHTTP(t *testing.T) {
	c := kafkatest.Cluster(t, DefaultKafkaTopics[:]...)
	prod := kafkatest.Producer(t, c)
	ts := startServer(t, Config{Kafka: KafkaConfig{Brokers: c.ListenAddrs(), Topics: DefaultKafkaTopics, SessionTimeout: 2 * time.Second},
		MaxVisibilityLag: 50 * time.Millisecond, RetryAfter: time.Second})
	const kafkaReqs, httpWorkers, httpReqs, spans = 300, 4, 60, 3

	var wg sync.WaitGroup
	errs := make(chan error, httpWorkers+1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < kafkaReqs; i += 10 {
			var recs []*kgo.Record
			for k := i; k < i+10; k++ {
				key, req := keyedTraces('k', k, spans, streamKeys('k', k)...)
				v, err := req.MarshalProto()
				if err != nil {
					errs <- err
					return
				}
				recs = append(recs, &kgo.Record{Topic: "otlp_spans", Key: key, Value: v})
			}
			if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				errs <- fmt.Errorf("produce: %w", err)
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	var retried atomic.Int64
	client := &http.Client{Timeout: 30 * time.Second}
	for w := range httpWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range httpReqs {
				i := n*httpWorkers + w
				_, req := keyedTraces('h', i, spans, streamKeys('h', i)...)
				body, err := req.MarshalProto()
				if err != nil {
					errs <- err
					return
				}
				for attempt := 0; ; attempt++ {
					resp, err := client.Post(ts.url+"/v1/traces", "application/x-protobuf", bytes.NewReader(body))
					if err != nil {
						errs <- err
						return
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						break
					}
					ra := resp.Header.Get("Retry-After")
					if resp.StatusCode != http.StatusServiceUnavailable || ra == "" || attempt > 100 {
						errs <- fmt.Errorf("request h%d: %d (Retry-After %q, attempt %d): %s", i, resp.StatusCode, ra, attempt, b)
						return
					}
					if retried.Add(1) == 1 {
						t.Logf("first 503: %s", b)
					}
					// A shorter wait than asked keeps the test short; the
					// server only needs to have asked.
					time.Sleep(100 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	want := (kafkaReqs + httpWorkers*httpReqs) * spans
	distinct, rows := waitSpans(t, ts, want, 30*time.Second)
	t.Logf("%d spans stored, %d distinct; %d HTTP retries after 503", rows, distinct, retried.Load())
	if distinct != want || rows != want {
		t.Fatalf("otel_traces holds %d rows, %d distinct spans; want %d of each", rows, distinct, want)
	}
	// num, widened while both wrote, holds every span's own value.
	var wrong int
	if err := ts.db.SQL.QueryRow(`SELECT count(*) FROM (SELECT num, CAST(regexp_extract("test.id", '^.([0-9]+)-', 1) AS INT) AS i FROM otel_traces)
		WHERE num IS DISTINCT FROM CASE WHEN i < 100 THEN i ELSE i + 0.5 END`).Scan(&wrong); err != nil {
		t.Fatalf("column num: %v", err)
	}
	if wrong != 0 {
		t.Errorf("%d spans have a wrong num", wrong)
	}
	// Each stream's keys became columns, with every span's own value.
	for _, q := range []struct{ col, tag string }{{"own.k19", "k"}, {"own.h15", "h"}, {"shared.14", "k"}, {"shared.11", "h"}} {
		var n int
		if err := ts.db.SQL.QueryRow(fmt.Sprintf(`SELECT count(*) FROM otel_traces WHERE "%s" IS NOT NULL AND "test.id" LIKE '%s%%'`, q.col, q.tag)).Scan(&n); err != nil {
			t.Fatalf("column %s: %v", q.col, err)
		}
		if n == 0 {
			t.Errorf("no %s span has column %s set", q.tag, q.col)
		}
	}
}

// /readyz names the assigned partitions that wait for another node's
// release (ready: the node serves the rest), /metrics has them as a
// gauge; with no broker reachable the node is not ready, and ready again
// once one is.
func TestKafkaReady(t *testing.T) {
	c := kafkatest.Cluster(t, DefaultKafkaTopics[:]...)
	kafkatest.CommitAsNode(t, c, DefaultKafkaGroup, "owned:ghost", map[int32]int64{2: 0, 5: 0})
	ts := startServer(t, Config{Kafka: KafkaConfig{Brokers: c.ListenAddrs(), Topics: DefaultKafkaTopics, SessionTimeout: 2 * time.Second}})
	ready := func(wantStatus int, want string, within time.Duration) {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			r := ts.do(http.MethodGet, "/readyz", "", "", nil)
			if r.status == wantStatus && strings.Contains(string(r.body), want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("/readyz: %d %q; want %d with %q", r.status, r.body, wantStatus, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	ready(http.StatusOK, "wait for their holder to release them (start it again; if its file is lost, shredduck kafka-release --node ID): otlp_spans/2 (held by node ghost), otlp_spans/5 (held by node ghost)\n", 10*time.Second)
	for _, part := range []string{"2", "5"} {
		if v := kafkaMetric(t, ts, `shredduck_kafka_partition_waiting\{holder="ghost",partition="`+part+`",topic="otlp_spans"\}`); v != 1 {
			t.Errorf("waiting gauge of otlp_spans/%s: %v, want 1", part, v)
		}
	}
	if v := kafkaMetric(t, ts, `shredduck_kafka_partition_waiting\{holder="ghost",partition="1",topic="otlp_spans"\}`); v != -1 {
		t.Errorf("waiting gauge of the claimed otlp_spans/1: %v, want none", v)
	}

	var down atomic.Bool
	c.Control(func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if down.Load() {
			return nil, errors.New("outage"), true
		}
		return nil, nil, false
	})
	down.Store(true)
	ready(http.StatusServiceUnavailable, "not ready: kafka: no broker has answered for", 10*time.Second)
	down.Store(false)
	ready(http.StatusOK, "ready; kafka partitions", 10*time.Second)
}

// The expirer (and the exporter) take turns with the Kafka loader from
// their first run. A server that started them before the loader, as it
// did, was reported by -race at once when the database held rows to
// expire at the start: they read s.kafka as New set it.
func TestKafkaExpireAtStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "k.duckdb")
	c := kafkatest.Cluster(t, DefaultKafkaTopics[:]...)
	for round := range 3 {
		ts := startServerAt(t, path, Config{})
		if r := ts.post("/v1/traces", "application/x-protobuf", "", tracesProto(t, "old")); r.status != http.StatusOK {
			t.Fatalf("%d %s", r.status, r.body)
		}
		ts.close()
		ts = startServerAt(t, path, Config{Kafka: KafkaConfig{Brokers: c.ListenAddrs(), Topics: DefaultKafkaTopics, SessionTimeout: 2 * time.Second},
			Retention: Retention{Traces: time.Hour, Interval: 10 * time.Millisecond}})
		for deadline := time.Now().Add(10 * time.Second); ts.count("otel_traces") != 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the 2023 span did not expire", round)
			}
		}
		ts.close()
	}
}
