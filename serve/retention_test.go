package serve

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/shredduck/shredduck/internal/parquettest"
)

// aged is a record of a retention test: its id and its time's age. A
// log record of zero age has no time; a span or data point whose id
// starts with "timeless" has none either (its time is 0).
type aged struct {
	id  string
	age time.Duration
}

func agedTraces(t *testing.T, now time.Time, recs []aged) []byte {
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	for i, r := range recs {
		s := ss.Spans().AppendEmpty()
		s.SetName("op")
		s.SetTraceID(pcommon.TraceID{9, byte(i)})
		s.SetSpanID(pcommon.SpanID{9, byte(i)})
		if !strings.HasPrefix(r.id, "timeless") {
			at := now.Add(-r.age)
			s.SetStartTimestamp(pcommon.NewTimestampFromTime(at))
			s.SetEndTimestamp(pcommon.NewTimestampFromTime(at.Add(time.Millisecond)))
		}
		s.Attributes().PutStr("test.id", r.id)
	}
	b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// agedLogs gives records whose id starts with "observed-" only an
// observed time: retention falls back to it.
func agedLogs(t *testing.T, now time.Time, recs []aged) []byte {
	ld := plog.NewLogs()
	sl := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty()
	for _, r := range recs {
		l := sl.LogRecords().AppendEmpty()
		l.Body().SetStr("hello")
		if r.age != 0 {
			ts := pcommon.NewTimestampFromTime(now.Add(-r.age))
			if strings.HasPrefix(r.id, "observed-") {
				l.SetObservedTimestamp(ts)
			} else {
				l.SetTimestamp(ts)
				l.SetObservedTimestamp(pcommon.NewTimestampFromTime(now))
			}
		}
		l.Attributes().PutStr("test.id", r.id)
	}
	b, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func agedMetrics(t *testing.T, now time.Time, recs []aged) []byte {
	md := pmetric.NewMetrics()
	m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("g")
	g := m.SetEmptyGauge()
	for i, r := range recs {
		p := g.DataPoints().AppendEmpty()
		if !strings.HasPrefix(r.id, "timeless") {
			p.SetTimestamp(pcommon.NewTimestampFromTime(now.Add(-r.age)))
		}
		p.SetIntValue(int64(i))
		p.Attributes().PutStr("test.id", r.id)
	}
	b, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Retention deletes exactly the rows older than each table's retention by
// their own time, in steps smaller than the expired rows, and counts them
// in /metrics; the rest stay.
func TestRetention(t *testing.T) {
	now := time.Now()
	var traces, logs, metrics []aged
	var wantTraces, wantLogs, wantMetrics []string
	for i := range 25 {
		id := func(p string) string { return p + string(rune('a'+i)) }
		// traces keep 1h, logs 2h, metrics 3h: ages of 0.5h..12.5h
		age := time.Duration(i)*30*time.Minute + 30*time.Minute
		traces = append(traces, aged{id("t"), age})
		if age < time.Hour {
			wantTraces = append(wantTraces, id("t"))
		}
		logs = append(logs, aged{id("l"), age}, aged{id("observed-l"), age})
		if age < 2*time.Hour {
			wantLogs = append(wantLogs, id("l"), id("observed-l"))
		}
		metrics = append(metrics, aged{id("m"), age})
		if age < 3*time.Hour {
			wantMetrics = append(wantMetrics, id("m"))
		}
	}
	// a log record with no time at all is kept, and so are a span that
	// started at 0 and a data point of time 0 (stored as NULL)
	logs = append(logs, aged{"timeless", 0}, aged{"future", -time.Hour})
	wantLogs = append(wantLogs, "timeless", "future")
	traces = append(traces, aged{"timeless-t", 0})
	wantTraces = append(wantTraces, "timeless-t")
	metrics = append(metrics, aged{"timeless-m", 0})
	wantMetrics = append(wantMetrics, "timeless-m")

	ts := startServer(t, Config{Retention: Retention{Traces: time.Hour, Logs: 2 * time.Hour, Metrics: 3 * time.Hour, Interval: 20 * time.Millisecond, StepRows: 3}})
	for _, c := range []struct {
		path string
		body []byte
	}{
		{"/v1/traces", agedTraces(t, now, traces)},
		{"/v1/logs", agedLogs(t, now, logs)},
		{"/v1/metrics", agedMetrics(t, now, metrics)},
	} {
		if r := ts.post(c.path, "application/x-protobuf", "", c.body); r.status != http.StatusOK {
			t.Fatalf("%s: %d %s", c.path, r.status, r.body)
		}
	}
	check := func(table string, want []string, total int) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for ts.count(table) != len(want) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		var got []string
		for id := range ts.ids(table) {
			got = append(got, id)
		}
		sort.Strings(got)
		sort.Strings(want)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s keeps %v, want %v", table, got, want)
		}
		// The counter is added after the step's commit: the rows may be
		// gone a moment before it shows.
		line := `shredduck_retention_rows_expired_total{table="` + table + `"} `
		wantLine := line + itoa(total-len(want))
		body := string(ts.do(http.MethodGet, "/metrics", "", "", nil).body)
		for !strings.Contains(body, wantLine) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
			body = string(ts.do(http.MethodGet, "/metrics", "", "", nil).body)
		}
		if !strings.Contains(body, wantLine) {
			t.Errorf("/metrics has no %q", wantLine)
		}
	}
	check("otel_traces", wantTraces, len(traces))
	check("otel_logs", wantLogs, len(logs))
	check("otel_metrics", wantMetrics, len(metrics))
	body := string(ts.do(http.MethodGet, "/metrics", "", "", nil).body)
	for _, m := range []string{"shredduck_retention_last_run_timestamp_seconds ", "shredduck_retention_last_run_duration_seconds "} {
		if !strings.Contains(body, m) {
			t.Errorf("/metrics has no %s", m)
		}
	}
	// The server still takes requests after its expiry steps.
	if r := ts.post("/v1/traces", "application/x-protobuf", "", agedTraces(t, time.Now(), []aged{{"after", 0}})); r.status != http.StatusOK {
		t.Fatalf("after expiry: %d %s", r.status, r.body)
	}
	if n := ts.count("otel_traces"); n != len(wantTraces)+1 {
		t.Errorf("otel_traces has %d rows after one more span, want %d", n, len(wantTraces)+1)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// With an export directory, each finished hour is written to Parquet and
// retention expires only what is written: the spans here arrive after
// their hours were written (empty), so those hours are written again
// before they expire; an export that fails holds every row back.
func TestExportDirGuardsRetention(t *testing.T) {
	now := time.Now()
	// Whole hours expire: with 90 minutes, the hour that ended 30 to 90
	// minutes ago stays.
	// A span with no time (start 0) is neither expired nor exported.
	recs := []aged{{"4h", 4*time.Hour + time.Minute}, {"3h", 3*time.Hour + time.Minute}, {"now", 0}, {"timeless", 0}}
	dir := t.TempDir()
	// A late file that a crash left renamed into place before its
	// transaction committed (not in shredduck_meta): removed, not read.
	orphan := filepath.Join(dir, "otel_traces", "date=2026-01-01", "hour=00", "late-1.parquet")
	if err := os.MkdirAll(filepath.Dir(orphan), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(orphan, []byte("not parquet"), 0o644); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, Config{
		Retention: Retention{Traces: 90 * time.Minute, Interval: 20 * time.Millisecond},
		Export:    Export{Dir: dir, Delay: time.Millisecond, Interval: 20 * time.Millisecond},
	})
	if r := ts.post("/v1/traces", "application/x-protobuf", "", agedTraces(t, now, recs)); r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
	deadline := time.Now().Add(20 * time.Second)
	for ts.count("otel_traces") != 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := ts.ids("otel_traces"); len(got) != 2 || got["now"] != 1 || got["timeless"] != 1 {
		t.Fatalf("otel_traces keeps %v, want the recent span and the one with no time", got)
	}
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Errorf("a late file whose expiry did not commit is still there: %v", err)
	}
	var n int
	if err := ts.db.SQL.QueryRow(`SELECT count(*) FROM read_parquet('` + dir + `/otel_traces/**/*.parquet', hive_partitioning = true) WHERE "test.id" IN ('4h', '3h')`).Scan(&n); err != nil || n != 2 {
		t.Errorf("the expired spans in the export: %d, %v; want 2", n, err)
	}
	if err := ts.db.SQL.QueryRow(`SELECT count(*) FROM read_parquet('` + dir + `/otel_traces/**/*.parquet', hive_partitioning = true) WHERE "test.id" = 'timeless'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("the span with no time is in the export %d times (%v); want none", n, err)
	}
	parquettest.AssertZstd(t, ts.db.SQL, dir+"/otel_traces/**/*.parquet")
	ts.close()

	// An export directory that cannot be written: nothing expires.
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "otel_traces"), nil, 0o644); err != nil { // not a directory
		t.Fatal(err)
	}
	ts = startServer(t, Config{
		Retention: Retention{Traces: 90 * time.Minute, Interval: 20 * time.Millisecond},
		Export:    Export{Dir: bad, Delay: time.Millisecond, Interval: 20 * time.Millisecond},
	})
	deadline = time.Now().Add(20 * time.Second)
	if r := ts.post("/v1/traces", "application/x-protobuf", "", agedTraces(t, now, recs)); r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
	for metricValue(ts.do(http.MethodGet, "/metrics", "", "", nil).body, "shredduck_export_errors_total") < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := ts.count("otel_traces"); n != len(recs) {
		t.Errorf("otel_traces has %d rows while the export fails, want all %d", n, len(recs))
	}
	// The failure shows on /readyz (still 200: ingest and queries work)
	// and in /metrics, until the directory is fixed.
	if r := ts.do(http.MethodGet, "/readyz", "", "", nil); r.status != http.StatusOK || !strings.Contains(string(r.body), "degraded: exporting to "+bad) || !strings.Contains(string(r.body), "retention waits") {
		t.Errorf("/readyz while the export fails: %d %q", r.status, r.body)
	}
	if v := metricValue(ts.do(http.MethodGet, "/metrics", "", "", nil).body, "shredduck_export_failing"); v != 1 {
		t.Errorf("shredduck_export_failing %g while the export fails, want 1", v)
	}
	if err := os.Remove(filepath.Join(bad, "otel_traces")); err != nil {
		t.Fatal(err)
	}
	for metricValue(ts.do(http.MethodGet, "/metrics", "", "", nil).body, "shredduck_export_failing") != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if r := ts.do(http.MethodGet, "/readyz", "", "", nil); r.status != http.StatusOK || string(r.body) != "ready\n" {
		t.Errorf("/readyz once the export works again: %d %q", r.status, r.body)
	}
}

// metricValue returns the value of an unlabelled sample in a /metrics
// body (-1 when absent).
func metricValue(body []byte, name string) float64 {
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

// An export during streaming: while clients keep sending spans of hours
// that are being exported and expired (records arriving late for them)
// and current ones, every acknowledged span ends up exactly once in the
// table (current) or in the export (expired), in data.parquet or, for
// those that came after their hour had expired, in a late-*.parquet.
func TestExportWhileStreaming(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, Config{
		Retention: Retention{Traces: 90 * time.Minute, Interval: 10 * time.Millisecond},
		Export:    Export{Dir: dir, Delay: time.Millisecond, Interval: 10 * time.Millisecond},
	})
	ages := []time.Duration{4*time.Hour + time.Minute, 3*time.Hour + time.Minute, 0}
	var mu sync.Mutex
	acked := map[string]bool{}
	var wg sync.WaitGroup
	stop := time.Now().Add(1500 * time.Millisecond)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(stop); i++ {
				var recs []aged
				for j, a := range ages {
					recs = append(recs, aged{fmt.Sprintf("w%d-%d-%d", w, i, j), a})
				}
				resp, err := ts.client.Post(ts.url+"/v1/traces", "application/x-protobuf", bytes.NewReader(agedTraces(t, time.Now(), recs)))
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					mu.Lock()
					for _, r := range recs {
						acked[r.id] = true
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	ts.waitLoaded()
	cut := time.Now().Add(-90 * time.Minute).Truncate(time.Hour)
	deadline := time.Now().Add(20 * time.Second)
	for {
		var n int
		if err := ts.db.SQL.QueryRow(`SELECT count(*) FROM otel_traces WHERE start_time < make_timestamp_ns(?)`, cut.UnixNano()).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d expired spans still in the table after 20s", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	count := func(q string) map[string]int {
		rows, err := ts.db.SQL.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string]int{}
		for rows.Next() {
			var id string
			var n int
			if err := rows.Scan(&id, &n); err != nil {
				t.Fatal(err)
			}
			out[id] = n
		}
		return out
	}
	table := count(`SELECT "test.id", count(*) FROM otel_traces GROUP BY 1`)
	exported := count(`SELECT "test.id", count(*) FROM read_parquet('` + dir + `/otel_traces/**/*.parquet', hive_partitioning = true, union_by_name = true) GROUP BY 1`)
	var late int
	files, _ := filepath.Glob(filepath.Join(dir, "otel_traces", "*", "*", "late-*.parquet"))
	late = len(files)
	for id := range acked {
		old := !strings.HasSuffix(id, "-2")
		switch {
		case old && (exported[id] != 1 || table[id] != 0):
			t.Errorf("expired span %s: %d times in the export, %d in the table; want 1 and 0", id, exported[id], table[id])
		case !old && table[id] != 1:
			t.Errorf("current span %s: %d times in the table, want 1", id, table[id])
		}
	}
	t.Logf("%d spans acknowledged; %d late files", len(acked), late)
	if len(acked) < 100 {
		t.Errorf("only %d spans acknowledged", len(acked))
	}
}
