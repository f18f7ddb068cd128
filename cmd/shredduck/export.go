package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/shred"
)

const exportUsage = `Usage: shredduck export [--db FILE.duckdb] --out DIR [--table T] [--since TIME] [--until TIME]

Writes the OTLP tables (or --table) as Parquet in a Hive layout,
DIR/TABLE/date=YYYY-MM-DD/hour=HH/data.parquet, by each record's own time
(UTC), zstd-compressed, with the tables' column types (attribute columns
and overflow maps included; ENUM columns read back as VARCHAR). Rows with
no time go to date=__HIVE_DEFAULT_PARTITION__ (without --since/--until).
--since and --until are rounded out to whole hours; a second run replaces
the files of the hours it writes again. DIR/TABLE/_shredduck_table.json
lets 'shredduck ingest DIR' make the same tables again. Read the files with
  SELECT * FROM read_parquet('DIR/TABLE/**/*.parquet', hive_partitioning = true, union_by_name = true)
A running shredduck serve holds the database: give it --export-dir
instead (docs/RETENTION.md).

Flags:
`

func runExport(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	fs.SetOutput(stderr)
	db := fs.String("db", defaultDB, "DuckDB database `file`")
	out := fs.String("out", "", "directory to write the Parquet files into (created if missing)")
	var tables stringList
	fs.Var(&tables, "table", "table to export (repeatable; default: every OTLP table)")
	var since, until timeFlag
	fs.Var(&since, "since", "first hour to export: RFC 3339 time, YYYY-MM-DD[THH], or an age such as 24h or 7d (before now)")
	fs.Var(&until, "until", "end of the export (exclusive), as --since")
	asJSON := fs.Bool("json", false, "print the files written as JSON lines")
	memLimit := fs.String("memory-limit", "256MB", "DuckDB's memory limit during the export (it spills to disk beyond it); empty: DuckDB's default, 80% of RAM")
	noteEnv(fs, dbEnv)
	fs.Usage = func() {
		fmt.Fprint(stderr, exportUsage)
		fs.PrintDefaults()
	}
	if _, code, ok := parseFlags(fs, args, dbEnv, os.LookupEnv, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "shredduck export: unexpected arguments %q\n", fs.Args())
		return exitUsage
	}
	if *out == "" {
		fmt.Fprintln(stderr, "shredduck export: --out DIR is required")
		return exitUsage
	}
	if err := checkDB(*db); err != nil {
		fmt.Fprintf(stderr, "shredduck export: %v\n", err)
		return exitUsage
	}
	if !since.t.IsZero() && !until.t.IsZero() && !since.t.Before(until.t) {
		fmt.Fprintln(stderr, "shredduck export: --since must be before --until")
		return exitUsage
	}
	d, err := ingest.OpenReadOnly(*db)
	if err != nil {
		hint := ""
		if errors.Is(err, ingest.ErrLocked) {
			hint = "\nif it is a running shredduck serve, start it with --export-dir DIR: it writes each hour once it is over (docs/RETENTION.md)"
		}
		fmt.Fprintf(stderr, "shredduck export: %v%s\n", err, hint)
		return exitError
	}
	defer d.Close()
	if *memLimit != "" {
		if _, err := d.SQL.ExecContext(ctx, "SET memory_limit = "+shred.QuoteString(*memLimit)); err != nil {
			fmt.Fprintf(stderr, "shredduck export: --memory-limit %q: %v\n", *memLimit, err)
			return exitUsage
		}
	}
	start := time.Now()
	var rows int64
	var n, replaced int
	enc := json.NewEncoder(stdout)
	_, err = d.Export(ctx, ingest.ExportOptions{Dir: *out, Tables: tables, Since: since.t, Until: until.t}, func(f ingest.ExportedFile) {
		n++
		rows += f.Rows
		if f.Replaced {
			replaced++
		}
		if *asJSON {
			enc.Encode(f)
			return
		}
		what := "wrote"
		switch {
		case f.Replaced:
			what = "replaced"
		case f.Kept:
			what = "kept (it holds rows the table no longer has)"
		}
		fmt.Fprintf(stdout, "%s %s (%d rows)\n", what, f.Path, f.Rows)
	})
	if err != nil {
		fmt.Fprintf(stderr, "shredduck export: %v\n", err)
		return exitError
	}
	if !*asJSON {
		fmt.Fprintf(stdout, "%d files (%d replaced), %d rows in %.2fs\n", n, replaced, rows, time.Since(start).Seconds())
	}
	return exitOK
}

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

// timeFlag is a point in time: RFC 3339, a date, a date and hour, or an
// age before now (24h, 7d).
type timeFlag struct{ t time.Time }

func (f *timeFlag) String() string {
	if f.t.IsZero() {
		return ""
	}
	return f.t.Format(time.RFC3339)
}

func (f *timeFlag) Set(s string) error {
	s = strings.TrimSpace(s)
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04", "2006-01-02T15", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			f.t = t.UTC()
			return nil
		}
	}
	var a age
	if err := a.Set(s); err == nil && a > 0 {
		f.t = time.Now().Add(-time.Duration(a)).UTC()
		return nil
	}
	return fmt.Errorf("%q is not a time (RFC 3339, YYYY-MM-DD, YYYY-MM-DDTHH, or an age such as 24h or 7d)", s)
}
