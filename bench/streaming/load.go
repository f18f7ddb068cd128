package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"github.com/shredduck/shredduck/internal/benchtraces"
)

// config is the load's parameters.
type config struct {
	protocol string // http or grpc
	workers  int
	records  int64 // spans per run, over all workers
	runs     int
	warmup   int
	batch    int    // the SDK's max export batch size; -sender replay: spans per request
	sender   string // sdk or replay
	ack      string // the server's --ack (recorded only)
	gzip     bool
	timeout  time.Duration
}

// target is a server under load.
type target struct {
	name     string // shredduck or ceiling
	httpURL  string // http://host:port
	grpcAddr string // host:port
	pid      int    // 0: unknown (no RSS)
	count    func(context.Context) (int64, error)
}

// Sample is one run against one target.
type Sample struct {
	Target        string  `json:"target"`
	Run           int     `json:"run"`
	WarmUp        bool    `json:"warmup"`
	Spans         int64   `json:"spans_sent"`     // spans created by the SDK
	Exported      int64   `json:"spans_exported"` // spans in export calls that succeeded
	RowsIngested  int64   `json:"rows_ingested"`  // what the target's count grew by
	Seconds       float64 `json:"seconds"`
	SpansPerSec   float64 `json:"spans_per_sec"`
	Requests      int     `json:"requests"`
	P50ms         float64 `json:"p50_ms"`
	P99ms         float64 `json:"p99_ms"`
	MaxMs         float64 `json:"max_ms"`
	PeakRSS       int64   `json:"server_peak_rss_bytes"`
	PeakRSSPerRun bool    `json:"server_peak_rss_per_run"` // VmHWM was reset before the run; else it is the process's peak so far
	SDKErrors     int64   `json:"sdk_errors"`
	Retries       int64   `json:"retries,omitempty"` // -sender replay: 503/429 answers retried
	// VisibleSeconds is the time from the last answer until every span
	// was counted (0 with --ack commit; the backlog's load with --ack log).
	VisibleSeconds float64 `json:"visible_after_seconds"`
	// ServerCPUus is the target's CPU time per span from the clock's start
	// until every span was counted (0 when unknown); SenderCPUus is this
	// process's while it sent them. On a machine both saturate, the
	// target's rate is cores over their sum.
	ServerCPUus float64 `json:"server_cpu_us_per_span,omitempty"`
	SenderCPUus float64 `json:"sender_cpu_us_per_span,omitempty"`
	FirstError  string  `json:"first_error,omitempty"`
	OK          bool    `json:"ok"`
	Failure     string  `json:"failure,omitempty"`
}

// Summary is the median of the timed runs of one target.
type Summary struct {
	Target      string  `json:"target"`
	Runs        int     `json:"runs"`
	SpansPerSec float64 `json:"spans_per_sec_median"`
	MinSpansSec float64 `json:"spans_per_sec_min"`
	MaxSpansSec float64 `json:"spans_per_sec_max"`
	P50ms       float64 `json:"p50_ms_median"`
	P99ms       float64 `json:"p99_ms_median"`
	PeakRSS     int64   `json:"server_peak_rss_bytes_max"`
	// VisibleSeconds: the median VisibleSeconds; SustainedSpansSec: spans
	// over the time until all were visible (the median run's).
	VisibleSeconds    float64 `json:"visible_after_seconds_median"`
	SustainedSpansSec float64 `json:"sustained_spans_per_sec_median"`
	ServerCPUus       float64 `json:"server_cpu_us_per_span_median,omitempty"`
	SenderCPUus       float64 `json:"sender_cpu_us_per_span_median,omitempty"`
}

// Result is the file bench/run_streaming.sh writes.
type Result struct {
	Kind     string            `json:"kind"` // "streaming"
	Command  string            `json:"command"`
	Driver   string            `json:"driver_command"`
	Started  time.Time         `json:"started"`
	Seconds  float64           `json:"seconds"`
	Machine  map[string]string `json:"machine"`
	Versions map[string]string `json:"versions"`
	Params   map[string]any    `json:"params"`
	// Ratio is the median spans/s of shredduck over that of the ceiling.
	Ratio float64 `json:"ratio_shredduck_over_ceiling"`
	// RatioSustained is the same of the sustained rates (spans over the
	// time until all were visible): below Ratio with --ack log when the
	// loader trails the answers.
	RatioSustained float64   `json:"ratio_sustained"`
	Samples        []Sample  `json:"samples"`
	Summary        []Summary `json:"summary"`
	Failed         bool      `json:"failed"`
	Failures       []string  `json:"failures,omitempty"`
}

