package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// shredduck is a `shredduck serve` child process.
type shredduck struct {
	cmd    *exec.Cmd
	url    string
	log    string
	exited chan struct{}
	err    error
}

// startShredduck starts `shredduck serve` on db with its HTTP listener on
// a free port, and the flags args besides.
func startShredduck(ctx context.Context, bin, db, logFile string, args ...string) (*shredduck, error) {
	lf, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, append([]string{"serve", "--db", db, "--http", "127.0.0.1:0", "--grpc", "off"}, args...)...)
	// Only the flags configure it (and $SHREDDUCK_TOKEN, which the
	// collector's exporter then sends, if the config's header is enabled).
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "SHREDDUCK_") || strings.HasPrefix(e, "SHREDDUCK_TOKEN=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &shredduck{cmd: cmd, log: logFile, exited: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			fmt.Fprintln(lf, sc.Text())
			var rec struct{ Msg, Port, Addr string }
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "listening" && rec.Port == "http" {
				select {
				case addr <- rec.Addr:
				default:
				}
			}
		}
		io.Copy(lf, stderr)
		lf.Close()
		s.err = cmd.Wait()
		close(s.exited)
	}()
	select {
	case a := <-addr:
		s.url = "http://" + a
	case <-s.exited:
		return nil, fmt.Errorf("shredduck serve exited at startup: %v (log: %s)", s.err, logFile)
	case <-ctx.Done():
		s.kill()
		return nil, fmt.Errorf("shredduck serve did not start: %v", ctx.Err())
	}
	for {
		resp, err := http.Get(s.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case <-ctx.Done():
			s.kill()
			return nil, fmt.Errorf("shredduck serve is not ready: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *shredduck) kill() {
	select {
	case <-s.exited:
	default:
		s.cmd.Process.Kill()
		<-s.exited
	}
}

// tailLog writes the last n lines of the server's log to w.
func (s *shredduck) tailLog(w io.Writer, n int) {
	b, err := os.ReadFile(s.log)
	if err != nil {
		return
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	fmt.Fprintf(w, "collector: the end of %s:\n", s.log)
	for _, l := range lines[max(0, len(lines)-n):] {
		fmt.Fprintf(w, "  %s\n", l)
	}
}

// stop sends SIGTERM and wants exit status 0.
func (s *shredduck) stop() error {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
		if s.err != nil {
			return fmt.Errorf("shredduck serve after SIGTERM: %v (log: %s)", s.err, s.log)
		}
		return nil
	case <-time.After(time.Minute):
		s.kill()
		return errors.New("shredduck serve did not exit within a minute of SIGTERM")
	}
}

// exportRequests summarizes shredduck's shredduck_requests_total of the
// OTLP/HTTP endpoints (the batching the exporter did).
func exportRequests(ctx context.Context, client *http.Client, url string) (string, error) {
	lines, err := metricLines(ctx, client, url, "shredduck_requests_total{")
	var out []string
	for _, l := range lines {
		if !strings.Contains(l, `endpoint="/v1/query"`) && strings.Contains(l, `endpoint="/v1/`) {
			out = append(out, strings.TrimPrefix(l, "shredduck_requests_total"))
		}
	}
	return strings.Join(out, ", "), err
}

// metricLines returns the samples of shredduck's /metrics that start with
// prefix.
func metricLines(ctx context.Context, client *http.Client, url, prefix string) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	if tok := os.Getenv("SHREDDUCK_TOKEN"); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/metrics: %s", url, resp.Status)
	}
	var out []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out, sc.Err()
}

// tableRows is count(*) of a table through POST /v1/query (0 while the
// table does not exist).
func tableRows(ctx context.Context, client *http.Client, url, table string) (int64, error) {
	r, err := queryRow(ctx, client, url, "SELECT count(*) FROM duckdb_tables() WHERE table_name = '"+table+"'")
	if err != nil {
		return 0, err
	}
	if r[0] == "0" {
		return 0, nil
	}
	if r, err = queryRow(ctx, client, url, "SELECT count(*) FROM "+table); err != nil {
		return 0, err
	}
	return strconv.ParseInt(r[0], 10, 64)
}

// queryRow runs a one-row query on shredduck serve and returns its cells
// as text (JSON strings unquoted).
func queryRow(ctx context.Context, client *http.Client, url, sql string) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/query", strings.NewReader(sql))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/sql")
	req.Header.Set("Accept", "application/json")
	if tok := os.Getenv("SHREDDUCK_TOKEN"); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("POST /v1/query %q: %s: %s", sql, resp.Status, bytes.TrimSpace(b))
	}
	var res struct {
		Rows [][]json.RawMessage `json:"rows"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, fmt.Errorf("POST /v1/query: %w", err)
	}
	if len(res.Rows) != 1 {
		return nil, fmt.Errorf("POST /v1/query %q: %d rows, want 1", sql, len(res.Rows))
	}
	out := make([]string, len(res.Rows[0]))
	for i, c := range res.Rows[0] {
		var s string
		if json.Unmarshal(c, &s) == nil {
			out[i] = s
		} else {
			out[i] = string(c)
		}
	}
	return out, nil
}
