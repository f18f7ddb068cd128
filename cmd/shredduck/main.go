// Command shredduck shreds telemetry into typed DuckDB columns.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/shredduck/shredduck/ingest"
)

const usage = `shredduck shreds OpenTelemetry data and NDJSON into typed DuckDB columns.

Usage:
  shredduck ingest [--db FILE.duckdb] [flags] PATH...   load files (- is stdin)
  shredduck query  [--db FILE.duckdb] [--csv] 'SQL'     run SQL and print the result
  shredduck serve  [--db FILE.duckdb] [flags]            receive OTLP/HTTP, OTLP/gRPC and NDJSON
  shredduck export [--db FILE.duckdb] --out DIR [flags]  write the OTLP tables as Hive-partitioned Parquet
  shredduck kafka-release --kafka-brokers B --node ID    release the Kafka partitions of a node whose file is lost
  shredduck --version                                   module version, commit, Go and DuckDB versions

The database is --db, else $SHREDDUCK_DB, else ./shredduck.duckdb.

Run 'shredduck <command> --help' for a command's flags.
`

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the command ran and failed (bad input, database error)
	exitUsage = 2 // bad flags or arguments
)

// defaultDB is the database file of every command without --db or
// $SHREDDUCK_DB.
const defaultDB = "shredduck.duckdb"

// defaultServerURL is where a shredduck serve with the default --http
// answers, for messages that point to --server.
const defaultServerURL = "http://127.0.0.1:4318"

// dbEnv maps the --db flag to its environment variable; ingest and query
// take it as serve does (serveEnv).
var dbEnv = map[string]string{"db": "SHREDDUCK_DB"}

// applyEnv sets each flag of env that was not given on the command line
// from its environment variable, if set.
func applyEnv(fs *flag.FlagSet, env map[string]string, lookupEnv func(string) (string, bool)) (given map[string]bool, err error) {
	given = make(map[string]bool)
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for name, v := range env {
		if val, ok := lookupEnv(v); ok && !given[name] {
			if err := fs.Set(name, val); err != nil {
				return nil, fmt.Errorf("$%s: %w", v, err)
			}
		}
	}
	return given, nil
}

// parseFlags parses args into fs, then sets the flags not given from the
// variables of env. ok false: the command ends with code (0 after -h,
// usage after an error, which it has printed).
func parseFlags(fs *flag.FlagSet, args []string, env map[string]string, lookupEnv func(string) (string, bool), stderr io.Writer) (given map[string]bool, code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, exitOK, false
		}
		return nil, exitUsage, false
	}
	given, err := applyEnv(fs, env, lookupEnv)
	if err != nil {
		fmt.Fprintf(stderr, "shredduck %s: %v\n", fs.Name(), err)
		return nil, exitUsage, false
	}
	return given, 0, true
}

// noteEnv adds the environment variable of each flag of env to its help.
func noteEnv(fs *flag.FlagSet, env map[string]string) {
	for name, v := range env {
		f := fs.Lookup(name)
		f.Usage += " [$" + v + "]"
	}
}

// checkDB refuses an empty --db (or $SHREDDUCK_DB=""), which DuckDB takes
// for an in-memory database: whatever a command wrote there would be gone
// when it exits. ":memory:" says so on purpose.
func checkDB(db string) error {
	if db == "" {
		return errors.New("--db (or $SHREDDUCK_DB) is empty; name a database file (:memory: for an in-memory database)")
	}
	return nil
}

// lockedHint is what a command adds to an error that another process
// holds the database: most often a running server, which can take the
// command's work instead.
func lockedHint(err error, command string) string {
	if !errors.Is(err, ingest.ErrLocked) {
		return ""
	}
	switch command {
	case "query":
		return "\nif it is a running shredduck serve, query through it: shredduck query --server URL 'SQL' (a serve with the default --http is at " + defaultServerURL + ")"
	case "ingest":
		return "\nif it is a running shredduck serve, send the data to it (POST URL/v1/traces, /v1/logs, /v1/metrics or /v1/ndjson/TABLE; a serve with the default --http is at " + defaultServerURL + "), or stop it first"
	}
	return "\nis another shredduck serve or ingest running on it?"
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return exitUsage
	}
	// Only the server keeps the pages DuckDB purges: measured there (its
	// CPU per span), while a bulk load of wide tables held more memory
	// for no time gained (docs/SERVE.md, Memory).
	tuneAllocator(os.LookupEnv, args[0] == "serve")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch args[0] {
	case "ingest":
		return runIngest(ctx, args[1:], os.Stdout, os.Stderr)
	case "query":
		return runQuery(ctx, args[1:], os.Stdout, os.Stderr)
	case "serve":
		return runServe(ctx, args[1:], os.Stdout, os.Stderr)
	case "export":
		return runExport(ctx, args[1:], os.Stdout, os.Stderr)
	case "kafka-release":
		return runKafkaRelease(ctx, args[1:], os.Stdout, os.Stderr)
	case "version", "--version", "-version":
		return runVersion(ctx, os.Stdout)
	case "-h", "--help", "help":
		fmt.Fprint(os.Stdout, usage)
		return exitOK
	}
	fmt.Fprintf(os.Stderr, "shredduck: unknown command %q\n\n%s", args[0], usage)
	return exitUsage
}
