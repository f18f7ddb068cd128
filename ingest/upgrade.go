package ingest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/shredduck/shredduck/shred"
	"github.com/shredduck/shredduck/transforms"
)

// SchemaVersion is the version of the tables and catalog this shredduck
// writes, recorded in shredduck_meta. Version 1 is every file written
// before the version was recorded; 2 declares virtual JSON columns as
// VARCHAR (walsafe.go) and has shredduck_widened_columns; 3 has the
// typed overflow maps (shred.OverflowMaps, added to a table with their
// first value) and shredduck_columns.promoted.
// A file of a later version is refused: this release cannot know what it
// changed.
const SchemaVersion = 3

// ErrNewerVersion is wrapped by the error of opening a file that a newer
// shredduck wrote.
var ErrNewerVersion = errors.New("the database was written by a newer shredduck")

// fileVersion returns the schema version recorded in db, 0 when none is
// (a new file, or one from before version 2, told apart by its tables).
func fileVersion(ctx context.Context, db *sql.DB) (int, error) {
	var has bool
	if err := db.QueryRowContext(ctx, `SELECT count(*) > 0 FROM duckdb_tables()
		WHERE database_name = current_database() AND schema_name = current_schema() AND table_name = 'shredduck_meta'`).Scan(&has); err != nil {
		return 0, err
	}
	if !has {
		return 0, nil
	}
	var v string
	err := db.QueryRowContext(ctx, "SELECT value FROM shredduck_meta WHERE key = 'schema_version'").Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("schema version %q: %w", v, err)
	}
	return n, nil
}

// checkVersion refuses a file of a newer schema version.
func checkVersion(ctx context.Context, path string, db *sql.DB) (int, error) {
	v, err := fileVersion(ctx, db)
	if err != nil {
		return 0, fmt.Errorf("cannot read the schema version of %s: %w", path, err)
	}
	if v > SchemaVersion {
		return v, fmt.Errorf("%w: %s has schema version %d, this shredduck knows versions up to %d; open it with the release that wrote it or a later one",
			ErrNewerVersion, path, v, SchemaVersion)
	}
	return v, nil
}

// upgrade brings the file to SchemaVersion: an OTLP table made by an
// earlier release gets the core columns added since (stored, with the
// column's default for the rows already there), and the version is
// recorded. It returns what it did.
func (d *DB) upgrade(ctx context.Context) ([]string, error) {
	var did []string
	rows, err := d.SQL.QueryContext(ctx, "SELECT table_name, transform FROM shredduck_tables ORDER BY table_name")
	if err != nil {
		return nil, err
	}
	type tbl struct{ name, transform string }
	var tables []tbl
	for rows.Next() {
		var t tbl
		if err := rows.Scan(&t.name, &t.transform); err != nil {
			rows.Close()
			return nil, err
		}
		tables = append(tables, t)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	err = d.inTx(ctx, func(conn *sql.Conn) error {
		for _, t := range tables {
			tr, err := transforms.Lookup(t.transform)
			if err != nil || len(tr.Core()) == 0 {
				continue // none: no core columns
			}
			have := make(map[string]bool)
			crows, err := conn.QueryContext(ctx, `SELECT lower(column_name) FROM duckdb_columns()
				WHERE database_name = current_database() AND schema_name = current_schema() AND table_name = ?`, t.name)
			if err != nil {
				return err
			}
			for crows.Next() {
				var c string
				crows.Scan(&c)
				have[c] = true
			}
			crows.Close()
			for _, c := range tr.Core() {
				if have[strings.ToLower(c.Name)] || c.OnDemand {
					continue
				}
				add := "ALTER TABLE " + shred.QuoteIdent(t.name) + " ADD COLUMN " + shred.QuoteIdent(c.Name) + " " + c.Type.SQL()
				if c.Zero {
					add += " DEFAULT " + c.DefaultSQL()
				}
				if _, err := conn.ExecContext(ctx, add); err != nil {
					return fmt.Errorf("cannot add core column %s to %s: %w", c.Name, t.name, err)
				}
				did = append(did, fmt.Sprintf("added core column %s to %s", c.Name, t.name))
			}
		}
		_, err := conn.ExecContext(ctx, "INSERT OR REPLACE INTO shredduck_meta (key, value) VALUES ('schema_version', ?)", strconv.Itoa(SchemaVersion))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cannot upgrade to schema version %d: %w", SchemaVersion, err)
	}
	return did, nil
}
