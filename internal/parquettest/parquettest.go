// Package parquettest holds checks of Parquet files that the tests of
// more than one package make.
package parquettest

import (
	"database/sql"
	"testing"

	"github.com/shredduck/shredduck/shred"
)

// AssertZstd fails unless every column chunk of the Parquet files that
// glob matches is zstd-compressed, as DuckDB's parquet_metadata reads
// them through db.
func AssertZstd(t testing.TB, db *sql.DB, glob string) {
	t.Helper()
	rows, err := db.Query(`SELECT compression, count(*) FROM parquet_metadata(` + shred.QuoteString(glob) + `) GROUP BY 1`)
	if err != nil {
		t.Fatalf("parquet_metadata(%s): %v", glob, err)
	}
	defer rows.Close()
	got := map[string]int64{}
	for rows.Next() {
		var c string
		var n int64
		if err := rows.Scan(&c, &n); err != nil {
			t.Fatal(err)
		}
		got[c] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got["ZSTD"] == 0 {
		t.Errorf("%s: column chunks by compression %v, want all ZSTD", glob, got)
	}
}
