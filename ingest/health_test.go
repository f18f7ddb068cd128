package ingest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/shredduck/shredduck/transforms"
)

func TestClassify(t *testing.T) {
	f := func(err error, unavailable, rejected bool) {
		t.Helper()
		got := classify(err)
		if errors.Is(got, ErrUnavailable) != unavailable || errors.Is(got, ErrRejected) != rejected {
			t.Errorf("classify(%v): unavailable %v, rejected %v; want %v, %v", err, errors.Is(got, ErrUnavailable), errors.Is(got, ErrRejected), unavailable, rejected)
		}
		if got.Error() != err.Error() {
			t.Errorf("classify changed the message %q to %q", err, got)
		}
	}
	oom := &duckdb.Error{Type: duckdb.ErrorTypeOutOfMemory, Msg: "Out of Memory Error: failed to allocate data of size 2.0 KiB"}
	f(oom, true, false)
	f(fmt.Errorf("commit: %w", oom), true, false)
	f(fmt.Errorf("commit: %w", &duckdb.Error{Type: duckdb.ErrorTypeTransaction, Msg: `TransactionContext Error: Failed to commit: Could not write file "x.wal": No space left on device`}), true, false)
	f(&duckdb.Error{Type: duckdb.ErrorTypeIO, Msg: "IO Error: Could not write file"}, true, false)
	f(errors.New("insert into t: Failed to append: could not allocate block of size 16.0 KiB"), true, false)
	f(fmt.Errorf("table t: %w", context.DeadlineExceeded), true, false)
	f(fmt.Errorf("table t: %w", rejected(errors.New("too wide"))), false, true)
	f(&duckdb.Error{Type: duckdb.ErrorTypeConstraint, Msg: "Constraint Error: duplicate key"}, false, false)
	f(errors.New("table t holds otlp-logs data; it cannot take otlp-traces"), false, false)
}

// Commits that cannot write, for real: commits then fail with
// ErrUnavailable, Health reports it (its probe write fails too), and once
// the cause is gone Health is nil again before any commit, and commits
// succeed. A full disk is a file size limit (RLIMIT_FSIZE) the WAL cannot
// grow past (EFBIG, "File too large", as ENOSPC); an unwritable
// directory is a WAL path DuckDB cannot open (a directory in its place:
// permissions do not stop root).
func TestCommitterCannotWrite(t *testing.T) {
	t.Run("full disk", func(t *testing.T) {
		// A write beyond the limit raises SIGXFSZ; unignored, it killed the
		// test process (DuckDB writes from C).
		signal.Ignore(syscall.SIGXFSZ)
		defer signal.Reset(syscall.SIGXFSZ)
		testCannotWrite(t, func(db *DB) (restore func()) {
			wal, err := db.WALSize()
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
			return func() {
				if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
					t.Fatal(err)
				}
			}
		})
	})
	t.Run("unwritable directory", func(t *testing.T) {
		testCannotWrite(t, func(db *DB) (restore func()) {
			if err := db.Checkpoint(context.Background()); err != nil { // no WAL left
				t.Fatal(err)
			}
			if err := os.Mkdir(db.Path+".wal", 0o755); err != nil {
				t.Fatal(err)
			}
			return func() {
				if err := os.Remove(db.Path + ".wal"); err != nil {
					t.Fatal(err)
				}
			}
		})
	})
}

