//go:build e2e

package serve

// The memory test: `shredduck serve` as a child process, with its default
// flags, is sent each of the attack mixes of issue #14 (gzip bombs, lying
// Content-Lengths, a small body of millions of empty spans, gRPC gzip
// bombs on one connection, a request with tens of thousands of distinct
// keys). Each mix runs against a fresh child on its own copy of a
// database holding spans acknowledged before it. After the mix the
// child's peak RSS (VmHWM) must be within memoryBound, the child must
// answer /readyz and take a good request, and after a clean stop every
// span acknowledged before the mix must be in the table. Run with
//
//	go test -tags e2e -run 'TestMemoryAttacks$' -v ./serve/
//
// The mixes are scaled to take a few seconds each; the full sizes
// are TestMemoryAttacksHeavy, behind the extra tag heavy:
//
//	go test -tags 'e2e heavy' -run TestMemoryAttacksHeavy -v ./serve/

import (
	"bytes"
	"compress/gzip"
	"database/sql"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/shredduck/shredduck/ingest"
)

// memoryBound is the target for the server's peak RSS under any
// of the mixes, with default flags.
const memoryBound = 1 << 30

// memoryScale sizes the attack mixes.
type memoryScale struct {
	bombs, bombMiB          int // concurrent OTLP/HTTP gzip bombs, and the MiB each inflates to
	liars                   int // connections declaring a 64 MiB body and sending one byte
	emptySpans, emptyBodies int // empty spans per gzip body, and such bodies at once
	grpcBombs, grpcBombMiB  int // gRPC gzip-bomb streams on one connection, MiB each
	keys                    int // distinct attribute keys in one request, in one span
	spreadKeys              int // distinct attribute keys in one request, one per span
}

// quickMemoryScale makes every mix take the unfixed server well past
// memoryBound (measured on 34ec44b: 1.6-3.9 GiB each) in a few seconds.
var quickMemoryScale = memoryScale{
	bombs: 16, bombMiB: 128,
	liars:      40,
	emptySpans: 4 << 20, emptyBodies: 2,
	grpcBombs: 16, grpcBombMiB: 128,
	keys: 50_000, spreadKeys: 20_000,
}

func TestMemoryAttacks(t *testing.T) { runMemoryAttacks(t, quickMemoryScale) }

