package main

import (
	"database/sql"
	"flag"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/shredduck/shredduck/bench/internal/benchutil"
)

// otlpSpans explodes NDJSON export requests ({{FILE}}) into one row per
// span: the request's resource and the span, both as the OTLP/JSON text
// (attributes stay key/value lists). The lines are read with
// read_json_objects and cut with json_transform to JSON leaves: in DuckDB
// 1.5.6, read_json(columns = {...}) with a deep STRUCT schema is many times
// slower on these 37 KB lines.
const otlpSpans = `WITH req AS (
  SELECT unnest(json_transform(json, '{"resourceSpans": [{"resource": "JSON", "scopeSpans": [{"spans": ["JSON"]}]}]}').resourceSpans) AS rs
  FROM read_json_objects({{FILE}}, format = 'newline_delimited')
),
ss AS (SELECT rs.resource AS resource, unnest(rs.scopeSpans) AS s FROM req)
SELECT resource, unnest(s.spans) AS span FROM ss`

// The tables each encoding is built with. json_flat and variant_flat encode
// the rows of shredduck's otel_traces table, attached as src.
var loadSQL = map[string]string{
	"json_otlp": `CREATE TABLE docs AS
SELECT json_object('resource', resource, 'span', span) AS doc FROM (` + otlpSpans + `)`,
	"variant_otlp": `CREATE TABLE docs AS
SELECT json_object('resource', resource, 'span', span)::VARIANT AS doc FROM (` + otlpSpans + `)`,
	"json_flat":    `CREATE TABLE docs AS SELECT to_json(t) AS doc FROM src.otel_traces t`,
	"variant_flat": `CREATE TABLE docs AS SELECT to_json(t)::VARIANT AS doc FROM src.otel_traces t`,
}

// runLoad builds one encoding's table in an existing database file,
// checkpoints, and prints {"rows":N,"seconds":S,"peak_rss_bytes":B}.
func runLoad(args []string) int {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	enc := fs.String("encoding", "", "json_otlp, variant_otlp, json_flat or variant_flat")
	dbPath := fs.String("db", "", "database file (created beforehand with the storage version wanted)")
	in := fs.String("in", "", "NDJSON traces (json_otlp, variant_otlp)")
	from := fs.String("from", "", "database holding shredduck's otel_traces (json_flat, variant_flat)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	q, ok := loadSQL[*enc]
	if !ok || *dbPath == "" || (strings.HasSuffix(*enc, "_otlp") && *in == "") || (strings.HasSuffix(*enc, "_flat") && *from == "") {
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
	start := time.Now()
	db, err := sql.Open("duckdb", *dbPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer db.Close()
	conn, err := db.Conn(contextBG)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer conn.Close()
	stmts := []string{strings.Replace(q, "{{FILE}}", benchutil.QuoteString(*in), 1), "CHECKPOINT"}
	if *from != "" {
		stmts = append([]string{"ATTACH " + benchutil.QuoteString(*from) + " AS src (READ_ONLY)"}, stmts...)
	}
	for _, s := range stmts {
		if _, err := conn.ExecContext(contextBG, s); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", *enc, err)
			return 1
		}
	}
	var n int64
	if err := conn.QueryRowContext(contextBG, "SELECT count(*) FROM docs").Scan(&n); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	fmt.Printf("{\"path\":%q,\"rows\":%d,\"seconds\":%.3f,\"peak_rss_bytes\":%d}\n", *enc, n, time.Since(start).Seconds(), ru.Maxrss*1024)
	return 0
}
