#!/usr/bin/env bash
# The same benchmarks on two builds of shredduck, alternated on one machine:
# by default the DuckDB 1.5 release (commit 7d0246c, DuckDB 1.5.6) against
# this checkout (DuckDB 2.0). Each benchmark script runs in each build's own
# tree, so every path of it (shredduck, sql_typed, the JSON and VARIANT
# baselines, DuckDB's JSON readers) runs on the engine that build links.
# Rounds alternate the order (A B, then B A, ...).
#   bench/run_ab.sh [--old COMMIT] [--rounds K] [--quick] [--out DIR | --record]
# Benchmarks: run_variant.sh (bulk ingest, storage, the query set, the JSON
# and VARIANT baselines), run_gharchive.sh, and run_streaming.sh with the
# light sender (--sender replay --workers 16 --batch 80) in both ack modes.
# --quick: their --quick sizes. Results: $out/ab/LABEL/rK/*.json, LABEL the
# DuckDB version of the build, or its commit when both link the same one
# (a code change measured before and after; --record: bench/results/ab/, which
# `go run ./bench/report` renders as the A/B section of RESULTS.md).
set -euo pipefail
cd "$(dirname "$0")/.."
old=7d0246c rounds=1 quick=() out=${TMPDIR:-/tmp}/shredduck-bench
while [ $# -gt 0 ]; do
  case "$1" in
    --old) old=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --quick) quick=(--quick) ;;
    --out) out=$2; shift ;;
    --record) out=bench/results ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
work=$(mktemp -d)
new=$(pwd)
trap 'git -C "$new" worktree remove --force "$work/old" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git worktree add --detach "$work/old" "$old" >/dev/null
mkdir -p "$out/ab"
out=$(cd "$out" && pwd)

# label prints the DuckDB version the tree at $1 links (v1.5.6, v2.0.0).
label() {
  (cd "$1" && go run ./cmd/shredduck --version) | sed -n 's/^DuckDB \(v[0-9.]*\).*/duckdb-\1/p' | head -1
}
a=$(label "$work/old") b=$(label "$new")
if [ -z "$a" ] || [ -z "$b" ]; then
  echo "run_ab: cannot tell the DuckDB version of the builds ('$a', '$b')" >&2
  exit 1
fi
if [ "$a" = "$b" ]; then
  a="$a-$(git -C "$work/old" rev-parse --short HEAD)" b="$b-$(git rev-parse --short HEAD)"
fi
echo "A: $old ($a), B: this checkout ($b); results in $out/ab" >&2

variant=() gharchive=() streaming=(--records 400000 --runs 3)
if [ ${#quick[@]} -gt 0 ]; then
  variant=(--quick) gharchive=(--quick) streaming=(--records 100000 --runs 2)
else
  variant=(--records 1000000 --runs 3) gharchive=(--runs 3)
fi

# one runs benchmark $2 with arguments $3... in tree $1 into its label's
# directory for the round.
one() {
  local tree=$1 lab=$2 round=$3 script=$4
  shift 4
  local dir="$out/ab/$lab/r$round"
  mkdir -p "$dir"
  echo "== round $round: $lab: $script $*" >&2
  (cd "$tree" && "bench/$script" "$@" --out "$dir")
}

for round in $(seq 1 "$rounds"); do
  order=("$work/old:$a" "$new:$b")
  if [ $((round % 2)) -eq 0 ]; then order=("$new:$b" "$work/old:$a"); fi
  for bench in variant gharchive acklog ackcommit; do
    for t in "${order[@]}"; do
      tree=${t%%:*} lab=${t##*:}
      case $bench in
        variant) one "$tree" "$lab" "$round" run_variant.sh "${variant[@]}" ;;
        gharchive) one "$tree" "$lab" "$round" run_gharchive.sh "${gharchive[@]}" ;;
        acklog) one "$tree" "$lab" "$round" run_streaming.sh "${streaming[@]}" --sender replay --workers 16 --batch 80 --ack log ;;
        ackcommit) one "$tree" "$lab" "$round" run_streaming.sh "${streaming[@]}" --sender replay --workers 16 --batch 80 --ack commit ;;
      esac
    done
  done
done
echo "done: $out/ab/$a and $out/ab/$b" >&2
