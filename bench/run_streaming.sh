#!/usr/bin/env bash
# Streaming OTLP ingest into `shredduck serve`: W workers, each an
# OpenTelemetry Go SDK TracerProvider with an OTLP exporter (otlptracehttp,
# protobuf; --grpc: otlptracegrpc), send N spans per run; side by side with a
# decode-only endpoint (the ceiling: pdata decodes each request and drops
# it). Interleaved runs after a warm-up, medians; spans/s, p50/p99 export
# latency, the server's peak RSS, and the ratio shredduck/ceiling. Every run
# is verified: rows ingested == spans sent.
#   bench/run_streaming.sh [--quick] [--records N] [--runs R] [--workers W] [--grpc] [--gzip] [--batch B]
#                          [--sender sdk|replay] [--ack commit|log] [--out DIR | --record]
# --sender replay: the light sender (requests of B spans encoded before the
# clock starts, POSTed by W workers; HTTP only). Without --ack the server
# runs at its default flags (--ack log: it acknowledges once a request is
# in its ingest log; "visible+s" is then the time from the last answer
# until every span was counted, and the sustained rate counts it).
# Default: 16 workers, 1,000,000 spans per run, 5 timed runs. --quick: 4
# workers, 100,000 spans, 3 runs. Writes
# $out/streaming-{http,grpc}-wW-N.json (--record: bench/results/); exits non-zero on a
# count mismatch.
set -euo pipefail
cd "$(dirname "$0")/.."
command="bench/run_streaming.sh $*"
records=1000000 runs=5 workers=16 protocol=http batch=512 gzip=() sender=sdk ack=
out=${TMPDIR:-/tmp}/shredduck-bench # as bench/lib.sh: the checkout stays clean
while [ $# -gt 0 ]; do
  case "$1" in
    --record) out=bench/results ;;
    --out) out=$2; shift ;;
    --quick) records=100000 runs=3 workers=4 ;;
    --records) records=$2; shift ;;
    --runs) runs=$2; shift ;;
    --workers) workers=$2; shift ;;
    --batch) batch=$2; shift ;;
    --grpc) protocol=grpc ;;
    --gzip) gzip=(-gzip) ;;
    --sender) sender=$2; shift ;;
    --ack) ack=$2; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
suffix=
[ "$sender" = sdk ] || suffix="$suffix-$sender"
# No --ack: the server runs at its default flags (--ack log), and the
# result's name says so.
server_flags=()
if [ -n "$ack" ]; then
  server_flags=(--ack "$ack") suffix="$suffix-ack$ack"
else
  suffix="$suffix-default"
fi
mkdir -p "$out"
echo "results go to $out" >&2
work=$(mktemp -d)
server=
cleanup() {
  if [ -n "$server" ] && kill -0 "$server" 2>/dev/null; then
    kill -TERM "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
go build -o "$work/shredduck" ./cmd/shredduck
go build -o "$work/streaming" ./bench/streaming

# The server picks free ports (127.0.0.1:0) and logs them.
"$work/shredduck" serve --db "$work/stream.duckdb" "${server_flags[@]}" --http 127.0.0.1:0 --grpc 127.0.0.1:0 \
  2>"$work/serve.log" &
server=$!
listening() { sed -n 's/.*"msg":"listening","port":"'"$1"'","addr":"\([^"]*\)".*/\1/p' "$work/serve.log" | head -n 1; }
for _ in $(seq 600); do
  http=$(listening http) grpc=$(listening grpc)
  [ -n "$http" ] && [ -n "$grpc" ] && break
  kill -0 "$server" 2>/dev/null || { cat "$work/serve.log" >&2; echo "shredduck serve exited" >&2; exit 1; }
  sleep 0.1
done
if [ -z "$http" ] || [ -z "$grpc" ]; then
  cat "$work/serve.log" >&2; echo "shredduck serve did not start" >&2; exit 1
fi
echo "shredduck serve (pid $server) on http $http, grpc $grpc" >&2

status=0
"$work/streaming" -http "http://$http" -grpc "$grpc" -pid "$server" -protocol "$protocol" \
  -workers "$workers" -records "$records" -runs "$runs" -batch "$batch" "${gzip[@]}" -sender "$sender" -ack "${ack:-log}" \
  -server-flags "${server_flags[*]}" \
  -command "$command" -out "$out/streaming-$protocol-w$workers-$records$suffix.json" || status=$?

kill -TERM "$server"
if ! wait "$server"; then
  echo "shredduck serve did not exit cleanly; its log:" >&2
  tail -n 50 "$work/serve.log" >&2
  status=1
fi
server=
if [ "$status" -ne 0 ]; then
  echo "server log (last 20 lines):" >&2
  tail -n 20 "$work/serve.log" >&2
fi
exit "$status"
