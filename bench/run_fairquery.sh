#!/usr/bin/env bash
# Fair queries (issue 29): shredduck serve at its default flags (plus --pg)
# takes spans from 4 workers (pre-encoded 80-span OTLP/HTTP requests) while
# two clients loop a query that needs more than --query-max-memory and a
# third loops a dashboard query, over HTTP (/v1/query) for S seconds, then
# over PostgreSQL for S seconds. Reports the dashboard's answered share,
# how the heavy queries ended, and checks rows == spans acknowledged and
# exit 0 on SIGTERM.
#   bench/run_fairquery.sh [--seconds S] [--out DIR | --record]
# Default 20 s per surface. Writes $out/fairquery.json (--record:
# bench/results/); exits non-zero on a count mismatch or a failed exit.
set -euo pipefail
cd "$(dirname "$0")/.."
command="bench/run_fairquery.sh${*:+ $*}"
seconds=20 out=${TMPDIR:-/tmp}/shredduck-bench
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift ;;
    --out) out=$2; shift ;;
    --record) out=bench/results ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$out"
echo "results go to $out" >&2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/shredduck" ./cmd/shredduck
go build -o "$work/fairquery" ./bench/fairquery
"$work/fairquery" -shredduck "$work/shredduck" -seconds "$seconds" -command "$command" -out "$out/fairquery.json"
