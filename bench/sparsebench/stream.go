package main

// The streaming phase: the shape's file replayed into the real
// `shredduck serve` (default flags: its memory limit, queues and
// backpressure) by a light load generator, a new server and database per
// run.

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/shredduck/shredduck/bench/internal/benchutil"
	"github.com/shredduck/shredduck/bench/internal/httppost"
)

// loadGenerator says what sends the requests, in the report and the output.
const loadGenerator = "pre-encoded OTLP/JSON replay (not an SDK): each line of the shape's file, one ExportTraceServiceRequest, " +
	"read into memory before the run, POSTed once to /v1/traces as application/json by W workers; " +
	"a 503 or 429 is retried after its Retry-After"

// streamSample is one streaming run of one shape.
type streamSample struct {
	Workers  int   `json:"workers"`
	Requests int   `json:"requests"` // lines of the file, each sent until it got a 2xx
	Spans    int64 `json:"spans_sent"`
	// Seconds is the wall time from the first send to the last 2xx.
	Seconds     float64 `json:"seconds"`
	SpansPerSec float64 `json:"spans_per_sec"`
	// RatioToBase is SpansPerSec over the baseline shape's in the same run.
	RatioToBase float64        `json:"ratio_to_baseline,omitempty"`
	Retries     int64          `json:"retries"`  // 503/429 answers retried after Retry-After
	Statuses    map[string]int `json:"statuses"` // every answer by status code
	Errors      int64          `json:"errors"`   // 4xx, 5xx other than 503, transport errors
	FirstError  string         `json:"first_error,omitempty"`
	PeakRSS     int64          `json:"server_peak_rss_bytes"` // VmHWM just before SIGTERM
	// StopSeconds is SIGTERM to exit (the final commit and checkpoint).
	StopSeconds float64 `json:"stop_seconds"`
	TableRows   int64   `json:"table_rows"` // count(*) in a read-only open afterwards
	DBBytes     int64   `json:"db_bytes"`
	Columns     int     `json:"columns"`
	// LogWarnings counts the server's log lines at level WARN or ERROR;
	// FirstWarning is the first of them (truncated).
	LogWarnings  int    `json:"server_log_warnings"`
	FirstWarning string `json:"server_first_warning,omitempty"`
	Error        string `json:"error,omitempty"`
}

// streamConfig is the streaming phase's parameters.
type streamConfig struct {
	bin     string
	workers int
	timeout time.Duration // one run, from the server's start to its exit
}

// stream runs one streaming measurement of sh: start `shredduck serve` on
// a new database, replay the file, read the server's peak RSS, stop it with
// SIGTERM and count the table's rows.
func stream(cfg streamConfig, db string, sh *shape, records int64) (s streamSample) {
	s = streamSample{Workers: cfg.workers, Statuses: map[string]int{}}
	benchutil.RemoveDB(db)
	defer benchutil.RemoveDB(db)
	bodies, err := readLines(sh.Input)
	if err != nil {
		s.Error = err.Error()
		return s
	}
	s.Requests = len(bodies)
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()

	logFile := db + ".log"
	defer os.Remove(logFile)
	srv, err := startServer(ctx, cfg.bin, db, logFile)
	if err != nil {
		s.Error = err.Error()
		return s
	}
	defer srv.kill()
	s.Spans = records
	replay(ctx, srv.url, bodies, cfg.workers, &s)
	bodies = nil
	s.PeakRSS = peakRSS(srv.cmd.Process.Pid)
	t0 := time.Now()
	stopErr := srv.stop(2 * time.Minute)
	s.StopSeconds = time.Since(t0).Seconds()
	s.LogWarnings, s.FirstWarning = logWarnings(logFile)
	if stopErr != nil {
		s.Error = fmt.Sprintf("shredduck serve: %v; log: %s", stopErr, tail(logFile, 5))
		return s
	}
	if s.Errors > 0 {
		s.Error = fmt.Sprintf("%d failed requests, first: %s", s.Errors, s.FirstError)
		return s
	}
	if fi, err := os.Stat(db); err == nil {
		s.DBBytes = fi.Size()
	}
	pool, err := sql.Open("duckdb", db+"?access_mode=read_only")
	if err != nil {
		s.Error = err.Error()
		return s
	}
	defer pool.Close()
	if err := pool.QueryRow("SELECT count(*) FROM otel_traces").Scan(&s.TableRows); err != nil || s.TableRows != records {
		s.Error = fmt.Sprintf("%d rows after streaming, want %d (%v)", s.TableRows, records, err)
		return s
	}
	if err := pool.QueryRow("SELECT count(*) FROM duckdb_columns() WHERE table_name = 'otel_traces'").Scan(&s.Columns); err != nil {
		s.Error = err.Error()
	}
	return s
}

