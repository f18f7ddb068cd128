package serve

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A full disk under the ingest log, for real: a 256 KiB tmpfs (root
// only). Once it is full requests get 503 with Retry-After, never 500 and
// never a 2xx for what was not written; what was acknowledged is stored
// once; once the loader has removed loaded segments, requests are taken
// again.
func TestAckLogFullDisk(t *testing.T) {
	logDir := filepath.Join(t.TempDir(), "log")
	if err := os.Mkdir(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", logDir, "tmpfs", 0, "size=256k"); err != nil {
		t.Skipf("cannot mount a small tmpfs for the log (root only): %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(logDir, syscall.MNT_DETACH) }) // after the server's cleanup
	// The log's own bound out of the way, and a lag longer than filling
	// the disk takes (no pacing), so that the disk is what refuses.
	ts := startServer(t, Config{Ack: AckLog, LogDir: logDir, LogSegmentBytes: 32 << 10, MaxVisibilityLag: 3 * time.Second})
	stalled := ts.stallLoader()
	request := func(prefix string, i int) (string, []byte) {
		ids := make([]string, 20)
		for j := range ids {
			ids[j] = fmt.Sprintf("%s%d-%d-%s", prefix, i, j, strings.Repeat("x", 200))
		}
		return ids[0], tracesProto(t, ids...)
	}
	acked := ts.fillLog(1000, "ingest log", func(i int) (string, []byte) { return request("d", i) })
	if len(acked) < 5 {
		t.Fatalf("the 256 KiB disk took %d requests", len(acked))
	}
	if r := ts.do("GET", "/readyz", "", "", nil); r.status != http.StatusServiceUnavailable || !strings.Contains(string(r.body), "no space") {
		t.Errorf("/readyz with the log's disk full: %d %q", r.status, r.body)
	}
	stalled.Store(false)
	taken := false
	for deadline := time.Now().Add(20 * time.Second); !taken && time.Now().Before(deadline); {
		id, body := request("after", 0)
		switch r := ts.send(body); r.status {
		case http.StatusOK:
			acked[id] = true
			taken = true
		case http.StatusServiceUnavailable:
			time.Sleep(50 * time.Millisecond)
		default:
			t.Fatalf("while the loader frees the disk: %d %s", r.status, r.body)
		}
	}
	if !taken {
		t.Fatal("no request was taken once the loader had loaded the log")
	}
	if r := ts.do("GET", "/readyz", "", "", nil); r.status != http.StatusOK {
		t.Errorf("/readyz once the log's disk has room: %d %q", r.status, r.body)
	}
	got := ts.ids("otel_traces")
	for id := range acked {
		if got[id] != 1 {
			t.Errorf("acknowledged %s is stored %d times", id[:12], got[id])
		}
	}
	if len(got) != 20*len(acked) {
		t.Errorf("%d spans stored, %d acknowledged", len(got), 20*len(acked))
	}
}
