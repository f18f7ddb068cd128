package ingest

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/shredduck/shredduck/shred"
)

// DuckDB 1.5.6 cannot replay an ALTER TABLE from its write-ahead log when
// binding it needs a catalog lookup: a generated column whose type holds
// JSON, an ALTER ... SET DATA TYPE JSON, a USING expression that calls a
// function. Replay then fails with "Calling
// DatabaseManager::GetDefaultDatabase with no default database set" and
// the file cannot be opened until a checkpoint that never comes. So the
// DDL shredduck writes never needs one (TestWALReplayShapes):
//
//   - virtual (deferred) columns are declared with VARCHAR wherever their
//     stored type has JSON (virtualTypeSQL);
//   - a widening is a plain cast, followed where the text form differs by
//     an UPDATE (data, not DDL, in the log); a widening to JSON or from a
//     timestamp adds the new column beside the old one, renamed, and the
//     old one is dropped at the next Open (widen);
//   - tables written by an earlier shredduck with JSON virtual columns
//     get them stored at Open (storeJSONVirtual).
//
// And should a log still be unreplayable (a file from an earlier release,
// a shape missed here), Open replays it from an in-memory database, where
// the default database is set (recoverWAL). TestWALReplayTrigger notices
// a DuckDB release that changes any of this.

// virtualTypeSQL renders t with VARCHAR in place of JSON: the declared
// type of a virtual column, replayable after a crash.
func virtualTypeSQL(t *shred.Type) string {
	switch t.Kind {
	case shred.JSON:
		return shred.TString.SQL()
	case shred.List:
		if t.Map {
			return "MAP(" + virtualTypeSQL(t.Elem.Fields[0].Type) + ", " + virtualTypeSQL(t.Elem.Fields[1].Type) + ")"
		}
		return virtualTypeSQL(t.Elem) + "[]"
	case shred.Struct:
		var sb strings.Builder
		sb.WriteString("STRUCT(")
		for i, f := range t.Fields {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString(shred.QuoteIdent(f.Name) + " " + virtualTypeSQL(f.Type))
		}
		sb.WriteByte(')')
		return sb.String()
	}
	return t.SQL()
}

// isWALReplayFailure tells whether opening a database failed while
// replaying its write-ahead log.
func isWALReplayFailure(err error) bool {
	return err != nil && strings.Contains(err.Error(), "Failure while replaying WAL")
}

