package ingest

import (
	"bytes"
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/shredduck/shredduck/shred"
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
	// ColumnDensity is the share of a table's recent records that must
	// carry an attribute key before it gets a stored column (shred.Schema);
	// 0 gives every key a column while the table has room. Open sets
	// shred.DefaultDensity.
	ColumnDensity float64
	// YoungColumns is the number of attribute columns below which a table
	// gives every key a column at once, whatever ColumnDensity
	// (shred.Schema.Young). Open sets shred.DefaultYoung.
	YoungColumns int
	// counts are the density counts of each table (shred.KeyCounts),
	// kept while the database is open: a table's schema state is rebuilt
	// after a failed transaction, its counts are not lost with it.
	counts   sync.Map       // table name -> *shred.KeyCounts
	raw      unsafe.Pointer // the C database, for lendThreads (checkpoint.go); nil if unknown
	readOnly bool
	gate     writerGate
	// schemaGen counts the committed transactions that changed a schema
	// (Tx.Commit after startDDL): a writer's state of a table from an
	// earlier transaction is used only while no writer has changed one
	// since (Tx.table).
	schemaGen atomic.Int64
	// keysGen is the key catalog's generation (KeysGen).
	keysGen atomic.Int64
	invalid invalidState // invalid.go
	// views is the side connection of bulk loads' arrow scans
	// (scanview.go), opened by the first.
	viewsMu sync.Mutex
	views   *viewHost
}

// defaultDensity is what Open sets DB.ColumnDensity to. The package's
// tests of everything but the density rule set it to 0, so that the keys
// of their few records get columns.
var defaultDensity = shred.DefaultDensity

// StorageVersion is the DuckDB storage format of the database files Open
// creates (a file keeps the format it was created with). DuckDB 1.5's
// newest format, v1.5.0, is the default: DuckDB 1.5 (an LTS release) reads
// it, and 2.0's own (v2.0.0) would lock those readers out. Against
// DuckDB's default, the oldest format it writes, v1.5.0 has the newer
// string compression: on 4.8M spans committed 8,192 at a time it wrote a
// 11% smaller file in 15% less time, its checkpoints included.
var StorageVersion = "v1.5.0"

// StorageReaders names the oldest DuckDB release that reads files of the
// storage format v ("1.5" for v1.5.0).
func StorageReaders(v string) string {
	v = strings.TrimPrefix(v, "v")
	if i := strings.LastIndexByte(v, '.'); i > 0 {
		v = v[:i]
	}
	return v
}

// ErrNotDatabase is returned by CheckPath, Open and OpenReadOnly for a
// path that holds something other than a DuckDB database (a directory, a
// JSON file, ...).
var ErrNotDatabase = errors.New("not a DuckDB database")

// ErrNoDatabase is returned by OpenReadOnly for a path with no database.
var ErrNoDatabase = errors.New("no database")

// ErrLocked is returned by Open and OpenReadOnly when another process has
// the database open.
var ErrLocked = errors.New("the database is in use by another process")

// duckMagic is the magic of DuckDB's main file header, after its 8-byte
// checksum.
var duckMagic = []byte("DUCK")

const duckMagicOffset = 8

// CheckPath reports whether path can be given to DuckDB: a DuckDB database
// file, or nothing yet (a missing or empty file), which DuckDB creates.
// DuckDB opens another existing file as something else (an in-memory
// database; a SQLite file through an extension it tries to download), so
// that rows written to a mistyped --db would be lost: such a path is an
// ErrNotDatabase. "" and ":memory:" are in-memory databases. It reports
// whether a database exists at path.
func CheckPath(path string) (exists bool, err error) {
	if path == "" || path == ":memory:" {
		return false, nil
	}
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return false, checkNoWAL(path)
	case err != nil:
		return false, fmt.Errorf("cannot open %s: %w", path, err)
	case st.IsDir():
		return false, fmt.Errorf("refusing to open %s: it is a directory, %w", path, ErrNotDatabase)
	case !st.Mode().IsRegular():
		return false, fmt.Errorf("refusing to open %s: it is not a regular file, %w", path, ErrNotDatabase)
	case st.Size() == 0:
		return false, checkNoWAL(path)
	}
	f, err := os.Open(path)
	if err != nil {
		return false, fmt.Errorf("cannot open %s: %w", path, err)
	}
	defer f.Close()
	head := make([]byte, 64)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return false, fmt.Errorf("cannot read %s: %w", path, err)
	}
	head = head[:n]
	if len(head) < duckMagicOffset+len(duckMagic) || !bytes.Equal(head[duckMagicOffset:duckMagicOffset+len(duckMagic)], duckMagic) {
		return false, fmt.Errorf("refusing to open %s: it is %s, %w", path, describeFile(head), ErrNotDatabase)
	}
	return true, nil
}

// checkNoWAL refuses a write-ahead log without its database: DuckDB would
// replay it into a new file, a database that is not the one the log
// belongs to.
func checkNoWAL(path string) error {
	if _, err := os.Stat(path + ".wal"); err == nil {
		return fmt.Errorf("refusing to open %s: there is its write-ahead log (%s.wal) but no database; restore the database or move the log away", path, path)
	}
	return nil
}

// describeFile names what the first bytes of a file look like, for the
// message that refuses it.
func describeFile(head []byte) string {
	t := bytes.TrimLeft(head, " \t\r\n")
	switch {
	case bytes.HasPrefix(head, []byte("SQLite format 3\x00")):
		return "a SQLite database"
	case len(t) > 0 && (t[0] == '{' || t[0] == '['):
		return "JSON"
	case bytes.HasPrefix(head, []byte("PAR1")):
		return "a Parquet file"
	case bytes.HasPrefix(head, []byte{0x1f, 0x8b}):
		return "a gzip file"
	}
	return "a file of another kind"
}

