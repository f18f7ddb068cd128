package ingest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/shredduck/shredduck/shred"
)

// ExpireStep deletes, in one transaction, up to limit rows of table whose
// time (timeExpr, a TIMESTAMP_NS expression over the table's columns) is
// before cut, and returns how many it deleted: fewer than limit means none
// is left. Rows whose time is NULL never expire. The caller must hold the
// writer's turn (Committer.Exclusive, Loader.Exclusive): a DELETE beside a
// pipelined group's ALTER would conflict with it. A crash leaves the step
// committed whole or not at all.
//
// The space comes back at the next checkpoint, for the row groups whose
// rows are all deleted (docs/RETENTION.md).
func (d *DB) ExpireStep(ctx context.Context, table, timeExpr string, cut time.Time, limit int) (int64, error) {
	tq := shred.QuoteIdent(table)
	// The rowid subquery bounds the transaction's size; a plain DELETE of
	// a week of spans would hold them all in one undo buffer.
	q := fmt.Sprintf(`DELETE FROM %s WHERE rowid IN (SELECT rowid FROM %s WHERE %s < make_timestamp_ns(?) LIMIT %d)`, tq, tq, timeExpr, limit)
	// Not ctx: DuckDB may commit a statement it reports interrupted, and
	// the caller counts what was deleted. A step is bounded by limit.
	res, err := d.SQL.ExecContext(context.WithoutCancel(ctx), q, cut.UnixNano())
	if err != nil {
		return 0, fmt.Errorf("cannot expire rows of %s before %s: %w", table, cut.UTC().Format(time.RFC3339), classify(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	return n, nil
}

// TableExists reports whether the main schema has a table named name.
func (d *DB) TableExists(ctx context.Context, name string) (bool, error) {
	var n int
	err := d.SQL.QueryRowContext(ctx, `SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = 'main' AND lower(table_name) = lower(?)`, name).Scan(&n)
	return n > 0, err
}

// HourCounts returns the rows of table per hour (Unix nanoseconds of the
// hour's start, by timeExpr) for the hours that end at or before cut.
func (d *DB) HourCounts(ctx context.Context, table, timeExpr string, cut time.Time) (map[int64]int64, error) {
	q := fmt.Sprintf(`SELECT epoch_ns(date_trunc('hour', %s)) AS h, count(*) FROM %s WHERE %s < make_timestamp_ns(?) GROUP BY h`,
		timeExpr, shred.QuoteIdent(table), timeExpr)
	rows, err := d.SQL.QueryContext(ctx, q, cut.Truncate(time.Hour).UnixNano())
	if err != nil {
		return nil, fmt.Errorf("cannot count the rows of %s by hour: %w", table, err)
	}
	defer rows.Close()
	out := map[int64]int64{}
	for rows.Next() {
		var h, n int64
		if err := rows.Scan(&h, &n); err != nil {
			return nil, err
		}
		out[h] = n
	}
	return out, rows.Err()
}

// ParquetRows returns the rows of a Parquet file (from its footer); 0
// when there is no such file.
func (d *DB) ParquetRows(ctx context.Context, path string) (int64, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	var n int64
	err := d.SQL.QueryRowContext(ctx, "SELECT count(*) FROM read_parquet("+shred.QuoteString(path)+")").Scan(&n)
	return n, err
}

// ExpireExported moves the rows table holds for the hour starting at hour
// (Unix nanoseconds) to Parquet and deletes them, all in one transaction
// so that the file holds exactly the rows deleted: rows that arrive
// meanwhile are not in the transaction's snapshot, neither written nor
// deleted. file is the Parquet file: the hour's data.parquet (HourFile)
// for an hour not expired before, whose rows are all in the table (if it
// holds as many rows already, it is not written again), or a file of its
// own for records that came after the hour had expired. turn runs its
// function in the writer's turn (Committer.Exclusive): the DELETE, the
// rename and the COMMIT run there, the COPY before it. key and value, when
// key is not "", are set in shredduck_meta in the same transaction.
//
// A crash after the rename and before the COMMIT leaves the rows in the
// table and in the file: data.parquet is written again whole at the next
// run, but a file of its own would hold them a second time.
func (d *DB) ExpireExported(ctx context.Context, table, transform string, hour int64, file string, turn func(func() error) error, key, value string) (int64, error) {
	tq := shred.QuoteIdent(table)
	timeExpr := TimeExpr(transform)
	cond := fmt.Sprintf("%s >= make_timestamp_ns(%d) AND %s < make_timestamp_ns(%d)", timeExpr, hour, timeExpr, hour+int64(time.Hour))
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return 0, fmt.Errorf("cannot create %s: %w", filepath.Dir(file), err)
	}
	conn, err := d.SQL.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN TRANSACTION"); err != nil {
		return 0, err
	}
	committed := false
	defer func() {
		if !committed {
			conn.ExecContext(context.Background(), "ROLLBACK")
		}
	}()
	var n int64
	if err := conn.QueryRowContext(ctx, "SELECT count(*) FROM "+tq+" WHERE "+cond).Scan(&n); err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, nil
	}
	tmp := ""
	if have, err := d.ParquetRows(ctx, file); err != nil || have != n || !strings.HasSuffix(file, "data.parquet") {
		tmp = filepath.Join(filepath.Dir(file), "."+filepath.Base(file)+".tmp")
		if _, err := conn.ExecContext(ctx, fmt.Sprintf("COPY (%s) TO %s (FORMAT parquet, COMPRESSION zstd)", timeRange(table, transform, hour, hour+int64(time.Hour)), shred.QuoteString(tmp))); err != nil {
			os.Remove(tmp)
			return 0, fmt.Errorf("cannot write %s: %w", file, classify(err))
		}
	}
	err = turn(func() error {
		if _, err := conn.ExecContext(ctx, "DELETE FROM "+tq+" WHERE "+cond); err != nil {
			return fmt.Errorf("cannot expire rows of %s: %w", table, classify(err))
		}
		if key != "" {
			if _, err := conn.ExecContext(ctx, "INSERT OR REPLACE INTO shredduck_meta (key, value) VALUES (?, ?)", key, value); err != nil {
				return err
			}
		}
		if tmp != "" {
			if err := syncRename(tmp, file); err != nil {
				return err
			}
		}
		// Not ctx: DuckDB may apply a COMMIT it reports interrupted.
		if _, err := conn.ExecContext(context.WithoutCancel(ctx), "COMMIT"); err != nil {
			return fmt.Errorf("cannot expire rows of %s: %w", table, classify(err))
		}
		committed = true
		return nil
	})
	if err != nil {
		if tmp != "" {
			os.Remove(tmp)
		}
		return 0, err
	}
	return n, nil
}