// readLines returns the non-empty lines of file.
func readLines(file string) ([][]byte, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var lines [][]byte
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) > 0 {
			lines = append(lines, line)
		}
	}
	return lines, nil
}

// replay POSTs every body once (until a 2xx) with workers concurrent
// senders and fills s's counts and rate.
func replay(ctx context.Context, url string, bodies [][]byte, workers int, s *streamSample) {
	client := &http.Client{Timeout: 5 * time.Minute, Transport: &http.Transport{
		MaxIdleConns: workers, MaxIdleConnsPerHost: workers, IdleConnTimeout: time.Minute}}
	defer client.CloseIdleConnections()
	var (
		next, retries, errs atomic.Int64
		mu                  sync.Mutex
		lastOK              time.Time
		wg                  sync.WaitGroup
	)
	fail := func(msg string) {
		if errs.Add(1) == 1 {
			mu.Lock()
			s.FirstError = msg
			mu.Unlock()
		}
	}
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(bodies) || ctx.Err() != nil {
					return
				}
				for {
					code, retryAfter, err := httppost.Post(ctx, client, url+"/v1/traces", "application/json", "", bodies[i])
					mu.Lock()
					if err != nil {
						s.Statuses["transport"]++
					} else {
						s.Statuses[strconv.Itoa(code)]++
					}
					if code >= 200 && code < 300 {
						lastOK = time.Now()
					}
					mu.Unlock()
					if err != nil {
						fail(fmt.Sprintf("request %d: %v", i, err))
						break
					}
					if code == http.StatusServiceUnavailable || code == http.StatusTooManyRequests {
						retries.Add(1)
						select {
						case <-time.After(retryAfter):
							continue
						case <-ctx.Done():
							fail(fmt.Sprintf("request %d: %v while retrying", i, ctx.Err()))
						}
					} else if code < 200 || code >= 300 {
						fail(fmt.Sprintf("request %d: HTTP %d", i, code))
					}
					break
				}
			}
		})
	}
	wg.Wait()
	s.Retries, s.Errors = retries.Load(), errs.Load()
	if !lastOK.IsZero() {
		s.Seconds = lastOK.Sub(start).Seconds()
		s.SpansPerSec = float64(s.Spans) / s.Seconds
	}
}

// server is a running `shredduck serve`.
type server struct {
	cmd  *exec.Cmd
	url  string
	done chan error // the process's exit
}

// startServer starts `shredduck serve` on db with default flags, HTTP on a
// port the kernel picks (read from its "listening" log line, so no port is
// guessed and none raced for) and gRPC off, and waits for /readyz.
func startServer(ctx context.Context, bin, db, logFile string) (*server, error) {
	lf, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	defer lf.Close()
	cmd := exec.Command(bin, "serve", "--db", db, "--http", "127.0.0.1:0", "--grpc", "")
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	srv := &server{cmd: cmd, done: make(chan error, 1)}
	go func() { srv.done <- cmd.Wait() }()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		select {
		case err := <-srv.done:
			srv.done <- err
			return nil, fmt.Errorf("shredduck serve exited before it was ready (%v): %s", err, tail(logFile, 5))
		case <-time.After(50 * time.Millisecond):
		}
		if srv.url == "" {
			srv.url = listenURL(logFile)
			continue
		}
		resp, err := http.Get(srv.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return srv, nil
			}
		}
	}
	srv.kill()
	return nil, fmt.Errorf("shredduck serve not ready in a minute: %s", tail(logFile, 5))
}

// listenURL is the HTTP address in the server's "listening" log line, or
// "" while there is none.
func listenURL(logFile string) string {
	data, _ := os.ReadFile(logFile)
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		var rec struct{ Msg, Port, Addr string }
		if json.Unmarshal(line, &rec) == nil && rec.Msg == "listening" && rec.Port == "http" {
			return "http://" + rec.Addr
		}
	}
	return ""
}

// stop sends SIGTERM and waits up to timeout for a clean exit.
func (s *server) stop(timeout time.Duration) error {
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case err := <-s.done:
		s.done <- err
		return err
	case <-time.After(timeout):
		s.kill()
		return fmt.Errorf("did not exit %v after SIGTERM", timeout)
	}
}

// kill stops the server if it still runs (only this process, by its pid).
func (s *server) kill() {
	select {
	case err := <-s.done:
		s.done <- err
	default:
		s.cmd.Process.Kill()
		s.done <- <-s.done
	}
}

