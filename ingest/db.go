//go:build duckdb_arrow

package ingest

import (
	"context"
	"database/sql"
	_ "embed"
	"fmt"
	"strings"
	"unsafe"

	duckdb "github.com/duckdb/duckdb-go/v2"
)

//go:embed catalog.sql
var catalogSQL string

// DB is an open DuckDB database file with shredduck's catalog.
type DB struct {
	SQL  *sql.DB
	Path string
	// Recovered is what Open did to make the file usable (its log
	// replayed from memory, columns an earlier release left stored or
	// dropped), for the caller to report; "" when nothing.
	Recovered string
	raw       unsafe.Pointer // the C database, for lendThreads (checkpoint.go); nil if unknown
}

// StorageVersion is the DuckDB storage format of the database files Open
// creates (a file keeps the format it was created with). DuckDB's default
// is the oldest format its current release can write, which lacks the
// newer string compression: on 4.8M spans committed 8,192 at a time the
// v1.5.0 format wrote a 11% smaller file in 15% less time, its
// checkpoints included. Such a file needs DuckDB 1.5 or later to read.
const StorageVersion = "v1.5.0"

// Open opens (creating if needed) the DuckDB database at path; "" or
// ":memory:" is an in-memory database.
func Open(path string) (*DB, error) {
	dsn := path + "?storage_compatibility_version=" + StorageVersion
	if path == "" || path == ":memory:" {
		dsn = ""
	}
	var recovered []string
	connector, err := duckdb.NewConnector(dsn, nil)
	if isWALReplayFailure(err) {
		if rerr := recoverWAL(path); rerr != nil {
			return nil, fmt.Errorf("cannot open %s: %w (replaying the log from an in-memory database failed too: %v)", path, err, rerr)
		}
		recovered = append(recovered, "replayed its write-ahead log from an in-memory database (DuckDB could not replay it on open)")
		connector, err = duckdb.NewConnector(dsn, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot open %s: %w", path, err)
	}
	db := sql.OpenDB(connector)
	// Rows keep no input order: DuckDB then fills one row group per thread
	// instead of merging small ordered batches, which cost a quarter more
	// CPU on the 1M-span benchmark (bench/run_ingest.sh). Queries that need
	// an order say ORDER BY.
	if _, err := db.Exec("SET preserve_insertion_order = false"); err != nil {
		db.Close()
		return nil, fmt.Errorf("cannot configure %s: %w", path, err)
	}
	if _, err := db.Exec(catalogSQL); err != nil {
		db.Close()
		return nil, fmt.Errorf("cannot create the catalog in %s: %w", path, err)
	}
	d := &DB{SQL: db, Path: path, raw: rawDatabase(connector)}
	if n, err := d.storeJSONVirtual(context.Background()); err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	} else if n > 0 {
		recovered = append(recovered, fmt.Sprintf("stored %d virtual JSON columns of an earlier release", n))
	}
	if n, err := d.dropWidened(context.Background()); err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	} else if n > 0 {
		recovered = append(recovered, fmt.Sprintf("dropped %d columns left by widenings", n))
	}
	d.Recovered = strings.Join(recovered, "; ")
	return d, nil
}

// Close checkpoints and closes the database.
func (d *DB) Close() error {
	cerr := d.Checkpoint(context.Background())
	err := d.SQL.Close()
	if err == nil && cerr != nil {
		err = fmt.Errorf("checkpoint: %w", cerr)
	}
	return err
}

// Version returns DuckDB's version string.
func (d *DB) Version(ctx context.Context) string {
	var v string
	if err := d.SQL.QueryRowContext(ctx, "SELECT version()").Scan(&v); err != nil {
		return "unknown"
	}
	return v
}
