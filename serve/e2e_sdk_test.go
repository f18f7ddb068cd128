package serve

// End-to-end tests with real clients: the OpenTelemetry Go SDK's OTLP
// exporters (HTTP protobuf, HTTP JSON, gRPC; plain and gzip) send known
// spans, log records and metrics to a server on 127.0.0.1:0, and the
// tables must hold exactly them.

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otellog "go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/metric"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// e2eClean clears the environment variables the SDK reads (endpoints,
// headers, resource), so that the test sees only its own configuration,
// and collects what the SDK reports to the global error handler.
func e2eClean(t *testing.T) *e2eErrors {
	t.Helper()
	for _, v := range []string{
		"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES",
		"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_PROTOCOL",
		"OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_INSECURE",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
		"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_LOGS_HEADERS", "OTEL_EXPORTER_OTLP_METRICS_HEADERS",
		"OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy",
	} {
		t.Setenv(v, "")
	}
	errs := &e2eErrors{}
	otel.SetErrorHandler(errs)
	t.Cleanup(func() { otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {})) })
	return errs
}

// e2eErrors records the errors the SDK hands to otel.Handle (failed
// exports among them).
type e2eErrors struct {
	mu   sync.Mutex
	errs []error
}

func (e *e2eErrors) Handle(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.errs = append(e.errs, err)
}

func (e *e2eErrors) check(t *testing.T) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, err := range e.errs {
		t.Errorf("SDK error: %v", err)
	}
}

func e2eResource(service string) *resource.Resource {
	return resource.NewSchemaless(
		attribute.String("service.name", service),
		attribute.String("deployment.environment", "e2e"),
		attribute.Int("e2e.resource.n", 7),
	)
}

