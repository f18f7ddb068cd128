#!/usr/bin/env bash
# The same generated traces through every encoding -- shredded (shredduck
# ingest), sql_typed, json_otlp, variant_otlp, json_flat, variant_flat --
# each in its own database file of storage version v1.5.0: load time,
# storage, and three queries whose answers are checked against the shredded
# table's. Same data, same run, interleaved, after a warm-up.
#   bench/run_variant.sh [--quick] [--records N] [--runs R] [--seed S]
# --quick is 100k spans and 1 timed run (the VARIANT queries take seconds each). Writes
# $out/variant-N.json (--record: bench/results/); exits non-zero on any count or answer
# mismatch. `go run ./bench/report` turns the results into bench/RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
command="bench/run_variant.sh${*:+ $*}"
records=1000000 runs=5 seed=1
quick_records=100000 quick_runs=1
. bench/lib.sh
parse_bench_args "$@"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/shredduck" ./cmd/shredduck
go build -o "$work/sqltyped" ./bench/sqltyped
go build -o "$work/otelbench" ./bench/otelbench
go run ./bench/gen traces -n "$records" -seed "$seed" -o "$work/traces.ndjson"
"$work/otelbench" variant -shredduck "$work/shredduck" -sqltyped "$work/sqltyped" \
  -in "$work/traces.ndjson" -records "$records" -runs "$runs" -seed "$seed" -dir "$work" \
  -command "$command" -out "$out/variant-$records.json"
