package main

import (
	"bufio"
	"compress/gzip"
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
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	_ "google.golang.org/grpc/encoding/gzip" // gzip-compressed gRPC requests
)

// The ceiling: OTLP endpoints that decode each request with pdata and
// discard it, answering 200 (gRPC OK). It is what the same load costs
// without storing anything: the upper bound for shredduck serve.

const maxBody = 64 << 20 // shredduck serve's default --max-body

type ceilingServer struct {
	spans    atomic.Int64
	requests atomic.Int64
}

func (c *ceilingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/count" && r.Method == http.MethodGet:
		fmt.Fprintf(w, "%d %d\n", c.spans.Load(), c.requests.Load())
		return
	case r.URL.Path != "/v1/traces":
		http.NotFound(w, r)
		return
	case r.Method != http.MethodPost:
		w.Header().Set("Allow", http.MethodPost)
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	var body io.Reader = r.Body
	switch strings.ToLower(r.Header.Get("Content-Encoding")) {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		defer zr.Close()
		body = zr
	default:
		http.Error(w, "unsupported Content-Encoding", http.StatusUnsupportedMediaType)
		return
	}
	b, err := io.ReadAll(io.LimitReader(body, maxBody+1))
	if err != nil || len(b) > maxBody {
		http.Error(w, "bad or too large body", http.StatusBadRequest)
		return
	}
	req := ptraceotlp.NewExportRequest()
	isJSON := strings.HasPrefix(r.Header.Get("Content-Type"), "application/json")
	if isJSON {
		err = req.UnmarshalJSON(b)
	} else {
		err = req.UnmarshalProto(b)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.spans.Add(int64(req.Traces().SpanCount()))
	c.requests.Add(1)
	if isJSON {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, "{}")
		return
	}
	// An empty ExportTraceServiceResponse.
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(http.StatusOK)
}

// Export implements the OTLP gRPC trace service: decoded by pdata's codec.
type ceilingGRPC struct {
	ptraceotlp.UnimplementedGRPCServer
	c *ceilingServer
}

func (g *ceilingGRPC) Export(_ context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	g.c.spans.Add(int64(req.Traces().SpanCount()))
	g.c.requests.Add(1)
	return ptraceotlp.NewExportResponse(), nil
}

// ceilingAddrs is the first line the ceiling prints on stdout.
type ceilingAddrs struct {
	HTTP string `json:"http"`
	GRPC string `json:"grpc"`
}

// runCeiling is `streaming ceiling -http ADDR -grpc ADDR`: it serves until
// SIGTERM or SIGINT (or its stdin closes) after printing its addresses as
// one JSON line.
func runCeiling(args []string) int {
	fs := flag.NewFlagSet("ceiling", flag.ContinueOnError)
	httpAddr := fs.String("http", "127.0.0.1:0", "OTLP/HTTP address")
	grpcAddr := fs.String("grpc", "127.0.0.1:0", "OTLP/gRPC address")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	c := &ceilingServer{}
	hl, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ceiling:", err)
		return 1
	}
	gl, err := net.Listen("tcp", *grpcAddr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ceiling:", err)
		return 1
	}
	hs := &http.Server{Handler: c, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	gs := grpc.NewServer(grpc.MaxRecvMsgSize(maxBody))
	ptraceotlp.RegisterGRPCServer(gs, &ceilingGRPC{c: c})
	go hs.Serve(hl)
	go gs.Serve(gl)
	line, _ := json.Marshal(ceilingAddrs{HTTP: hl.Addr().String(), GRPC: gl.Addr().String()})
	fmt.Printf("%s\n", line)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		// The parent holds our stdin open: when it dies, so do we.
		io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	<-ctx.Done()
	gs.Stop()
	hs.Close()
	return 0
}

// ceilingProcess is a running `streaming ceiling` child.
type ceilingProcess struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addrs ceilingAddrs
	done  chan error
}

func startCeiling() (*ceilingProcess, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "ceiling", "-http", "127.0.0.1:0", "-grpc", "127.0.0.1:0")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &ceilingProcess{cmd: cmd, stdin: stdin, done: make(chan error, 1)}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		io.Copy(io.Discard, stdout)
		p.done <- cmd.Wait()
	}()
	select {
	case l, ok := <-lines:
		if !ok {
			return nil, errors.New("the ceiling exited at startup")
		}
		if err := json.Unmarshal([]byte(l), &p.addrs); err != nil {
			p.stop()
			return nil, fmt.Errorf("the ceiling's first line %q: %w", l, err)
		}
	case <-time.After(30 * time.Second):
		p.stop()
		return nil, errors.New("the ceiling did not start in 30s")
	}
	return p, nil
}

func (p *ceilingProcess) pid() int { return p.cmd.Process.Pid }

func (p *ceilingProcess) stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.stdin.Close()
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// count returns the spans the ceiling has decoded.
func (p *ceilingProcess) count(ctx context.Context, client *http.Client) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addrs.HTTP+"/count", nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) < 1 {
		return 0, fmt.Errorf("ceiling /count: %q", b)
	}
	return strconv.ParseInt(f[0], 10, 64)
}