// e2eQuery runs a query on the test server's database and returns its rows
// as strings (NULL as "NULL"), one row per element, cells joined by "|".
func (ts *testServer) e2eQuery(query string, args ...any) []string {
	ts.t.Helper()
	rows, err := ts.db.SQL.Query(query, args...)
	if err != nil {
		ts.t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		ts.t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		cells := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range cells {
			ptrs[i] = &cells[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			ts.t.Fatalf("%s: %v", query, err)
		}
		parts := make([]string, len(cells))
		for i, c := range cells {
			parts[i] = "NULL"
			if c.Valid {
				parts[i] = c.String
			}
		}
		out = append(out, strings.Join(parts, "|"))
	}
	if err := rows.Err(); err != nil {
		ts.t.Fatalf("%s: %v", query, err)
	}
	return out
}

// e2eColumnTypes returns the DuckDB type of each named column of a table.
func (ts *testServer) e2eColumnTypes(table string, columns ...string) map[string]string {
	ts.t.Helper()
	out := make(map[string]string)
	for _, r := range ts.e2eQuery(`SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ?`, table) {
		name, typ, _ := strings.Cut(r, "|")
		out[name] = typ
	}
	for _, c := range columns {
		if _, ok := out[c]; !ok {
			ts.t.Errorf("%s has no column %q (columns: %v)", table, c, out)
		}
	}
	return out
}

func e2eWantTypes(t *testing.T, got map[string]string, want map[string]string) {
	t.Helper()
	for c, typ := range want {
		if got[c] != typ {
			t.Errorf("column %q is %s, want %s", c, got[c], typ)
		}
	}
}

// e2eDiff compares two sorted row lists and reports the first differences.
func e2eDiff(t *testing.T, what string, got, want []string) {
	t.Helper()
	sort.Strings(got)
	sort.Strings(want)
	if len(got) != len(want) {
		t.Errorf("%s: %d rows, want %d", what, len(got), len(want))
	}
	gs := make(map[string]int)
	for _, g := range got {
		gs[g]++
	}
	missing := 0
	for _, w := range want {
		if gs[w] > 0 {
			gs[w]--
			continue
		}
		if missing < 5 {
			t.Errorf("%s: missing row %s", what, w)
		}
		missing++
	}
	extra := 0
	for _, g := range got {
		if gs[g] > 0 {
			if extra < 5 {
				t.Errorf("%s: unexpected row %s (×%d)", what, g, gs[g])
			}
			extra += gs[g]
			gs[g] = 0
		}
	}
	if missing+extra > 0 {
		t.Errorf("%s: %d rows missing, %d unexpected", what, missing, extra)
	}
}

const e2eSpanPairs = 500 // root spans, each with one child: 1,000 spans

// TestSDKTraces exports 1,000 spans through each of the SDK's trace
// exporters (a TracerProvider with a batcher, ForceFlush, Shutdown) and
// checks every row: ids, parent links, names, kinds, status, typed
// attribute columns, events, service_name and the resource and scope.
func TestSDKTraces(t *testing.T) {
	type variant struct {
		name string
		exp  func(ctx context.Context, ts *testServer) (sdktrace.SpanExporter, error)
	}
	hostPort := func(ts *testServer) string { return strings.TrimPrefix(ts.url, "http://") }
	variants := []variant{
		{"http-protobuf", func(ctx context.Context, ts *testServer) (sdktrace.SpanExporter, error) {
			return otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(hostPort(ts)), otlptracehttp.WithInsecure())
		}},
		{"http-protobuf-gzip", func(ctx context.Context, ts *testServer) (sdktrace.SpanExporter, error) {
			return otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(ts.url+"/v1/traces"),
				otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
		}},
		{"http-json", func(ctx context.Context, ts *testServer) (sdktrace.SpanExporter, error) {
			return otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(hostPort(ts)), otlptracehttp.WithInsecure(),
				otlptracehttp.WithEncoding(otlptracehttp.EncodingJSON))
		}},
		{"grpc", func(ctx context.Context, ts *testServer) (sdktrace.SpanExporter, error) {
			return otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(ts.grpcAddr), otlptracegrpc.WithInsecure())
		}},
		{"grpc-gzip-on-http-port", func(ctx context.Context, ts *testServer) (sdktrace.SpanExporter, error) {
			return otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(hostPort(ts)), otlptracegrpc.WithInsecure(),
				otlptracegrpc.WithCompressor("gzip"))
		}},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			errs := e2eClean(t)
			ts := startServer(t, Config{})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			exp, err := v.exp(ctx, ts)
			if err != nil {
				t.Fatal(err)
			}
			service := "e2e-" + v.name
			tp := sdktrace.NewTracerProvider(
				sdktrace.WithResource(e2eResource(service)),
				sdktrace.WithSampler(sdktrace.AlwaysSample()),
				sdktrace.WithBatcher(exp, sdktrace.WithBlocking(), sdktrace.WithMaxQueueSize(4096),
					sdktrace.WithMaxExportBatchSize(128), sdktrace.WithBatchTimeout(50*time.Millisecond)),
			)
			tracer := tp.Tracer("e2e.tracer", trace.WithInstrumentationVersion("1.2.3"),
				trace.WithInstrumentationAttributes(attribute.String("e2e.scope.attr", "x")))

			base := time.Unix(1_700_000_000, 0)
			var want []string
			row := func(s trace.Span, parent trace.SpanID, name, kind string, id int, status, msg string, events int) string {
				sc := s.SpanContext()
				p := "NULL"
				if parent.IsValid() {
					p = parent.String()
				}
				even := id%2 == 0
				return strings.Join([]string{sc.TraceID().String(), sc.SpanID().String(), p, name, kind,
					fmt.Sprint(id), fmt.Sprintf("s%04d", id), fmt.Sprint(even), fmt.Sprint(float64(id) / 4),
					fmt.Sprintf(`["t%d","u"]`, id%3), status, msg, fmt.Sprint(events), "1000000",
					service, "e2e", "7", "e2e.tracer", "1.2.3", "x"}, "|")
			}
			attrs := func(id int) []attribute.KeyValue {
				return []attribute.KeyValue{
					attribute.Int("e2e.id", id),
					attribute.String("e2e.str", fmt.Sprintf("s%04d", id)),
					attribute.Bool("e2e.even", id%2 == 0),
					attribute.Float64("e2e.ratio", float64(id)/4),
					attribute.StringSlice("e2e.tags", []string{fmt.Sprintf("t%d", id%3), "u"}),
				}
			}
			for i := range e2eSpanPairs {
				start := base.Add(time.Duration(i) * time.Millisecond)
				rctx, root := tracer.Start(ctx, "e2e.root", trace.WithSpanKind(trace.SpanKindServer),
					trace.WithTimestamp(start), trace.WithAttributes(attrs(2*i)...))
				_, child := tracer.Start(rctx, "e2e.child", trace.WithSpanKind(trace.SpanKindClient),
					trace.WithTimestamp(start), trace.WithAttributes(attrs(2*i+1)...))
				events := 0
				if i%5 == 0 {
					child.AddEvent("e2e.event", trace.WithTimestamp(start), trace.WithAttributes(attribute.Int("n", i)))
					events = 1
				}
				status, msg := "UNSET", "NULL"
				if i%10 == 0 {
					child.SetStatus(codes.Error, "boom")
					status, msg = "ERROR", "boom"
				}
				child.End(trace.WithTimestamp(start.Add(time.Millisecond)))
				root.End(trace.WithTimestamp(start.Add(time.Millisecond)))
				want = append(want,
					row(root, trace.SpanID{}, "e2e.root", "SERVER", 2*i, "UNSET", "NULL", 0),
					row(child, root.SpanContext().SpanID(), "e2e.child", "CLIENT", 2*i+1, status, msg, events))
			}
			if err := tp.ForceFlush(ctx); err != nil {
				t.Fatalf("ForceFlush: %v", err)
			}
			if err := tp.Shutdown(ctx); err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			errs.check(t)

			if n := ts.count("otel_traces"); n != 2*e2eSpanPairs {
				t.Fatalf("otel_traces has %d rows, want %d", n, 2*e2eSpanPairs)
			}
			e2eWantTypes(t, ts.e2eColumnTypes("otel_traces", "e2e.id", "e2e.str", "e2e.even", "e2e.ratio", "e2e.tags",
				"resource.service.name", "resource.deployment.environment", "resource.e2e.resource.n", "scope.e2e.scope.attr"),
				map[string]string{"e2e.id": "BIGINT", "e2e.str": "VARCHAR", "e2e.even": "BOOLEAN", "e2e.ratio": "DOUBLE",
					"e2e.tags": "JSON", "resource.e2e.resource.n": "BIGINT", "resource.deployment.environment": "VARCHAR"})
			got := ts.e2eQuery(`SELECT trace_id, span_id, parent_span_id, name, kind::VARCHAR,
				"e2e.id", "e2e.str", "e2e.even", "e2e.ratio", "e2e.tags"::VARCHAR, status_code::VARCHAR, status_message,
				coalesce(len(events), 0), duration_ns,
				service_name, "resource.deployment.environment", "resource.e2e.resource.n", scope_name, scope_version, "scope.e2e.scope.attr"
				FROM otel_traces`)
			e2eDiff(t, "otel_traces", got, want)
			// Parent links resolve within the table, and times are the SDK's.
			if r := ts.e2eQuery(`SELECT count(*) FROM otel_traces c JOIN otel_traces p
				ON c.parent_span_id = p.span_id AND c.trace_id = p.trace_id WHERE c.name = 'e2e.child' AND p.name = 'e2e.root'`); r[0] != fmt.Sprint(e2eSpanPairs) {
				t.Errorf("%s children joined to their roots, want %d", r[0], e2eSpanPairs)
			}
			if r := ts.e2eQuery(`SELECT min(start_time)::VARCHAR, count(DISTINCT trace_id), sum(len(events))::BIGINT
				FROM otel_traces`); r[0] != "2023-11-14 22:13:20|500|100" {
				t.Errorf("min(start_time), traces, events: %s", r[0])
			}
			if r := ts.e2eQuery(`SELECT events[1].name, events[1].attributes::VARCHAR FROM otel_traces
				WHERE "e2e.id" = 11`); r[0] != `e2e.event|{"n":5}` {
				t.Errorf("event of span 11: %s", r[0])
			}
		})
	}
}

