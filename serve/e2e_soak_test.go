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
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// soakPayload is record i of request seq's soak.payload: 16
// random-looking hex digits, unique across the soak's records.
func soakPayload(seq, i int) string {
	return fmt.Sprintf("%016x", uint64(seq)*2654435761+uint64(i))
}

// soakRequest is request seq of a signal (traces, logs, metrics): n
// records of time at, shaped like the benchmark's spans (a route, a
// status code, a service, a 16-byte payload).
func soakRequest(signal string, seq, n int, at time.Time) []byte {
	ts := pcommon.NewTimestampFromTime(at)
	svc := fmt.Sprintf("svc-%d", seq%7)
	attrs := func(m pcommon.Map, i int) {
		m.PutStr("http.route", fmt.Sprintf("/api/%d", i%40))
		m.PutInt("http.status_code", int64(200+100*(i%4)))
		m.PutStr("soak.payload", soakPayload(seq, i))
	}
	var b []byte
	var err error
	switch signal {
	case "traces":
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", svc)
		ss := rs.ScopeSpans().AppendEmpty()
		for i := range n {
			s := ss.Spans().AppendEmpty()
			s.SetName(fmt.Sprintf("GET /api/%d", i%40))
			s.SetTraceID(pcommon.TraceID{0xe0, byte(seq >> 24), byte(seq >> 16), byte(seq >> 8), byte(seq), byte(i), 7, 7, 7, 7, 7, 7, 7, 7, 7, 7})
			s.SetSpanID(pcommon.SpanID{0xe1, byte(seq >> 16), byte(seq >> 8), byte(seq), byte(i >> 8), byte(i), 1, 1})
			s.SetKind(ptrace.SpanKindServer)
			s.SetStartTimestamp(ts)
			s.SetEndTimestamp(pcommon.NewTimestampFromTime(at.Add(time.Duration(i) * time.Millisecond)))
			attrs(s.Attributes(), i)
		}
		b, err = ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	case "logs":
		ld := plog.NewLogs()
		rl := ld.ResourceLogs().AppendEmpty()
		rl.Resource().Attributes().PutStr("service.name", svc)
		sl := rl.ScopeLogs().AppendEmpty()
		for i := range n {
			l := sl.LogRecords().AppendEmpty()
			l.SetTimestamp(ts)
			l.SetObservedTimestamp(ts)
			l.SetSeverityNumber(plog.SeverityNumberInfo)
			l.SetSeverityText("INFO")
			l.Body().SetStr(fmt.Sprintf("GET /api/%d served", i%40))
			attrs(l.Attributes(), i)
		}
		b, err = plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
	case "metrics":
		md := pmetric.NewMetrics()
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutStr("service.name", svc)
		m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
		m.SetName("soak.latency_ms")
		g := m.SetEmptyGauge()
		for i := range n {
			p := g.DataPoints().AppendEmpty()
			p.SetTimestamp(ts)
			p.SetDoubleValue(float64(i%97) + 0.5)
			attrs(p.Attributes(), i)
		}
		b, err = pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	default:
		panic("soak: no signal " + signal)
	}
	if err != nil {
		panic(err)
	}
	return b
}

// soakStream is one signal's senders: records/s (0: as fast as they are
// answered) over workers.
type soakStream struct {
	signal  string
	rate    int
	workers int
}

// soakCount is what a stream's requests got.
type soakCount struct {
	acked   atomic.Int64 // records in requests answered 200
	failed  atomic.Int64 // requests that failed (neither 200 nor 503/429)
	refused atomic.Int64 // requests answered 503/429 (retried later, as an exporter would)
}

const soakPerRequest = 100

// soakSend sends the streams to url until ctx ends, each record of time
// clock(), and returns the counts per signal; wait returns once every
// sender has stopped.
func soakSend(ctx context.Context, url string, streams []soakStream, clock func() time.Time) (counts map[string]*soakCount, wait func()) {
	var seq atomic.Int64
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 30 * time.Second}
	counts = map[string]*soakCount{}
	for _, st := range streams {
		c := &soakCount{}
		counts[st.signal] = c
		every := time.Hour
		if st.rate > 0 {
			every = time.Duration(float64(time.Second) * soakPerRequest * float64(st.workers) / float64(st.rate))
		}
		for range st.workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tick := time.NewTicker(every)
				defer tick.Stop()
				for {
					if st.rate > 0 {
						select {
						case <-ctx.Done():
							return
						case <-tick.C:
						}
					} else if ctx.Err() != nil {
						return
					}
					body := soakRequest(st.signal, int(seq.Add(1)), soakPerRequest, clock())
					resp, err := client.Post(url+"/v1/"+st.signal, "application/x-protobuf", bytes.NewReader(body))
					if err != nil {
						c.failed.Add(1)
						continue
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					switch resp.StatusCode {
					case http.StatusOK:
						c.acked.Add(soakPerRequest)
					case http.StatusServiceUnavailable, http.StatusTooManyRequests:
						c.refused.Add(1)
						time.Sleep(20 * time.Millisecond)
					default:
						c.failed.Add(1)
					}
				}
			}()
		}
	}
	return counts, wg.Wait
}

