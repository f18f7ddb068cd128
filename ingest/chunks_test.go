package ingest_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/internal/benchtraces"
)

// wideLines makes n NDJSON records for the none transform that cover its
// column types: integers, doubles, booleans, short and long strings (DuckDB
// inlines up to 12 bytes), RFC 3339 timestamps, lists, nested objects,
// NULLs, sparse keys, and a key whose type widens from BIGINT to VARCHAR
// part-way.
func wideLines(n int) []byte {
	var b bytes.Buffer
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `{"id":%d,"ratio":%g,"ok":%t,"short":"s%d","long":"a string longer than twelve bytes, number %d","when":"2026-11-30T04:%02d:%02dZ","tags":["x%d","y"],"nested":{"a":%d,"b":{"c":"deep %d"}}`,
			i, float64(i)/7, i%3 == 0, i%10, i, i/60%60, i%60, i%5, i, i)
		if i%7 == 0 {
			fmt.Fprintf(&b, `,"sparse_%d":"only sometimes","odd \"key\". x":%d`, i%4, i)
		}
		if i%11 == 0 {
			b.WriteString(`,"maybe":null,"empty":""`)
		}
		if i < n/2 {
			fmt.Fprintf(&b, `,"widens":%d`, i)
		} else {
			fmt.Fprintf(&b, `,"widens":"v%d"`, i)
		}
		b.WriteString("}\n")
	}
	return b.Bytes()
}

// TestChunkAppenderMatchesInsert loads every fixture, GH Archive events,
// generated traces and generated wide records twice, once through INSERT
// ... SELECT over an Arrow scan (bulk loads) and once through the C
// appender (the server's group commits), and requires identical tables
// and catalogs. Batches of 3000 rows make the appender split records at
// DuckDB's 2048-row chunks, the generated files change their schema
// between batches, and the last pair of tables has a name and a column
// with quotes, dots and spaces (the C appender takes names verbatim).
func TestChunkAppenderMatchesInsert(t *testing.T) {
	dir := t.TempDir()
	var traces bytes.Buffer
	for _, l := range benchtraces.Lines(7000, 1) {
		traces.Write(l)
		traces.WriteByte('\n')
	}
	files := append(fixtureFiles(t),
		filepath.Join("..", "testdata", "gharchive", "quickwit-gharchive-100.derived.ndjson"),
		filepath.Join("..", "testdata", "gharchive", "pinot-2021-07-21-few-hours.json"),
		writeFile(t, dir, "traces.ndjson", traces.Bytes()),
		writeFile(t, dir, "wide.ndjson", wideLines(7000)),
	)
	db := openDB(t)
	for i, f := range files {
		opt := ingest.Options{BatchRows: 3000}
		if strings.HasSuffix(f, "wide.ndjson") || strings.Contains(f, "gharchive") {
			opt.Transform = "none"
		}
		a, b := fmt.Sprintf("insert_%d", i), fmt.Sprintf("chunks_%d", i)
		if i == len(files)-1 { // names the appender takes verbatim, not as SQL
			a, b = `in"sert. wide`, `ch"unks. wide`
		}
		opt.Table = a
		ra := mustLoad(t, db, opt, f)
		opt.Table = b
		rb := mustLoad(t, db, ingest.WithChunkAppender(opt), f)
		if ra.Records != rb.Records || ra.Records == 0 {
			t.Errorf("%s: %d records through INSERT, %d through the appender", f, ra.Records, rb.Records)
		}
		if n := rowCount(t, db, b); n != stats(t, rb, b).Rows {
			t.Errorf("%s: %d rows in %s, stats say %d", f, n, b, stats(t, rb, b).Rows)
		}
		compareTables(t, db, a, b)
	}
}
