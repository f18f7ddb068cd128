#!/usr/bin/env bash
# GH-Archive-shaped events (bench/gen gharchive, resampled from
# testdata/gharchive) loaded four ways, each into its own new database file:
# shredduck ingest --transform none cold and warm (the same file again into
# the same database, no column added), DuckDB read_json_objects into one
# JSON column, and DuckDB read_json_auto into typed STRUCT columns. Seconds,
# peak RSS, storage, and five queries on the shredded table, the JSON column
# and the read_json_auto table, every answer checked against the shredded
# one. Interleaved, after a warm-up.
#   bench/run_gharchive.sh [--quick] [--records N] [--runs R] [--seed S] [--memory-limit M]
# --quick is 20k events and 3 timed runs. --memory-limit is passed to
# shredduck (default: not passed, so shredduck's own 256MB; the DuckDB loads
# run with DuckDB's default). Writes
# $out/gharchive-N.json (--record: bench/results/; kind "gharchive", bench/report renders it in RESULTS.md);
# exits non-zero on any load failure or answer mismatch.
set -euo pipefail
cd "$(dirname "$0")/.."
command="bench/run_gharchive.sh${*:+ $*}"
records=247000 runs=5 seed=1 memlimit=
quick_records=20000 quick_runs=3
declare -A extra_flags=([--memory-limit]=memlimit)
. bench/lib.sh
parse_bench_args "$@"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/shredduck" ./cmd/shredduck
go build -o "$work/ghbench" ./bench/ghbench
go run ./bench/gen gharchive -n "$records" -seed "$seed" -o "$work/gharchive.ndjson"
"$work/ghbench" -shredduck "$work/shredduck" -in "$work/gharchive.ndjson" \
  -records "$records" -runs "$runs" -seed "$seed" -dir "$work" -memory-limit "$memlimit" \
  -command "$command" -out "$out/gharchive-$records.json"