type soakSample struct {
	at   time.Duration
	size int64
}

// soakSizes samples the size of the database file every second until
// ctx ends.
func soakSizes(ctx context.Context, db string) []soakSample {
	var samples []soakSample
	start := time.Now()
	for ctx.Err() == nil {
		time.Sleep(time.Second)
		if st, err := os.Stat(db); err == nil {
			samples = append(samples, soakSample{time.Since(start), st.Size()})
		}
	}
	return samples
}

// soakPlateau logs the samples and returns the largest size in the
// middle third of the soak and in the last third.
func soakPlateau(t *testing.T, samples []soakSample, length time.Duration) (mid, last int64) {
	for i, s := range samples {
		switch {
		case s.at > length*2/3:
			last = max(last, s.size)
		case s.at > length/3:
			mid = max(mid, s.size)
		}
		if i%5 == 0 || i == len(samples)-1 {
			t.Logf("%5.0fs  %6.1f MB", s.at.Seconds(), float64(s.size)/1e6)
		}
	}
	return mid, last
}

// soakBytesPerRecord is what a record of the soak's mix (a span, half a
// log record, half a data point) takes in the file without retention,
// with --checkpoint-threshold 4MB: SHREDDUCK_SOAK_RETENTION=off, 60 s at
// 10,000 spans/s, 5,000 log records/s and 5,000 data points/s grew the
// file steadily to 62.9 MB for 1.20M records (41.4 MB at the end of the
// middle third), on DuckDB 2.0 with every young key a column.
const soakBytesPerRecord = 52

// soakSettings are TestSoakRetention's environment: SHREDDUCK_SOAK (the
// length of each case, default 2m; .ci/run runs 60s),
// SHREDDUCK_SOAK_RATE (spans/s, default 10,000; log records and data
// points half as many each; 0: as fast as 8, 4 and 4 workers go),
// SHREDDUCK_SOAK_SIGNALS (default traces,logs,metrics) and
// SHREDDUCK_SOAK_RETENTION (default 10s; off turns retention off and the
// plateau checks with it, for measuring).
type soakSettings struct {
	length, retention time.Duration
	streams           []soakStream
	rate              int
}

func soakEnv(t *testing.T) soakSettings {
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
	s := soakSettings{length: env("SHREDDUCK_SOAK", 2*time.Minute), retention: env("SHREDDUCK_SOAK_RETENTION", 10*time.Second), rate: 10000}
	if v := os.Getenv("SHREDDUCK_SOAK_RATE"); v != "" {
		fmt.Sscan(v, &s.rate)
	}
	signals := "traces,logs,metrics"
	if v := os.Getenv("SHREDDUCK_SOAK_SIGNALS"); v != "" {
		signals = v
	}
	for _, sig := range strings.Split(signals, ",") {
		st := soakStream{signal: sig, rate: s.rate, workers: 4}
		if sig != "traces" {
			st.rate, st.workers = s.rate/2, 2
		}
		if s.rate == 0 {
			st.workers *= 2
		}
		s.streams = append(s.streams, st)
	}
	return s
}

// TestSoakRetention streams spans, log records and data points at a
// constant rate to a server with a short retention and samples the
// database file's size: once the first expired row groups are freed and
// reused, the file stops growing. "signals": shredduck serve as a child
// process, records of now, --retention 10s. "export-dir": the same
// records into a server with --export-dir, whose retention waits for
// each hour to be exported and then expires it whole; an hour passes in
// 5 s of the server's clock (SHREDDUCK_SOAK_HOUR), so the server runs in
// the test's process, and in the end every record expired is in the
// export once.
func TestSoakRetention(t *testing.T) {
	s := soakEnv(t)
	t.Run("signals", func(t *testing.T) { soakSignals(t, s) })
	t.Run("export-dir", func(t *testing.T) { soakExportDir(t, s) })
}

