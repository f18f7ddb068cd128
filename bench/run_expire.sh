#!/usr/bin/env bash
# The stall of serve --export-dir's retention: the writer's turn in which
# an hour of N spans is deleted and committed in one transaction
# (ingest.DB.ExpireExported), and the checkpoint that follows it, also in
# the writer's turn; ms per hour and peak RSS, each run checked (the hour
# gone from the table, its Parquet file holding N, the later hours whole).
# Spans are bench/gen's traces (a 122,880-span template, repeated with
# start times spread over each hour). docs/RETENTION.md shows the results.
#   bench/run_expire.sh [--quick] [--records N[,N...]] [--runs R] [--seed S] [--out DIR | --record]
# --records: spans per hour (default 1000000,3600000; 36000000, an hour of
# 10,000 spans/s, needs about 8 GB in $TMPDIR and 15 minutes).
# Writes $out/expire-N.json (--record: bench/results/); exits non-zero on
# any failed or unverified run.
set -euo pipefail
cd "$(dirname "$0")/.."
records=1000000,3600000 runs=3 seed=1
quick_records=100000 quick_runs=1
. bench/lib.sh
parse_bench_args "$@"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/expirebench" ./bench/expirebench
go run ./bench/gen traces -n 122880 -seed "$seed" -o "$work/template.ndjson"
"$work/expirebench" -template "$work/template.ndjson" -spans "$records" -runs "$runs" -seed "$seed" -dir "$work" \
  -command "bench/run_expire.sh $*" -out "$out/expire-${records//,/-}.json"
