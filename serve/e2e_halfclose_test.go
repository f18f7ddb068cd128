//go:build e2e

package serve

// Half-closed clients against the real binary (issue 14, item 2): while
// other clients keep group commits busy, clients send a whole request and
// half-close their connection (shutdown(SHUT_WR)), or half-close before
// their Content-Length; the child is killed with SIGKILL right after such
// a request is acknowledged. Every acknowledged request must be there
// after the restart, and no truncated one may be acknowledged. Before the
// fix the half-closed requests got an implicit 200 at once, before their
// commit. Run with
//
//	go test -tags e2e -run TestCrashHalfClosed -v ./serve/

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shredduck/shredduck/ingest"
)

// halfClosedPost sends body to the child's /v1/traces as protobuf,
// declaring declared bytes, half-closes and returns the status (0: no
// answer, or an error).
func halfClosedPost(addr string, body []byte, declared int) int {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0
	}
	defer c.Close()
	conn := c.(*net.TCPConn)
	head := fmt.Sprintf("POST /v1/traces HTTP/1.1\r\nHost: shredduck\r\nContent-Type: application/x-protobuf\r\nContent-Length: %d\r\n\r\n", declared)
	if _, err := conn.Write(append([]byte(head), body...)); err != nil {
		return 0
	}
	if err := conn.CloseWrite(); err != nil {
		return 0
	}
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func TestCrashHalfClosed(t *testing.T) {
	bin := e2eBuildShredduck(t)
	db := filepath.Join(t.TempDir(), "halfclosed.duckdb")
	const (
		rounds     = 3
		busy       = 8 // clients keeping commits busy
		halfClosed = 4
		warmup     = 20 // acknowledged half-closed requests before the kill
	)
	var (
		mu        sync.Mutex
		acked     = make(map[int]bool) // by crash.seq
		seq       atomic.Int64
		truncated = make(map[int]bool) // by crash.seq
		bad       []string
	)
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: busy}}
	for round := range rounds {
		child := e2eStartChild(t, bin, db)
		addr := strings.TrimPrefix(child.url, "http://")
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		var wg sync.WaitGroup
		var halfAcked atomic.Int64
		var killOnce sync.Once
		killed := make(chan struct{})
		kill := func() {
			killOnce.Do(func() {
				child.cmd.Process.Signal(syscall.SIGKILL)
				close(killed)
			})
		}
		alive := func() bool {
			select {
			case <-killed:
				return false
			default:
				return ctx.Err() == nil
			}
		}
		for range busy {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for alive() {
					n := int(seq.Add(1))
					resp, err := client.Post(child.url+"/v1/traces", "application/x-protobuf", bytes.NewReader(crashRequest(n)))
					if err != nil {
						time.Sleep(5 * time.Millisecond)
						continue
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						mu.Lock()
						acked[n] = true
						mu.Unlock()
					}
				}
			}()
		}
		for range halfClosed {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for alive() {
					n := int(seq.Add(1))
					body := crashRequest(n)
					if n%5 == 0 { // a body that stops short of its Content-Length
						st := halfClosedPost(addr, body[:len(body)/2], len(body))
						mu.Lock()
						truncated[n] = true
						if st >= 200 && st < 300 {
							bad = append(bad, fmt.Sprintf("request %d with half its body got %d", n, st))
						}
						mu.Unlock()
						continue
					}
					st := halfClosedPost(addr, body, len(body))
					if st >= 200 && st < 300 {
						mu.Lock()
						acked[n] = true
						mu.Unlock()
						if halfAcked.Add(1) == warmup {
							kill() // at once: its commit, and those queued beside it, must be durable
						}
					}
				}
			}()
		}
		select {
		case <-child.exited:
		case <-ctx.Done():
		}
		cancel()
		wg.Wait()
		child.kill()
		select {
		case <-killed:
		default:
			t.Fatalf("round %d: %d half-closed requests acknowledged in 60s (the child: %v)\n%s", round, halfAcked.Load(), child.err, child.log())
		}
		t.Logf("round %d: killed after %d acknowledged half-closed requests (%d requests so far)", round, halfAcked.Load(), seq.Load())
	}
	child := e2eStartChild(t, bin, db)
	child.stop()

	for _, b := range bad {
		t.Error(b)
	}
	d, err := ingest.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	present := make(map[int]int)
	var tables int
	if err := d.SQL.QueryRow(`SELECT count(*) FROM duckdb_tables() WHERE table_name = 'otel_traces'`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	query := `SELECT "crash.seq", count(*) FROM otel_traces GROUP BY 1`
	if tables == 0 { // nothing was ever committed
		query = `SELECT 0, 0 WHERE false`
	}
	rows, err := d.SQL.Query(query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var s, n int
		if err := rows.Scan(&s, &n); err != nil {
			t.Fatal(err)
		}
		present[s] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var missing []int
	for s := range acked {
		if present[s] != crashSpansPerRequest {
			missing = append(missing, s)
		}
	}
	for s, n := range present {
		switch {
		case truncated[s]:
			t.Errorf("request %d: %d rows of a truncated body", s, n)
		case n != crashSpansPerRequest:
			t.Errorf("request %d: %d rows, want %d (committed whole, once)", s, n, crashSpansPerRequest)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d of %d acknowledged requests are missing after SIGKILL and restart, e.g. %v", len(missing), len(acked), missing[:min(10, len(missing))])
	}
	t.Logf("%d requests, %d acknowledged (%d missing), %d truncated ones sent", seq.Load(), len(acked), len(missing), len(truncated))
}
