// Package jaegertest runs a real Jaeger v2 (tools/jaeger) with memory
// storage on free ports, so that tests compare shredduck's Jaeger API with
// what Jaeger itself answers on the same data.
package jaegertest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shredduck/shredduck/internal/toolbin"
)

var (
	once   sync.Once
	bin    string
	binErr error
)

// binary returns Jaeger's binary: $SHREDDUCK_JAEGER if set, else one built
// from tools/jaeger (a module of its own, whose go.mod pins Jaeger as a
// tool) into the user's cache directory (toolbin).
func binary() (string, error) {
	once.Do(func() {
		if p := os.Getenv("SHREDDUCK_JAEGER"); p != "" {
			bin = p
			return
		}
		bin, binErr = toolbin.Build("jaeger", "github.com/jaegertracing/jaeger/cmd/jaeger", "CGO_ENABLED=0")
	})
	return bin, binErr
}

// Jaeger is a running Jaeger v2: OTLP/HTTP in, its query HTTP API out.
type Jaeger struct {
	// OTLP is the base URL of its OTLP/HTTP receiver (POST OTLP+"/v1/traces").
	OTLP string
	// Query is the base URL of its query service (GET Query+"/api/services").
	Query string
}

// config is Jaeger's: its storage (%[1]s) under the name "store", the
// query service's HTTP and gRPC addresses (%[2]s, %[3]s), the OTLP/HTTP
// receiver's (%[4]s).
const config = `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_storage:
    backends:
      store:
%[1]s
  jaeger_query:
    storage:
      traces: store
    http:
      endpoint: %[2]s
    grpc:
      endpoint: %[3]s
receivers:
  otlp:
    protocols:
      http:
        endpoint: %[4]s
exporters:
  jaeger_storage_exporter:
    trace_storage: store
`

const memoryStorage = `        memory:
          max_traces: 100000`

// remoteStorage reads from a gRPC remote storage at %[1]s, with the header
// Authorization: Bearer %[2]s, and writes there over OTLP/gRPC.
const remoteStorage = `        grpc:
          endpoint: %[1]s
          tls:
            insecure: true
          headers:
            Authorization: "Bearer %[2]s"
          writer:
            endpoint: %[1]s
            tls:
              insecure: true
            headers:
              Authorization: "Bearer %[2]s"`

// Start runs Jaeger with memory storage until the test ends, and returns
// once its query API answers.
func Start(t testing.TB) *Jaeger {
	t.Helper()
	return start(t, memoryStorage)
}

// StartRemote runs Jaeger on a gRPC remote storage (Jaeger's storage API
// v2) at addr (host:port, plain HTTP/2), which it calls with token, until
// the test ends.
func StartRemote(t testing.TB, addr, token string) *Jaeger {
	t.Helper()
	return start(t, fmt.Sprintf(remoteStorage, addr, token))
}

func start(t testing.TB, storage string) *Jaeger {
	t.Helper()
	b, err := binary()
	if err != nil {
		t.Fatal(err)
	}
	ports := freePorts(t, 3)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "jaeger.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, config, storage, ports[0], ports[1], ports[2]), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := exec.Command(b, "--config", "file:"+cfg)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	j := &Jaeger{OTLP: "http://" + ports[2], Query: "http://" + ports[0]}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		if ready(ctx, j.Query+"/api/services") && ready(ctx, j.OTLP+"/v1/traces") {
			return j
		}
		select {
		case err := <-exited:
			t.Fatalf("jaeger exited: %v\n%s", err, out.String())
		case <-ctx.Done():
			t.Fatalf("jaeger did not answer within a minute\n%s", out.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ready says whether url answers at all (the OTLP receiver answers GET
// with 405).
func ready(ctx context.Context, url string) bool {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode < 500 && !strings.HasPrefix(resp.Status, "404")
}

// freePorts returns n addresses on 127.0.0.1 that were free a moment ago.
func freePorts(t testing.TB, n int) []string {
	t.Helper()
	var out []string
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	for _, l := range ls {
		l.Close()
	}
	return out
}

var (
	tgOnce sync.Once
	tgBin  string
	tgErr  error
)

// Telemetrygen runs the OpenTelemetry Collector's telemetrygen (tools/
// telemetrygen, built once into the user's cache directory) to send n
// traces over OTLP/HTTP to endpoint (host:port, plain HTTP) and waits for
// it to end. The rate is low enough that its batch span processor drops
// nothing.
func Telemetrygen(t testing.TB, endpoint string, n int) {
	t.Helper()
	tgOnce.Do(func() {
		if p := os.Getenv("SHREDDUCK_TELEMETRYGEN"); p != "" {
			tgBin = p
			return
		}
		tgBin, tgErr = toolbin.Build("telemetrygen", "github.com/open-telemetry/opentelemetry-collector-contrib/cmd/telemetrygen", "CGO_ENABLED=0")
	})
	if tgErr != nil {
		t.Fatal(tgErr)
	}
	cmd := exec.Command(tgBin, "traces", "--otlp-http", "--otlp-insecure", "--otlp-endpoint", endpoint,
		"--traces", fmt.Sprint(n), "--workers", "1", "--rate", "20", "--child-spans", "2")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("telemetrygen: %v\n%s", err, out)
	}
}
