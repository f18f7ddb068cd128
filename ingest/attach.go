package ingest

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/shredduck/shredduck/shred"
)

// RowGroupRows is the row group size of the database files Open attaches.
// DuckDB writes a transaction of at least a row group straight to the
// file, compressed, and copies a smaller one into the table's last row
// group, which is then stored in fragments: on the streaming benchmark's
// spans a loader's 90,000-row transactions took 1.4x the CPU and 1.8x the
// disk of 122,880-row ones (BenchmarkLoader). A quarter of DuckDB's
// default lets transactions of a quarter of the rows take the direct
// path, for 5% more disk than full-size row groups. The size is not
// stored in the file: another program's DuckDB reads it as any other.
const RowGroupRows = 30720

// connect opens an in-memory database ("" or ":memory:") or, through
// connectFile, the file at path.
func connect(path string, readOnly bool) (*duckdb.Connector, *sql.DB, error) {
	if path == "" || path == ":memory:" {
		connector, err := duckdb.NewConnector("", nil)
		if err != nil {
			return nil, nil, err
		}
		return connector, sql.OpenDB(connector), nil
	}
	return connectFile(path, readOnly)
}

// connectFile opens a DuckDB instance with an in-memory main database and
// the file at path attached as the default database of every connection:
// ATTACH is the only way to choose its row group size. The name it is
// attached as is the file's, as DuckDB names a database it opens.
func connectFile(path string, readOnly bool) (*duckdb.Connector, *sql.DB, error) {
	alias := attachName(path)
	var attached atomic.Bool
	use := "USE " + shred.QuoteIdent(alias)
	connector, err := duckdb.NewConnector("", func(e driver.ExecerContext) error {
		if !attached.Load() {
			return nil // the first connection, which attaches
		}
		_, err := e.ExecContext(context.Background(), use, nil)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	db := sql.OpenDB(connector)
	opts := "ROW_GROUP_SIZE " + strconv.Itoa(RowGroupRows)
	if st, err := os.Stat(path); err != nil || st.Size() == 0 {
		// Only a new file takes the format: DuckDB 2.0 refuses to open an
		// existing one with a version other than the one it was made with.
		opts += ", STORAGE_VERSION " + shred.QuoteString(StorageVersion)
	}
	if readOnly {
		opts = "READ_ONLY"
	}
	conn, err := db.Conn(context.Background())
	if err == nil {
		// Spilled operators write beside the file, as DuckDB does for a
		// file it opens (an in-memory main database would use ./.tmp).
		_, err = conn.ExecContext(context.Background(), "SET temp_directory = "+shred.QuoteString(path+".tmp"))
	}
	if err == nil {
		_, err = conn.ExecContext(context.Background(), "ATTACH "+shred.QuoteString(path)+" AS "+shred.QuoteIdent(alias)+" ("+opts+")")
	}
	if err == nil {
		attached.Store(true)
		_, err = conn.ExecContext(context.Background(), use)
	}
	if conn != nil {
		conn.Close()
	}
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return connector, db, nil
}

// attachName is the name a database file is attached as: its base name
// without the extension, as DuckDB names a file it opens, unless that is
// one of the names DuckDB keeps for itself.
func attachName(path string) string {
	name := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	switch strings.ToLower(name) {
	case "", "memory", "system", "temp", "main":
		return name + "_db"
	}
	return name
}
