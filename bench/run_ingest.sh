#!/usr/bin/env bash
# Bulk ingest of generated traces: shredduck vs sql_typed (DuckDB's JSON
# reader + hand-written SQL), same file, same run, interleaved.
#   bench/run_ingest.sh [--quick] [--records N] [--runs R] [--seed S] [--out DIR | --record]
set -euo pipefail
cd "$(dirname "$0")/.."
records=1000000 runs=3 seed=1
quick_records=100000 quick_runs=1
. bench/lib.sh
parse_bench_args "$@"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/shredduck" ./cmd/shredduck
go build -o "$work/sqltyped" ./bench/sqltyped
go build -o "$work/ingestbench" ./bench/ingestbench
go run ./bench/gen traces -n "$records" -seed "$seed" -o "$work/traces.ndjson"
"$work/ingestbench" -shredduck "$work/shredduck" -sqltyped "$work/sqltyped" \
  -in "$work/traces.ndjson" -records "$records" -runs "$runs" -dir "$work" \
  -out "$out/ingest-traces-$records.json"