// recoverWAL replays the write-ahead log of the database file at path by
// attaching it to an in-memory database and checkpointing it there, so
// that the file opens again with every committed transaction.
func recoverWAL(path string) error {
	connector, err := duckdb.NewConnector("", nil)
	if err != nil {
		return err
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, stmt := range []string{
		"ATTACH " + shred.QuoteString(path) + " AS shredduck_recover",
		"CHECKPOINT shredduck_recover",
		"DETACH shredduck_recover",
	} {
		if _, err := db.Exec(stmt); err != nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
	}
	return nil
}

// jsonVirtualColumns is the FROM and WHERE of the virtual columns whose
// type holds JSON (storeJSONVirtual repairs them; OpenReadOnly looks for
// them).
const jsonVirtualColumns = `FROM duckdb_columns() c JOIN shredduck_virtual_columns v
	ON c.table_name = v.table_name AND c.column_name = v.column_name
	WHERE c.database_name = current_database() AND c.schema_name = current_schema()
	AND c.data_type LIKE '%JSON%'`

// storeJSONVirtual gives storage to the virtual columns whose type holds
// JSON, as an earlier shredduck declared them: their next ALTER in the
// log would make the file unopenable after a crash. It then checkpoints,
// so that no such ALTER stays in the log.
func (d *DB) storeJSONVirtual(ctx context.Context) (int, error) {
	rows, err := d.SQL.QueryContext(ctx, "SELECT c.table_name, c.column_name, c.data_type "+jsonVirtualColumns+" ORDER BY c.table_name, c.column_index")
	if err != nil {
		return 0, err
	}
	type col struct{ table, name, typ string }
	var cols []col
	for rows.Next() {
		var c col
		if err := rows.Scan(&c.table, &c.name, &c.typ); err != nil {
			rows.Close()
			return 0, err
		}
		cols = append(cols, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(cols) == 0 {
		return 0, err
	}
	if err := d.inTx(ctx, func(conn *sql.Conn) error {
		// Every drop before any add: an ADD COLUMN's replay binds the
		// table's generated columns, so none with JSON may be left.
		for _, c := range cols {
			if _, err := conn.ExecContext(ctx, "ALTER TABLE "+shred.QuoteIdent(c.table)+" DROP COLUMN "+shred.QuoteIdent(c.name)); err != nil {
				return err
			}
		}
		for _, c := range cols {
			if _, err := conn.ExecContext(ctx, "ALTER TABLE "+shred.QuoteIdent(c.table)+" ADD COLUMN "+shred.QuoteIdent(c.name)+" "+c.typ); err != nil {
				return err
			}
			if _, err := conn.ExecContext(ctx, "DELETE FROM shredduck_virtual_columns WHERE table_name = ? AND column_name = ?", c.table, c.name); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return 0, fmt.Errorf("cannot store the JSON virtual columns of an earlier release: %w", err)
	}
	return len(cols), d.Checkpoint(ctx)
}

// dropWidened drops the columns that widenings left beside their
// replacements (widen) and checkpoints. They could not be dropped in the
// widening's transaction: DuckDB refuses to commit an UPDATE and a DROP
// COLUMN of one table together.
func (d *DB) dropWidened(ctx context.Context) (int, error) {
	rows, err := d.SQL.QueryContext(ctx, "SELECT table_name, column_name FROM shredduck_widened_columns ORDER BY table_name, column_name")
	if err != nil {
		return 0, err
	}
	var pending [][2]string
	for rows.Next() {
		var p [2]string
		if err := rows.Scan(&p[0], &p[1]); err != nil {
			rows.Close()
			return 0, err
		}
		pending = append(pending, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(pending) == 0 {
		return 0, err
	}
	if err := d.inTx(ctx, func(conn *sql.Conn) error {
		for _, p := range pending {
			if _, err := conn.ExecContext(ctx, "ALTER TABLE "+shred.QuoteIdent(p[0])+" DROP COLUMN IF EXISTS "+shred.QuoteIdent(p[1])); err != nil {
				return err
			}
		}
		_, err := conn.ExecContext(ctx, "DELETE FROM shredduck_widened_columns")
		return err
	}); err != nil {
		return 0, fmt.Errorf("cannot drop the columns left by widenings: %w", err)
	}
	return len(pending), d.Checkpoint(ctx)
}

// inTx runs f in a transaction on one connection and commits it, or
// rolls it back when f fails (releaseConn: never back to the pool with a
// transaction open).
func (d *DB) inTx(ctx context.Context, f func(*sql.Conn) error) (err error) {
	conn, err := d.SQL.Conn(ctx)
	if err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
		releaseConn(conn)
		return err
	}
	defer func() {
		if err != nil {
			releaseConn(conn)
			return
		}
		conn.Close()
	}()
	if err := f(conn); err != nil {
		return err
	}
	_, err = conn.ExecContext(context.WithoutCancel(ctx), "COMMIT") // as Tx.Commit
	return err
}

// addSourceRows adds shredduck_sources.rows to a file of an earlier
// release, and checkpoints at once: replaying the ADD COLUMN binds the
// table's DEFAULT now(), a function lookup DuckDB cannot make during
// replay (a crash after it left a file DuckDB could not open:
// TestCrashAfterStart).
func (d *DB) addSourceRows(ctx context.Context) (bool, error) {
	var has bool
	if err := d.SQL.QueryRowContext(ctx, `SELECT count(*) > 0 FROM duckdb_columns() WHERE database_name = current_database()
		AND schema_name = current_schema() AND table_name = 'shredduck_sources' AND column_name = 'rows'`).Scan(&has); err != nil || has {
		return false, err
	}
	if _, err := d.SQL.ExecContext(ctx, "ALTER TABLE shredduck_sources ADD COLUMN rows UBIGINT DEFAULT 0"); err != nil {
		return false, fmt.Errorf("cannot add shredduck_sources.rows: %w", err)
	}
	if _, err := d.SQL.ExecContext(ctx, "CHECKPOINT"); err != nil {
		return false, fmt.Errorf("cannot checkpoint after adding shredduck_sources.rows: %w", err)
	}
	return true, nil
}