func runLoad(args []string) error {
	fs := flag.NewFlagSet("streaming", flag.ContinueOnError)
	httpURL := fs.String("http", "", "shredduck serve's HTTP base `URL` (http://127.0.0.1:4318)")
	grpcAddr := fs.String("grpc", "", "shredduck serve's gRPC `address` (127.0.0.1:4317), for -protocol grpc")
	pid := fs.Int("pid", 0, "shredduck serve's process id, for its peak RSS")
	var cfg config
	fs.StringVar(&cfg.protocol, "protocol", "http", "http (otlptracehttp, protobuf) or grpc (otlptracegrpc)")
	fs.IntVar(&cfg.workers, "workers", 16, "concurrent workers, each with its own TracerProvider and exporter")
	fs.Int64Var(&cfg.records, "records", 1_000_000, "spans per run, over all workers")
	fs.IntVar(&cfg.runs, "runs", 5, "timed runs per target")
	fs.IntVar(&cfg.warmup, "warmup", 1, "warm-up runs per target (not summarized)")
	fs.IntVar(&cfg.batch, "batch", 512, "the SDK's max export batch size (spans per request); -sender replay: spans per request")
	fs.StringVar(&cfg.sender, "sender", "sdk", "sdk (an OpenTelemetry Go SDK TracerProvider per worker) or replay (requests encoded before the clock starts, POSTed by the workers: a light sender; HTTP only)")
	fs.BoolVar(&cfg.gzip, "gzip", false, "gzip the export requests")
	fs.StringVar(&cfg.ack, "ack", "commit", "the server's --ack, recorded with the result")
	fs.DurationVar(&cfg.timeout, "timeout", 10*time.Minute, "limit of one run")
	serverFlags := fs.String("server-flags", "", "the flags the server was started with beyond its addresses and database, recorded with the result (\"\": its defaults)")
	ceiling := fs.Bool("ceiling", true, "also measure the decode-only endpoint")
	out := fs.String("out", "", "write the result JSON to `file`")
	command := fs.String("command", "", "the command that ran this, recorded in the result")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *httpURL == "" {
		return errors.New("-http is required")
	}
	if cfg.protocol != "http" && cfg.protocol != "grpc" {
		return fmt.Errorf("-protocol %q: http or grpc", cfg.protocol)
	}
	if cfg.protocol == "grpc" && *grpcAddr == "" {
		return errors.New("-protocol grpc needs -grpc")
	}
	if cfg.sender != "sdk" && (cfg.sender != "replay" || cfg.protocol != "http") {
		return fmt.Errorf("-sender %q: sdk, or replay with -protocol http", cfg.sender)
	}
	if cfg.workers < 1 || cfg.records < int64(cfg.workers) || cfg.runs < 1 || cfg.warmup < 0 || cfg.batch < 1 {
		return errors.New("bad -workers, -records, -runs, -warmup or -batch")
	}
	started := time.Now()
	client := &http.Client{Timeout: 5 * time.Minute}
	ctx := context.Background()

	shred := &target{name: "shredduck", httpURL: strings.TrimRight(*httpURL, "/"), grpcAddr: *grpcAddr, pid: *pid}
	shred.count = func(ctx context.Context) (int64, error) { return tableRows(ctx, client, shred.httpURL, "otel_traces") }
	targets := []*target{shred}
	if *ceiling {
		cp, err := startCeiling()
		if err != nil {
			return err
		}
		defer cp.stop()
		targets = append(targets, &target{name: "ceiling", httpURL: "http://" + cp.addrs.HTTP, grpcAddr: cp.addrs.GRPC,
			pid: cp.pid(), count: func(ctx context.Context) (int64, error) { return cp.count(ctx, client) }})
	}

	errs := &sdkErrors{}
	otel.SetErrorHandler(errs)
	res := &Result{Kind: "streaming", Command: *command, Driver: strings.Join(os.Args, " "), Started: started.UTC(),
		Machine: machine(), Versions: versions(ctx, client, shred.httpURL),
		Params: map[string]any{"protocol": cfg.protocol, "encoding": "protobuf", "sender": cfg.sender, "ack": cfg.ack, "server_flags": *serverFlags, "workers": cfg.workers, "records": cfg.records,
			"runs": cfg.runs, "warmup": cfg.warmup, "batch": cfg.batch, "gzip": cfg.gzip,
			"ceiling": "decode-only, separate process: pdata ptraceotlp.ExportRequest.UnmarshalProto (HTTP) or pdata's gRPC codec (gRPC), then discarded"}}
	fmt.Fprintf(os.Stderr, "streaming: %s, %d workers × %d spans per run, %d warm-up + %d timed runs per target\n",
		cfg.protocol, cfg.workers, cfg.records/int64(cfg.workers), cfg.warmup, cfg.runs)
	for run := range cfg.warmup + cfg.runs {
		order := targets
		if run%2 == 1 {
			order = slices.Clone(targets)
			slices.Reverse(order)
		}
		for _, tgt := range order {
			var s Sample
			if cfg.sender == "replay" {
				s = replayOnce(ctx, tgt, cfg)
			} else {
				s = runOnce(ctx, tgt, cfg, errs)
			}
			s.Run, s.WarmUp = run, run < cfg.warmup
			res.Samples = append(res.Samples, s)
			status := "ok"
			if !s.OK {
				status = "FAILED: " + s.Failure
				res.Failures = append(res.Failures, fmt.Sprintf("%s run %d: %s", s.Target, run, s.Failure))
			}
			fmt.Fprintf(os.Stderr, "  run %d %-9s %9.0f spans/s  p50 %7.2f ms  p99 %7.2f ms  %5d requests  rss %6.1f MiB  %s\n",
				run, s.Target, s.SpansPerSec, s.P50ms, s.P99ms, s.Requests, float64(s.PeakRSS)/(1<<20), status)
		}
	}
	res.Failed = len(res.Failures) > 0
	for _, tgt := range targets {
		res.Summary = append(res.Summary, summarize(tgt.name, res.Samples))
	}
	if len(res.Summary) == 2 && res.Summary[1].SpansPerSec > 0 {
		res.Ratio = res.Summary[0].SpansPerSec / res.Summary[1].SpansPerSec
		res.RatioSustained = res.Summary[0].SustainedSpansSec / res.Summary[1].SustainedSpansSec
	}
	res.Seconds = time.Since(started).Seconds()
	printTable(os.Stdout, res, cfg)
	if *out != "" {
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(*out, append(b, '\n'), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "streaming: wrote %s\n", *out)
	}
	if res.Failed {
		return fmt.Errorf("%d runs failed: %s", len(res.Failures), strings.Join(res.Failures, "; "))
	}
	return nil
}

