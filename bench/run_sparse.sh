#!/usr/bin/env bash
# Attribute-key distributions (#15): the same generated traces with 10
# extra string attributes per span drawn from 20 keys (dense), from 5,000
# keys uniformly (sparse) and by a Zipf law (zipf), loaded with
# `shredduck ingest` interleaved; ingest time, peak RSS, storage, the
# RawDuck queries and a sparse-key query, every key's count checked. Then,
# in the same run, each file streamed into `shredduck serve` (default
# flags) by W workers replaying its pre-encoded OTLP/JSON requests (not an
# SDK): spans/s, ratio to dense, 503/429 retries, the server's peak RSS,
# the row count checked after SIGTERM.
#   bench/run_sparse.sh [--quick] [--records N] [--runs R] [--seed S] [--keys K] [--stream-workers W] [--out DIR | --record]
# --stream-workers: concurrent senders (default 8); 0: no streaming phase.
# Writes $out/sparse-N.json (--record: bench/results/); exits non-zero on
# any failed or unverified run.
set -euo pipefail
cd "$(dirname "$0")/.."
records=200000 runs=3 seed=1 keys=5000 stream_workers=8
quick_records=20000 quick_runs=1
declare -A extra_flags=([--keys]=keys [--stream-workers]=stream_workers)
. bench/lib.sh
parse_bench_args "$@"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/shredduck" ./cmd/shredduck
go build -o "$work/sparsebench" ./bench/sparsebench
go run ./bench/gen traces -n "$records" -seed "$seed" -keys 20 -o "$work/dense.ndjson"
go run ./bench/gen traces -n "$records" -seed "$seed" -keys "$keys" -o "$work/sparse.ndjson"
go run ./bench/gen traces -n "$records" -seed "$seed" -keys "$keys" -key-dist zipf -o "$work/zipf.ndjson"
command="bench/run_sparse.sh $*"
"$work/sparsebench" -shredduck "$work/shredduck" -records "$records" -runs "$runs" -dir "$work" \
  -stream-workers "$stream_workers" \
  -in "dense=$work/dense.ndjson" -in "sparse=$work/sparse.ndjson" -in "zipf=$work/zipf.ndjson" \
  -command "$command" -out "$out/sparse-$records.json"
