package serve

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	ossignal "os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shredduck/shredduck/ingest"
)

// A failed commit is 400 only when the request's own data cannot be
// stored; everything else is 503 with Retry-After, never 500, which OTLP
// clients do not retry.
func TestCommitErrorStatus(t *testing.T) {
	f := func(err error, status int, code int32, reason string) {
		t.Helper()
		e := commitError("otel_traces", err, 2*time.Second)
		if e.status != status || e.code != code || e.reason != reason {
			t.Errorf("%v: %d %d %s, want %d %d %s", err, e.status, e.code, e.reason, status, code, reason)
		}
		if retryable := status == http.StatusServiceUnavailable; retryable != (e.retryAfter > 0) {
			t.Errorf("%v: status %d with Retry-After %v", err, e.status, e.retryAfter)
		}
		if !strings.Contains(e.msg, "otel_traces") || !strings.Contains(e.msg, err.Error()) {
			t.Errorf("message %q does not name the table and the cause", e.msg)
		}
	}
	class := func(c error, msg string) error { return fmt.Errorf("%s: %w", msg, errors.Join(c, errors.New(msg))) }
	f(class(ingest.ErrRejected, "table otel_traces would have 330 columns"), http.StatusBadRequest, codeInvalidArgument, reasonRejected)
	f(class(ingest.ErrUnavailable, "Out of Memory Error: failed to pin block"), http.StatusServiceUnavailable, codeUnavailable, reasonUnavailable)
	f(class(ingest.ErrUnavailable, "Could not write file: No space left on device"), http.StatusServiceUnavailable, codeUnavailable, reasonUnavailable)
	f(errors.New("something nobody foresaw"), http.StatusServiceUnavailable, codeUnavailable, reasonCommitFailed)
}

// wideTraces is a traces request with one span of keys attributes, named
// after tag, with the span's id in test.id.
func wideTraces(t *testing.T, tag string, keys int) []byte {
	t.Helper()
	req := tracesRequest(tag)
	attrs := req.Traces().ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes()
	for k := range keys {
		attrs.PutInt(fmt.Sprintf("%s.k%03d", tag, k), int64(k))
	}
	b, err := req.MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Requests whose keys would take otel_traces past what the default memory
// limit allows (which the server cannot raise while it serves queries) are
// taken: keys past the table's budget go to the overflow maps. Innocent
// requests sent meanwhile, which share group commits with them, all commit.
// (Before the budget: 400 naming --memory-limit for the wide ones, and
// earlier still 65 of 68 innocent requests failed with 500.)
func TestWideRequestsBesideInnocentOnes(t *testing.T) {
	ts := startServer(t, Config{})
	ts.good()
	const wideClients, wideEach, clients, each = 4, 4, 12, 8
	var (
		mu       sync.Mutex
		failures []string
		wg       sync.WaitGroup
	)
	send := func(body []byte) response {
		req, _ := http.NewRequest("POST", ts.url+"/v1/traces", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/x-protobuf")
		resp, err := ts.client.Do(req)
		if err != nil {
			return response{status: -1, body: []byte(err.Error())}
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return response{status: resp.StatusCode, header: resp.Header, body: b.Bytes()}
	}
	for c := range wideClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range wideEach {
				if r := send(wideTraces(t, fmt.Sprintf("wide%d-%d", c, i), 300)); r.status != http.StatusOK {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("wide request: %d %q", r.status, r.body))
					mu.Unlock()
				}
			}
		}()
	}
	var innocent []string
	for c := range clients {
		for i := range each {
			innocent = append(innocent, fmt.Sprintf("innocent%d-%d", c, i))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if r := send(tracesProto(t, fmt.Sprintf("innocent%d-%d", c, i))); r.status != http.StatusOK {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("innocent request: %d %q", r.status, r.body))
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	for i, f := range failures {
		if i == 10 {
			t.Errorf("... %d failures in all", len(failures))
			break
		}
		t.Error(f)
	}
	got := ts.ids("otel_traces")
	for _, id := range innocent {
		if got[id] != 1 {
			t.Errorf("innocent span %s is in the table %d times", id, got[id])
		}
	}
	if want := len(innocent) + wideClients*wideEach + 1; len(got) != want {
		t.Errorf("%d distinct ids in the table, want %d (the innocent ones, the wide ones and good)", len(got), want)
	}
	if n := storedColumns(t, ts.db, "otel_traces"); n > 256 {
		t.Errorf("otel_traces has %d columns: past what 256MB allows", n)
	}
	ts.good()
}

// A full disk, for real (a file size limit the WAL cannot grow past:
// EFBIG, as ENOSPC): requests get 503 with Retry-After, /readyz says not
// ready; once the disk has room /readyz is ready again before any request
// is sent, and requests commit.
func TestFullDiskReadiness(t *testing.T) {
	ossignal.Ignore(syscall.SIGXFSZ) // raised by writes beyond the limit; unignored, it killed the process
	defer ossignal.Reset(syscall.SIGXFSZ)
	ts := startServer(t, Config{Ack: AckCommit}) // DuckDB's disk; --ack log keeps acknowledged requests in the log
	ts.good()
	wal, err := ts.db.WALSize()
	if err != nil || wal == 0 {
		t.Fatalf("WAL size %d: %v", wal, err)
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	full := old
	full.Cur = uint64(wal)
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &full); err != nil {
		t.Skipf("cannot limit the file size: %v", err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
				t.Fatal(err)
			}
		}
	}
	defer restore()
	for i := range 3 {
		r := ts.post("/v1/traces", "application/x-protobuf", "", tracesProto(t, fmt.Sprint("full-", i)))
		wantStatus(t, r, http.StatusServiceUnavailable, formatProto, codeUnavailable)
		if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 {
			t.Errorf("503 with Retry-After %q", r.header.Get("Retry-After"))
		}
	}
	r := ts.post("/v1/traces", "application/json", "", []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","name":"j"}]}]}]}`))
	wantStatus(t, r, http.StatusServiceUnavailable, formatJSON, codeUnavailable)
	if r := ts.do("GET", "/readyz", "", "", nil); r.status != http.StatusServiceUnavailable || !contains(string(r.body), "commits fail") {
		t.Errorf("/readyz on a full disk: %d %q", r.status, r.body)
	}
	restore()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := ts.do("GET", "/readyz", "", "", nil)
		if r.status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz once the disk has room: %d %q", r.status, r.body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	ts.good()
	if got := ts.ids("otel_traces"); len(got) != 1 || got["good"] != 2 {
		t.Errorf("ids in the table: %v, want good twice", got)
	}
}