func soakSignals(t *testing.T, s soakSettings) {
	bin := e2eBuildShredduck(t)
	db := filepath.Join(t.TempDir(), "soak.duckdb")
	// A small threshold checkpoints (and so frees expired row groups)
	// every second or so at 10,000 spans/s; at full speed the default does.
	var flags []string
	if s.rate > 0 {
		flags = append(flags, "--checkpoint-threshold", "4MB")
	}
	if s.retention > 0 {
		flags = append(flags, "--retention", s.retention.String(), "--retention-interval", "1s")
	}
	child := e2eStartChild(t, bin, db, flags...)
	ctx, cancel := context.WithTimeout(context.Background(), s.length)
	defer cancel()
	counts, wait := soakSend(ctx, child.url, s.streams, time.Now)
	samples := soakSizes(ctx, db)
	wait()
	var sent int64
	expired := map[string]float64{}
	for _, st := range s.streams {
		table := "otel_" + st.signal
		c := counts[st.signal]
		rows := e2eQueryInt(t, child, "SELECT count(*) FROM "+table)
		expired[table] = e2eMetric(child, `shredduck_retention_rows_expired_total{table="`+table+`"}`)
		t.Logf("%s: %d sent (%.0f/s), %d in the table, %.0f expired; %d requests refused with 503", st.signal, c.acked.Load(),
			float64(c.acked.Load())/s.length.Seconds(), rows, expired[table], c.refused.Load())
		if c.failed.Load() > 0 {
			t.Errorf("%s: %d requests failed", st.signal, c.failed.Load())
		}
		sent += c.acked.Load()
	}
	// The file's blocks, and the row groups of shredduck_sources: a
	// transaction's position row each, deleted in time or each a block.
	t.Logf("blocks total, used, free: %s", e2eQueryText(child, `SELECT total_blocks, used_blocks, free_blocks FROM pragma_database_size() WHERE total_blocks > 0`))
	if rgs := e2eQueryInt(t, child, `SELECT count(DISTINCT row_group_id) FROM pragma_storage_info('shredduck_sources')`); rgs > 8 {
		t.Errorf("shredduck_sources has %d row groups: its old positions are not pruned", rgs)
	}
	child.stop()
	mid, last := soakPlateau(t, samples, s.length)
	t.Logf("%d records sent; largest file in the middle third %.1f MB, in the last third %.1f MB (%.1f bytes per record sent)",
		sent, float64(mid)/1e6, float64(last)/1e6, float64(last)/float64(sent))
	if s.retention == 0 {
		return
	}
	for table, n := range expired {
		if n == 0 {
			t.Errorf("nothing expired from %s", table)
		}
	}
	// The size swings by some blocks around the plateau (each checkpoint
	// frees a row group and allocates the next). At full speed it swings
	// by a checkpoint's worth (128MB of WAL): a run at full speed is for
	// the throughput.
	if s.rate > 0 {
		soakCheckPlateau(t, mid, last, sent)
	}
}

// soakCheckPlateau fails unless the file's largest size in the last
// third is within 25% of the middle third's and under half of what the
// records sent take without retention.
func soakCheckPlateau(t *testing.T, mid, last, sent int64) {
	t.Helper()
	if float64(last) > 1.25*float64(mid) {
		t.Errorf("the file grew from %d to %d bytes between the middle and the last third of the soak: no plateau", mid, last)
	}
	if without := soakBytesPerRecord * sent; float64(last) > 0.5*float64(without) {
		t.Errorf("the file has %d bytes, more than half the %d the %d records sent take without retention", last, without, sent)
	}
}

