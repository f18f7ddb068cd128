package serve

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// rawPost writes a POST of body to path on a new TCP connection, with a
// Content-Length of declared bytes (len(body) when 0), then half-closes
// the connection (shutdown(SHUT_WR)) and returns it with a reader of its
// answer.
func rawPost(t *testing.T, addr, path, contentType string, body []byte, declared int) (*net.TCPConn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	conn := c.(*net.TCPConn)
	if declared == 0 {
		declared = len(body)
	}
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: shredduck\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n", path, contentType, declared)
	if _, err := conn.Write(append([]byte(head), body...)); err != nil {
		t.Fatal(err)
	}
	if err := conn.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	return conn, bufio.NewReader(conn)
}

// readAnswer reads one HTTP response within d; nil when the server closed
// the connection without answering, or sent nothing within d (timedOut).
func readAnswer(t *testing.T, conn *net.TCPConn, r *bufio.Reader, d time.Duration) (resp *http.Response, body string, timedOut bool) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return nil, "", true
		}
		return nil, "", false // closed without an answer
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b), false
}

// A client that half-closes its connection with less body than its
// Content-Length declares gets 400, or no answer; never a 2xx, and
// nothing is committed. It got 200 with an empty body: the handler
// returned without writing once the request's context ended.
func TestTruncatedBodyHalfClosed(t *testing.T) {
	ts := startServer(t, Config{})
	addr := strings.TrimPrefix(ts.url, "http://")
	body := tracesProto(t, "truncated")
	ndjson := []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","name":"n"}]}]}]}` + "\n")
	for _, c := range []struct {
		path, contentType string
		body              []byte
	}{
		{"/v1/traces", "application/x-protobuf", body},
		{"/v1/traces", "application/json", []byte(`{"resourceSpans":[`)},
		{"/v1/ndjson/halfclosed", "application/x-ndjson", ndjson},
	} {
		conn, r := rawPost(t, addr, c.path, c.contentType, c.body, len(c.body)+1000)
		resp, answer, timedOut := readAnswer(t, conn, r, 10*time.Second)
		switch {
		case timedOut:
			t.Errorf("%s: no answer and the connection still open after 10s", c.path)
		case resp == nil: // closed without an answer: allowed
		case resp.StatusCode != http.StatusBadRequest:
			t.Errorf("%s %s with a truncated body: %s %q, want 400 or no answer", c.path, c.contentType, resp.Status, answer)
		}
	}
	if n := ts.count("otel_traces") + ts.count("halfclosed"); n != 0 {
		t.Errorf("%d rows committed from truncated bodies", n)
	}
	ts.good()
}

// A complete body whose client half-closes while the request waits for
// its commit is answered only after the commit, with its real outcome.
// It got 200 at once, before its batch was committed: the request's
// context ended with the half-close, Submit returned, and net/http sent
// an implicit 200. Here the commit cannot start until the test lets it:
// the test holds the pool's only connection.
func TestHalfClosedRequestAnsweredAfterCommit(t *testing.T) {
	ts := startServer(t, Config{Ack: AckCommit}) // answered after the commit
	ts.good()                                    // the table exists: the commit below needs no DDL
	addr := strings.TrimPrefix(ts.url, "http://")
	ts.db.SQL.SetMaxOpenConns(1)
	defer ts.db.SQL.SetMaxOpenConns(0)
	hold, err := ts.db.SQL.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if !released {
			released = true
			hold.Close()
		}
	}
	defer release()
	conns := make([]*net.TCPConn, 2)
	readers := make([]*bufio.Reader, 2)
	conns[0], readers[0] = rawPost(t, addr, "/v1/traces", "application/x-protobuf", tracesProto(t, "halfclosed-proto"), 0)
	conns[1], readers[1] = rawPost(t, addr, "/v1/traces", "application/json",
		[]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f11","spanId":"0102030405060709","name":"n","attributes":[{"key":"test.id","value":{"stringValue":"halfclosed-json"}}]}]}]}]}`), 0)
	for i := range conns {
		resp, body, timedOut := readAnswer(t, conns[i], readers[i], time.Second)
		if !timedOut {
			status := "no answer"
			if resp != nil {
				status = fmt.Sprintf("%s %q", resp.Status, body)
			}
			t.Errorf("request %d answered while its commit could not run: %s", i, status)
		}
	}
	release()
	for i := range conns {
		resp, body, timedOut := readAnswer(t, conns[i], readers[i], 30*time.Second)
		if timedOut || resp == nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d after its commit could run: %v %v %q", i, timedOut, resp, body)
		}
	}
	got := ts.ids("otel_traces")
	if got["halfclosed-proto"] != 1 || got["halfclosed-json"] != 1 {
		t.Errorf("acknowledged half-closed requests in the table: %v", got)
	}
}

// An ingest handler that returns without writing has its connection
// aborted instead of net/http's implicit 200, which to an OTLP client
// means stored.
func TestMustAnswer(t *testing.T) {
	ts := startServer(t, Config{})
	silent := httptest.NewServer(ts.srv.mustAnswer("/test", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json") // a header alone is no answer
	})))
	defer silent.Close()
	resp, err := http.Post(silent.URL, "application/json", strings.NewReader("{}"))
	if err == nil {
		resp.Body.Close()
		t.Fatalf("a handler that wrote nothing: %s, want the connection aborted", resp.Status)
	}
	answering := httptest.NewServer(ts.srv.mustAnswer("/test", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
	})))
	defer answering.Close()
	resp, err = http.Post(answering.URL, "application/json", strings.NewReader("{}"))
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("a handler that answered: %v %v", resp, err)
	}
	resp.Body.Close()
	r := ts.do("GET", "/metrics", "", "", nil)
	if !strings.Contains(string(r.body), `shredduck_rejected_requests_total{endpoint="/test",reason="no_answer"} 1`) {
		t.Error("/metrics does not count the aborted request")
	}
}

// A whole NDJSON body from a client that half-closes commits and gets
// 200: the catalog check before the commit must not fail on the
// request's ended context (it answered 500, then 503 for ever).
func TestHalfClosedNDJSON(t *testing.T) {
	ts := startServer(t, Config{})
	addr := strings.TrimPrefix(ts.url, "http://")
	body := []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","name":"n"}]}]}]}` + "\n")
	for i := range 3 {
		conn, r := rawPost(t, addr, "/v1/ndjson/halfclosed", "application/x-ndjson", body, 0)
		resp, answer, timedOut := readAnswer(t, conn, r, 30*time.Second)
		if timedOut || resp == nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("half-closed NDJSON request %d: %v %v %q", i, timedOut, resp, answer)
		}
	}
	if n := ts.count("halfclosed"); n != 3 {
		t.Errorf("%d rows, want 3", n)
	}
}
