package serve

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/shredduck/shredduck/ingest"
)

const testdata = "../testdata/otlp/otlp2parquet"

// testServer is a Server on 127.0.0.1:0 listeners with a database in a
// temporary directory; stop (or the test's cleanup) shuts it down.
type testServer struct {
	t        *testing.T
	srv      *Server
	db       *ingest.DB
	url      string // http://127.0.0.1:port of the HTTP port
	grpcAddr string
	cancel   context.CancelFunc
	done     chan error
	client   *http.Client
	stopped  bool
	closed   bool
}

func startServer(t *testing.T, cfg Config) *testServer {
	t.Helper()
	return startServerAt(t, filepath.Join(t.TempDir(), "test.duckdb"), cfg)
}

// startServerAt is startServer on the database file path; close (or the
// test's cleanup) stops the server and closes the database, so that the
// next server can open the same file.
func startServerAt(t *testing.T, path string, cfg Config) *testServer {
	t.Helper()
	return startServerDensity(t, path, cfg, 0)
}

// startServerDensity is startServerAt with DB.ColumnDensity density: the
// other helpers give every key of a test's few records a stored column.
func startServerDensity(t *testing.T, path string, cfg Config, density float64) *testServer {
	t.Helper()
	db, err := ingest.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	db.ColumnDensity = density
	if cfg.MemoryLimit == "" {
		cfg.MemoryLimit = "256MB"
	}
	// SHREDDUCK_TEST_ACK=log runs the tests in that mode (.ci/run does):
	// each acknowledged request is then waited for until it is loaded.
	if cfg.Ack == "" {
		cfg.Ack = os.Getenv("SHREDDUCK_TEST_ACK")
	}
	if cfg.Ack == AckLog && cfg.LogDir == "" {
		cfg.LogDir = path + ".ingestlog"
	}
	if cfg.Ack == AckLog && cfg.MaxVisibilityLag == 0 {
		cfg.MaxVisibilityLag = 20 * time.Millisecond
	}
	srv, err := New(db, cfg)
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	httpL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	grpcL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts := &testServer{t: t, srv: srv, db: db, url: "http://" + httpL.Addr().String(), grpcAddr: grpcL.Addr().String(),
		cancel: cancel, done: make(chan error, 1),
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	go func() { ts.done <- srv.Serve(ctx, httpL, grpcL) }()
	t.Cleanup(ts.close)
	return ts
}

// close stops the server and closes its database, once.
func (ts *testServer) close() {
	ts.t.Helper()
	if ts.closed {
		return
	}
	ts.stop()
	ts.closed = true
	if err := ts.db.Close(); err != nil {
		ts.t.Errorf("closing the database: %v", err)
	}
}

// stop cancels Serve's context and waits for it to return.
func (ts *testServer) stop() {
	ts.t.Helper()
	if ts.stopped {
		return
	}
	ts.stopped = true
	ts.cancel()
	select {
	case err := <-ts.done:
		if err != nil {
			ts.t.Errorf("Serve: %v", err)
		}
	case <-time.After(60 * time.Second):
		ts.t.Fatal("Serve did not return after its context ended")
	}
}

// response is what a test request got back.
type response struct {
	status int
	header http.Header
	body   []byte
}

// post sends body to path with the given Content-Type and
// Content-Encoding (either may be empty) and extra header pairs.
func (ts *testServer) post(path, contentType, encoding string, body []byte, header ...string) response {
	ts.t.Helper()
	return ts.do(http.MethodPost, path, contentType, encoding, body, header...)
}

func (ts *testServer) do(method, path, contentType, encoding string, body []byte, header ...string) response {
	ts.t.Helper()
	req, err := http.NewRequest(method, ts.url+path, bytes.NewReader(body))
	if err != nil {
		ts.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := ts.client.Do(req)
	if err != nil {
		ts.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		ts.t.Fatalf("%s %s: reading the response: %v", method, path, err)
	}
	if resp.StatusCode/100 == 2 && method == http.MethodPost && path != "/v1/query" {
		ts.waitLoaded()
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// waitLoaded waits until what the server acknowledged is committed (with
// --ack log; at once otherwise).
func (ts *testServer) waitLoaded() {
	ts.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := ts.srv.WaitLoaded(ctx); err != nil {
		ts.t.Fatalf("acknowledged requests not loaded in 30s: %v", err)
	}
}

// count returns the rows of a table (0 when it does not exist).
func (ts *testServer) count(table string) int {
	ts.t.Helper()
	ts.waitLoaded()
	return countRows(ts.t, ts.db, table)
}

func countRows(t *testing.T, db *ingest.DB, table string) int {
	t.Helper()
	var exists int
	if err := db.SQL.QueryRow("SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", table).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists == 0 {
		return 0
	}
	var n int
	if err := db.SQL.QueryRow("SELECT count(*) FROM " + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// wantStatus checks an error response: the status, and a google.rpc.Status
// body in the given format with the given code.
func wantStatus(t *testing.T, r response, status int, f format, code int32) *statuspb.Status {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %q", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != f.ContentType() {
		t.Fatalf("Content-Type %q, want %q", ct, f.ContentType())
	}
	st, err := parseStatus(f, r.body)
	if err != nil {
		t.Fatalf("body %q is not a %s google.rpc.Status: %v", r.body, f, err)
	}
	if st.Code != code {
		t.Fatalf("Status code %d, want %d (message %q)", st.Code, code, st.Message)
	}
	if st.Message == "" {
		t.Fatalf("Status without a message")
	}
	return st
}

// parseStatus decodes a google.rpc.Status body; the JSON form must have
// no other keys than code, message and details.
func parseStatus(f format, body []byte) (*statuspb.Status, error) {
	st := &statuspb.Status{}
	if f == formatProto {
		if err := proto.Unmarshal(body, st); err != nil {
			return nil, err
		}
		return st, nil
	}
	var js struct {
		Code    *int32 `json:"code"`
		Message string `json:"message"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&js); err != nil {
		return nil, err
	}
	if js.Code == nil {
		return nil, fmt.Errorf("no code")
	}
	st.Code, st.Message = *js.Code, js.Message
	return st, nil
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testdata, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func gzipBytes(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// tracesRequest returns a traces export request with one span per id,
// each carrying its id in the attribute test.id.
func tracesRequest(ids ...string) ptraceotlp.ExportRequest {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "servetest")
	ss := rs.ScopeSpans().AppendEmpty()
	for i, id := range ids {
		s := ss.Spans().AppendEmpty()
		s.SetName("op")
		s.SetTraceID(pcommon.TraceID{1, 2, 3, byte(i)})
		s.SetSpanID(pcommon.SpanID{4, 5, byte(i >> 8), byte(i)})
		s.SetKind(ptrace.SpanKindServer)
		s.SetStartTimestamp(1_700_000_000_000_000_000)
		s.SetEndTimestamp(1_700_000_000_001_000_000)
		s.Attributes().PutStr("test.id", id)
	}
	return ptraceotlp.NewExportRequestFromTraces(td)
}

func tracesProto(t testing.TB, ids ...string) []byte {
	t.Helper()
	b, err := tracesRequest(ids...).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ids returns the test.id values in a table.
func (ts *testServer) ids(table string) map[string]int {
	ts.t.Helper()
	ts.waitLoaded()
	rows, err := ts.db.SQL.Query(`SELECT "test.id" FROM ` + table)
	if err != nil {
		ts.t.Fatal(err)
	}
	defer rows.Close()
	out := make(map[string]int)
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			ts.t.Fatal(err)
		}
		out[id]++
	}
	if err := rows.Err(); err != nil {
		ts.t.Fatal(err)
	}
	return out
}

// good sends a valid traces request and checks that it is committed: the
// server still serves after whatever came before.
func (ts *testServer) good(header ...string) {
	ts.t.Helper()
	before := ts.count("otel_traces")
	r := ts.post("/v1/traces", "application/x-protobuf", "", tracesProto(ts.t, "good"), header...)
	if r.status != http.StatusOK {
		ts.t.Fatalf("a good request got %d: %q", r.status, r.body)
	}
	if after := ts.count("otel_traces"); after != before+1 {
		ts.t.Fatalf("otel_traces has %d rows after a good request, want %d", after, before+1)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