// peakRSS is VmHWM of pid in bytes (0 if unknown).
func peakRSS(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for l := range strings.SplitSeq(string(data), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// logWarnings counts the log lines at level WARN or ERROR and returns the
// first, truncated.
func logWarnings(logFile string) (n int, first string) {
	f, err := os.Open(logFile)
	if err != nil {
		return 0, ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var rec struct{ Level string }
		if json.Unmarshal(sc.Bytes(), &rec) != nil || (rec.Level != "WARN" && rec.Level != "ERROR") {
			continue
		}
		if n++; n == 1 {
			first = truncate(sc.Text(), 300)
		}
	}
	return n, first
}

// tail is the last n lines of a file, joined, truncated.
func tail(file string, n int) string {
	data, _ := os.ReadFile(file)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	return truncate(strings.Join(lines[max(0, len(lines)-n):], " | "), 1500)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// printStreamTable prints the streaming phase: per shape the medians over
// the timed runs that verified, and the target for the others.
func printStreamTable(rep *report) {
	const gib = 1 << 30
	type row struct {
		rate, ratio, retries, rss []float64
		maxRSS                    int64
		statuses                  map[string]int
		runs, failed              int
	}
	rows := map[string]*row{}
	for _, sh := range rep.Shapes {
		rows[sh.Name] = &row{statuses: map[string]int{}}
	}
	for _, s := range rep.Samples {
		r, st := rows[s.Shape], s.Stream
		if st == nil {
			continue
		}
		for code, n := range st.Statuses {
			r.statuses[code] += n
		}
		r.maxRSS = max(r.maxRSS, st.PeakRSS)
		if st.Error != "" {
			r.failed++
			continue
		}
		r.runs++
		r.rate = append(r.rate, st.SpansPerSec)
		r.ratio = append(r.ratio, st.RatioToBase)
		r.retries = append(r.retries, float64(st.Retries))
		r.rss = append(r.rss, float64(st.PeakRSS))
	}
	base := rep.Shapes[0].Name
	fmt.Printf("\nstreaming into shredduck serve (default flags), %d workers; load generator: pre-encoded OTLP/JSON replay, not an SDK\n", rep.Stream.Workers)
	fmt.Printf("%-8s %10s %19s %9s %8s %13s %13s  %-24s %s\n", "shape", "spans/s", "(min-max)", "x "+base, "retries", "peak RSS med", "peak RSS max", "answers (timed runs)", "runs ok")
	for _, sh := range rep.Shapes {
		r := rows[sh.Name]
		rate := benchutil.Summarize(r.rate)
		codes := make([]string, 0, len(r.statuses))
		for code, n := range r.statuses {
			codes = append(codes, fmt.Sprintf("%s:%d", code, n))
		}
		slices.Sort(codes)
		fmt.Printf("%-8s %10.0f %9.0f-%-9.0f %8.2fx %8.0f %9.0f MiB %9.0f MiB  %-24s %d/%d\n", sh.Name, rate.Median, rate.Min, rate.Max,
			benchutil.Summarize(r.ratio).Median, benchutil.Summarize(r.retries).Median,
			benchutil.Summarize(r.rss).Median/(1<<20), float64(r.maxRSS)/(1<<20), strings.Join(codes, " "), r.runs, r.runs+r.failed)
	}
	for _, sh := range rep.Shapes[1:] {
		r := rows[sh.Name]
		var other5xx, n503 int
		for code, n := range r.statuses {
			switch {
			case code == "503":
				n503 += n
			case code >= "500" && code < "600":
				other5xx += n
			}
		}
		ratio := benchutil.Summarize(r.ratio).Median
		met := r.failed == 0 && r.runs > 0 && other5xx == 0 && ratio >= 2.0/3 && r.maxRSS <= gib
		verdict := "met"
		if !met {
			verdict = "NOT met"
		}
		fmt.Printf("target #15 (%s): every request taken, >= 0.67x %s's rate, peak RSS <= 1 GiB: %s (%.2fx, max %.0f MiB, %d failed runs, %d 5xx other than 503, %d 503 retried)\n",
			sh.Name, base, verdict, ratio, float64(r.maxRSS)/(1<<20), r.failed, other5xx, n503)
	}
}

// releaseMemory returns this process's free memory to the OS and resets
// its peak RSS (VmHWM, through /proc/self/clear_refs) to what it holds now;
// false if the reset is not possible. os/exec starts a child that shares
// this process's address space until it execs (vfork), and Linux carries
// that space's peak into the child's ru_maxrss, which `shredduck ingest`
// reports as its own peak RSS: without this, the streaming phase's bodies
// (a whole file in memory) would count in the next ingest's peak RSS. The
// server's VmHWM, read from /proc, is its own address space's and needs
// no reset.
func releaseMemory() bool {
	debug.FreeOSMemory()
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}
