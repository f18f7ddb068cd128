// Command fairquery measures whether the query surface stays fair: a real
// `shredduck serve` at its default flags (plus --pg) takes a stream of
// spans while two clients loop a query that needs more than
// --query-max-memory and a third loops a dashboard query, over HTTP
// (/v1/query) and then over PostgreSQL. It reports how many dashboard
// queries were answered, how the heavy ones ended, and whether the rows
// stored equal the spans acknowledged.
//
//	go run ./bench/fairquery -shredduck BIN [-seconds 20] [-out FILE]
//
// bench/run_fairquery.sh builds the binary and runs it.
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
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/shredduck/shredduck/bench/internal/benchutil"
)

// The queries: one that needs more than the default memory share,
// one a Grafana panel runs.
const (
	heavyQuery     = "SELECT count(*) FROM (SELECT DISTINCT i::VARCHAR || repeat('x', 20) FROM range(3000000) t(i))"
	dashboardQuery = "SELECT name, count(*) AS c FROM otel_traces GROUP BY ALL ORDER BY c DESC LIMIT 5"
	spansPerReq    = 80
	ingestWorkers  = 4
)

// Phase is one query surface's run.
type Phase struct {
	Surface        string  `json:"surface"` // http or pg
	Seconds        float64 `json:"seconds"`
	DashboardOK    int64   `json:"dashboard_ok"`
	DashboardTries int64   `json:"dashboard_tries"`
	DashboardShare float64 `json:"dashboard_ok_share"`
	HeavyStopped   int64   `json:"heavy_stopped"` // refused for memory, naming --query-max-memory
	HeavyOther     int64   `json:"heavy_other"`   // answered or failed otherwise
	FirstRefusal   string  `json:"first_dashboard_refusal,omitempty"`
}

// Result is the file bench/run_fairquery.sh writes.
type Result struct {
	benchutil.Header
	ServerFlags   string  `json:"server_flags"`
	Phases        []Phase `json:"phases"`
	AckedRequests int64   `json:"acked_requests"`
	Refused       int64   `json:"refused_requests"`
	SpansAcked    int64   `json:"spans_acked"`
	Rows          int64   `json:"rows"`
	VisibleAfter  float64 `json:"visible_after_seconds"`
	ExitCode      int     `json:"server_exit_code"`
	PeakRSS       int64   `json:"server_peak_rss_bytes"`
}

func main() {
	bin := flag.String("shredduck", "", "the shredduck binary")
	seconds := flag.Float64("seconds", 20, "seconds per query surface")
	out := flag.String("out", "", "write the result JSON to `file`")
	command := flag.String("command", "", "the command that ran this, recorded in the result")
	flag.Parse()
	if *bin == "" {
		fmt.Fprintln(os.Stderr, "fairquery: -shredduck is required")
		os.Exit(2)
	}
	res, err := run(*bin, time.Duration(*seconds*float64(time.Second)))
	if res != nil {
		res.Command, res.Driver = *command, strings.Join(os.Args, " ")
		if *out != "" {
			if werr := benchutil.WriteJSON(*out, res); werr != nil {
				err = errors.Join(err, werr)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fairquery:", err)
		os.Exit(1)
	}
}

// server is the shredduck serve under test.
type server struct {
	cmd      *exec.Cmd
	http, pg string
}

func start(bin, dir string) (*server, error) {
	cmd := exec.Command(bin, "serve", "--db", filepath.Join(dir, "fair.duckdb"), "--http", "127.0.0.1:0", "--grpc", "off", "--pg", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{cmd: cmd}
	addrs := make(chan [2]string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		var h, p string
		for sc.Scan() {
			var rec struct{ Msg, Port, Addr string }
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "listening" {
				switch rec.Port {
				case "http":
					h = rec.Addr
				case "pg":
					p = rec.Addr
				}
				if h != "" && p != "" {
					addrs <- [2]string{h, p}
					h = "" // once
				}
			}
		}
	}()
	select {
	case a := <-addrs:
		s.http, s.pg = "http://"+a[0], a[1]
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		return nil, errors.New("shredduck serve did not listen in 60s")
	}
	return s, nil
}

// vmHWM is a process's peak RSS so far (Linux; 0 elsewhere).
func vmHWM(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
			return kb << 10
		}
	}
	return 0
}

// request is a traces request of spansPerReq spans, encoded once.
func request() []byte {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "fairquery")
	ss := rs.ScopeSpans().AppendEmpty()
	now := time.Now()
	for i := range spansPerReq {
		sp := ss.Spans().AppendEmpty()
		var tid pcommon.TraceID
		copy(tid[:], fmt.Sprintf("%016d", i))
		sp.SetTraceID(tid)
		sp.SetName(fmt.Sprintf("op-%d", i%7))
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(now))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(now.Add(time.Millisecond)))
		sp.Attributes().PutStr("http.route", fmt.Sprintf("/r/%d", i%11))
		sp.Attributes().PutInt("http.status_code", int64(200+i%3*100))
	}
	b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		panic(err)
	}
	return b
}

