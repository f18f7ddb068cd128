//go:build e2e

package serve

// The crash test: `shredduck serve` as a child process is killed with
// SIGKILL while clients stream spans to it, restarted on the same file,
// killed again, and so on; at the end every span whose request was
// acknowledged (200) must be in the table exactly once, and every request
// must be in it whole or not at all. Run with
//
//	go test -tags e2e -run TestCrash -v ./serve/

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
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
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/internal/keyview"
)

// e2eBuildShredduck builds cmd/shredduck into a temporary directory, as
// the Makefile does.
func e2eBuildShredduck(t *testing.T) string {
	t.Helper()
	// go test puts its own GOROOT/bin first on the test's PATH.
	bin := filepath.Join(t.TempDir(), "shredduck")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/shredduck")
	cmd.Dir = ".."
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/shredduck: %v\n%s", err, out)
	}
	t.Logf("built shredduck in %v", time.Since(start).Round(time.Millisecond))
	return bin
}

// e2eChild is a `shredduck serve` child process.
type e2eChild struct {
	t      *testing.T
	cmd    *exec.Cmd
	url    string // http://127.0.0.1:port
	exited chan struct{}
	err    error // Wait's result, after exited is closed

	mu     sync.Mutex
	stderr bytes.Buffer // the child's log (the last 64 KiB)
}

// e2eStartChild runs `shredduck serve --db db --http 127.0.0.1:0 --grpc off`
// with the extra flags and waits until it answers /readyz. The port is taken from its
// "listening" log line, so no port is guessed.
func e2eStartChild(t *testing.T, bin, db string, extra ...string) *e2eChild {
	t.Helper()
	c := &e2eChild{t: t, exited: make(chan struct{})}
	args := append([]string{"serve", "--db", db, "--http", "127.0.0.1:0", "--grpc", "off", "--log-level", "info"}, extra...)
	c.cmd = exec.Command(bin, args...)
	// Only the flags configure the child: no SHREDDUCK_* variable (a token,
	// another table) from the test's environment.
	c.cmd.Env = envWithout(os.Environ(), "SHREDDUCK_")
	stderr, err := c.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			c.mu.Lock()
			c.stderr.Write(line)
			c.stderr.WriteByte('\n')
			if c.stderr.Len() > 64<<10 {
				b := c.stderr.Bytes()[c.stderr.Len()-32<<10:]
				c.stderr = *bytes.NewBuffer(append([]byte(nil), b...))
			}
			c.mu.Unlock()
			var rec struct {
				Msg, Port, Addr string
			}
			if json.Unmarshal(line, &rec) == nil && rec.Msg == "listening" && rec.Port == "http" {
				select {
				case addr <- rec.Addr:
				default:
				}
			}
		}
		io.Copy(io.Discard, stderr)
		c.err = c.cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(func() { c.kill() })
	select {
	case a := <-addr:
		c.url = "http://" + a
	case <-c.exited:
		t.Fatalf("shredduck serve exited at startup: %v\n%s", c.err, c.log())
	case <-time.After(60 * time.Second):
		t.Fatalf("shredduck serve did not start listening in 60s\n%s", c.log())
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(c.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return c
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("shredduck serve is not ready after 60s: %v\n%s", err, c.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func envWithout(env []string, prefix string) []string {
	var out []string
	for _, e := range env {
		if !strings.HasPrefix(e, prefix) {
			out = append(out, e)
		}
	}
	return out
}

func (c *e2eChild) log() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stderr.String()
}

// kill sends SIGKILL (if the child still runs) and waits for it to exit.
func (c *e2eChild) kill() {
	select {
	case <-c.exited:
		return
	default:
	}
	c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.exited
}

// stop sends SIGTERM and wants a clean exit (0) within 60s.
func (c *e2eChild) stop() {
	c.t.Helper()
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
		if c.err != nil {
			c.t.Fatalf("shredduck serve after SIGTERM: %v\n%s", c.err, c.log())
		}
	case <-time.After(60 * time.Second):
		c.kill()
		c.t.Fatalf("shredduck serve did not exit within 60s of SIGTERM\n%s", c.log())
	}
}

const crashSpansPerRequest = 25

// crashRequest is the OTLP/HTTP protobuf body of request seq: spans with
// the ids r<seq>-<i> in the attribute crash.id and unique span ids.
func crashRequest(seq int) []byte { return crashRequestOf(seq, crashSpansPerRequest) }

// crashRequestOf is crashRequest with spans spans.
func crashRequestOf(seq, spans int) []byte {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "crashtest")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("crash")
	for i := range spans {
		s := ss.Spans().AppendEmpty()
		s.SetName("op")
		s.SetTraceID(pcommon.TraceID{0xc0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, byte(seq >> 24), byte(seq >> 16), byte(seq >> 8), byte(seq), 1})
		s.SetSpanID(pcommon.SpanID{0xc1, byte((i + 1) >> 8), byte(seq >> 24), byte(seq >> 16), byte(seq >> 8), byte(seq), 0, byte(i + 1)})
		s.SetKind(ptrace.SpanKindServer)
		s.SetStartTimestamp(pcommon.Timestamp(1_700_000_000_000_000_000 + int64(seq)*1000))
		s.SetEndTimestamp(pcommon.Timestamp(1_700_000_000_000_000_000 + int64(seq)*1000 + 500))
		s.Attributes().PutStr("crash.id", fmt.Sprintf("r%06d-%02d", seq, i))
		s.Attributes().PutInt("crash.seq", int64(seq))
		// Some width, so that commits take a little time.
		s.Attributes().PutStr("crash.payload", strings.Repeat("x", 200+i%50))
	}
	b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		panic(err) // pdata marshals what it built
	}
	return b
}

