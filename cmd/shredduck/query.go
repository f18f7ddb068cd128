package main

import (
	"context"
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/serve/queryhttp"
)

func runQuery(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("query", flag.ContinueOnError)
	fs.SetOutput(stderr)
	db := fs.String("db", defaultDB, "DuckDB database `file`, opened read-only (never created)")
	asCSV := fs.Bool("csv", false, "print CSV instead of an aligned table")
	server := fs.String("server", "", "run the query on a running shredduck serve at `URL` (POST URL/v1/query) instead of opening --db")
	tokenFile := fs.String("token-file", "", "`file` holding the server's bearer token (default $SHREDDUCK_TOKEN or $SHREDDUCK_TOKEN_FILE)")
	noteEnv(fs, dbEnv)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: shredduck query [--db FILE.duckdb] [--csv] 'SQL'\n       shredduck query --server URL [--csv] 'SQL'\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if _, code, ok := parseFlags(fs, args, dbEnv, os.LookupEnv, stderr); !ok {
		return code
	}
	if err := checkDB(*db); err != nil && *server == "" {
		fmt.Fprintf(stderr, "shredduck query: %v\n", err)
		return exitUsage
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "shredduck query: want exactly one SQL argument")
		return exitUsage
	}
	if *server != "" {
		return runQueryServer(ctx, *server, *tokenFile, fs.Arg(0), *asCSV, stdout, stderr)
	}
	// Read-only: a mistyped --db is an error instead of a new empty
	// database, and queries can run beside each other.
	d, err := ingest.OpenReadOnly(*db)
	if errors.Is(err, ingest.ErrNoDatabase) {
		fmt.Fprintf(stderr, "shredduck query: %v\ngive the database with --db FILE or $SHREDDUCK_DB, or query a running shredduck serve with --server URL\n", err)
		return exitError
	}
	if err != nil {
		fmt.Fprintf(stderr, "shredduck query: %v%s\n", err, lockedHint(err, "query"))
		return exitError
	}
	if d.Recovered != "" {
		fmt.Fprintf(stderr, "shredduck query: %s: %s\n", *db, d.Recovered)
	}
	defer d.Close()
	if err := printLocal(ctx, d, fs.Arg(0), *asCSV, stdout); err != nil {
		fmt.Fprintf(stderr, "shredduck query: %v\n", err)
		return exitError
	}
	return exitOK
}

// printLocal runs query on d and prints its result. A SELECT is rendered
// by the server's code (queryhttp.Local), so that it prints exactly as
// with --server; anything else (PRAGMA, CALL, COPY, ...) as the driver
// returns it.
func printLocal(ctx context.Context, d *ingest.DB, query string, asCSV bool, w io.Writer) error {
	body, err := queryhttp.Local(ctx, d, query)
	if err == nil {
		var res serverResult
		if err := json.Unmarshal(body, &res); err != nil {
			return err
		}
		return printServerRows(w, &res, asCSV)
	}
	if !errors.Is(err, queryhttp.ErrNotOneSelect) {
		return err
	}
	rows, err := d.SQL.QueryContext(ctx, query)
	if err != nil {
		return err
	}
	defer rows.Close()
	return printRows(w, rows, asCSV)
}

// printRows writes a result as an aligned table or as CSV; NULL prints as
// NULL in the table and as an empty field in CSV.
func printRows(w io.Writer, rows *sql.Rows, asCSV bool) error {
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	rec := make([]string, len(cols))
	var cw *csv.Writer
	var tw *tabwriter.Writer
	if asCSV {
		cw = csv.NewWriter(w)
		cw.Write(cols)
	} else {
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, strings.Join(cols, "\t"))
	}
	n := 0
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		for i, v := range vals {
			rec[i] = format(v, asCSV)
		}
		if asCSV {
			cw.Write(rec)
		} else {
			fmt.Fprintln(tw, strings.Join(rec, "\t"))
		}
		n++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if asCSV {
		cw.Flush()
		return cw.Error()
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "(%d rows)\n", n)
	return nil
}

func format(v any, asCSV bool) string {
	switch x := v.(type) {
	case nil:
		if asCSV {
			return ""
		}
		return "NULL"
	case []byte:
		return fmt.Sprintf("\\x%x", x)
	case time.Time:
		return x.UTC().Format("2006-01-02 15:04:05.999999999")
	case string:
		if !asCSV {
			return strings.NewReplacer("\t", "\\t", "\n", "\\n").Replace(x)
		}
		return x
	}
	return fmt.Sprint(v)
}