const e2eLogRecords = 1000

// TestSDKLogs exports 1,000 log records with known bodies, severities,
// attributes, event names and trace context through the SDK's log
// exporters, and checks every row.
func TestSDKLogs(t *testing.T) {
	type variant struct {
		name string
		exp  func(ctx context.Context, ts *testServer) (sdklog.Exporter, error)
	}
	variants := []variant{
		{"http-protobuf", func(ctx context.Context, ts *testServer) (sdklog.Exporter, error) {
			return otlploghttp.New(ctx, otlploghttp.WithEndpoint(strings.TrimPrefix(ts.url, "http://")), otlploghttp.WithInsecure())
		}},
		{"http-protobuf-gzip", func(ctx context.Context, ts *testServer) (sdklog.Exporter, error) {
			return otlploghttp.New(ctx, otlploghttp.WithEndpointURL(ts.url+"/v1/logs"), otlploghttp.WithCompression(otlploghttp.GzipCompression))
		}},
		{"grpc", func(ctx context.Context, ts *testServer) (sdklog.Exporter, error) {
			return otlploggrpc.New(ctx, otlploggrpc.WithEndpoint(ts.grpcAddr), otlploggrpc.WithInsecure())
		}},
	}
	severities := []otellog.Severity{otellog.SeverityInfo, otellog.SeverityWarn, otellog.SeverityError, otellog.SeverityDebug}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			errs := e2eClean(t)
			ts := startServer(t, Config{})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			exp, err := v.exp(ctx, ts)
			if err != nil {
				t.Fatal(err)
			}
			service := "e2e-logs-" + v.name
			lp := sdklog.NewLoggerProvider(
				sdklog.WithResource(e2eResource(service)),
				sdklog.WithProcessor(sdklog.NewBatchProcessor(exp, sdklog.WithMaxQueueSize(4096),
					sdklog.WithExportMaxBatchSize(200), sdklog.WithExportInterval(50*time.Millisecond))),
			)
			logger := lp.Logger("e2e.logger", otellog.WithInstrumentationVersion("0.1.0"))
			base := time.Unix(1_700_000_000, 0).UTC()
			traceID := trace.TraceID{0xaa, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
			var want []string
			for i := range e2eLogRecords {
				var r otellog.Record
				at := base.Add(time.Duration(i) * time.Millisecond)
				r.SetTimestamp(at)
				r.SetObservedTimestamp(at.Add(time.Second))
				sev := severities[i%len(severities)]
				r.SetSeverity(sev)
				r.SetSeverityText(sev.String())
				body, bodyType := fmt.Sprintf("log line %d: héllo \"quoted\"\n", i), "string"
				switch i % 100 {
				case 1:
					r.SetBody(attribute.Int64Value(int64(i)))
					body, bodyType = fmt.Sprint(i), "int"
				case 2:
					// The SDK sorts a map's keys; shredduck keeps the order it gets.
					r.SetBody(attribute.MapValue(attribute.String("k", "v"), attribute.Int("i", i)))
					body, bodyType = fmt.Sprintf(`{"i":%d,"k":"v"}`, i), "kvlist"
				default:
					r.SetBody(attribute.StringValue(body))
				}
				event := "NULL"
				if i%10 == 0 {
					event = "e2e.event"
					r.SetEventName(event)
				}
				r.AddAttributes(attribute.Int("e2e.id", i), attribute.String("e2e.str", fmt.Sprintf("s%04d", i)))
				ectx := ctx
				tid, sid := "NULL", "NULL"
				if i%3 == 0 {
					spanID := trace.SpanID{0xbb, 0, 0, 0, 0, 0, byte(i >> 8), byte(i)}
					ectx = trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
						TraceID: traceID, SpanID: spanID, TraceFlags: trace.FlagsSampled}))
					tid, sid = traceID.String(), spanID.String()
				}
				logger.Emit(ectx, r)
				want = append(want, strings.Join([]string{
					at.Format("2006-01-02 15:04:05.000"), fmt.Sprint(int(sev)), sev.String(), body, bodyType, event,
					fmt.Sprint(i), fmt.Sprintf("s%04d", i), tid, sid, service, "e2e", "e2e.logger", "0.1.0"}, "|"))
			}
			if err := lp.ForceFlush(ctx); err != nil {
				t.Fatalf("ForceFlush: %v", err)
			}
			if err := lp.Shutdown(ctx); err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			errs.check(t)
			if n := ts.count("otel_logs"); n != e2eLogRecords {
				t.Fatalf("otel_logs has %d rows, want %d", n, e2eLogRecords)
			}
			e2eWantTypes(t, ts.e2eColumnTypes("otel_logs", "e2e.id", "e2e.str", "resource.service.name"),
				map[string]string{"e2e.id": "BIGINT", "e2e.str": "VARCHAR"})
			got := ts.e2eQuery(`SELECT strftime(time, '%Y-%m-%d %H:%M:%S.%g'), severity_number, severity_text, body, body_type::VARCHAR,
				event_name, "e2e.id", "e2e.str", trace_id, span_id, service_name, "resource.deployment.environment", scope_name, scope_version
				FROM otel_logs`)
			e2eDiff(t, "otel_logs", got, want)
			if r := ts.e2eQuery(`SELECT count(*) FROM otel_logs WHERE observed_time - time <> INTERVAL 1 SECOND`); r[0] != "0" {
				t.Errorf("%s rows with observed_time other than time + 1s", r[0])
			}
		})
	}
}

