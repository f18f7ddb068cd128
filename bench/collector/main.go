// Command collector checks shredduck serve behind a real OpenTelemetry
// Collector: it starts `shredduck serve` (the binary given by -shredduck)
// on a temporary database, starts an in-process collector (the otlp
// receiver and the otlp_http exporter, configured by docs/collector.yaml),
// sends N spans, N log records and N metric data points to the collector's
// receiver as plain OTLP/HTTP protobuf requests, waits until the exporter
// has drained its queue into shredduck, and checks that the tables hold
// exactly what was sent: the counts, one row per id, the resource.
//
//	go run . -shredduck /path/to/shredduck -config ../../docs/collector.yaml -n 20000
//
// It is a separate Go module so that the collector's dependencies stay out
// of shredduck's; it talks to shredduck only over HTTP. bench/run_collector.sh
// builds both and runs it.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/confmap/provider/yamlprovider"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/otlphttpexporter"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "collector:", err)
		os.Exit(1)
	}
}

type options struct {
	shredduck string
	config    string
	n         int
	batch     int
	workers   int
	timeout   time.Duration
	keep      bool
}

func run() error {
	var o options
	flag.StringVar(&o.shredduck, "shredduck", "", "the shredduck `binary` (go build ./cmd/shredduck)")
	flag.StringVar(&o.config, "config", "../../docs/collector.yaml", "collector configuration `file`")
	flag.IntVar(&o.n, "n", 20000, "spans, log records and metric data points to send (each)")
	flag.IntVar(&o.batch, "batch", 100, "records per request to the collector")
	flag.IntVar(&o.workers, "workers", 4, "concurrent senders")
	flag.DurationVar(&o.timeout, "timeout", 3*time.Minute, "limit of the whole check")
	flag.BoolVar(&o.keep, "keep", false, "keep the temporary directory (the database and logs)")
	flag.Parse()
	if o.shredduck == "" {
		return errors.New("-shredduck is required")
	}
	if o.n < 1 || o.batch < 1 || o.workers < 1 {
		return errors.New("-n, -batch and -workers must be positive")
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	dir, err := os.MkdirTemp("", "shredduck-collector-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Fprintf(os.Stderr, "collector: keeping %s\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}

	// 1. shredduck serve on a free port.
	sd, err := startShredduck(ctx, o.shredduck, filepath.Join(dir, "collector.duckdb"), filepath.Join(dir, "serve.log"))
	if err != nil {
		return err
	}
	defer sd.kill()
	fmt.Fprintf(os.Stderr, "collector: shredduck serve (pid %d) on %s\n", sd.cmd.Process.Pid, sd.url)

	// 2. The collector, configured by the documented file, its ports and
	// shredduck's address set through the variables the file reads.
	recvHTTP, recvGRPC := freePort(), freePort()
	if recvHTTP == "" || recvGRPC == "" {
		return errors.New("no free port")
	}
	os.Setenv("COLLECTOR_HTTP_ENDPOINT", recvHTTP)
	os.Setenv("COLLECTOR_GRPC_ENDPOINT", recvGRPC)
	os.Setenv("SHREDDUCK_ENDPOINT", sd.url)
	col, colDone, err := startCollector(ctx, o.config)
	if err != nil {
		return err
	}
	stopCollector := func() error {
		col.Shutdown()
		select {
		case err := <-colDone:
			return err
		case <-time.After(time.Minute):
			return errors.New("the collector did not stop within a minute")
		}
	}
	collectorStopped := false
	defer func() {
		if !collectorStopped {
			stopCollector()
		}
	}()
	if err := waitListening(ctx, recvHTTP, colDone); err != nil {
		return fmt.Errorf("collector receiver: %w", err)
	}
	fmt.Fprintf(os.Stderr, "collector: collector %s receiving OTLP/HTTP on %s, exporting to %s\n", o.config, recvHTTP, sd.url)

	// 3. Send.
	start := time.Now()
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: o.workers}}
	sent := map[string]*sender{}
	for _, sig := range signals {
		s := &sender{sig: sig}
		sent[sig.table] = s
		if err := s.send(ctx, client, "http://"+recvHTTP, o); err != nil {
			return err
		}
	}
	sendTime := time.Since(start)

	// 4. Wait for the exporter to drain: every table reaches its count.
	var counts map[string]int64
	for {
		counts = map[string]int64{}
		done := true
		for _, sig := range signals {
			n, err := tableRows(ctx, client, sd.url, sig.table)
			if err != nil {
				return err
			}
			counts[sig.table] = n
			if n < int64(o.n) {
				done = false
			}
		}
		if done {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the collector did not deliver everything before the timeout: %v of %d each", counts, o.n)
		case <-time.After(100 * time.Millisecond):
		}
	}
	drainTime := time.Since(start)
	if reqs, err := exportRequests(ctx, client, sd.url); err == nil {
		fmt.Fprintf(os.Stderr, "collector: requests the exporter made to shredduck: %s\n", reqs)
	}

	// 5. Stop the collector (it flushes what it still holds), then check.
	collectorStopped = true
	if err := stopCollector(); err != nil {
		return fmt.Errorf("collector: %w", err)
	}
	var problems []string
	for _, sig := range signals {
		s := sent[sig.table]
		r, err := queryRow(ctx, client, sd.url, fmt.Sprintf(
			`SELECT count(*), count(DISTINCT "bench.id"), min("bench.id"), max("bench.id"), count(DISTINCT service_name), min(service_name) FROM %s`, sig.table))
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "collector: %-12s sent %d in %d requests (%d retried), table: rows %s, distinct ids %s, ids %s..%s, service %s\n",
			sig.table, s.records.Load(), s.requests.Load(), s.retries.Load(), r[0], r[1], r[2], r[3], r[5])
		want := []string{strconv.Itoa(o.n), strconv.Itoa(o.n), "0", strconv.Itoa(o.n - 1), "1", "collector-bench"}
		for i := range want {
			if r[i] != want[i] {
				problems = append(problems, fmt.Sprintf("%s: got count, distinct ids, min id, max id, services, service = %v; want %v", sig.table, r, want))
				break
			}
		}
		if s.records.Load() != int64(o.n) {
			problems = append(problems, fmt.Sprintf("%s: the collector accepted %d records, want %d", sig.table, s.records.Load(), o.n))
		}
	}
	if err := sd.stop(); err != nil {
		problems = append(problems, err.Error())
	}
	total := float64(3 * o.n)
	fmt.Fprintf(os.Stderr, "collector: sent %d records in %.2fs, all in shredduck after %.2fs (%.0f records/s end to end)\n",
		3*o.n, sendTime.Seconds(), drainTime.Seconds(), total/drainTime.Seconds())
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	fmt.Println("collector: OK: every span, log record and data point sent to the collector is in shredduck, once")
	return nil
}

