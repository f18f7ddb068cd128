//go:build e2e

package serve

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shredduck/shredduck/serve/queryhttp"
)

// vmHWM returns a process's peak resident set (VmHWM) in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// TestE2EQueryMemory sends /v1/query the queries that took the server
// past any memory bound (scaled down), several at once, while a client
// streams spans: the server's peak RSS stays bounded, every query is
// answered, and no ingest request fails. Before the byte limit, the size
// rules and the memory guard the same test peaked at 3453 MiB (SELECT
// repeat('x', 1000000) FROM range(400) alone: 2.9 GB).
func TestE2EQueryMemory(t *testing.T) {
	bin := e2eBuildShredduck(t)
	db := filepath.Join(t.TempDir(), "query.duckdb")
	child := e2eStartChild(t, bin, db)
	pid := child.cmd.Process.Pid
	client := &http.Client{Timeout: 120 * time.Second}
	base := vmHWM(t, pid)

	ctx, cancel := context.WithCancel(context.Background())
	var sent, failed atomic.Int64
	var failure atomic.Value
	var ingest sync.WaitGroup
	ingest.Add(1)
	go func() {
		defer ingest.Done()
		for seq := 1; ctx.Err() == nil; seq++ {
			resp, err := client.Post(child.url+"/v1/traces", "application/x-protobuf", bytes.NewReader(crashRequest(seq)))
			sent.Add(1)
			if err != nil {
				failed.Add(1)
				failure.Store(err.Error())
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				failed.Add(1)
				failure.Store(fmt.Sprintf("%d %s", resp.StatusCode, b))
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()

	query := func(sql string) (int, int, string) {
		resp, err := client.Post(child.url+"/v1/query", "application/sql", strings.NewReader(sql))
		if err != nil {
			t.Errorf("%.60s: %v", sql, err)
			return 0, 0, ""
		}
		defer resp.Body.Close()
		var head [300]byte
		k, _ := io.ReadFull(resp.Body, head[:])
		n, _ := io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Logf("%.60s: %d %s (VmHWM %d MiB)", sql, resp.StatusCode, head[:k], vmHWM(t, pid)>>20)
		}
		return resp.StatusCode, int(n) + k, resp.Header.Get("X-Shredduck-Truncated")
	}
	attacks := []struct {
		sql    string
		status int
	}{
		// The row limit did not bound the response: 1 MB x 150 rows.
		{"SELECT repeat('x', 1000000) FROM range(150)", http.StatusOK},
		// Folded while preparing, outside DuckDB's memory limit.
		{"SELECT length(repeat('x', 300000000))", http.StatusBadRequest},
		// Evaluated per chunk of 2048 rows, outside the memory limit.
		{"SELECT length(repeat(i::VARCHAR, 200000)) FROM range(3000) t(i)", http.StatusBadRequest},
		// Folded for seconds, on after the 504.
		{"SELECT levenshtein(repeat('a', 40000), repeat('b', 40000))", http.StatusBadRequest},
		{"SELECT * FROM query('SELECT repeat(''x'', 300000000)')", http.StatusBadRequest},
		// Heavy but allowed: DuckDB's memory limit holds, and ingest goes on.
		{"SELECT count(DISTINCT i) FROM range(20000000) t(i)", 0},
		{"SELECT length(string_agg(repeat('x', 10000), '')) FROM range(100000)", 0},
	}
	// One at a time: each gets its own answer, and the peak stays low.
	for _, a := range attacks {
		st, n, trunc := query(a.sql)
		if a.status != 0 && st != a.status || st >= 500 && st != http.StatusServiceUnavailable {
			t.Errorf("%.60s: %d, want %d", a.sql, st, a.status)
		}
		if st == http.StatusOK && (n > queryhttp.DefaultMaxBytes || a.status == http.StatusOK && trunc != "true") {
			t.Errorf("%.60s: a %d-byte answer (truncated %s)", a.sql, n, trunc)
		}
		t.Logf("alone: %d, VmHWM %d MiB: %.60s", st, vmHWM(t, pid)>>20, a.sql)
	}
	// All at once, three of each: queries may be stopped to keep memory
	// for ingest (503), nothing else.
	var wg sync.WaitGroup
	for _, a := range attacks {
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st, n, _ := query(a.sql)
				if st != a.status && st != http.StatusServiceUnavailable && a.status != 0 || st == 0 || st >= 500 && st != http.StatusServiceUnavailable {
					t.Errorf("together: %.60s: %d, want %d or 503", a.sql, st, a.status)
				}
				if st == http.StatusOK && n > queryhttp.DefaultMaxBytes {
					t.Errorf("together: %.60s: a %d-byte answer", a.sql, n)
				}
			}()
		}
	}
	wg.Wait()
	cancel()
	ingest.Wait()
	peak := vmHWM(t, pid)
	t.Logf("VmHWM %d MiB (%d MiB at start); %d ingest requests, %d failed", peak>>20, base>>20, sent.Load(), failed.Load())
	if failed.Load() > 0 {
		t.Errorf("%d of %d ingest requests failed while the queries ran, e.g. %v", failed.Load(), sent.Load(), failure.Load())
	}
	// DuckDB's 256MB limit, four queries' results (16 MiB in DuckDB, about
	// three times that while Go renders them) and the server's own
	// buffers: 336-584 MiB measured. Issue #14 asks for 1 GiB at most.
	if peak > 768<<20 {
		t.Errorf("peak RSS %d MiB, want at most 768 MiB", peak>>20)
	}
	child.stop()

	// The flags reach the query endpoint.
	child = e2eStartChild(t, bin, db, "--query-max-bytes", "1MiB", "--query-max-rows", "5")
	client.Timeout = 30 * time.Second
	pid = child.cmd.Process.Pid
	if st, n, trunc := query("SELECT repeat('x', 100000) FROM range(400)"); st != http.StatusOK || n > 1<<20 || n < 400000 || trunc != "true" {
		t.Errorf("--query-max-bytes 1MiB: %d, %d bytes, truncated %s", st, n, trunc)
	}
	if st, _, trunc := query("SELECT * FROM range(100)"); st != http.StatusOK || trunc != "true" {
		t.Errorf("--query-max-rows 5: %d, truncated %s", st, trunc)
	}
	child.stop()
}
