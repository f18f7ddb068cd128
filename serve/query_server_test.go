package serve

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/shredduck/shredduck/ingest"
)

// The server serves the endpoint behind its token and locks the database
// down when it builds its routes.
func TestQueryThroughServer(t *testing.T) {
	db, err := ingest.Open(filepath.Join(t.TempDir(), "s.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	srv, err := New(db, Config{MemoryLimit: "256MB", Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	h := srv.Handler()
	if r := postQuery(t, h, "/v1/query", "text/plain", "SELECT 1"); r.status != http.StatusUnauthorized {
		t.Errorf("without the token: %d %s", r.status, r.body)
	}
	res := decodeResult(t, postQuery(t, h, "/v1/query", "text/plain", "SELECT current_setting('lock_configuration') AS l", "Authorization", "Bearer tok"))
	if string(res.Rows[0][0]) != "true" {
		t.Errorf("lock_configuration %s", res.Rows[0][0])
	}
	if r := postQuery(t, h, "/v1/query", "text/plain", "SELECT * FROM read_text('/etc/hostname')", "Authorization", "Bearer tok"); r.status != http.StatusBadRequest {
		t.Errorf("read_text through the server: %d %s", r.status, r.body)
	}
}

// Group commits and heavy queries share DuckDB's memory limit: no ingest
// request fails while queries run. Before the guard, commits failed with
// "Out of Memory" at the default 256MB.
func TestQueriesDoNotFailIngest(t *testing.T) {
	ts := startServer(t, Config{MemoryLimit: "128MB"})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var queries, stopped atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				r := ts.post("/v1/query", "application/sql", "", []byte("SELECT count(DISTINCT i) FROM range(20000000) t(i)"))
				queries.Add(1)
				switch r.status {
				case http.StatusOK:
				case http.StatusServiceUnavailable:
					stopped.Add(1)
				default:
					t.Errorf("query: %d %s", r.status, r.body)
				}
			}
		}()
	}
	failed := 0
	var first string
	for i := range 150 {
		ids := make([]string, 25)
		for k := range ids {
			ids[k] = fmt.Sprintf("%d-%d-%s", i, k, strings.Repeat("x", 200))
		}
		r := ts.post("/v1/traces", "application/x-protobuf", "", tracesProto(t, ids...))
		if r.status != http.StatusOK {
			failed++
			first = fmt.Sprintf("%d %s", r.status, r.body)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d queries, %d stopped", queries.Load(), stopped.Load())
	if failed > 0 {
		t.Errorf("%d of 150 ingest requests failed while queries ran, e.g. %s", failed, first)
	}
	if n := ts.count("otel_traces"); n != (150-failed)*25 {
		t.Errorf("%d spans", n)
	}
}

type queryResponse struct {
	status int
	header http.Header
	body   string
}

func postQuery(t *testing.T, h http.Handler, target, contentType, body string, header ...string) queryResponse {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, target, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return queryResponse{w.Code, w.Header(), w.Body.String()}
}

// rawResult is a JSON result with its cells as raw JSON.
type rawResult struct {
	Columns   []string            `json:"columns"`
	Types     []string            `json:"types"`
	Rows      [][]json.RawMessage `json:"rows"`
	Truncated bool                `json:"truncated"`
}

func decodeResult(t *testing.T, r queryResponse) rawResult {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	var res rawResult
	if err := json.Unmarshal([]byte(r.body), &res); err != nil {
		t.Fatalf("%v: %s", err, r.body)
	}
	return res
}