// components is the collector's build: the otlp receiver, the otlp_http
// exporter, and the telemetry the service needs.
func components() (otelcol.Factories, error) {
	var f otelcol.Factories
	var err error
	if f.Receivers, err = otelcol.MakeFactoryMap[receiver.Factory](otlpreceiver.NewFactory()); err != nil {
		return f, err
	}
	if f.Exporters, err = otelcol.MakeFactoryMap[exporter.Factory](otlphttpexporter.NewFactory()); err != nil {
		return f, err
	}
	f.Telemetry = otelconftelemetry.NewFactory()
	return f, nil
}

// startCollector runs a collector on the configuration file, with its own
// metrics off (no port 8888) and its log at warn.
func startCollector(ctx context.Context, config string) (*otelcol.Collector, chan error, error) {
	abs, err := filepath.Abs(config)
	if err != nil {
		return nil, nil, err
	}
	col, err := otelcol.NewCollector(otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{Command: "shredduck-collector-bench", Description: "shredduck collector check", Version: "dev"},
		Factories: components,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{ResolverSettings: confmap.ResolverSettings{
			URIs: []string{
				"file:" + abs,
				"yaml:service::telemetry::metrics::level: none",
				"yaml:service::telemetry::logs::level: warn",
			},
			ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory(), envprovider.NewFactory(), yamlprovider.NewFactory()},
			DefaultScheme:     "env",
		}},
		DisableGracefulShutdown: true, // this program handles its own signals
	})
	if err != nil {
		return nil, nil, err
	}
	done := make(chan error, 1)
	go func() { done <- col.Run(context.WithoutCancel(ctx)) }()
	return col, done, nil
}

// waitListening waits until addr accepts connections (or the collector
// exits).
func waitListening(ctx context.Context, addr string, exited chan error) error {
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("the collector exited: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// freePort returns 127.0.0.1:port of a port that was free a moment ago.
func freePort() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return ""
	}
	defer l.Close()
	return l.Addr().String()
}

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