func run(bin string, each time.Duration) (*Result, error) {
	dir, err := os.MkdirTemp("", "fairquery-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	res := &Result{Header: benchutil.Header{Kind: "fairquery", Started: time.Now().UTC(), Machine: benchutil.Machine()}}
	s, err := start(bin, dir)
	if err != nil {
		return nil, err
	}
	defer s.cmd.Process.Kill()
	client := &http.Client{Timeout: time.Minute}
	body := request()
	var acked, refused atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range ingestWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := client.Post(s.http+"/v1/traces", "application/x-protobuf", bytes.NewReader(body))
				if err != nil {
					refused.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					acked.Add(1)
				} else {
					refused.Add(1)
					time.Sleep(50 * time.Millisecond)
				}
			}
		}()
	}
	time.Sleep(2 * time.Second) // rows for the dashboard to count
	for _, surface := range []string{"http", "pg"} {
		p, err := phase(s, client, surface, each)
		if err != nil {
			close(stop)
			return res, err
		}
		res.Phases = append(res.Phases, p)
		fmt.Fprintf(os.Stderr, "fairquery: %s: dashboard %d of %d answered (%.1f%%); heavy stopped %d, other %d\n",
			surface, p.DashboardOK, p.DashboardTries, 100*p.DashboardShare, p.HeavyStopped, p.HeavyOther)
	}
	close(stop)
	wg.Wait()
	res.AckedRequests, res.Refused, res.SpansAcked = acked.Load(), refused.Load(), acked.Load()*spansPerReq
	last := time.Now()
	for {
		res.Rows, err = count(client, s.http)
		if err == nil && res.Rows >= res.SpansAcked || time.Since(last) > 30*time.Second {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	res.VisibleAfter = time.Since(last).Seconds()
	res.PeakRSS = vmHWM(s.cmd.Process.Pid)
	s.cmd.Process.Signal(syscall.SIGTERM)
	werr := s.cmd.Wait()
	res.ExitCode = s.cmd.ProcessState.ExitCode()
	fmt.Fprintf(os.Stderr, "fairquery: %d spans acknowledged, %d rows (visible %.2fs after the last answer), %d requests refused; server exit %d, peak RSS %d MiB\n",
		res.SpansAcked, res.Rows, res.VisibleAfter, res.Refused, res.ExitCode, res.PeakRSS>>20)
	switch {
	case res.Rows != res.SpansAcked:
		res.Failed = true
		res.Failures = append(res.Failures, fmt.Sprintf("%d rows, %d spans acknowledged", res.Rows, res.SpansAcked))
	case werr != nil:
		res.Failed = true
		res.Failures = append(res.Failures, "server exit: "+werr.Error())
	}
	if res.Failed {
		return res, errors.New(strings.Join(res.Failures, "; "))
	}
	return res, nil
}

// phase runs two heavy loops and a dashboard loop on one surface.
func phase(s *server, client *http.Client, surface string, d time.Duration) (Phase, error) {
	p := Phase{Surface: surface}
	var q func(ctx context.Context, sql string) error
	if surface == "http" {
		q = func(ctx context.Context, sql string) error { return httpQuery(ctx, client, s.http, sql) }
	} else {
		conns := make(chan *pgx.Conn, 3)
		for range 3 {
			c, err := pgx.Connect(context.Background(), "postgres://bench@"+s.pg+"/shredduck?sslmode=disable")
			if err != nil {
				return p, err
			}
			defer c.Close(context.Background())
			conns <- c
		}
		q = func(ctx context.Context, sql string) error {
			c := <-conns
			defer func() { conns <- c }()
			rows, err := c.Query(ctx, sql)
			if err != nil {
				return err
			}
			for rows.Next() {
			}
			rows.Close()
			return rows.Err()
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	var stopped, other atomic.Int64
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				err := q(context.Background(), heavyQuery)
				if err != nil && strings.Contains(err.Error(), "--query-max-memory") {
					stopped.Add(1)
				} else {
					other.Add(1)
				}
			}
		}()
	}
	start := time.Now()
	for ctx.Err() == nil {
		err := q(context.Background(), dashboardQuery)
		p.DashboardTries++
		if err == nil {
			p.DashboardOK++
		} else if p.FirstRefusal == "" {
			p.FirstRefusal = err.Error()
		}
	}
	wg.Wait()
	p.Seconds = time.Since(start).Seconds()
	p.HeavyStopped, p.HeavyOther = stopped.Load(), other.Load()
	if p.DashboardTries > 0 {
		p.DashboardShare = float64(p.DashboardOK) / float64(p.DashboardTries)
	}
	return p, nil
}

// httpQuery runs sql on /v1/query; a non-200 answer is an error with its
// body.
func httpQuery(ctx context.Context, client *http.Client, base, sql string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/query", strings.NewReader(sql))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "text/plain")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%d: %s", resp.StatusCode, bytes.TrimSpace(b))
	}
	return nil
}

func count(client *http.Client, base string) (int64, error) {
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/query", strings.NewReader("SELECT count(*) AS n FROM otel_traces"))
	req.Header.Set("Content-Type", "text/plain")
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var r struct{ Rows [][]json.Number }
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || len(r.Rows) != 1 || len(r.Rows[0]) != 1 {
		return 0, fmt.Errorf("count: %v", err)
	}
	return r.Rows[0][0].Int64()
}
