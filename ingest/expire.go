package ingest

import (
	"context"
	"fmt"
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
