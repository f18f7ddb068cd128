// Command otelbench drives the end-to-end OpenTelemetry benchmarks of
// bench/run_otel.sh and bench/run_variant.sh.
//
//	otelbench otel    -shredduck BIN -traces F -logs F -metrics F -records N [-runs R] ...
//	otelbench variant -shredduck BIN -sqltyped BIN -in traces.ndjson -records N [-runs R] ...
//	otelbench load    -encoding E -db FILE (-in NDJSON | -from SHREDDED.duckdb)
//
// otel times shredduck ingest of generated traces, logs and metrics, cold
// (into a new database) and warm (the same data again into the same
// database after DELETE FROM the table, so no column is added).
//
// variant loads the same traces into every encoding (shredded, sql_typed,
// json_otlp, variant_otlp, json_flat, variant_flat), each in its own
// database file of storage version v1.5.0, and compares load time, storage
// and three queries, every answer checked against the shredded table's.
//
// load is the child process that variant times for the encodings built in
// DuckDB SQL; it prints one JSON line like bench/sqltyped.
//
// All paths run on the same data in the same run, interleaved (A, B, A,
// B, ...), after a warm-up; the result JSON keeps every sample. A failed or
// unverified run is reported as failed, never timed, never replaced, and
// makes the command exit with status 1.
package main

import (
	"fmt"
	"os"
)

const usage = `usage:
  otelbench otel    -shredduck BIN -traces F -logs F -metrics F -records N [-runs R] [-seed S] [-dir D] [-out F] [-command C]
  otelbench variant -shredduck BIN -sqltyped BIN -in F -records N [-runs R] [-seed S] [-dir D] [-out F] [-command C]
  otelbench load    -encoding E -db FILE (-in NDJSON | -from SHREDDED.duckdb)
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var code int
	switch os.Args[1] {
	case "otel":
		code = runOtel(os.Args[2:])
	case "variant":
		code = runVariant(os.Args[2:])
	case "load":
		code = runLoad(os.Args[2:])
	default:
		fmt.Fprint(os.Stderr, usage)
		code = 2
	}
	os.Exit(code)
}
