package ingest

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/shredduck/shredduck/shred"
	"github.com/shredduck/shredduck/transforms"
)

// openUncheckpointed opens a new database file whose WAL DuckDB itself
// does not checkpoint (checkpoint_threshold 1TB), closed with the test.
func openUncheckpointed(t *testing.T) *DB {
	t.Helper()
	db, err := Open(filepath.Join(t.TempDir(), "c.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.SQL.Exec("SET checkpoint_threshold = '1TB'"); err != nil {
		t.Fatal(err)
	}
	return db
}

// persistentSegments counts otel_traces' column segments in the database
// file (written by a checkpoint) and in memory (committed to the WAL only).
func persistentSegments(t *testing.T, db *DB) (persistent, transient int) {
	t.Helper()
	err := db.SQL.QueryRow(`SELECT count(*) FILTER (persistent), count(*) FILTER (NOT persistent)
		FROM pragma_storage_info('otel_traces')`).Scan(&persistent, &transient)
	if err != nil {
		t.Fatal(err)
	}
	return persistent, transient
}

// TestCommitterCheckpoints: with CheckpointBytes the committer checkpoints
// after a group's COMMIT once the WAL is that large, with DuckDB's own checkpoint
// out of the way; without it, the same load leaves everything in the WAL.
func TestCommitterCheckpoints(t *testing.T) {
	const senders, each, spans = 4, 30, 50
	for _, tc := range []struct {
		name  string
		bytes int64
	}{{"committer", 64 << 10}, {"off", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			db := openUncheckpointed(t)
			var mu sync.Mutex
			var checkpoints int
			var errs []error
			c := db.NewCommitter(CommitOptions{CheckpointBytes: tc.bytes, OnCheckpoint: func(d time.Duration, err error) {
				mu.Lock()
				defer mu.Unlock()
				checkpoints++
				if err != nil {
					errs = append(errs, err)
				}
			}})
			submitAll(t, c, senders, each, func(id int) *shred.Batch { return spanBatch(t, id, spans) })
			c.Close()
			if len(errs) > 0 {
				t.Fatalf("checkpoints failed: %v", errs)
			}
			var n int
			if err := db.SQL.QueryRow(`SELECT count(*) FROM otel_traces`).Scan(&n); err != nil || n != senders*each*spans {
				t.Fatalf("rows %d, want %d (%v)", n, senders*each*spans, err)
			}
			wal, err := db.WALSize()
			if err != nil {
				t.Fatal(err)
			}
			persistent, transient := persistentSegments(t, db)
			t.Logf("%d checkpoints; WAL %d bytes; %d segments in the file, %d in memory", checkpoints, wal, persistent, transient)
			if tc.bytes == 0 {
				if checkpoints != 0 || persistent != 0 || wal < 64<<10 {
					t.Errorf("without CheckpointBytes: %d checkpoints, %d segments in the file, WAL %d bytes; want none, none, over 64 KiB", checkpoints, persistent, wal)
				}
				return
			}
			if checkpoints == 0 || persistent == 0 {
				t.Errorf("%d checkpoints, %d segments in the file; want some of each", checkpoints, persistent)
			}
		})
	}
}

// TestCheckpointLocked: DB.Checkpoint lends threads without any SET, so it
// works once the configuration is locked (as the server's is); it can be
// called again and again and leaves no goroutine behind.
func TestCheckpointLocked(t *testing.T) {
	db := openUncheckpointed(t)
	if db.raw == nil {
		t.Fatal("no C database handle: duckdb-go's Connector changed (rawDatabase); checkpoints would use DuckDB's threads only")
	}
	ctx := context.Background()
	for _, q := range []string{"SET threads = 1", "SET lock_configuration = true",
		"CREATE TABLE otel_traces AS SELECT md5(i::VARCHAR) AS trace_id, i FROM range(50000) r(i)"} {
		if _, err := db.SQL.Exec(q); err != nil {
			t.Fatal(q, err)
		}
	}
	before := runtime.NumGoroutine()
	for i := range 10 {
		if _, err := db.SQL.Exec("INSERT INTO otel_traces SELECT md5(i::VARCHAR), i FROM range(?, ? + 20000) r(i)", i*20000, i*20000); err != nil {
			t.Fatal(err)
		}
		if wal, err := db.WALSize(); err != nil || wal == 0 {
			t.Fatalf("WAL %d bytes after an insert (%v)", wal, err)
		}
		if err := db.Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
		if wal, err := db.WALSize(); err != nil || wal != 0 {
			t.Fatalf("WAL %d bytes after a checkpoint (%v)", wal, err)
		}
	}
	if _, transient := persistentSegments(t, db); transient != 0 {
		t.Errorf("%d segments still only in memory", transient)
	}
	// A lent thread signals done just before its goroutine returns, so the
	// count may take a moment to come back down; a leak never does.
	after := runtime.NumGoroutine()
	for deadline := time.Now().Add(5 * time.Second); after > before && time.Now().Before(deadline); after = runtime.NumGoroutine() {
		time.Sleep(10 * time.Millisecond)
	}
	if after > before {
		t.Errorf("%d goroutines after the checkpoints, %d before", after, before)
	}
	if _, err := db.SQL.Exec("SET threads = 2"); err == nil {
		t.Error("the configuration is not locked")
	}
}

// TestCommitterCheckpointFails: a failed checkpoint loses no commit, and is
// tried again only once the WAL has grown by an eighth of CheckpointBytes,
// not before every group.
func TestCommitterCheckpointFails(t *testing.T) {
	db := openUncheckpointed(t)
	const limit = 64 << 10
	var attempts []int64 // WAL size at each attempt
	var groups int
	c := db.NewCommitter(CommitOptions{CheckpointBytes: limit, OnCommit: func(ci CommitInfo) { groups++ }})
	c.checkpointRun = func(context.Context) error {
		n, err := db.WALSize()
		if err != nil {
			return err
		}
		attempts = append(attempts, n)
		return errors.New("disk full")
	}
	// One sender: every submission is a group of its own.
	for i := range 60 {
		if err := c.Submit(context.Background(), "otel_traces", transforms.Traces, spanBatch(t, i, 20), 100); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	var n int
	if err := db.SQL.QueryRow(`SELECT count(*) FROM otel_traces`).Scan(&n); err != nil || n != 60*20 {
		t.Fatalf("rows %d, want %d (%v)", n, 60*20, err)
	}
	wal, err := db.WALSize()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d groups, WAL %d bytes, checkpoint attempts at %v", groups, wal, attempts)
	if len(attempts) < 2 {
		t.Fatalf("%d checkpoint attempts; the test's WAL (%d bytes) is too small", len(attempts), wal)
	}
	if len(attempts) >= groups/2 {
		t.Errorf("%d checkpoint attempts in %d groups: a failing checkpoint is retried too often", len(attempts), groups)
	}
	for i := 1; i < len(attempts); i++ {
		if attempts[i] < attempts[i-1]+limit/8 {
			t.Errorf("attempt %d at %d WAL bytes, less than an eighth of %d after the one before (%d)", i, attempts[i], limit, attempts[i-1])
		}
	}
}
