# Sourced by bench/run_*.sh (not a script of its own): the flags they share.
# The sourcing script sets records, runs and seed to its defaults and
# quick_records, quick_runs to what --quick means, lists flags of its own in
# the associative array extra_flags (flag -> variable set to its value),
# then calls parse_bench_args "$@".
#   --quick        quick_records records, quick_runs timed runs
#   --records N    records to generate
#   --runs R       timed runs (after one warm-up)
#   --seed S       generator seed
#   --out DIR      where the results go (default: a scratch directory,
#                  ${TMPDIR:-/tmp}/shredduck-bench); the checkout stays clean
#   --record       write them to bench/results/ instead (what RESULTS.md shows)
# After parse_bench_args, $out is that directory (created).
declare -p extra_flags >/dev/null 2>&1 || declare -A extra_flags=()

parse_bench_args() {
  out=${TMPDIR:-/tmp}/shredduck-bench
  while [ $# -gt 0 ]; do
    case "$1" in
      --record) out=bench/results ;;
      --out) out=$2; shift ;;
      --quick) records=$quick_records runs=$quick_runs ;;
      --records) records=$2; shift ;;
      --runs) runs=$2; shift ;;
      --seed) seed=$2; shift ;;
      *)
        if [ -z "${extra_flags[$1]+set}" ] || [ $# -lt 2 ]; then
          echo "unknown argument $1" >&2
          exit 2
        fi
        printf -v "${extra_flags[$1]}" '%s' "$2"
        shift ;;
    esac
    shift
  done
  mkdir -p "$out"
  echo "results go to $out" >&2
}
