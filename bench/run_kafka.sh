#!/usr/bin/env bash
# shredduck serve nodes consuming OTLP traces from Kafka as one consumer
# group (issue 19), with 1, 2 and 3 nodes on this machine: bench/kafkabench
# starts an in-process Kafka-protocol cluster (kfake: 3 brokers, otlp_spans
# with 6 partitions) and the nodes as real processes, each on its own
# DuckDB file. Throughput: a backlog of N spans, produced with the nodes
# stopped, as Kafka records of S spans each (keyed by trace id, otlp_proto;
# S=1 is what the Collector's kafkaexporter writes with
# partition_traces_by_id), timed from SIGCONT until the nodes together have
# stored every record: records/s and spans/s in total and per node, the
# nodes' CPU seconds per million spans, and the cluster's (the driver's)
# CPU in the same window. Burst: the nodes consume a steady rate, then ten
# times that for a few seconds: the largest lag and the time to catch up.
# Interleaved runs after a warm-up, medians. Every run is checked: the
# nodes' tables attached together hold every span once (count and
# distinct span ids), every node some.
#   bench/run_kafka.sh [--quick] [--records N] [--runs R] [--nodes 1,2,3] [--spans-per-record 1,50]
#                      [--burst-rate R] [--profile DIR] [--out DIR | --record]
# --records: spans per throughput run (default 100,000; --quick 10,000,
# one run, no warm-up, a short burst). --burst-rate: the steady rate of the
# burst test, records/s (default 500, below what one node keeps up with
# here; --quick 200; 0: none). The data are
# deterministic: --seed changes nothing. --profile DIR: each node's
# CPU profile (shredduck serve --cpuprofile) in DIR.
# Writes $out/kafka-N.json (--record: bench/results/); exits non-zero on
# any failed run or count mismatch.
set -euo pipefail
cd "$(dirname "$0")/.."
command="bench/run_kafka.sh $*"
records=100000 runs=3 seed=1
quick_records=10000 quick_runs=1
nodes=1,2,3 shapes=1,50 burst_rate= profile=
declare -A extra_flags=([--nodes]=nodes [--spans-per-record]=shapes [--burst-rate]=burst_rate [--profile]=profile)
. bench/lib.sh
parse_bench_args "$@"
warmup=1 burst=(-steady-seconds 5 -burst-seconds 3) default_burst_rate=500
for a in "$@"; do
  if [ "$a" = --quick ]; then warmup=0 burst=(-steady-seconds 2 -burst-seconds 1) default_burst_rate=200; fi
done
burst_rate=${burst_rate:-$default_burst_rate}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/shredduck" ./cmd/shredduck
go build -o "$work/kafkabench" ./bench/kafkabench
profile_flag=()
[ -z "$profile" ] || profile_flag=(-profile "$profile")
"$work/kafkabench" -shredduck "$work/shredduck" -dir "$work" -nodes "$nodes" -spans-per-record "$shapes" \
  -spans "$records" -runs "$runs" -warmup "$warmup" -burst-rate "$burst_rate" "${burst[@]}" "${profile_flag[@]}" \
  -command "$command" -out "$out/kafka-$records.json"
