package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a bytes.Buffer safe for a writer and a reader at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// queryStatus starts serve with args and env, POSTs a query to it and
// returns the answer's status and body, and serve's log.
func queryStatus(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	return serveStatus(t, env, http.MethodPost, "/v1/query", "SELECT 42 AS answer", args...)
}

// serveStatus starts serve with args and env, sends it one request and
// returns the answer's status and body, and serve's log.
func serveStatus(t *testing.T, env map[string]string, method, path, body string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var errb lockedBuffer
	done := make(chan int, 1)
	args = append([]string{"--db", filepath.Join(t.TempDir(), "q.duckdb"), "--grpc", "off"}, args...)
	go func() {
		done <- runServeEnv(ctx, args, io.Discard, &errb, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	}()
	defer func() { cancel(); <-done }()
	var addr string
	for deadline := time.Now().Add(30 * time.Second); addr == "" && time.Now().Before(deadline); {
		for _, line := range strings.Split(errb.String(), "\n") {
			var rec struct{ Msg, Port, Addr string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "listening" && rec.Port == "http" {
				addr = rec.Addr
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if addr == "" {
		t.Fatalf("serve did not listen:\n%s", errb.String())
	}
	addr = strings.Replace(addr, "0.0.0.0", "127.0.0.1", 1)
	req, _ := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
	if tok, ok := env["SHREDDUCK_TOKEN"]; ok {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(got), errb.String()
}

// On an address other hosts reach and without a token, the query endpoint
// is off (403 saying what to change, a warning in the log) unless
// --allow-unauthenticated-query; on loopback, or with a token, it answers.
func TestQueryOffOnTheNetwork(t *testing.T) {
	for _, c := range []struct {
		name   string
		env    map[string]string
		args   []string
		status int
		log    string
	}{
		{"all interfaces, no token", nil, []string{"--http", "0.0.0.0:0"}, http.StatusForbidden, "query endpoint off"},
		{"all interfaces, allowed", nil, []string{"--http", "0.0.0.0:0", "--allow-unauthenticated-query"}, http.StatusOK, "open to the network without a token"},
		{"all interfaces, allowed by env", map[string]string{"SHREDDUCK_ALLOW_UNAUTHENTICATED_QUERY": "true"}, []string{"--http", "0.0.0.0:0"}, http.StatusOK, "open to the network"},
		{"all interfaces, token", map[string]string{"SHREDDUCK_TOKEN": "tok"}, []string{"--http", "0.0.0.0:0"}, http.StatusOK, ""},
		{"loopback, no token", nil, []string{"--http", "127.0.0.1:0"}, http.StatusOK, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body, log := queryStatus(t, c.env, c.args...)
			if status != c.status {
				t.Errorf("status %d (%s), want %d", status, body, c.status)
			}
			if status == http.StatusForbidden && !strings.Contains(body, "--allow-unauthenticated-query") {
				t.Errorf("the refusal does not say what to change: %s", body)
			}
			if status == http.StatusOK && !strings.Contains(body, "42") {
				t.Errorf("answer %s", body)
			}
			if c.log != "" && !strings.Contains(log, c.log) {
				t.Errorf("log lacks %q:\n%s", c.log, log)
			}
		})
	}
}

// The Jaeger API follows the query endpoint: off (403 saying what to
// change) where /v1/query is off, answering where it answers.
func TestTraceAPIFollowsQueryEndpoint(t *testing.T) {
	for _, c := range []struct {
		name   string
		env    map[string]string
		args   []string
		status int
	}{
		{"all interfaces, no token", nil, []string{"--http", "0.0.0.0:0"}, http.StatusForbidden},
		{"all interfaces, token", map[string]string{"SHREDDUCK_TOKEN": "tok"}, []string{"--http", "0.0.0.0:0"}, http.StatusOK},
		{"loopback, no token", nil, []string{"--http", "127.0.0.1:0"}, http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body, _ := serveStatus(t, c.env, http.MethodGet, "/api/services", "", c.args...)
			if status != c.status {
				t.Errorf("status %d (%s), want %d", status, body, c.status)
			}
			if status == http.StatusForbidden && !strings.Contains(body, "--allow-unauthenticated-query") {
				t.Errorf("the refusal does not say what to change: %s", body)
			}
			if status == http.StatusOK && !strings.Contains(body, `"data":null`) {
				t.Errorf("answer %s", body)
			}
		})
	}
}