// testCannotWrite commits, calls block to stop the database's writes, and
// checks the committer and its Health until and after restore.
func testCannotWrite(t *testing.T, block func(*DB) (restore func())) {
	db, err := Open(filepath.Join(t.TempDir(), "c.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c := db.NewCommitter(CommitOptions{})
	defer c.Close()
	submit := func(id int) error {
		return c.Submit(context.Background(), "otel_traces", transforms.Traces, spanBatch(t, id, 200), 1)
	}
	if err := submit(0); err != nil {
		t.Fatal(err)
	}
	if err := c.Health(context.Background()); err != nil {
		t.Fatalf("Health after a commit: %v", err)
	}
	restore := block(db)
	restored := false
	defer func() {
		if !restored {
			restore()
		}
	}()
	for id := 1; id <= 3; id++ {
		err := submit(id)
		if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrRejected) {
			t.Fatalf("submission %d: %v, want ErrUnavailable", id, err)
		}
	}
	if herr := c.Health(context.Background()); !errors.Is(herr, ErrUnavailable) {
		t.Errorf("Health: %v, want ErrUnavailable", herr)
	}
	restore()
	restored = true
	c.probe.mu.Lock()
	c.probe.at = c.probe.at.Add(-probeInterval) // the next Health probes again at once
	c.probe.mu.Unlock()
	if err := c.Health(context.Background()); err != nil {
		t.Errorf("Health once writes work again: %v", err)
	}
	for id := 4; id <= 5; id++ {
		if err := submit(id); err != nil {
			t.Fatalf("submission %d once writes work again: %v", id, err)
		}
	}
	var n int
	if err := db.SQL.QueryRow(`SELECT count(DISTINCT req) FROM otel_traces`).Scan(&n); err != nil || n != 3 {
		t.Errorf("%d requests stored (%v), want 3", n, err)
	}
}

// Real out-of-memory failures: group commits while heavy queries hold
// DuckDB's memory (a low memory_limit). Every failed submission must be
// ErrUnavailable (retryable), none may fail on a connection an earlier
// failure left in an aborted transaction, and once the queries stop the
// pool's connections are clean and commits succeed.
func TestCommitterOutOfMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("a few seconds of load")
	}
	db, c := openCommitter(t, nil)
	for _, set := range []string{"SET memory_limit = '32MB'", "SET threads = 2"} {
		if _, err := db.SQL.Exec(set); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				var n int
				db.SQL.QueryRow(`SELECT count(*) FROM (SELECT DISTINCT i::VARCHAR || repeat('x', 20) FROM range(2000000) t(i))`).Scan(&n)
			}
		}()
	}
	var (
		mu                    sync.Mutex
		ok, unavailable       int
		aborted, unclassified []string
		segtree               []string
		id                    atomic.Int64
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				err := c.Submit(context.Background(), "otel_traces", transforms.Traces, spanBatch(t, int(id.Add(1)), 200), 1)
				mu.Lock()
				switch {
				case err == nil:
					ok++
				case strings.Contains(err.Error(), "transaction is aborted"):
					aborted = append(aborted, err.Error())
				case strings.Contains(err.Error(), segmentTreeBug):
					segtree = append(segtree, err.Error())
				case errors.Is(err, ErrUnavailable):
					unavailable++
				default:
					unclassified = append(unclassified, err.Error())
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("%d submissions committed, %d out of memory (ErrUnavailable)", ok, unavailable)
	if len(segtree) > 0 {
		// If DuckDB invalidated the database, the server must learn it
		// (invalid.go), to stop and be restarted.
		var one int
		if err := db.SQL.QueryRow("SELECT 1").Scan(&one); err != nil && strings.Contains(err.Error(), "invalidated") {
			select {
			case <-db.Invalidated():
			default:
				t.Errorf("DuckDB invalidated the database (%v) but Invalidated is not closed", err)
			}
		}
		skipSegmentTreeBug(t, segtree[0])
	}
	if len(aborted) > 0 {
		t.Errorf("%d submissions failed on a connection left in an aborted transaction: %s", len(aborted), aborted[0])
	}
	if len(unclassified) > 0 {
		t.Errorf("%d submissions failed without a class: %s", len(unclassified), unclassified[0])
	}
	if unavailable == 0 {
		t.Log("no commit ran out of memory this time")
	}
	if _, err := db.SQL.Exec("SET memory_limit = '1GB'"); err != nil {
		if strings.Contains(err.Error(), segmentTreeBug) {
			skipSegmentTreeBug(t, err.Error())
		}
		t.Fatal(err)
	}
	// Every pooled connection can start a transaction.
	n := db.SQL.Stats().OpenConnections
	conns := make([]*sql.Conn, 0, n)
	for range n {
		conn, err := db.SQL.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
		if _, err := conn.ExecContext(context.Background(), "BEGIN TRANSACTION"); err != nil {
			t.Errorf("a pooled connection after the load: %v", err)
			continue
		}
		conn.ExecContext(context.Background(), "ROLLBACK")
	}
	for _, conn := range conns {
		conn.Close()
	}
	for i := range 3 {
		if err := c.Submit(context.Background(), "otel_traces", transforms.Traces, spanBatch(t, int(id.Add(1)), 200), 1); err != nil {
			t.Errorf("submission %d after the load: %v", i, err)
		}
	}
}

// segmentTreeBug is DuckDB 1.5.6's message when, under memory pressure, a
// table's row groups no longer cover its rows (row group 0 holding 30,603
// rows, the next starting at 30,720) and the database is invalidated.
// TestCommitterOutOfMemory met it in about one run in ten, on the main of
// 68c958e too (2 of 15 runs), and in none of 60 runs of 2026-12-02; its
// cause is not found yet. A server stops on it (invalid.go). DuckDB 2.0
// has not shown it.
const segmentTreeBug = "Could not find node in column segment tree"

// skipSegmentTreeBug ends a test that met segmentTreeBug. DuckDB 2.0 has
// not shown it, so it fails the test: nothing after it holds in an
// invalidated database.
func skipSegmentTreeBug(t *testing.T, msg string) {
	t.Helper()
	t.Fatalf("DuckDB invalidated the database under memory pressure (DuckDB 1.5.6's segmentTreeBug): %.300s", msg)
}