// shredduck is a `shredduck serve` child process.
type shredduck struct {
	cmd    *exec.Cmd
	url    string
	log    string
	exited chan struct{}
	err    error
}

func startShredduck(ctx context.Context, bin, db, logFile string) (*shredduck, error) {
	lf, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "serve", "--db", db, "--http", "127.0.0.1:0", "--grpc", "off")
	// Only the flags configure it (and $SHREDDUCK_TOKEN, which the
	// collector's exporter then sends, if the config's header is enabled).
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "SHREDDUCK_") || strings.HasPrefix(e, "SHREDDUCK_TOKEN=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &shredduck{cmd: cmd, log: logFile, exited: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			fmt.Fprintln(lf, sc.Text())
			var rec struct{ Msg, Port, Addr string }
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "listening" && rec.Port == "http" {
				select {
				case addr <- rec.Addr:
				default:
				}
			}
		}
		io.Copy(lf, stderr)
		lf.Close()
		s.err = cmd.Wait()
		close(s.exited)
	}()
	select {
	case a := <-addr:
		s.url = "http://" + a
	case <-s.exited:
		return nil, fmt.Errorf("shredduck serve exited at startup: %v (log: %s)", s.err, logFile)
	case <-ctx.Done():
		s.kill()
		return nil, fmt.Errorf("shredduck serve did not start: %v", ctx.Err())
	}
	for {
		resp, err := http.Get(s.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case <-ctx.Done():
			s.kill()
			return nil, fmt.Errorf("shredduck serve is not ready: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *shredduck) kill() {
	select {
	case <-s.exited:
	default:
		s.cmd.Process.Kill()
		<-s.exited
	}
}

// stop sends SIGTERM and wants exit status 0.
func (s *shredduck) stop() error {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
		if s.err != nil {
			return fmt.Errorf("shredduck serve after SIGTERM: %v (log: %s)", s.err, s.log)
		}
		return nil
	case <-time.After(time.Minute):
		s.kill()
		return errors.New("shredduck serve did not exit within a minute of SIGTERM")
	}
}

// exportRequests summarizes shredduck's shredduck_requests_total of the
// OTLP/HTTP endpoints (the batching the exporter did).
func exportRequests(ctx context.Context, client *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
	if err != nil {
		return "", err
	}
	if tok := os.Getenv("SHREDDUCK_TOKEN"); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "shredduck_requests_total{") && !strings.Contains(l, `endpoint="/v1/query"`) && strings.Contains(l, `endpoint="/v1/`) {
			out = append(out, strings.TrimPrefix(l, "shredduck_requests_total"))
		}
	}
	return strings.Join(out, ", "), sc.Err()
}

// tableRows is count(*) of a table through POST /v1/query (0 while the
// table does not exist).
func tableRows(ctx context.Context, client *http.Client, url, table string) (int64, error) {
	r, err := queryRow(ctx, client, url, "SELECT count(*) FROM duckdb_tables() WHERE table_name = '"+table+"'")
	if err != nil {
		return 0, err
	}
	if r[0] == "0" {
		return 0, nil
	}
	if r, err = queryRow(ctx, client, url, "SELECT count(*) FROM "+table); err != nil {
		return 0, err
	}
	return strconv.ParseInt(r[0], 10, 64)
}

// queryRow runs a one-row query on shredduck serve and returns its cells
// as text (JSON strings unquoted).
func queryRow(ctx context.Context, client *http.Client, url, sql string) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/query", strings.NewReader(sql))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/sql")
	req.Header.Set("Accept", "application/json")
	if tok := os.Getenv("SHREDDUCK_TOKEN"); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("POST /v1/query %q: %s: %s", sql, resp.Status, bytes.TrimSpace(b))
	}
	var res struct {
		Rows [][]json.RawMessage `json:"rows"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, fmt.Errorf("POST /v1/query: %w", err)
	}
	if len(res.Rows) != 1 {
		return nil, fmt.Errorf("POST /v1/query %q: %d rows, want 1", sql, len(res.Rows))
	}
	out := make([]string, len(res.Rows[0]))
	for i, c := range res.Rows[0] {
		var s string
		if json.Unmarshal(c, &s) == nil {
			out[i] = s
		} else {
			out[i] = string(c)
		}
	}
	return out, nil
}