func soakExportDir(t *testing.T, s soakSettings) {
	if s.retention == 0 || s.rate == 0 {
		t.Skip("the export-dir soak checks the plateau: retention on, at a constant rate")
	}
	hour := 5 * time.Second
	if v := os.Getenv("SHREDDUCK_SOAK_HOUR"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("$SHREDDUCK_SOAK_HOUR: %v", err)
		}
		hour = d
	}
	// The server's clock, and the records' times: from an hour's start
	// two days ago, an hour every `hour`.
	speed := float64(time.Hour) / float64(hour)
	t0 := time.Now()
	s0 := t0.Add(-48 * time.Hour).Truncate(time.Hour)
	clock := func() time.Time { return s0.Add(time.Duration(float64(time.Since(t0)) * speed)) }

	path := filepath.Join(t.TempDir(), "soak.duckdb")
	dir := t.TempDir()
	// Retention 1 h, the export 5 minutes after each hour ends (the
	// default): an hour stays until it has been over for an hour, so the
	// table holds one to two hours (5 to 10 s here) and loses one in each
	// run that expires it.
	ts := startServerAt(t, path, Config{CheckpointThreshold: "4MB",
		Retention: Retention{Traces: time.Hour, Logs: time.Hour, Metrics: time.Hour, Interval: 500 * time.Millisecond},
		Export:    Export{Dir: dir, Delay: 5 * time.Minute, Interval: 500 * time.Millisecond},
		now:       clock})
	ctx, cancel := context.WithTimeout(context.Background(), s.length)
	defer cancel()
	counts, wait := soakSend(ctx, ts.url, s.streams, clock)
	samples := soakSizes(ctx, path)
	wait()
	ts.stop() // the expirer and the exporter stop with it

	var sent int64
	for _, st := range s.streams {
		table := "otel_" + st.signal
		c := counts[st.signal]
		if c.failed.Load() > 0 {
			t.Errorf("%s: %d requests failed", st.signal, c.failed.Load())
		}
		sent += c.acked.Load()
		files, _ := filepath.Glob(filepath.Join(dir, table, "*", "*", "data.parquet"))
		late, _ := filepath.Glob(filepath.Join(dir, table, "*", "*", "late-*.parquet"))
		parquet := fmt.Sprintf(`read_parquet('%s/%s/**/*.parquet', hive_partitioning = true, union_by_name = true)`, dir, table)
		var rows, rowsDistinct, exported, exportedDistinct, union, onlyExported int64
		for _, q := range []struct {
			sql string
			dst []any
		}{
			{`SELECT count(*), count(DISTINCT "soak.payload") FROM ` + table, []any{&rows, &rowsDistinct}},
			{`SELECT count(*), count(DISTINCT "soak.payload") FROM ` + parquet, []any{&exported, &exportedDistinct}},
			{`SELECT count(DISTINCT p) FROM (SELECT "soak.payload" AS p FROM ` + table + ` UNION ALL SELECT "soak.payload" FROM ` + parquet + `)`, []any{&union}},
			{`SELECT count(*) FROM ` + parquet + ` WHERE "soak.payload" NOT IN (SELECT "soak.payload" FROM ` + table + `)`, []any{&onlyExported}},
		} {
			if err := ts.db.SQL.QueryRow(q.sql).Scan(q.dst...); err != nil {
				t.Fatalf("%s: %v", q.sql, err)
			}
		}
		n := expiredRows(t, ts.srv, table)
		t.Logf("%s: %d sent (%.0f/s), %d in the table, %d in the export (%d hours' data.parquet, %d late files), %.0f expired; %d requests refused with 503",
			st.signal, c.acked.Load(), float64(c.acked.Load())/s.length.Seconds(), rows, exported, len(files), len(late), n, c.refused.Load())
		switch {
		case n == 0:
			t.Errorf("nothing expired from %s", table)
		case rows != rowsDistinct || exported != exportedDistinct:
			t.Errorf("%s: %d rows (%d distinct), the export %d (%d distinct): a record twice", table, rows, rowsDistinct, exported, exportedDistinct)
		case c.failed.Load() == 0 && union != c.acked.Load():
			t.Errorf("%s: the table and the export hold %d records, %d were acknowledged", table, union, c.acked.Load())
		case float64(onlyExported) != n:
			t.Errorf("%s: %d records are in the export and not in the table, %.0f expired", table, onlyExported, n)
		}
	}
	mid, last := soakPlateau(t, samples, s.length)
	t.Logf("%d records sent; largest file in the middle third %.1f MB, in the last third %.1f MB (%.1f bytes per record sent)",
		sent, float64(mid)/1e6, float64(last)/1e6, float64(last)/float64(sent))
	soakCheckPlateau(t, mid, last, sent)
}

// expiredRows is the server's shredduck_retention_rows_expired_total of
// table (0 if absent).
func expiredRows(t *testing.T, s *Server, table string) float64 {
	mfs, err := s.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "shredduck_retention_rows_expired_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "table" && l.GetValue() == table {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// e2eQueryText is the child's /v1/query answer to q, as text.
func e2eQueryText(c *e2eChild, q string) string {
	resp, err := http.Post(c.url+"/v1/query", "application/sql", strings.NewReader(q))
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.Status + " " + string(b)
}
