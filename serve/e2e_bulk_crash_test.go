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
// DuckDB 1.5, with the earlier rows and either none or all of the killed
// load (a kill after the commit, while the process closes, keeps it), and
// the next load stores all of its file. Kill points are fractions of a
// measured whole load, so a fast machine still gets kills mid-load.
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
	start := time.Now()
	if out, err := load().CombinedOutput(); err != nil {
		t.Fatalf("first load: %v\n%s", err, out)
	}
	whole := time.Since(start)
	want := n
	count := func(when string) int {
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
		if s := duckdb15test.MustQuery(t, db, "SELECT count(*) FROM otel_traces"); s != strconv.Itoa(got) {
			t.Errorf("%s: DuckDB 1.5 reads %s spans, shredduck %d", when, s, got)
		}
		return got
	}
	cut := 0
	for _, frac := range []float64{0.15, 0.35, 0.55, 0.8} {
		after := time.Duration(frac * float64(whole))
		cmd := load()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(after) // a kill point, not a synchronisation
		cmd.Process.Signal(syscall.SIGKILL)
		err := cmd.Wait()
		when := "killed after " + after.String()
		switch got := count(when); got {
		case want:
			cut++
		case want + n: // committed before the kill
			want = got
		default:
			t.Errorf("%s: %d spans, want %d (none of the load) or %d (all of it)", when, got, want, want+n)
		}
		t.Logf("after %s of a %s load: %v, %d spans", after, whole, err, want)
	}
	if cut == 0 {
		t.Errorf("no kill landed before a commit (a whole load takes %s): the test checked nothing mid-load", whole)
	}
	if out, err := load().CombinedOutput(); err != nil {
		t.Fatalf("load after the kills: %v\n%s", err, out)
	}
	want += n
	if got := count("after a whole load"); got != want {
		t.Errorf("after a whole load: %d spans, want %d", got, want)
	}
}