// TestSDKMetrics exports a counter (three attribute sets), a histogram with
// explicit bounds and a gauge through the SDK's metric exporters, twice
// (ForceFlush, more measurements, Shutdown), with cumulative temporality,
// and checks every data point.
func TestSDKMetrics(t *testing.T) {
	type variant struct {
		name string
		exp  func(ctx context.Context, ts *testServer) (sdkmetric.Exporter, error)
	}
	variants := []variant{
		{"http-protobuf", func(ctx context.Context, ts *testServer) (sdkmetric.Exporter, error) {
			return otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpoint(strings.TrimPrefix(ts.url, "http://")), otlpmetrichttp.WithInsecure())
		}},
		{"http-protobuf-gzip", func(ctx context.Context, ts *testServer) (sdkmetric.Exporter, error) {
			return otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(ts.url+"/v1/metrics"), otlpmetrichttp.WithCompression(otlpmetrichttp.GzipCompression))
		}},
		{"grpc", func(ctx context.Context, ts *testServer) (sdkmetric.Exporter, error) {
			return otlpmetricgrpc.New(ctx, otlpmetricgrpc.WithEndpoint(ts.grpcAddr), otlpmetricgrpc.WithInsecure())
		}},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			errs := e2eClean(t)
			ts := startServer(t, Config{})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			exp, err := v.exp(ctx, ts)
			if err != nil {
				t.Fatal(err)
			}
			service := "e2e-metrics-" + v.name
			mp := sdkmetric.NewMeterProvider(
				sdkmetric.WithResource(e2eResource(service)),
				// One export per ForceFlush and one at Shutdown, none in between.
				sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp, sdkmetric.WithInterval(time.Hour))),
			)
			meter := mp.Meter("e2e.meter", metric.WithInstrumentationVersion("9.9"))
			counter, err := meter.Int64Counter("e2e.requests", metric.WithUnit("{request}"), metric.WithDescription("requests"))
			if err != nil {
				t.Fatal(err)
			}
			hist, err := meter.Float64Histogram("e2e.latency", metric.WithUnit("ms"), metric.WithExplicitBucketBoundaries(1, 10, 100))
			if err != nil {
				t.Fatal(err)
			}
			gauge, err := meter.Float64Gauge("e2e.temperature", metric.WithUnit("Cel"))
			if err != nil {
				t.Fatal(err)
			}
			route := func(r string) metric.MeasurementOption {
				return metric.WithAttributes(attribute.String("route", r))
			}
			for range 10 {
				counter.Add(ctx, 1, route("/a"))
			}
			for range 5 {
				counter.Add(ctx, 3, route("/b"))
			}
			counter.Add(ctx, 7, route("/c"))
			for _, x := range []float64{0.5, 5, 5, 50, 500} {
				hist.Record(ctx, x, metric.WithAttributes(attribute.Bool("ok", true)))
			}
			gauge.Record(ctx, 21.5)
			if err := mp.ForceFlush(ctx); err != nil {
				t.Fatalf("ForceFlush: %v", err)
			}
			counter.Add(ctx, 1, route("/a"))
			hist.Record(ctx, 2, metric.WithAttributes(attribute.Bool("ok", true)))
			gauge.Record(ctx, 22.5)
			if err := mp.Shutdown(ctx); err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			errs.check(t)

			if n := ts.count("otel_metrics"); n != 10 {
				t.Fatalf("otel_metrics has %d rows, want 10 (5 data points × 2 exports)", n)
			}
			e2eWantTypes(t, ts.e2eColumnTypes("otel_metrics", "route", "ok"), map[string]string{"route": "VARCHAR", "ok": "BOOLEAN"})
			// Export 1 is the earlier time of each series, export 2 the later.
			got := ts.e2eQuery(`SELECT dense_rank() OVER (PARTITION BY metric_name, route ORDER BY time) AS export,
				metric_type::VARCHAR, metric_name, metric_description, metric_unit, route, ok, value, value_int,
				aggregation_temporality, is_monotonic, count, sum, min, max, bucket_counts::VARCHAR, explicit_bounds::VARCHAR,
				service_name, "resource.deployment.environment", scope_name, scope_version
				FROM otel_metrics`)
			tail := "|" + service + "|e2e|e2e.meter|9.9"
			want := []string{
				"1|sum|e2e.requests|requests|{request}|/a|NULL|10|10|CUMULATIVE|true|NULL|NULL|NULL|NULL|NULL|NULL" + tail,
				"1|sum|e2e.requests|requests|{request}|/b|NULL|15|15|CUMULATIVE|true|NULL|NULL|NULL|NULL|NULL|NULL" + tail,
				"1|sum|e2e.requests|requests|{request}|/c|NULL|7|7|CUMULATIVE|true|NULL|NULL|NULL|NULL|NULL|NULL" + tail,
				"2|sum|e2e.requests|requests|{request}|/a|NULL|11|11|CUMULATIVE|true|NULL|NULL|NULL|NULL|NULL|NULL" + tail,
				"2|sum|e2e.requests|requests|{request}|/b|NULL|15|15|CUMULATIVE|true|NULL|NULL|NULL|NULL|NULL|NULL" + tail,
				"2|sum|e2e.requests|requests|{request}|/c|NULL|7|7|CUMULATIVE|true|NULL|NULL|NULL|NULL|NULL|NULL" + tail,
				"1|histogram|e2e.latency|NULL|ms|NULL|true|NULL|NULL|CUMULATIVE|NULL|5|560.5|0.5|500|[1, 2, 1, 1]|[1.0, 10.0, 100.0]" + tail,
				"2|histogram|e2e.latency|NULL|ms|NULL|true|NULL|NULL|CUMULATIVE|NULL|6|562.5|0.5|500|[1, 3, 1, 1]|[1.0, 10.0, 100.0]" + tail,
				"1|gauge|e2e.temperature|NULL|Cel|NULL|NULL|21.5|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL" + tail,
				"2|gauge|e2e.temperature|NULL|Cel|NULL|NULL|22.5|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL" + tail,
			}
			e2eDiff(t, "otel_metrics", got, want)
			// A cumulative series keeps its start time across exports.
			if r := ts.e2eQuery(`SELECT count(*) FROM (SELECT metric_name, route FROM otel_metrics WHERE metric_type <> 'gauge'
				GROUP BY ALL HAVING count(DISTINCT start_time) <> 1 OR count(*) <> 2)`); r[0] != "0" {
				t.Errorf("%s cumulative series without one start time for both exports", r[0])
			}
		})
	}
}
