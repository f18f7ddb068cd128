package ingest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/shredduck/shredduck/transforms"
)

// Table names compare case-insensitively, as DuckDB's identifiers do:
// "Otel_Traces" is the table otel_traces.

// ErrReservedTable is the error of a table name that a transform may not
// write.
var ErrReservedTable = errors.New("reserved table name")

// routingTransforms own their default tables (transforms.Transform.Table):
// the OTLP signals' tables, which `shredduck serve` and `shredduck ingest`
// route to without being told.
var routingTransforms = []transforms.Transform{transforms.Traces, transforms.Logs, transforms.Metrics}

// systemPrefixes and systemNames would shadow DuckDB's catalog: an
// unqualified name resolves to a table in main before the system views
// (sqlite_master, pg_class, duckdb_tables, ...), and schema names make
// qualified names ambiguous.
var (
	systemPrefixes = []string{"shredduck_", "duckdb_", "pg_", "sqlite_", "pragma_"}
	systemNames    = map[string]bool{"information_schema": true, "pg_catalog": true, "main": true, "temp": true, "system": true}
)

// CheckTable refuses a table name that transform may not write: those
// SystemTable refuses, and another transform's routing table (otel_traces,
// otel_logs, otel_metrics), in any case. The error wraps ErrReservedTable.
func CheckTable(name, transform string) error {
	if err := SystemTable(name); err != nil {
		return err
	}
	lower := strings.ToLower(name)
	for _, tr := range routingTransforms {
		if lower == tr.Table() && transform != tr.Name() {
			return fmt.Errorf("%w: %s is the table of transform %s, not %s", ErrReservedTable, name, tr.Name(), transform)
		}
	}
	return nil
}

// SystemTable refuses, in any case, the names no transform may write:
// shredduck's catalog tables (shredduck_*) and the names of DuckDB's
// system views and schemas. The error wraps ErrReservedTable.
func SystemTable(name string) error {
	lower := strings.ToLower(name)
	for _, p := range systemPrefixes {
		if strings.HasPrefix(lower, p) {
			if p == "shredduck_" {
				return fmt.Errorf("%w: %s: names starting with shredduck_ are shredduck's catalog", ErrReservedTable, name)
			}
			return fmt.Errorf("%w: %s: names starting with %s would shadow DuckDB's system views", ErrReservedTable, name, p)
		}
	}
	if systemNames[lower] {
		return fmt.Errorf("%w: %s is a DuckDB schema or catalog name", ErrReservedTable, name)
	}
	return nil
}

// StoredTable looks name up in the catalog case-insensitively: it returns
// the name the table was created with and its transform, or "", "" when
// there is no such table.
func (d *DB) StoredTable(ctx context.Context, name string) (stored, transform string, err error) {
	return storedTable(ctx, d.SQL, name)
}

type queryRower interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func storedTable(ctx context.Context, q queryRower, name string) (stored, transform string, err error) {
	// ORDER BY: a database from before names compared case-insensitively
	// may hold two spellings; the older one is the table DuckDB resolves.
	err = q.QueryRowContext(ctx, "SELECT table_name, transform FROM shredduck_tables WHERE lower(table_name) = lower(?) ORDER BY created LIMIT 1", name).Scan(&stored, &transform)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", nil
	}
	if err != nil {
		return "", "", fmt.Errorf("cannot read the catalog: %w", err)
	}
	return stored, transform, nil
}

// resolveTable is the name a load writes tr's batches for name to: the
// catalog's spelling of it, after CheckTable. A table of another
// transform is refused here, before any batch reaches it.
func (tx *Tx) resolveTable(name string, tr transforms.Transform) (string, error) {
	if err := CheckTable(name, tr.Name()); err != nil {
		return "", err
	}
	if t := tx.tables[name]; t != nil {
		return name, nil // table checks the transform
	}
	// The connection may be streaming another table's INSERT, which waits
	// for more batches: it must end before the catalog can be read.
	if err := tx.endRun(); err != nil {
		return "", err
	}
	stored, existing, err := storedTable(tx.ctx, tx.conn, name)
	switch {
	case err != nil:
		return "", err
	case stored == "" && strings.EqualFold(name, tr.Table()):
		return tr.Table(), nil // a transform's own table keeps its spelling
	case stored == "":
		return name, nil
	case existing != tr.Name():
		return "", fmt.Errorf("table %s holds %s data; it cannot take %s", stored, existing, tr.Name())
	}
	return stored, nil
}
