package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	"github.com/shredduck/shredduck/internal/testcert"
)

// startServe runs serve with args and env until the test ends and returns
// the addresses it listens on, by port name (http, grpc, pg).
func startServe(t *testing.T, env map[string]string, args ...string) (map[string]string, *lockedBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errb := &lockedBuffer{}
	done := make(chan int, 1)
	args = append([]string{"--db", filepath.Join(t.TempDir(), "pg.duckdb")}, args...)
	go func() {
		done <- runServeEnv(ctx, args, io.Discard, errb, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != exitOK {
			t.Errorf("serve exited %d:\n%s", code, errb.String())
		}
	})
	addrs := map[string]string{}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, line := range strings.Split(errb.String(), "\n") {
			var rec struct{ Msg, Port, Addr string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "listening" {
				addrs[rec.Port] = strings.Replace(rec.Addr, "0.0.0.0", "127.0.0.1", 1)
			}
		}
		if addrs["pg"] != "" && strings.Contains(errb.String(), `"msg":"serving"`) {
			return addrs, errb
		}
	}
	t.Fatalf("serve did not listen:\n%s", errb.String())
	return nil, nil
}

func pgURL(addr, password, sslmode string) string {
	return "postgres://u:" + password + "@" + addr + "/db?sslmode=" + sslmode
}

// --tls-cert/--tls-key serve OTLP/HTTP, OTLP/gRPC and --pg over TLS only;
// the PostgreSQL password is the token; the flags have their environment
// variables.
func TestServeTLSAndPG(t *testing.T) {
	cert := testcert.New(t)
	env := map[string]string{
		"SHREDDUCK_TOKEN": "tok", "SHREDDUCK_PG": "127.0.0.1:0",
		"SHREDDUCK_TLS_CERT": cert.CertFile, "SHREDDUCK_TLS_KEY": cert.KeyFile,
	}
	addrs, _ := startServe(t, env, "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0")
	ctx := context.Background()
	tlsClient := &tls.Config{RootCAs: cert.Pool, ServerName: "127.0.0.1"}

	// OTLP/HTTP over TLS.
	traces := ptrace.NewTraces()
	rs := traces.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "tls-test")
	span := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	span.SetName("over-https")
	span.SetTraceID(pcommon.TraceID{1})
	span.SetSpanID(pcommon.SpanID{1})
	body, err := ptraceotlp.NewExportRequestFromTraces(traces).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsClient, ForceAttemptHTTP2: true}}
	req, _ := http.NewRequest(http.MethodPost, "https://"+addrs["http"]+"/v1/traces", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("OTLP/HTTP over TLS: %d", resp.StatusCode)
	}
	// Go's TLS server answers plain HTTP with 400 and nothing else.
	if resp, err := http.Post("http://"+addrs["http"]+"/v1/traces", "application/x-protobuf", strings.NewReader(string(body))); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP to the TLS port: %d", resp.StatusCode)
		}
	}

	// OTLP/gRPC over TLS.
	cc, err := grpc.NewClient(addrs["grpc"], grpc.WithTransportCredentials(credentials.NewTLS(tlsClient)))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	span.SetName("over-grpc-tls")
	gctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer tok")
	if _, err := ptraceotlp.NewGRPCClient(cc).Export(gctx, ptraceotlp.NewExportRequestFromTraces(traces)); err != nil {
		t.Fatalf("OTLP/gRPC over TLS: %v", err)
	}

	// PostgreSQL over TLS, the token as password.
	cfg, err := pgx.ParseConfig(pgURL(addrs["pg"], "tok", "verify-full"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.TLSConfig.RootCAs = cert.Pool
	cfg.TLSConfig.ServerName = "127.0.0.1"
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	// serve acknowledges once a request is in the ingest log (--ack log,
	// the default); its rows are visible within --max-visibility-lag.
	var names []string
	queries := 0
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		queries++
		rows, _ := c.Query(ctx, "SELECT name FROM otel_traces WHERE service_name = $1 ORDER BY name", "tls-test")
		names, err = pgx.CollectRows(rows, pgx.RowTo[string])
		if err == nil && strings.Join(names, ",") == "over-grpc-tls,over-https" || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || strings.Join(names, ",") != "over-grpc-tls,over-https" {
		t.Errorf("spans %v %v", names, err)
	}
	_, err = pgx.Connect(ctx, pgURL(addrs["pg"], "tok", "disable"))
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "28000" {
		t.Errorf("plain-text PostgreSQL session: %v", err)
	}
	cfg.Password = "wrong"
	_, err = pgx.ConnectConfig(ctx, cfg)
	if !errors.As(err, &pe) || pe.Code != "28P01" {
		t.Errorf("wrong password: %v", err)
	}

	// The endpoint's metrics are on /metrics.
	req, _ = http.NewRequest(http.MethodGet, "https://"+addrs["http"]+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer tok")
	resp, err = hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"shredduck_pg_sessions 1", fmt.Sprintf(`shredduck_pg_queries_total{code="00000"} %d`, queries),
		`shredduck_pg_refused_sessions_total{code="28P01"} 1`, `shredduck_pg_refused_sessions_total{code="28000"} 1`} {
		if !strings.Contains(string(metrics), want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// Without a token, --pg on an address other hosts reach refuses sessions
// (saying what to change) unless --allow-unauthenticated-query; a bad
// --tls-cert is a usage error.
func TestServePGOffOnTheNetwork(t *testing.T) {
	ctx := context.Background()
	addrs, log := startServe(t, nil, "--http", "127.0.0.1:0", "--grpc", "off", "--pg", "0.0.0.0:0")
	_, err := pgx.Connect(ctx, pgURL(addrs["pg"], "", "disable"))
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "28000" || !strings.Contains(pe.Message, "--allow-unauthenticated-query") {
		t.Errorf("%v", err)
	}
	if !strings.Contains(log.String(), "PostgreSQL endpoint refuses sessions") {
		t.Errorf("log:\n%s", log.String())
	}
	addrs, _ = startServe(t, map[string]string{"SHREDDUCK_ALLOW_UNAUTHENTICATED_QUERY": "true"}, "--http", "127.0.0.1:0", "--grpc", "off", "--pg", "0.0.0.0:0")
	c, err := pgx.Connect(ctx, pgURL(addrs["pg"], "", "disable"))
	if err != nil {
		t.Fatal(err)
	}
	c.Close(ctx)

	var errb lockedBuffer
	if code := runServeEnv(ctx, []string{"--db", filepath.Join(t.TempDir(), "x.duckdb"), "--tls-cert", "nope.pem"}, io.Discard, &errb, func(string) (string, bool) { return "", false }); code != exitUsage || !strings.Contains(errb.String(), "--tls-key") {
		t.Errorf("--tls-cert alone: %d %s", code, errb.String())
	}
}
