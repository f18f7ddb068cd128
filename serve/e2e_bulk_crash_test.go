//go:build e2e

package serve

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/internal/duckdb15test"
)

// TestCrashBulkIngest SIGKILLs `shredduck ingest` at points spread over a
// load into a database that already holds rows. Each insert of a bulk load
// has its arrow stream in an in-memory database attached for it
// (ingest/scanview.go): after the kill the file opens, in shredduck and in
// DuckDB 1.5, with the earlier rows and none of the killed load, and the
// next load stores all of its file.
func TestCrashBulkIngest(t *testing.T) {
	bin := e2eBuildShredduck(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "traces.ndjson")
	const n = 100000
	gen := exec.Command("go", "run", "./bench/gen", "traces", "-n", strconv.Itoa(n), "-seed", "1", "-o", in)
	gen.Dir = ".."
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("bench/gen: %v\n%s", err, out)
	}
	db := filepath.Join(dir, "bulk.duckdb")
	load := func() *exec.Cmd { return exec.Command(bin, "ingest", "--db", db, in) }
	if out, err := load().CombinedOutput(); err != nil {
		t.Fatalf("first load: %v\n%s", err, out)
	}
	want := n
	check := func(when string) {
		t.Helper()
		d, err := ingest.Open(db)
		if err != nil {
			t.Fatalf("%s: the file does not open: %v", when, err)
		}
		var got int
		if err := d.SQL.QueryRow("SELECT count(*) FROM otel_traces").Scan(&got); err != nil {
			t.Fatal(err)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: %d spans, want %d", when, got, want)
		}
		if s := duckdb15test.MustQuery(t, db, "SELECT count(*) FROM otel_traces"); s != strconv.Itoa(want) {
			t.Errorf("%s: DuckDB 1.5 reads %s spans, want %d", when, s, want)
		}
	}
	for _, after := range []time.Duration{100 * time.Millisecond, 250 * time.Millisecond, 400 * time.Millisecond, 700 * time.Millisecond} {
		cmd := load()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(after) // a kill point, not a synchronisation
		cmd.Process.Signal(syscall.SIGKILL)
		err := cmd.Wait()
		if err == nil { // it finished before the kill: its rows are stored
			want += n
		}
		t.Logf("after %s: %v", after, err)
		check("killed after " + after.String())
	}
	if out, err := load().CombinedOutput(); err != nil {
		t.Fatalf("load after the kills: %v\n%s", err, out)
	}
	want += n
	check("after a whole load")
}
