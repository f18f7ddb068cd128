package jaegerapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/serve"
	"github.com/shredduck/shredduck/serve/jaegerapi"
	"github.com/shredduck/shredduck/serve/sqlpolicy"
)

// server is shredduck's server as cmd/shredduck wires it: the Jaeger API
// and /v1/query on one query policy, behind token (when not "").
type server struct {
	url      string
	grpcAddr string // its gRPC port, host:port
	token    string
}

func startServer(t testing.TB, ack, token string, opts ...func(*ingest.DB)) *server {
	t.Helper()
	return startServerPolicy(t, ack, token, sqlpolicy.Config{}, opts...)
}

// startServerPolicy is startServer with the query policy's limits pcfg.
func startServerPolicy(t testing.TB, ack, token string, pcfg sqlpolicy.Config, opts ...func(*ingest.DB)) *server {
	t.Helper()
	return startServerRunner(t, ack, token, pcfg, nil, opts...)
}

// startServerRunner is startServerPolicy whose Jaeger API runs its
// queries on wrap(policy), when wrap is not nil.
func startServerRunner(t testing.TB, ack, token string, pcfg sqlpolicy.Config, wrap func(jaegerapi.Runner) jaegerapi.Runner, opts ...func(*ingest.DB)) *server {
	t.Helper()
	path := filepath.Join(t.TempDir(), "t.duckdb")
	db, err := ingest.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range opts {
		o(db)
	}
	policy := sqlpolicy.New(db, pcfg)
	var run jaegerapi.Runner = policy
	if wrap != nil {
		run = wrap(policy)
	}
	traces := jaegerapi.New(run, jaegerapi.Config{})
	cfg := serve.Config{MemoryLimit: "256MB", Ack: ack, Token: token,
		Query:  serve.NewQueryHandler(db, serve.QueryConfig{Policy: policy}),
		Traces: traces, TracesGRPC: traces.GRPC()}
	if ack == serve.AckLog {
		cfg.LogDir, cfg.MaxVisibilityLag = path+".ingestlog", 20*time.Millisecond
	}
	srv, err := serve.New(db, cfg)
	if err == nil {
		err = serve.LockDown(db)
	}
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	httpL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	grpcL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, httpL, grpcL) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		if err := db.Close(); err != nil {
			t.Errorf("closing the database: %v", err)
		}
	})
	return &server{url: "http://" + httpL.Addr().String(), grpcAddr: grpcL.Addr().String(), token: token}
}

// get returns the status and body of GET base+path.
func get(t testing.TB, base, token, path string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// postTraces sends td as OTLP/HTTP protobuf to base+"/v1/traces".
func postTraces(t testing.TB, base, token string, td ptrace.Traces) {
	t.Helper()
	body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/traces", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/x-protobuf")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s/v1/traces: %s: %s", base, resp.Status, b)
	}
}

// readOTLP reads an OTLP traces file of the repository's testdata, JSON
// or (.pb) binary protobuf.
func readOTLP(t *testing.T, name string) ptrace.Traces {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "otlp", name))
	if err != nil {
		t.Fatal(err)
	}
	var u ptrace.Unmarshaler = &ptrace.JSONUnmarshaler{}
	if strings.HasSuffix(name, ".pb") {
		u = &ptrace.ProtoUnmarshaler{}
	}
	td, err := u.UnmarshalTraces(b)
	if err != nil {
		t.Fatal(err)
	}
	return td
}

// waitFor polls until cond holds: with --ack log, rows become visible
// shortly after the 2xx.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// spanCount is how many spans the API at base answers for the search.
func spanCount(t testing.TB, base, token, search string) int {
	t.Helper()
	code, body := get(t, base, token, "/api/traces?"+search)
	if code != http.StatusOK {
		return -1
	}
	var r struct {
		Data []struct {
			Spans []json.RawMessage `json:"spans"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		panic(fmt.Sprintf("%v: %s", err, body))
	}
	n := 0
	for _, tr := range r.Data {
		n += len(tr.Spans)
	}
	return n
}