// sdkErrors counts what the SDK hands to otel.Handle (failed exports,
// dropped spans), keeping the first message.
type sdkErrors struct {
	n     atomic.Int64
	mu    sync.Mutex
	first string
}

func (e *sdkErrors) Handle(err error) {
	if e.n.Add(1) == 1 {
		e.mu.Lock()
		e.first = err.Error()
		e.mu.Unlock()
	}
}

func (e *sdkErrors) reset() {
	e.n.Store(0)
	e.mu.Lock()
	e.first = ""
	e.mu.Unlock()
}

// latencies collects request durations.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// timedTransport times each request until its response headers arrive:
// shredduck answers only after the commit, so that is the export latency.
type timedTransport struct {
	base http.RoundTripper
	lat  *latencies
}

func (t *timedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := t.base.RoundTrip(r)
	t.lat.add(time.Since(start))
	return resp, err
}

// countingExporter counts the spans of export calls that succeeded.
type countingExporter struct {
	sdktrace.SpanExporter
	n *atomic.Int64
}

func (c countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := c.SpanExporter.ExportSpans(ctx, spans)
	if err == nil {
		c.n.Add(int64(len(spans)))
	}
	return err
}

func newExporter(ctx context.Context, tgt *target, cfg config, lat *latencies, tr *http.Transport) (sdktrace.SpanExporter, error) {
	if cfg.protocol == "grpc" {
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(tgt.grpcAddr), otlptracegrpc.WithInsecure(),
			otlptracegrpc.WithTimeout(time.Minute),
			otlptracegrpc.WithDialOption(grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
				cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				start := time.Now()
				err := invoker(ctx, method, req, reply, cc, opts...)
				lat.add(time.Since(start))
				return err
			}))}
		if cfg.gzip {
			opts = append(opts, otlptracegrpc.WithCompressor("gzip"))
		}
		return otlptracegrpc.New(ctx, opts...)
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(tgt.httpURL + "/v1/traces"),
		otlptracehttp.WithHTTPClient(&http.Client{Timeout: time.Minute, Transport: &timedTransport{base: tr, lat: lat}})}
	if cfg.gzip {
		opts = append(opts, otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
	}
	return otlptracehttp.New(ctx, opts...)
}