// crashOutcome is what a client knows about one request.
type crashOutcome int

const (
	crashFailed crashOutcome = iota // an error or a status other than 200: may or may not be committed
	crashAcked                      // 200: must be committed
)

// crashPost sends an OTLP/HTTP protobuf traces request and says what its
// answer promises.
func crashPost(ctx context.Context, client *http.Client, url string, body []byte) crashOutcome {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/traces", bytes.NewReader(body))
	if err != nil {
		return crashFailed
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	resp, err := client.Do(req)
	if err != nil {
		return crashFailed
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return crashAcked
	}
	return crashFailed
}

// TestCrashRecovery streams spans over OTLP/HTTP protobuf to a shredduck
// serve child process, kills it with SIGKILL mid-stream, restarts it on the
// same file, several times, and checks that every acknowledged span is
// present exactly once and no request is half committed.
func TestCrashRecovery(t *testing.T) { crashRecovery(t, crashSmall) }

// TestCrashRecoveryAckLog is TestCrashRecovery with --ack log: a 200 means
// the request is in the ingest log, so the kills land mid-append,
// mid-fsync, mid-load, (with a 1MB threshold) mid-checkpoint and (with
// 64 KiB segments) mid-roll and mid-removal of loaded segments; a restart
// replays exactly what the database had not loaded.
func TestCrashRecoveryAckLog(t *testing.T) {
	crashRecovery(t, crashSmall, "--ack", "log", "--checkpoint-threshold", "1MB", "--max-visibility-lag", "300ms", "--log-segment-bytes", "64KiB")
}

// TestCrashRecoveryAckLogRowGroups is TestCrashRecoveryAckLog with
// requests of 3,000 spans: the loader's transactions end at a row group
// (30,720 rows), inside a request, so the kills also land between the
// two transactions that store one request; the restart stores the rest
// of it once.
func TestCrashRecoveryAckLogRowGroups(t *testing.T) {
	crashRecovery(t, crashShape{spans: 3000, firstKill: 12, killStep: 9}, "--ack", "log", "--checkpoint-threshold", "4MB", "--max-visibility-lag", "300ms")
}

// crashShape is the requests of a crash test and when its rounds kill.
type crashShape struct {
	spans               int // per request
	firstKill, killStep int // acknowledged requests before the first round's kill, and more per round
}

var crashSmall = crashShape{spans: crashSpansPerRequest, firstKill: 40, killStep: 35}

func crashRecovery(t *testing.T, shape crashShape, extra ...string) {
	bin := e2eBuildShredduck(t)
	db := filepath.Join(t.TempDir(), "crash.duckdb")
	const (
		rounds  = 4
		workers = 4
	)
	var (
		mu       sync.Mutex
		outcomes = make(map[int]crashOutcome)
		seq      atomic.Int64
	)
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	for round := range rounds {
		child := e2eStartChild(t, bin, db, extra...)
		var acked atomic.Int64
		// Kill after a number of acknowledged requests that differs by round,
		// while the workers keep sending: requests are in flight, queued and
		// being committed at that moment.
		killAt := int64(shape.firstKill + shape.killStep*round)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		var wg sync.WaitGroup
		var killOnce sync.Once
		killedAt := make(chan time.Time, 1)
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					n := int(seq.Add(1))
					out := crashPost(ctx, client, child.url, crashRequestOf(n, shape.spans))
					mu.Lock()
					outcomes[n] = out
					mu.Unlock()
					if out == crashAcked && acked.Add(1) == killAt {
						killOnce.Do(func() {
							child.cmd.Process.Signal(syscall.SIGKILL)
							killedAt <- time.Now()
						})
					}
					if out == crashFailed {
						// The server is gone: stop this worker.
						select {
						case <-child.exited:
							return
						case <-time.After(10 * time.Millisecond):
						}
					}
				}
			}()
		}
		// Every worker stops once the child is gone (or the round times out).
		timedOut := false
		select {
		case <-child.exited:
		case <-ctx.Done():
			timedOut = true
		}
		cancel()
		wg.Wait()
		child.kill()
		select {
		case <-killedAt:
		default:
			if timedOut {
				t.Fatalf("round %d: %d of %d requests acknowledged in 60s\n%s", round, acked.Load(), killAt, child.log())
			}
			t.Fatalf("round %d: the child exited before it was killed: %v\n%s", round, child.err, child.log())
		}
		var ws syscall.WaitStatus
		if st, ok := child.cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
			ws = st
		}
		if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: the child did not die of SIGKILL: %v", round, child.cmd.ProcessState)
		}
		t.Logf("round %d: killed after %d acknowledged requests (%d requests so far)", round, acked.Load(), seq.Load())
	}

	// A last start: the server recovers the file and still takes data; then
	// a clean stop.
	child := e2eStartChild(t, bin, db, extra...)
	n := int(seq.Add(1))
	resp, err := client.Post(child.url+"/v1/traces", "application/x-protobuf", bytes.NewReader(crashRequestOf(n, shape.spans)))
	if err != nil {
		t.Fatalf("a request after the restarts: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a request after the restarts: %s", resp.Status)
	}
	outcomes[n] = crashAcked
	child.stop()

	d, err := ingest.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	present := make(map[int]bool)
	var ackedReqs, unackedCommitted int
	keyQuery(t, d, `SELECT "crash.seq", count(*), count(DISTINCT "crash.id"), count(DISTINCT span_id) FROM otel_traces GROUP BY 1`, nil, func(rows *sql.Rows) error {
		var s, cnt, ids, spanIDs int
		if err := rows.Scan(&s, &cnt, &ids, &spanIDs); err != nil {
			return err
		}
		present[s] = true
		out, sent := outcomes[s]
		switch {
		case !sent:
			t.Errorf("request %d is in the table but was never sent", s)
		case cnt != shape.spans || ids != shape.spans || spanIDs != shape.spans:
			t.Errorf("request %d: %d rows, %d distinct ids, %d distinct span ids; want %d of each (committed whole, once)",
				s, cnt, ids, spanIDs, shape.spans)
		case out == crashFailed:
			unackedCommitted++ // committed, but the answer was lost in the kill: allowed
		}
		return nil
	})
	var missing []int
	for s, out := range outcomes {
		if out == crashAcked {
			ackedReqs++
			if !present[s] {
				missing = append(missing, s)
			}
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d acknowledged requests are missing after the crashes, e.g. %v", len(missing), missing[:min(10, len(missing))])
	}
	var total, distinct int
	keyQuery(t, d, `SELECT count(*), count(DISTINCT "crash.id") FROM otel_traces`, nil, func(rows *sql.Rows) error { return rows.Scan(&total, &distinct) })
	if total != distinct {
		t.Errorf("%d rows but %d distinct ids: duplicates", total, distinct)
	}
	t.Logf("%d requests sent, %d acknowledged (all present), %d not acknowledged but committed, %d rows",
		len(outcomes), ackedReqs, unackedCommitted, total)
	if shape.spans > crashSpansPerRequest {
		var inside int
		if err := d.SQL.QueryRow("SELECT count(*) FROM shredduck_sources WHERE rows > 0").Scan(&inside); err != nil {
			t.Fatal(err)
		}
		if inside == 0 {
			t.Error("no transaction ended inside a request: the test did not exercise the split")
		}
		t.Logf("%d transactions ended inside a request", inside)
	}
	if ackedReqs < rounds*shape.firstKill {
		t.Errorf("only %d acknowledged requests: the test did not exercise much", ackedReqs)
	}
}

// keyQuery runs q on db as shredduck's query paths do, with every
// attribute key read as its column whatever its storage (keyview), and
// calls scan for each row.
func keyQuery(t *testing.T, db *ingest.DB, q string, args []any, scan func(*sql.Rows) error) {
	t.Helper()
	ctx := context.Background()
	conn, err := db.SQL.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	views, err := keyview.Create(ctx, conn, q)
	if err != nil {
		t.Fatal(err)
	}
	defer views.Drop(ctx)
	rows, err := conn.QueryContext(ctx, q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			t.Fatal(err)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}
