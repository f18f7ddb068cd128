package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
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

// node is a `shredduck serve --kafka-brokers` child process on its own
// database file.
type node struct {
	name   string
	db     string
	log    string
	url    string
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

var client = &http.Client{Timeout: 30 * time.Second}

// startNode starts shredduck serve on db, consuming the traces topic only
// (--kafka-topics otlp_spans,,: the other topics' partitions would take
// their share of the group's assignment), its HTTP listener on a free
// port, and waits until it is ready.
func startNode(ctx context.Context, bin, name, db, logFile string, brokers []string, profile string) (*node, error) {
	lf, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	args := []string{"serve", "--db", db, "--http", "127.0.0.1:0", "--grpc", "off",
		"--kafka-brokers", strings.Join(brokers, ","), "--kafka-topics", tracesTopic + ",,"}
	if profile != "" {
		args = append(args, "--cpuprofile", profile)
	}
	cmd := exec.Command(bin, args...)
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "SHREDDUCK_") { // only the flags configure it
			cmd.Env = append(cmd.Env, e)
		}
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		lf.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, err
	}
	n := &node{name: name, db: db, log: logFile, cmd: cmd, exited: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
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
		n.err = cmd.Wait()
		close(n.exited)
	}()
	select {
	case a := <-addr:
		n.url = "http://" + a
	case <-n.exited:
		return nil, fmt.Errorf("%s: shredduck serve exited at startup: %v (log: %s)", name, n.err, logFile)
	case <-ctx.Done():
		n.kill()
		return nil, fmt.Errorf("%s: shredduck serve did not start: %v", name, ctx.Err())
	}
	for {
		resp, err := client.Get(n.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return n, nil
			}
		}
		select {
		case <-ctx.Done():
			n.kill()
			return nil, fmt.Errorf("%s: shredduck serve is not ready: %v", name, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (n *node) kill() {
	select {
	case <-n.exited:
	default:
		n.cmd.Process.Signal(syscall.SIGCONT) // a stopped process dies only once continued
		n.cmd.Process.Kill()
		<-n.exited
	}
}

func (n *node) signal(sig syscall.Signal) error { return n.cmd.Process.Signal(sig) }

// stop sends SIGTERM and wants exit status 0.
func (n *node) stop() error {
	n.cmd.Process.Signal(syscall.SIGCONT)
	n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
		if n.err != nil {
			return fmt.Errorf("%s: shredduck serve after SIGTERM: %v (log: %s)", n.name, n.err, n.log)
		}
		return nil
	case <-time.After(time.Minute):
		n.kill()
		return fmt.Errorf("%s: shredduck serve did not exit within a minute of SIGTERM (log: %s)", n.name, n.log)
	}
}

// tail returns the last lines of the node's log.
func (n *node) tail(lines int) string {
	b, _ := os.ReadFile(n.log)
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(ls[max(0, len(ls)-lines):], "\n")
}

// cpuSeconds is the user and system CPU time the process has used so far
// (/proc/PID/stat, in the kernel's USER_HZ of 100 ticks a second).
func (n *node) cpuSeconds() (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", n.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	// The command name in parentheses may hold spaces: count from after it.
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", n.cmd.Process.Pid, len(f))
	}
	// Fields 14 and 15 of stat (utime, stime) are 12 and 13 after the name.
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q, stime %q", n.cmd.Process.Pid, f[11], f[12])
	}
	return float64(u+s) / 100, nil
}

// peakRSS is the process's VmHWM in bytes (0 if unknown).
func (n *node) peakRSS() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", n.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// stored raises stored[partition] to the next offset the node stored of
// the traces topic's partitions (its shredduck_sources, through
// /v1/query).
func (n *node) stored(ctx context.Context, stored map[int32]int64) error {
	rows, err := n.query(ctx, `SELECT source, max(position) FROM shredduck_sources WHERE source LIKE 'kafka/`+tracesTopic+`/%' GROUP BY source`)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if len(r) != 2 {
			return fmt.Errorf("%s: shredduck_sources: a row of %d cells", n.name, len(r))
		}
		src, _ := r[0].(string)
		p, err := strconv.ParseInt(src[strings.LastIndexByte(src, '/')+1:], 10, 32)
		if err != nil {
			return fmt.Errorf("%s: shredduck_sources source %q: %w", n.name, src, err)
		}
		pos, err := cellInt(r[1])
		if err != nil {
			return fmt.Errorf("%s: shredduck_sources %s: %w", n.name, src, err)
		}
		stored[int32(p)] = max(stored[int32(p)], pos)
	}
	return nil
}

// query runs sql through POST /v1/query and returns its rows.
func (n *node) query(ctx context.Context, sql string) ([][]any, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.url+"/v1/query", strings.NewReader(sql))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/sql")
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: /v1/query: %w", n.name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: /v1/query: %w", n.name, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: /v1/query: %s: %s", n.name, resp.Status, bytes.TrimSpace(body))
	}
	var out struct {
		Rows [][]any `json:"rows"`
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	if err := d.Decode(&out); err != nil {
		return nil, fmt.Errorf("%s: /v1/query answer: %w", n.name, err)
	}
	return out.Rows, nil
}

func cellInt(c any) (int64, error) {
	switch v := c.(type) {
	case json.Number:
		return v.Int64()
	case string:
		return strconv.ParseInt(v, 10, 64)
	}
	return 0, fmt.Errorf("not an integer: %v", c)
}

// metrics returns the node's /metrics samples whose name starts with
// prefix, as name{labels} -> value.
func (n *node) metrics(ctx context.Context, prefix string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.url+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: /metrics: %w", n.name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: /metrics: %s", n.name, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, prefix) {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		v, err := strconv.ParseFloat(l[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("%s: /metrics line %q: %w", n.name, l, err)
		}
		out[l[:i]] = v
	}
	return out, sc.Err()
}
