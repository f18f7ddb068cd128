//go:build unix

package pgwire

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shredduck/shredduck/serve/sqlpolicy"
)

// TestPGRefusedHasNoSideEffect is serve's TestQueryRefusedHasNoSideEffect
// over PostgreSQL, in both query protocols: statements refused in the
// directory DuckDB may write to (serve's --export-dir) leave no directory,
// read no file and register no secret.
func TestPGRefusedHasNoSideEffect(t *testing.T) {
	exp := t.TempDir()
	p := startPG(t, Config{}, sqlpolicy.Config{}, `CREATE TABLE t AS SELECT 1 AS i`,
		"SET allowed_directories = ['"+exp+"/']")
	fifo := filepath.Join(exp, "t", "date=2026-01-01", "hour=00", "data.parquet")
	if err := os.MkdirAll(filepath.Dir(fifo), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o644); err != nil { // a read would block, and shows
		t.Fatal(err)
	}
	planted := filepath.Join(exp, "t", "date=2026-01-02", "hour=05")
	ctx := context.Background()
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheStatement} {
		c := p.connect("", "")
		for _, q := range []struct{ sql, got string }{
			{"EXPORT DATABASE '" + planted + "'", "EXPORT"},
			{"COPY t FROM '" + fifo + "'", "COPY"},
			{"COPY t FROM '" + fifo + "' (FORMAT parquet)", "COPY"},
			{"CREATE SECRET s (TYPE s3, KEY_ID 'k', SECRET 'v')", "CREATE"},
			{"CREATE SECRET s (TYPE s3, KEY_ID 'k', SECRET 'v')", "CREATE"},
			{"COPY (SELECT 1) TO '" + filepath.Join(exp, "x.csv") + "'", "COPY"},
		} {
			_, err := c.Exec(ctx, q.sql, mode)
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != "42501" || !strings.Contains(pe.Message, "only SELECT statements are allowed (got "+q.got+")") {
				t.Errorf("%v: %s: %v, want 42501 got %s", mode, q.sql, err, q.got)
			}
		}
		var n int32
		if err := c.QueryRow(ctx, "SELECT count(*) FROM t", mode).Scan(&n); err != nil || n != 1 {
			t.Errorf("%v: t after the refusals: %d %v", mode, n, err)
		}
	}
	if _, err := os.Stat(filepath.Join(exp, "t", "date=2026-01-02")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused EXPORT DATABASE left %s: %v", planted, err)
	}
	if _, err := os.Stat(filepath.Join(exp, "x.csv")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused COPY TO wrote a file: %v", err)
	}
	if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); !errors.Is(err, syscall.ENXIO) {
		if f != nil {
			f.Close()
		}
		t.Errorf("a refused COPY FROM left the file open for reading: %v", err)
	}
}
