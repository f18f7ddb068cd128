// Command shredduck shreds telemetry into typed DuckDB columns.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

const usage = `shredduck shreds OpenTelemetry data and NDJSON into typed DuckDB columns.

Usage:
  shredduck ingest --db FILE.duckdb [flags] PATH...   load files (- is stdin)
  shredduck query  --db FILE.duckdb [--csv] 'SQL'     run SQL and print the result
  shredduck serve  [--db FILE.duckdb] [flags]          receive OTLP/HTTP, OTLP/gRPC and NDJSON
  shredduck --version                                 module version, commit, Go and DuckDB versions

Run 'shredduck <command> --help' for a command's flags.
`

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the command ran and failed (bad input, database error)
	exitUsage = 2 // bad flags or arguments
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch args[0] {
	case "ingest":
		return runIngest(ctx, args[1:], os.Stdout, os.Stderr)
	case "query":
		return runQuery(ctx, args[1:], os.Stdout, os.Stderr)
	case "serve":
		return runServe(ctx, args[1:], os.Stdout, os.Stderr)
	case "version", "--version", "-version":
		return runVersion(ctx, os.Stdout)
	case "-h", "--help", "help":
		fmt.Fprint(os.Stdout, usage)
		return exitOK
	}
	fmt.Fprintf(os.Stderr, "shredduck: unknown command %q\n\n%s", args[0], usage)
	return exitUsage
}