func runMemoryAttacks(t *testing.T, sc memoryScale) {
	bin := e2eBuildShredduck(t)
	dir := t.TempDir()
	seed := filepath.Join(dir, "seed.duckdb")
	client := &http.Client{Timeout: 60 * time.Second}

	// Spans acknowledged before the attacks, which must survive them; each
	// mix gets its own copy of the database, so that no mix's leftovers
	// (rows it got in, a wide table) change the next one.
	const before = 20
	child := e2eStartChild(t, bin, seed)
	for seq := 1; seq <= before; seq++ {
		if code := memoryPost(client, child.url+"/v1/traces", "", crashRequest(seq)); code != http.StatusOK {
			t.Fatalf("request %d before the attacks: status %d\n%s", seq, code, child.log())
		}
	}
	child.stop() // a clean stop checkpoints: the file is the whole database
	seedData, err := os.ReadFile(seed)
	if err != nil {
		t.Fatal(err)
	}

	mixes := []struct {
		name string
		run  func(t *testing.T, url string)
	}{
		{"gzip bombs", func(t *testing.T, url string) {
			bomb := gzipBomb(t, sc.bombMiB)
			memoryConcurrent(t, sc.bombs, func(int) int { return memoryPost(client, url+"/v1/traces", "gzip", bomb) })
		}},
		{"lying Content-Length", func(t *testing.T, url string) { memoryLiars(t, url, sc.liars) }},
		{"empty spans", func(t *testing.T, url string) {
			body := memoryGzip(emptySpansRequest(sc.emptySpans))
			t.Logf("%d empty spans: %d-byte gzip body", sc.emptySpans, len(body))
			memoryConcurrent(t, sc.emptyBodies, func(int) int { return memoryPost(client, url+"/v1/traces", "gzip", body) })
		}},
		{"gRPC gzip bombs", func(t *testing.T, url string) {
			memoryGRPCBombs(t, url, sc.grpcBombs, gzipBomb(t, sc.grpcBombMiB))
		}},
		{"distinct keys", func(t *testing.T, url string) {
			code := memoryPost(client, url+"/v1/traces", "gzip", memoryGzip(distinctKeysRequest(sc.keys, 1)))
			t.Logf("%d distinct keys in a span: status %d", sc.keys, code)
		}},
		{"distinct keys, spread", func(t *testing.T, url string) {
			code := memoryPost(client, url+"/v1/traces", "gzip", memoryGzip(distinctKeysRequest(sc.spreadKeys, sc.spreadKeys)))
			t.Logf("%d distinct keys in as many spans: status %d", sc.spreadKeys, code)
		}},
	}
	for i, m := range mixes {
		if only := os.Getenv("SHREDDUCK_MEMORY_MIX"); only != "" && !strings.Contains(m.name, only) {
			continue
		}
		db := filepath.Join(dir, fmt.Sprintf("mix%d.duckdb", i))
		if err := os.WriteFile(db, seedData, 0o644); err != nil {
			t.Fatal(err)
		}
		child := e2eStartChild(t, bin, db)
		stopWatch := memoryWatchdog(child)
		start := time.Now()
		m.run(t, child.url)
		// Memory kept after the mix counts too: let the answers' work
		// (commits, checkpoints) settle before reading the peak.
		time.Sleep(time.Second)
		peak, rss := peakRSS(child)
		if stopWatch() {
			t.Fatalf("%s: the server's RSS passed %d MiB; killed", m.name, memoryKill>>20)
		}
		t.Logf("%-22s peak RSS %4d MiB, RSS after %4d MiB, %v", m.name, peak>>20, rss>>20, time.Since(start).Round(time.Millisecond))
		if peak > memoryBound {
			t.Errorf("%s: peak RSS %d MiB, over the bound of %d MiB", m.name, peak>>20, memoryBound>>20)
		}
		select {
		case <-child.exited:
			t.Fatalf("%s: the server exited: %v\n%s", m.name, child.err, child.log())
		default:
		}
		if err := memoryReady(child.url); err != nil {
			t.Errorf("%s: the server is not ready after the mix: %v", m.name, err)
		}
		if code := memoryPost(client, child.url+"/v1/traces", "", crashRequest(before+1)); code != http.StatusOK {
			t.Errorf("%s: a good request after the mix: status %d", m.name, code)
		}
		child.stop()
		memoryCheckSeed(t, m.name, db, before)
	}
}

// memoryCheckSeed checks that the spans of requests 1..before are in db.
func memoryCheckSeed(t *testing.T, mix, db string, before int) {
	t.Helper()
	d, err := ingest.Open(db)
	if err != nil {
		t.Fatalf("%s: %v", mix, err)
	}
	defer d.Close()
	var spans, reqs int
	keyQuery(t, d, `SELECT count(DISTINCT "crash.id"), count(DISTINCT "crash.seq") FROM otel_traces WHERE "crash.seq" <= ?`, []any{before}, func(rows *sql.Rows) error { return rows.Scan(&spans, &reqs) })
	if want := before * crashSpansPerRequest; spans != want || reqs != before {
		t.Errorf("%s: %d of the %d spans acknowledged before the attack (%d of %d requests)", mix, spans, want, reqs, before)
	}
}

// memoryPost POSTs an OTLP/HTTP protobuf body and returns the status, or
// 0 when there was no answer.
func memoryPost(client *http.Client, url, encoding string, body []byte) int {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// memoryConcurrent runs n copies of f at once and logs how their answers
// were distributed.
func memoryConcurrent(t *testing.T, n int, f func(i int) int) {
	t.Helper()
	codes := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { codes[i] = f(i) })
	}
	wg.Wait()
	t.Logf("answers: %s", memoryCodes(codes))
}

func memoryCodes(codes []int) string {
	count := make(map[int]int)
	for _, c := range codes {
		count[c]++
	}
	var parts []string
	for c, n := range count {
		parts = append(parts, fmt.Sprintf("%d×%d", n, c))
	}
	return strings.Join(parts, " ")
}