// Open opens (creating if needed) the DuckDB database at path; "" or
// ":memory:" is an in-memory database. A path holding anything else than
// a DuckDB database is refused (CheckPath) before DuckDB sees it.
func Open(path string) (*DB, error) {
	if exists, err := CheckPath(path); err != nil {
		return nil, err
	} else if !exists && path != "" && path != ":memory:" {
		// DuckDB refuses an empty file ("not a valid DuckDB database"),
		// which mktemp or touch leave: it is a database not yet written.
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("cannot replace the empty file %s: %w", path, err)
		}
	}
	var recovered []string
	connector, db, err := connect(path, false)
	if isWALReplayFailure(err) {
		if rerr := recoverWAL(path); rerr != nil {
			return nil, fmt.Errorf("cannot open %s: %w (replaying the log from an in-memory database failed too: %v)", path, err, rerr)
		}
		recovered = append(recovered, "replayed its write-ahead log from an in-memory database (DuckDB could not replay it on open)")
		connector, db, err = connect(path, false)
	}
	if err != nil {
		return nil, openError(path, err)
	}
	// Rows keep no input order: DuckDB then fills one row group per thread
	// instead of merging small ordered batches, which cost a quarter more
	// CPU on the 1M-span benchmark (bench/run_ingest.sh). Queries that need
	// an order say ORDER BY.
	if _, err := db.Exec("SET preserve_insertion_order = false"); err != nil {
		db.Close()
		return nil, fmt.Errorf("cannot configure %s: %w", path, err)
	}
	version, err := checkVersion(context.Background(), path, db)
	if err != nil {
		db.Close()
		return nil, err
	}
	if _, err := db.Exec(catalogSQL); err != nil {
		db.Close()
		return nil, fmt.Errorf("cannot create the catalog in %s: %w", path, err)
	}
	d := &DB{SQL: db, Path: path, raw: rawDatabase(connector), ColumnDensity: defaultDensity, YoungColumns: shred.DefaultYoung}
	if version < SchemaVersion {
		did, err := d.upgrade(context.Background())
		if err != nil {
			db.Close()
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		recovered = append(recovered, did...)
	}
	if added, err := d.addSourceRows(context.Background()); err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	} else if added {
		recovered = append(recovered, "added shredduck_sources.rows")
	}
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

// openError wraps DuckDB's failure to open path, as ErrLocked where
// another process holds the file.
func openError(path string, err error) error {
	if strings.Contains(err.Error(), "Could not set lock on file") {
		return fmt.Errorf("cannot open %s: %w (%v)", path, ErrLocked, err)
	}
	return fmt.Errorf("cannot open %s: %w", path, err)
}

// OpenReadOnly opens the existing DuckDB database at path for queries:
// it creates no file (a missing or empty one is an ErrNoDatabase) and
// writes nothing, so that several processes can read one file. When the
// file needs what Open does to it (a log DuckDB cannot replay, columns a
// widening left), it is opened with Open instead, which does it.
func OpenReadOnly(path string) (*DB, error) {
	if path == "" || path == ":memory:" {
		return Open(path)
	}
	exists, err := CheckPath(path)
	if err != nil {
		return nil, err
	}
	if !exists {
		what := "does not exist"
		if st, err := os.Stat(path); err == nil && st.Size() == 0 {
			what = "is empty"
		}
		return nil, fmt.Errorf("%w: %s %s", ErrNoDatabase, path, what)
	}
	connector, db, err := connect(path, true)
	if isWALReplayFailure(err) {
		return Open(path)
	}
	if err != nil {
		return nil, openError(path, err)
	}
	if _, err := checkVersion(context.Background(), path, db); err != nil {
		db.Close()
		return nil, err
	}
	d := &DB{SQL: db, Path: path, raw: rawDatabase(connector), readOnly: true, ColumnDensity: defaultDensity, YoungColumns: shred.DefaultYoung}
	pending, err := d.pendingRepairs(context.Background())
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if pending {
		db.Close()
		return Open(path)
	}
	return d, nil
}

// pendingRepairs reports whether Open would change the database: columns
// left by widenings, or virtual JSON columns of an earlier release.
func (d *DB) pendingRepairs(ctx context.Context) (bool, error) {
	var n int
	err := d.SQL.QueryRowContext(ctx, `SELECT count(*) FROM duckdb_tables()
		WHERE database_name = current_database() AND schema_name = current_schema()
		AND table_name IN ('shredduck_widened_columns', 'shredduck_virtual_columns')`).Scan(&n)
	if err != nil || n < 2 {
		return false, err // not shredduck's catalog, or one from before these tables
	}
	err = d.SQL.QueryRowContext(ctx, "SELECT (SELECT count(*) FROM shredduck_widened_columns) + (SELECT count(*) "+jsonVirtualColumns+")").Scan(&n)
	return n > 0, err
}

// Close checkpoints (unless opened read-only) and closes the database.
func (d *DB) Close() error {
	d.closeViews()
	if d.readOnly {
		return d.SQL.Close()
	}
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

// keyCounts returns the density counts of table.
func (d *DB) keyCounts(table string) *shred.KeyCounts {
	c, _ := d.counts.LoadOrStore(table, new(shred.KeyCounts))
	return c.(*shred.KeyCounts)
}
