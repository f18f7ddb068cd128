#!/usr/bin/env bash
# shredduck serve behind a real OpenTelemetry Collector (in-process, built
# from the collector's Go modules in bench/collector, a separate Go module):
# the otlp receiver and the otlp_http exporter configured by
# docs/collector.yaml. Sends N spans, N log records and N metric data points
# to the collector over OTLP/HTTP and checks that shredduck holds exactly
# them once the exporter has drained.
# With --kafka the collector runs docs/scale-out/collector-kafka.yaml (the
# contrib kafkaexporter) against an in-process Kafka-protocol cluster (3
# brokers, 6 partitions per topic) that --nodes shredduck nodes consume as
# one consumer group; their tables together must hold every record once.
#   bench/run_collector.sh [--kafka [--nodes K]] [--records N] [--batch B] [--workers W] [--config FILE]
# A cold build of the collector's modules takes a minute or two.
set -euo pipefail
cd "$(dirname "$0")/.."
records=20000 batch=100 workers=4 config= kafka=() nodes=1
while [ $# -gt 0 ]; do
  case "$1" in
    --records) records=$2; shift ;;
    --batch) batch=$2; shift ;;
    --workers) workers=$2; shift ;;
    --config) config=$2; shift ;;
    --kafka) kafka=(-kafka) ;;
    --nodes) nodes=$2; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
if [ -z "$config" ]; then
  config=docs/collector.yaml
  if [ ${#kafka[@]} -gt 0 ]; then config=docs/scale-out/collector-kafka.yaml; fi
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/shredduck" ./cmd/shredduck
(cd bench/collector && go build -o "$work/collector" .)
"$work/collector" -shredduck "$work/shredduck" -config "$config" "${kafka[@]}" \
  -nodes "$nodes" -n "$records" -batch "$batch" -workers "$workers"
