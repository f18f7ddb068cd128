package main

// The two servers: shredduck (bulk `shredduck ingest`, then `shredduck
// serve` on the file) and Jaeger v2 with memory storage, loaded over
// OTLP/HTTP.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shredduck/shredduck/bench/internal/benchutil"
)

// server is a child process answering the query API at url.
type server struct {
	cmd    *exec.Cmd
	url    string
	log    *bytes.Buffer
	exited chan error
}

// stop ends the process (SIGTERM, then SIGKILL after 10 s).
func (s *server) stop() {
	if s == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
	}
}

// lockedBuffer is a bytes.Buffer a child writes to while we read it.
type lockedBuffer struct {
	mu sync.Mutex
	bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.String()
}

func start(name string, args ...string) (*server, *lockedBuffer, error) {
	out := &lockedBuffer{}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	s := &server{cmd: cmd, log: &out.Buffer, exited: make(chan error, 1)}
	go func() { s.exited <- cmd.Wait() }()
	return s, out, nil
}

// loadShredduck loads the NDJSON into a new database with `shredduck
// ingest` and returns its seconds, peak RSS and the rows it reported.
func loadShredduck(bin, db, ndjson string) (benchutil.Proc, benchutil.IngestOutput, error) {
	benchutil.RemoveDB(db)
	p, err := benchutil.Run(bin, "ingest", "--db", db, "--json", "--progress=false", ndjson)
	var o benchutil.IngestOutput
	if err == nil {
		err = json.Unmarshal(benchutil.LastLine(p.Stdout), &o)
	}
	return p, o, err
}

var listening = regexp.MustCompile(`"msg":"listening","port":"http","addr":"([^"]+)"`)

// startShredduck runs `shredduck serve` on db at its default flags (free
// ports on 127.0.0.1) and returns once it logged its HTTP address.
func startShredduck(bin, db string) (*server, error) {
	s, out, err := start(bin, "serve", "--db", db, "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if m := listening.FindStringSubmatch(out.String()); m != nil {
			s.url = "http://" + m[1]
			return s, nil
		}
		select {
		case err := <-s.exited:
			return nil, fmt.Errorf("shredduck serve exited: %v\n%s", err, out.String())
		default:
		}
	}
	s.stop()
	return nil, fmt.Errorf("shredduck serve did not log its address:\n%s", out.String())
}

// jaegerConfig is internal/jaegertest's, with memory storage of at most
// %[1]d traces, the query service's HTTP and gRPC addresses (%[2]s,
// %[3]s) and the OTLP/HTTP receiver's (%[4]s).
const jaegerConfig = `service:
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
        memory:
          max_traces: %[1]d
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
        max_request_body_size: 67108864
exporters:
  jaeger_storage_exporter:
    trace_storage: store
`

// startJaeger runs Jaeger with memory storage for maxTraces traces and
// returns it with its OTLP/HTTP base URL once both answer.
func startJaeger(bin, dir string, maxTraces int) (*server, string, error) {
	ports, err := freePorts(3)
	if err != nil {
		return nil, "", err
	}
	cfg := filepath.Join(dir, "jaeger.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, jaegerConfig, maxTraces, ports[0], ports[1], ports[2]), 0o644); err != nil {
		return nil, "", err
	}
	s, out, err := start(bin, "--config", "file:"+cfg)
	if err != nil {
		return nil, "", err
	}
	s.url = "http://" + ports[0]
	otlp := "http://" + ports[2]
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if answers(s.url+"/api/services") && answers(otlp+"/v1/traces") {
			return s, otlp, nil
		}
		select {
		case err := <-s.exited:
			return nil, "", fmt.Errorf("jaeger exited: %v\n%s", err, out.String())
		default:
		}
	}
	s.stop()
	return nil, "", fmt.Errorf("jaeger did not answer within a minute:\n%s", out.String())
}

// answers says whether url answers below 500 (the OTLP receiver answers
// GET with 405).
func answers(url string) bool {
	resp, err := http.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode < 500 && resp.StatusCode != http.StatusNotFound
}

func freePorts(n int) ([]string, error) {
	var out []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		out = append(out, l.Addr().String())
	}
	return out, nil
}

// loadJaeger POSTs every request of the protobuf file to Jaeger's OTLP/HTTP
// receiver from 4 workers.
func loadJaeger(otlp, proto string) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reqs := make(chan []byte, 16)
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for b := range reqs {
				if err := post(ctx, otlp+"/v1/traces", b); err != nil {
					failed.CompareAndSwap(nil, &err)
					cancel()
				}
			}
		})
	}
	err := readProto(proto, func(b []byte) error {
		select {
		case reqs <- b:
			return nil
		case <-ctx.Done():
			return errors.New("a request failed")
		}
	})
	close(reqs)
	wg.Wait()
	if e := failed.Load(); e != nil {
		return *e
	}
	return err
}

func post(ctx context.Context, url string, body []byte) error {
	for try := 0; ; try++ {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/x-protobuf")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusOK:
			return nil
		case (resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusTooManyRequests) && try < 100:
			time.Sleep(100 * time.Millisecond)
		default:
			return fmt.Errorf("POST %s: %s: %s", url, resp.Status, strings.TrimSpace(string(msg)))
		}
	}
}

// rss is VmRSS and VmHWM of pid in bytes.
func rss(pid int) (cur, peak int64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		var n int64
		fmt.Sscan(f[1], &n)
		switch f[0] {
		case "VmRSS:":
			cur = n << 10
		case "VmHWM:":
			peak = n << 10
		}
	}
	return cur, peak
}

// procCPU is the user and system CPU time of pid so far (0 if unknown).
func procCPU(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command (which may hold spaces), from state on.
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	var user, sys int64
	fmt.Sscan(f[11], &user)
	fmt.Sscan(f[12], &sys)
	return time.Duration(user+sys) * 10 * time.Millisecond // USER_HZ 100
}