func memoryGzip(b []byte) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// emptySpansRequest is an ExportTraceServiceRequest of one resource and
// scope block holding n empty spans: two bytes each on the wire.
func emptySpansRequest(n int) []byte {
	empty := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), nil)
	scope := bytes.Repeat(empty, n)                                                      // ScopeSpans.spans
	rs := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), scope) // ResourceSpans.scope_spans
	return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), rs)   // resource_spans
}

// distinctKeysRequest is a traces request of spans spans with keys
// distinct attribute keys spread evenly over them.
func distinctKeysRequest(keys, spans int) []byte {
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	var s ptrace.Span
	for i := range keys {
		if i%(keys/spans) == 0 {
			s = ss.Spans().AppendEmpty()
			s.SetName("k")
		}
		s.Attributes().PutStr("key."+strconv.Itoa(i), "v")
	}
	b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		panic(err)
	}
	return b
}

// memoryLiars opens n connections that each declare a 64 MiB body and
// send one byte, and keeps them open for two seconds.
func memoryLiars(t *testing.T, url string, n int) {
	t.Helper()
	addr := strings.TrimPrefix(url, "http://")
	var conns []net.Conn
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Errorf("dial: %v", err)
			break
		}
		fmt.Fprintf(c, "POST /v1/traces HTTP/1.1\r\nHost: %s\r\nContent-Type: application/x-protobuf\r\nContent-Length: %d\r\n\r\nx", addr, 64<<20)
		conns = append(conns, c)
	}
	time.Sleep(2 * time.Second)
	answered := 0
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
		if n, _ := c.Read(make([]byte, 1)); n > 0 {
			answered++
		}
		c.Close()
	}
	t.Logf("%d connections, %d answered within 2s", len(conns), answered)
}

// memoryGRPCBombs sends n gRPC Export calls at once on one h2c connection,
// each one compressed message that inflates to bomb's size.
func memoryGRPCBombs(t *testing.T, url string, n int, bomb []byte) {
	t.Helper()
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p, MaxConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 60 * time.Second}
	msg := make([]byte, 5, 5+len(bomb))
	msg[0] = 1 // compressed
	binary.BigEndian.PutUint32(msg[1:], uint32(len(bomb)))
	msg = append(msg, bomb...)
	statuses := make([]int, n)
	grpcCodes := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, url+"/opentelemetry.proto.collector.trace.v1.TraceService/Export", bytes.NewReader(msg))
			req.Header.Set("Content-Type", "application/grpc")
			req.Header.Set("Grpc-Encoding", "gzip")
			req.Header.Set("Te", "trailers")
			resp, err := client.Do(req)
			if err != nil {
				grpcCodes[i] = "error"
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			statuses[i] = resp.StatusCode
			grpcCodes[i] = grpcStatus(resp.Header)
			if grpcCodes[i] == "" {
				grpcCodes[i] = grpcStatus(resp.Trailer)
			}
		})
	}
	wg.Wait()
	count := make(map[string]int)
	for _, c := range grpcCodes {
		count[c]++
	}
	t.Logf("gRPC answers: %v", count)
}

// memoryKill is the RSS at which the watchdog kills the child: the machine
// is shared, and the unfixed server took 14 GiB on a mix.
const memoryKill = 6 << 30

// memoryWatchdog kills the child if its RSS passes memoryKill; stop ends
// the watch and reports whether it did.
func memoryWatchdog(c *e2eChild) (stop func() bool) {
	done := make(chan struct{})
	var killed bool
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-c.exited:
				return
			case <-tick.C:
			}
			if _, rss := peakRSS(c); rss > memoryKill {
				killed = true
				c.kill()
				return
			}
		}
	})
	return func() bool {
		close(done)
		wg.Wait()
		return killed
	}
}

// peakRSS returns the child's VmHWM and VmRSS, in bytes (zero once it
// has exited).
func peakRSS(c *e2eChild) (peak, rss int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmHWM:":
			peak = kb << 10
		case "VmRSS:":
			rss = kb << 10
		}
	}
	return peak, rss
}

// memoryReady asks /readyz, retrying for a few seconds: a server that
// refuses work for a moment after a mix is still alive.
func memoryReady(url string) error {
	var err error
	for range 50 {
		var resp *http.Response
		resp, err = http.Get(url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("/readyz: %s", resp.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}
