package ingest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
	res, err := d.SQL.ExecContext(ctx, q, cut.UnixNano())
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

// ExpireHour checks that table holds want rows in the hour starting at
// hour (Unix nanoseconds) and, if so, deletes them and sets the
// shredduck_meta key to value, in one transaction; ok is false (nothing
// changed) when the count differs. The caller holds the writer's turn, so
// nothing arrives between the count and the DELETE.
func (d *DB) ExpireHour(ctx context.Context, table, timeExpr string, hour, want int64, key, value string) (ok bool, err error) {
	tq := shred.QuoteIdent(table)
	cond := fmt.Sprintf("%s >= make_timestamp_ns(%d) AND %s < make_timestamp_ns(%d)", timeExpr, hour, timeExpr, hour+int64(time.Hour))
	conn, err := d.SQL.Conn(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN TRANSACTION"); err != nil {
		return false, err
	}
	defer func() {
		if !ok {
			conn.ExecContext(context.Background(), "ROLLBACK")
		}
	}()
	var n int64
	if err := conn.QueryRowContext(ctx, "SELECT count(*) FROM "+tq+" WHERE "+cond).Scan(&n); err != nil {
		return false, err
	}
	if n != want {
		return false, nil
	}
	if _, err := conn.ExecContext(ctx, "DELETE FROM "+tq+" WHERE "+cond); err != nil {
		return false, fmt.Errorf("cannot expire rows of %s: %w", table, classify(err))
	}
	if _, err := conn.ExecContext(ctx, "INSERT OR REPLACE INTO shredduck_meta (key, value) VALUES (?, ?)", key, value); err != nil {
		return false, err
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return false, fmt.Errorf("cannot expire rows of %s: %w", table, classify(err))
	}
	return true, nil
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

// ExpireLate writes the rows table holds for the hour starting at hour
// (Unix nanoseconds) to a file of their own beside the hour's export file,
// late-<now>.parquet, and deletes them: records that arrived after their
// hour was exported and expired, which must not replace that file. The
// caller holds the writer's turn. A crash between the file's rename and
// the DELETE's commit leaves those rows in both (the next run writes them
// again): the one window in which the export can hold a row twice.
func (d *DB) ExpireLate(ctx context.Context, dir, table, timeExpr string, hour int64) (int64, error) {
	tq := shred.QuoteIdent(table)
	cond := fmt.Sprintf("%s >= make_timestamp_ns(%d) AND %s < make_timestamp_ns(%d)", timeExpr, hour, timeExpr, hour+int64(time.Hour))
	pdir := hourPath(dir, table, time.Unix(0, hour).UTC())
	if err := os.MkdirAll(pdir, 0o755); err != nil {
		return 0, fmt.Errorf("cannot create %s: %w", pdir, err)
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
	path := filepath.Join(pdir, fmt.Sprintf("late-%d.parquet", time.Now().UnixNano()))
	tmp := filepath.Join(pdir, ".late.parquet.tmp")
	res, err := conn.ExecContext(ctx, fmt.Sprintf("COPY (SELECT * FROM %s WHERE %s) TO %s (FORMAT parquet, COMPRESSION zstd)", tq, cond, shred.QuoteString(tmp)))
	if err != nil {
		os.Remove(tmp)
		return 0, fmt.Errorf("cannot write %s: %w", path, classify(err))
	}
	n, _ := res.RowsAffected()
	if n == 0 {
		os.Remove(tmp)
		return 0, nil
	}
	if _, err := conn.ExecContext(ctx, "DELETE FROM "+tq+" WHERE "+cond); err != nil {
		os.Remove(tmp)
		return 0, fmt.Errorf("cannot expire rows of %s: %w", table, classify(err))
	}
	if err := syncRename(tmp, path); err != nil {
		os.Remove(tmp)
		return 0, err
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		os.Remove(path)
		return 0, fmt.Errorf("cannot expire rows of %s: %w", table, classify(err))
	}
	committed = true
	return n, nil
}
