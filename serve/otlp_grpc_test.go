package serve

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func dialGRPC(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// TestOTLPGRPC exports every signal with the collector's generated gRPC
// clients, on the gRPC port and on the HTTP port, plain and gzip.
func TestOTLPGRPC(t *testing.T) {
	ts := startServer(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	logsReq := plogotlp.NewExportRequest()
	if err := logsReq.UnmarshalProto(readTestdata(t, "logs.pb")); err != nil {
		t.Fatal(err)
	}
	metricsReq := pmetricotlp.NewExportRequest()
	if err := metricsReq.UnmarshalProto(readTestdata(t, "metrics_sum.pb")); err != nil {
		t.Fatal(err)
	}
	for _, port := range []struct{ name, addr string }{{"grpc port", ts.grpcAddr}, {"http port", ts.url[len("http://"):]}} {
		t.Run(port.name, func(t *testing.T) {
			conn := dialGRPC(t, port.addr)
			before := ts.count("otel_traces")
			if _, err := ptraceotlp.NewGRPCClient(conn).Export(ctx, tracesRequest("a", "b", "c")); err != nil {
				t.Fatalf("traces: %v", err)
			}
			if _, err := ptraceotlp.NewGRPCClient(conn).Export(ctx, tracesRequest("d"), grpc.UseCompressor(gzip.Name)); err != nil {
				t.Fatalf("traces, gzip: %v", err)
			}
			if got := ts.count("otel_traces") - before; got != 4 {
				t.Errorf("%d spans committed, want 4", got)
			}
			before = ts.count("otel_logs")
			if _, err := plogotlp.NewGRPCClient(conn).Export(ctx, logsReq); err != nil {
				t.Fatalf("logs: %v", err)
			}
			if got := ts.count("otel_logs") - before; got != logsReq.Logs().LogRecordCount() {
				t.Errorf("%d log records committed, want %d", got, logsReq.Logs().LogRecordCount())
			}
			before = ts.count("otel_metrics")
			if _, err := pmetricotlp.NewGRPCClient(conn).Export(ctx, metricsReq); err != nil {
				t.Fatalf("metrics: %v", err)
			}
			if got := ts.count("otel_metrics") - before; got != metricsReq.Metrics().DataPointCount() {
				t.Errorf("%d data points committed, want %d", got, metricsReq.Metrics().DataPointCount())
			}
			// An empty request.
			if _, err := ptraceotlp.NewGRPCClient(conn).Export(ctx, ptraceotlp.NewExportRequest()); err != nil {
				t.Fatalf("empty request: %v", err)
			}
		})
	}

	conn := dialGRPC(t, ts.grpcAddr)
	// A span with an invalid kind is rejected, the other one stored: OK
	// with partial_success.
	bad := tracesRequest("grpc-kept", "grpc-bad")
	bad.Traces().ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(1).SetKind(ptrace.SpanKind(99))
	resp, err := ptraceotlp.NewGRPCClient(conn).Export(ctx, bad)
	if err != nil {
		t.Fatalf("one invalid span kind: %v, want OK with partial_success", err)
	}
	if ps := resp.PartialSuccess(); ps.RejectedSpans() != 1 || !contains(ps.ErrorMessage(), "span 2 of the request: field kind") {
		t.Errorf("partial_success %d %q", ps.RejectedSpans(), ps.ErrorMessage())
	}
	if ids := ts.ids("otel_traces"); ids["grpc-kept"] != 1 || ids["grpc-bad"] != 0 {
		t.Errorf("stored %v, want grpc-kept once and no grpc-bad", ids)
	}
	// Malformed protobuf is refused whole.
	var reply0 []byte
	err = conn.Invoke(ctx, "/opentelemetry.proto.collector.trace.v1.TraceService/Export", []byte{0x0a, 0x05, 0x01}, &reply0, grpc.ForceCodec(bytesCodec{}))
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("malformed protobuf: %v, want InvalidArgument", err)
	}
	// Logs sent to the traces method do not decode as traces.
	logsBytes, err := logsReq.MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	var reply []byte
	err = conn.Invoke(ctx, "/opentelemetry.proto.collector.trace.v1.TraceService/Export", logsBytes, &reply, grpc.ForceCodec(bytesCodec{}))
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("logs to the traces method: %v, want InvalidArgument", err)
	}
	ts.good()
}

// bytesCodec sends and receives protobuf messages as raw bytes.
type bytesCodec struct{}

func (bytesCodec) Name() string                  { return "proto" }
func (bytesCodec) Marshal(v any) ([]byte, error) { return v.([]byte), nil }
func (bytesCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}

// TestOTLPGRPCAuth checks the token on gRPC: UNAUTHENTICATED without it.
func TestOTLPGRPCAuth(t *testing.T) {
	ts := startServer(t, Config{Token: "s3cret"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := dialGRPC(t, ts.grpcAddr)
	client := ptraceotlp.NewGRPCClient(conn)
	if _, err := client.Export(ctx, tracesRequest("x")); status.Code(err) != codes.Unauthenticated {
		t.Errorf("no token: %v, want Unauthenticated", err)
	}
	wrong := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer nope")
	if _, err := client.Export(wrong, tracesRequest("x")); status.Code(err) != codes.Unauthenticated {
		t.Errorf("wrong token: %v, want Unauthenticated", err)
	}
	right := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer s3cret")
	if _, err := client.Export(right, tracesRequest("x")); err != nil {
		t.Errorf("right token: %v", err)
	}
	if n := ts.count("otel_traces"); n != 1 {
		t.Errorf("%d spans committed, want 1", n)
	}
}

// TestOTLPGRPCLimits: a message over the body limit is RESOURCE_EXHAUSTED,
// and gRPC calls are counted by code.
func TestOTLPGRPCLimits(t *testing.T) {
	ts := startServer(t, Config{MaxBody: 16 << 10})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := ptraceotlp.NewGRPCClient(dialGRPC(t, ts.grpcAddr))
	big := tracesRequest(strings.Repeat("x", 32<<10))
	if _, err := client.Export(ctx, big); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a request over the limit: %v, want ResourceExhausted", err)
	}
	if _, err := client.Export(ctx, big, grpc.UseCompressor(gzip.Name)); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a gzip request over the limit: %v, want ResourceExhausted", err)
	}
	if _, err := client.Export(ctx, tracesRequest("small")); err != nil {
		t.Errorf("a small request: %v", err)
	}
	r := ts.do("GET", "/metrics", "", "", nil)
	for _, want := range []string{
		`shredduck_requests_total{code="ok",endpoint="/opentelemetry.proto.collector.trace.v1.TraceService/Export"} 1`,
		`shredduck_requests_total{code="resource_exhausted",endpoint="/opentelemetry.proto.collector.trace.v1.TraceService/Export"} 2`,
	} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
