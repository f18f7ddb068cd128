package serve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shredduck/shredduck/ingest"
)

// When DuckDB invalidates the database, Supervise closes the server and the
// database and opens them again in the process, behind the same port:
// meanwhile requests get 503 with Retry-After and /readyz says why; after
// it every request a client sent until it got 200 is stored exactly once,
// in both ack modes. The invalidation is MarkInvalidated, the seam the
// writers' confirmed failures go through: DuckDB 2.0 has not been seen to
// invalidate a database (TestCommitterOutOfMemory).
func TestSuperviseReopens(t *testing.T) {
	for _, ack := range []string{AckCommit, AckLog} {
		t.Run(ack, func(t *testing.T) { superviseReopens(t, ack) })
	}
}

func superviseReopens(t *testing.T, ack string) {
	path := filepath.Join(t.TempDir(), "reopen.duckdb")
	doors := NewDoors(DoorsConfig{RetryAfter: time.Second})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String()
	var (
		mu      sync.Mutex
		current *ingest.DB
		opens   int
	)
	release := make(chan struct{})
	open := func() (*Instance, error) {
		mu.Lock()
		opens++
		n := opens
		mu.Unlock()
		if n == 2 {
			<-release // the test looks at the doors while no server is behind them
		}
		db, err := ingest.Open(path)
		if err != nil {
			return nil, err
		}
		db.ColumnDensity = 0 // test.id a column of its own
		srv, err := New(db, Config{Ack: ack, LogDir: path + ".ingestlog", MaxVisibilityLag: 20 * time.Millisecond,
			MemoryLimit: "256MB", Gatherer: doors.Gatherer(), RetryAfter: time.Second})
		if err != nil {
			db.Close()
			return nil, err
		}
		mu.Lock()
		current = db
		mu.Unlock()
		return &Instance{Server: srv, Close: db.Close}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Supervise(ctx, doors, l, nil, open, func(string) {}) }()

	client := &http.Client{Timeout: 30 * time.Second}
	post := func(id string) (int, http.Header) {
		resp, err := client.Post(url+"/v1/traces", "application/x-protobuf", bytes.NewReader(tracesProto(t, id)))
		if err != nil {
			return 0, nil
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header
	}
	get := func(p string) (int, string) {
		resp, err := client.Get(url + p)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// Senders: each sends its ids in turn, a refused one again until it
	// gets 200, as an OTLP exporter retries.
	var acked sync.Map
	var refused atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				id := fmt.Sprintf("w%d-%d", w, i)
				for {
					select {
					case <-stop:
						return
					default:
					}
					code, h := post(id)
					if code == http.StatusOK {
						acked.Store(id, true)
						break
					}
					if code == http.StatusServiceUnavailable && h.Get("Retry-After") == "" {
						t.Errorf("503 without Retry-After")
					}
					refused.Add(1)
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %s in 20s", what)
			}
		}
	}
	count := func() int {
		n := 0
		acked.Range(func(any, any) bool { n++; return true })
		return n
	}
	waitFor("acknowledged requests", func() bool { return count() > 50 })
	mu.Lock()
	current.MarkInvalidated(errors.New("INTERNAL Error: Could not find node in column segment tree"))
	mu.Unlock()
	waitFor("503 while reopening", func() bool {
		code, body := get("/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "being opened again")
	})
	if code, h := post("probe"); code != http.StatusServiceUnavailable || h.Get("Retry-After") != "1" {
		t.Errorf("ingest while reopening: %d %v", code, h)
	}
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz while reopening: %d", code)
	}
	resp, err := client.Post(url+"/v1/query", "text/plain", strings.NewReader("SELECT 1"))
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a query while reopening: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	before := count()
	close(release)
	waitFor("requests acknowledged after the reopening", func() bool { return count() > before+50 })
	if code, body := get("/metrics"); code != http.StatusOK || !strings.Contains(body, "shredduck_database_reopened_total 1\n") {
		t.Errorf("/metrics after the reopening: %d, reopenings not counted", code)
	}
	close(stop)
	wg.Wait()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Supervise: %v", err)
	}
	db, err := ingest.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.SQL.Query(`SELECT "test.id", count(*) FROM otel_traces GROUP BY ALL`)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		stored[id] = n
	}
	rows.Close()
	n := 0
	acked.Range(func(k, _ any) bool {
		n++
		if stored[k.(string)] != 1 {
			t.Errorf("%s acknowledged, stored %d times", k, stored[k.(string)])
		}
		return true
	})
	t.Logf("--ack %s: %d acknowledged, %d refused and retried, %d stored", ack, n, refused.Load(), len(stored))
}