// runOnce puts cfg.records spans through tgt and measures it.
func runOnce(ctx context.Context, tgt *target, cfg config, errs *sdkErrors) Sample {
	s := Sample{Target: tgt.name, Spans: cfg.records}
	fail := func(format string, a ...any) Sample {
		s.Failure = fmt.Sprintf(format, a...)
		return s
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	before, err := tgt.count(ctx)
	if err != nil {
		return fail("count before: %v", err)
	}
	s.PeakRSSPerRun = resetPeakRSS(tgt.pid)
	errs.reset()
	lat := &latencies{}
	tr := &http.Transport{MaxIdleConns: 2 * cfg.workers, MaxIdleConnsPerHost: 2 * cfg.workers, IdleConnTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	var exported atomic.Int64

	// Exporters are made before the clock starts (gRPC connects lazily, on
	// the first export, as in a real service).
	tps := make([]*sdktrace.TracerProvider, cfg.workers)
	for w := range cfg.workers {
		exp, err := newExporter(ctx, tgt, cfg, lat, tr)
		if err != nil {
			return fail("exporter: %v", err)
		}
		res := resource.NewSchemaless(
			attribute.String("service.name", fmt.Sprintf("bench-svc-%d", w%4)),
			attribute.String("service.instance.id", fmt.Sprintf("worker-%d", w)),
			attribute.String("host.name", "bench-host"),
			attribute.String("deployment.environment", "bench"),
			attribute.String("telemetry.sdk.language", "go"),
			attribute.String("telemetry.sdk.version", sdk.Version()),
		)
		tps[w] = sdktrace.NewTracerProvider(
			sdktrace.WithResource(res),
			sdktrace.WithSampler(sdktrace.AlwaysSample()),
			// Blocking, with a queue of a few batches: the workers wait for
			// the exporter instead of dropping spans.
			sdktrace.WithSpanProcessor(sdktrace.NewBatchSpanProcessor(countingExporter{exp, &exported},
				sdktrace.WithBlocking(), sdktrace.WithMaxQueueSize(4*cfg.batch),
				sdktrace.WithMaxExportBatchSize(cfg.batch), sdktrace.WithBatchTimeout(time.Second),
				sdktrace.WithExportTimeout(time.Minute))),
		)
	}
	clock := startCPU(tgt.pid)
	start := time.Now()
	var wg sync.WaitGroup
	shutdownErrs := make([]error, cfg.workers)
	for w := range cfg.workers {
		n := cfg.records / int64(cfg.workers)
		if int64(w) < cfg.records%int64(cfg.workers) {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			generate(ctx, tps[w].Tracer("shredduck/bench/streaming", trace.WithInstrumentationVersion("1.0.0")), w, n)
			shutdownErrs[w] = tps[w].Shutdown(ctx)
		}()
	}
	wg.Wait()
	clock.sent()
	elapsed := time.Since(start)
	s.Seconds = elapsed.Seconds()
	s.SpansPerSec = float64(cfg.records) / s.Seconds
	s.Exported = exported.Load()
	s.PeakRSS = peakRSS(tgt.pid)
	s.SDKErrors = errs.n.Load()
	errs.mu.Lock()
	s.FirstError = errs.first
	errs.mu.Unlock()
	if err := s.measure(ctx, tgt, before, lat); err != nil {
		return fail("%v", err)
	}
	clock.fill(&s)
	var problems []string
	if e := errors.Join(shutdownErrs...); e != nil {
		problems = append(problems, "shutdown: "+e.Error())
	}
	problems = append(problems, countProblems(s)...)
	if s.SDKErrors > 0 {
		problems = append(problems, fmt.Sprintf("%d SDK errors, first: %s", s.SDKErrors, s.FirstError))
	}
	if len(problems) > 0 {
		return fail("%s", strings.Join(problems, "; "))
	}
	s.OK = true
	return s
}

// generate creates n spans with tracer: pairs of a server span and a
// client child.
func generate(ctx context.Context, tracer trace.Tracer, worker int, n int64) {
	for i := int64(0); i < n; i += 2 {
		k := int(i/2) % len(benchtraces.StreamRoutes)
		status := 200
		if i%97 == 0 {
			status = 500
		}
		rctx, root := tracer.Start(ctx, benchtraces.StreamMethods[k]+" "+benchtraces.StreamRoutes[k], trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(
				attribute.String("http.request.method", benchtraces.StreamMethods[k]),
				attribute.String("http.route", benchtraces.StreamRoutes[k]),
				attribute.String("url.scheme", "http"),
				attribute.Int("http.response.status_code", status),
				attribute.String("server.address", "api.example.com"),
				attribute.Int("server.port", 8080),
				attribute.String("client.address", "10.0.0."+strconv.Itoa(worker)),
				attribute.Int64("user.id", i%10007),
				attribute.Float64("app.cart.total", float64(i%1000)/7),
				attribute.Bool("app.cache.hit", i%3 == 0),
			))
		if i+1 < n {
			_, child := tracer.Start(rctx, "SELECT "+benchtraces.StreamTables[k%len(benchtraces.StreamTables)], trace.WithSpanKind(trace.SpanKindClient),
				trace.WithAttributes(
					attribute.String("db.system.name", "postgresql"),
					attribute.String("db.collection.name", benchtraces.StreamTables[k%len(benchtraces.StreamTables)]),
					attribute.String("db.query.text", "SELECT * FROM "+benchtraces.StreamTables[k%len(benchtraces.StreamTables)]+" WHERE id = $1"),
					attribute.String("db.namespace", "shop"),
					attribute.Int64("db.response.returned_rows", i%50),
				))
			child.End()
		}
		if status == 500 {
			root.AddEvent("exception", trace.WithAttributes(attribute.String("exception.type", "Timeout"),
				attribute.String("exception.message", "upstream timed out")))
		}
		root.End()
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// percentile of sorted durations (nearest rank).
func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(float64(len(sorted))*p+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func median(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	x = slices.Clone(x)
	slices.Sort(x)
	if len(x)%2 == 1 {
		return x[len(x)/2]
	}
	return (x[len(x)/2-1] + x[len(x)/2]) / 2
}

func summarize(name string, samples []Sample) Summary {
	sum := Summary{Target: name}
	var rate, p50, p99, vis, sustained, srvCPU, sendCPU []float64
	for _, s := range samples {
		if s.Target != name || s.WarmUp || !s.OK {
			continue
		}
		sum.Runs++
		rate = append(rate, s.SpansPerSec)
		p50 = append(p50, s.P50ms)
		p99 = append(p99, s.P99ms)
		vis = append(vis, s.VisibleSeconds)
		sustained = append(sustained, float64(s.Spans)/(s.Seconds+s.VisibleSeconds))
		srvCPU, sendCPU = append(srvCPU, s.ServerCPUus), append(sendCPU, s.SenderCPUus)
		sum.PeakRSS = max(sum.PeakRSS, s.PeakRSS)
	}
	sum.SpansPerSec, sum.P50ms, sum.P99ms = median(rate), median(p50), median(p99)
	sum.VisibleSeconds, sum.SustainedSpansSec = median(vis), median(sustained)
	sum.ServerCPUus, sum.SenderCPUus = median(srvCPU), median(sendCPU)
	if len(rate) > 0 {
		sum.MinSpansSec, sum.MaxSpansSec = slices.Min(rate), slices.Max(rate)
	}
	return sum
}

func printTable(w io.Writer, res *Result, cfg config) {
	fmt.Fprintf(w, "\nstreaming OTLP/%s, sender %s, %d workers × %d spans, median of %d runs (after %d warm-up)\n",
		cfg.protocol, cfg.sender, cfg.workers, cfg.records/int64(cfg.workers), cfg.runs, cfg.warmup)
	fmt.Fprintf(w, "%-10s %12s %21s %9s %9s %13s %10s %12s %12s %12s\n", "target", "spans/s", "(min–max)", "p50 ms", "p99 ms", "peak RSS MiB", "visible+s", "sustained/s", "server µs/sp", "sender µs/sp")
	for _, s := range res.Summary {
		fmt.Fprintf(w, "%-10s %12.0f %10.0f–%-10.0f %9.2f %9.2f %13.1f %10.2f %12.0f %12.2f %12.2f\n", s.Target, s.SpansPerSec, s.MinSpansSec, s.MaxSpansSec,
			s.P50ms, s.P99ms, float64(s.PeakRSS)/(1<<20), s.VisibleSeconds, s.SustainedSpansSec, s.ServerCPUus, s.SenderCPUus)
	}
	if res.Ratio > 0 {
		fmt.Fprintf(w, "ratio shredduck/ceiling: %.2f acknowledged, %.2f sustained (issue target at 16 workers: ≥ 0.60)\n", res.Ratio, res.RatioSustained)
	}
	if res.Failed {
		fmt.Fprintf(w, "FAILED: %s\n", strings.Join(res.Failures, "; "))
	}
}

// tableRows is count(*) of a table through shredduck's POST /v1/query; 0
// while the table does not exist.
func tableRows(ctx context.Context, client *http.Client, url, table string) (int64, error) {
	v, err := queryScalar(ctx, client, url, "SELECT count(*) FROM duckdb_tables() WHERE table_name = '"+table+"'")
	if err != nil {
		return 0, err
	}
	if v == "0" {
		return 0, nil
	}
	v, err = queryScalar(ctx, client, url, "SELECT count(*) FROM "+table)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(v, 10, 64)
}

// queryScalar runs a one-cell query on shredduck serve and returns the
// cell as text.
func queryScalar(ctx context.Context, client *http.Client, url, sql string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/query", strings.NewReader(sql))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/sql")
	req.Header.Set("Accept", "application/json")
	if tok := os.Getenv("SHREDDUCK_TOKEN"); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("POST /v1/query %q: %s: %s", sql, resp.Status, bytes.TrimSpace(b))
	}
	var r struct {
		Rows [][]json.RawMessage `json:"rows"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return "", fmt.Errorf("POST /v1/query: %w", err)
	}
	if len(r.Rows) != 1 || len(r.Rows[0]) != 1 {
		return "", fmt.Errorf("POST /v1/query %q: not one cell: %s", sql, b)
	}
	var s string
	if json.Unmarshal(r.Rows[0][0], &s) == nil {
		return s, nil
	}
	return string(r.Rows[0][0]), nil
}

// resetPeakRSS resets VmHWM of pid (writing 5 to /proc/PID/clear_refs);
// false if that is not possible.
func resetPeakRSS(pid int) bool {
	if pid <= 0 {
		return false
	}
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0) == nil
}

// peakRSS is VmHWM of pid in bytes (0 if unknown).
func peakRSS(pid int) int64 {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// procCPU is the CPU time (user and system) pid has used, from
// /proc/PID/stat in clock ticks of 1/100 s (Linux's USER_HZ); false when
// unknown.
func procCPU(pid int) (time.Duration, bool) {
	if pid <= 0 {
		return 0, false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')') // the command name may hold spaces
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:])) // from field 3, state
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, true
}

// selfCPU is the CPU time this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuClock measures a run's CPU: the target's until every span is counted,
// this process's while it sends.
type cpuClock struct {
	pid            int
	server, sender time.Duration
	known          bool
}

func startCPU(pid int) cpuClock {
	c := cpuClock{pid: pid, sender: selfCPU()}
	c.server, c.known = procCPU(pid)
	return c
}

// sent ends the sender's part.
func (c *cpuClock) sent() { c.sender = selfCPU() - c.sender }

// fill ends the target's part and records both in s.
func (c *cpuClock) fill(s *Sample) {
	if now, ok := procCPU(c.pid); ok && c.known && s.Spans > 0 {
		s.ServerCPUus = float64((now - c.server).Microseconds()) / float64(s.Spans)
	}
	if s.Spans > 0 {
		s.SenderCPUus = float64(c.sender.Microseconds()) / float64(s.Spans)
	}
}

// machine describes the host, with the keys bench/ingestbench uses.
func machine() map[string]string {
	m := map[string]string{"goos": runtime.GOOS, "goarch": runtime.GOARCH, "cpus": strconv.Itoa(runtime.NumCPU()), "go": runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				m["cpu"] = strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		m["memory"] = strings.TrimSpace(strings.TrimPrefix(strings.SplitN(string(b), "\n", 2)[0], "MemTotal:"))
	}
	if b, err := os.ReadFile("/etc/os-release"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "PRETTY_NAME=") {
				m["os"] = strings.Trim(strings.TrimPrefix(l, "PRETTY_NAME="), `"`)
			}
		}
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		m["loadavg"] = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	return m
}

// versions: the server's DuckDB, and the modules this program was built
// with.
func versions(ctx context.Context, client *http.Client, url string) map[string]string {
	v := map[string]string{"otel_sdk": sdk.Version(), "otel": otel.Version()}
	if d, err := queryScalar(ctx, client, url, "SELECT version()"); err == nil {
		v["duckdb"] = d
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			switch m.Path {
			case "go.opentelemetry.io/collector/pdata", "go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp",
				"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc", "google.golang.org/grpc":
				v[m.Path] = m.Version
			}
		}
	}
	return v
}
