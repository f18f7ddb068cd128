#!/usr/bin/env bash
# shredduck's Jaeger query API (serve/jaegerapi) beside a real Jaeger v2
# (tools/jaeger, v1.75) with memory storage, on the same generated traces
# (bench/jaegerbench: 5-50 spans per trace, 10 services, an hour of
# starts): a trace by id (random existing traces, each once) and searches
# with limit=20 as Grafana sends them: by service over the hour, by service
# in a 5-minute window, by service and a rare tag (customer.id), by
# service and a frequent one (http.status_code=500). shredduck loads them
# with `shredduck ingest` (NDJSON of OTLP/JSON) and answers from `shredduck
# serve` at its default flags; Jaeger gets them over OTLP/HTTP. Requests go
# one at a time, to each server in turn; p50/p99/max of the timed ones and
# each server's CPU per request. Every answer is checked (span counts of
# every trace, the trace asked for, the traces a search must find); any
# mismatch fails the run.
#   bench/run_jaeger.sh [--quick] [--records N[,N...]] [--ids N] [--searches N]
#                       [--jaeger-max-spans N] [--seed S] [--out DIR | --record]
# --records: spans, one run per size (default 1000000,10000000); Jaeger is
# measured up to --jaeger-max-spans (default 1000000: its memory store
# keeps every span in RAM; beyond, shredduck alone). --quick: 20,000 spans,
# 20 ids, 5 searches of each kind (seconds; for CI). Jaeger's binary:
# $SHREDDUCK_JAEGER, or built from tools/jaeger into the user's cache
# (internal/toolbin's place; a cold build takes minutes). Writes
# $out/jaeger-N.json (--record: bench/results/); exits non-zero on any
# failure or answer mismatch.
set -euo pipefail
cd "$(dirname "$0")/.."
command="bench/run_jaeger.sh${*:+ $*}"
records=1000000,10000000 runs=1 seed=1 ids=300 searches=60 jmax=1000000
quick_records=20000 quick_runs=1
declare -A extra_flags=([--ids]=ids [--searches]=searches [--jaeger-max-spans]=jmax)
. bench/lib.sh
for a in "$@"; do
  if [ "$a" = --quick ]; then ids=20 searches=5; fi
done
parse_bench_args "$@"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/shredduck" ./cmd/shredduck
go build -o "$work/jaegerbench" ./bench/jaegerbench
jaeger=${SHREDDUCK_JAEGER:-}
if [ -z "$jaeger" ]; then
  jaeger="${XDG_CACHE_HOME:-$HOME/.cache}/shredduck-test/jaeger"
  (cd tools/jaeger && CGO_ENABLED=0 GOFLAGS= go build -o "$jaeger.$$" github.com/jaegertracing/jaeger/cmd/jaeger && mv "$jaeger.$$" "$jaeger")
fi
status=0
for n in ${records//,/ }; do
  mkdir -p "$work/$n"
  "$work/jaegerbench" -shredduck "$work/shredduck" -jaeger "$jaeger" -spans "$n" -seed "$seed" \
    -ids "$ids" -searches "$searches" -jaeger-max-spans "$jmax" -dir "$work/$n" \
    -command "$command" -out "$out/jaeger-$n.json" || status=1
  rm -rf "$work/$n"
done
exit "$status"
