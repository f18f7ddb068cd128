package ingest

/*
// From DuckDB's C API (duckdb.h), linked from duckdb-go's bindings; the
// header is not on this package's include path.
typedef struct _duckdb_database { void *internal_ptr; } *duckdb_database;
typedef void *duckdb_task_state;
duckdb_task_state duckdb_create_task_state(duckdb_database database);
void duckdb_execute_tasks_state(duckdb_task_state state);
void duckdb_finish_execution(duckdb_task_state state);
void duckdb_destroy_task_state(duckdb_task_state state);
*/
import "C"

import (
	"context"
	"errors"
	"os"
	"reflect"
	"runtime"
	"strings"
	"unsafe"

	duckdb "github.com/duckdb/duckdb-go/v2"
	"github.com/duckdb/duckdb-go/v2/mapping"
)

// A server keeps DuckDB at one thread fewer than the cores: with a second
// thread the appender's flush and the COMMIT busy-poll for the tasks the
// other thread runs (docs/SERVE.md), and the spare core receives and
// decodes. A checkpoint, though, compresses row groups in parallel tasks,
// and with one thread it stalls every commit for as long as one core
// takes (DuckDB 1.5 lets no commit into a table through while a checkpoint
// writes it). DB.Checkpoint therefore lends the idle cores to DuckDB for
// the checkpoint only: goroutines, each on its own OS thread, run DuckDB's
// queued tasks through the C API's task state until the checkpoint ends.
// This needs no SET, so it works after LockDown has locked the
// configuration. Measured: a checkpoint of 4.8M spans on 2 cores took
// 4.1-4.6 s instead of 7.7-8.4 s, at the same CPU time.

// rawDatabase returns the C database of a duckdb-go connector. The driver
// does not export it; its Connector keeps it in a field checked by type
// (reflect) before it is read, so that a driver whose layout differs
// gives nil (and checkpoints on DuckDB's own threads) instead of garbage.
func rawDatabase(c *duckdb.Connector) unsafe.Pointer {
	f, ok := reflect.TypeOf(c).Elem().FieldByName("db")
	if !ok || f.Type != reflect.TypeOf(mapping.Database{}) {
		return nil
	}
	return (*mapping.Database)(unsafe.Add(unsafe.Pointer(c), f.Offset)).Ptr
}

// lendThreads runs DuckDB's queued tasks on n more OS threads until the
// returned function is called; it returns when they have stopped.
func (d *DB) lendThreads(n int) (stop func()) {
	if n <= 0 || d.raw == nil {
		return func() {}
	}
	st := C.duckdb_create_task_state(C.duckdb_database(d.raw))
	done := make(chan struct{}, n)
	for range n {
		go func() {
			// A task may keep thread-local state: one OS thread per call.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			C.duckdb_execute_tasks_state(st)
			done <- struct{}{}
		}()
	}
	return func() {
		C.duckdb_finish_execution(st)
		for range n {
			<-done
		}
		C.duckdb_destroy_task_state(st)
	}
}

// Checkpoint writes the WAL into the database file (CHECKPOINT), with the
// cores DuckDB's thread setting leaves unused lent to it (see above).
func (d *DB) Checkpoint(ctx context.Context) error {
	var threads int
	if err := d.SQL.QueryRowContext(ctx, "SELECT current_setting('threads')").Scan(&threads); err != nil {
		return err
	}
	stop := d.lendThreads(runtime.NumCPU() - threads)
	defer stop()
	_, err := d.SQL.ExecContext(ctx, "CHECKPOINT")
	return err
}

// WALSize returns the size of the database's write-ahead log in bytes: 0
// for an in-memory database or when there is none.
func (d *DB) WALSize() (int64, error) {
	if d.Path == "" || d.Path == ":memory:" {
		return 0, nil
	}
	st, err := os.Stat(d.Path + ".wal")
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// SizeSetting returns a DuckDB size setting (memory_limit,
// checkpoint_threshold) in bytes, rounded as DuckDB prints it.
func (d *DB) SizeSetting(ctx context.Context, name string) (int64, error) {
	var v string
	if err := d.SQL.QueryRowContext(ctx, "SELECT current_setting(?)", name).Scan(&v); err != nil {
		return 0, err
	}
	n := parseSize(v)
	if n <= 0 && !strings.HasPrefix(v, "0") {
		return 0, errors.New("cannot read " + name + " = " + v)
	}
	return n, nil
}
