#!/usr/bin/env bash
# Bulk ingest of generated traces, logs and metrics (bench/gen) with
# shredduck: cold (new database) and warm (the same data again into the same
# database after DELETE FROM the table, so no column is added). Seconds,
# records/s, MB/s and peak RSS; every load is verified (rows == records
# generated, warm content == cold content). Interleaved, after a warm-up.
#   bench/run_otel.sh [--quick] [--records N] [--runs R] [--seed S]
# --quick is 100k records per signal and 3 timed runs. Writes
# $out/otel-ingest-N.json (--record: bench/results/); exits non-zero on any count mismatch.
set -euo pipefail
cd "$(dirname "$0")/.."
command="bench/run_otel.sh${*:+ $*}"
records=1000000 runs=5 seed=1
quick_records=100000 quick_runs=3
. bench/lib.sh
parse_bench_args "$@"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/shredduck" ./cmd/shredduck
go build -o "$work/otelbench" ./bench/otelbench
for s in traces logs metrics; do
  go run ./bench/gen "$s" -n "$records" -seed "$seed" -o "$work/$s.ndjson"
done
"$work/otelbench" otel -shredduck "$work/shredduck" \
  -traces "$work/traces.ndjson" -logs "$work/logs.ndjson" -metrics "$work/metrics.ndjson" \
  -records "$records" -runs "$runs" -seed "$seed" -dir "$work" \
  -command "$command" -out "$out/otel-ingest-$records.json"
