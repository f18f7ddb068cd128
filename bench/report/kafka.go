package main

import (
	"fmt"
	"strings"

	"github.com/shredduck/shredduck/bench/internal/benchutil"
)

// kafkaBench is the part of bench/run_kafka.sh's results (kind "kafka",
// kafka-N.json, written by bench/kafkabench, a main package that cannot be
// imported) that the report shows.
type kafkaBench struct {
	benchutil.Header
	Params struct {
		Nodes         []int   `json:"nodes"`
		Brokers       int     `json:"brokers"`
		Partitions    int     `json:"partitions"`
		SpanShape     string  `json:"span_shape"`
		NodeFlags     string  `json:"node_flags"`
		BurstRate     float64 `json:"burst_steady_records_per_sec"`
		BurstFactor   float64 `json:"burst_factor"`
		BurstSeconds  float64 `json:"burst_seconds"`
		SteadySeconds float64 `json:"burst_steady_seconds"`
	} `json:"params"`
	Summary []struct {
		SpansPerRecord       int            `json:"spans_per_record"`
		Nodes                int            `json:"nodes"`
		Records              int64          `json:"records"`
		RecordsPerSec        benchutil.Stat `json:"records_per_sec"`
		SpansPerSec          benchutil.Stat `json:"spans_per_sec"`
		RecordsPerSecPerNode float64        `json:"records_per_sec_per_node"`
		SpansPerSecPerNode   float64        `json:"spans_per_sec_per_node"`
		NodeCPUPerMSpans     benchutil.Stat `json:"node_cpu_seconds_per_million_spans"`
		DriverCPUPerMSpans   benchutil.Stat `json:"driver_cpu_seconds_per_million_spans"`
		NodeCores            benchutil.Stat `json:"node_cores_busy"`
		SpansPerCPUSecond    benchutil.Stat `json:"spans_per_node_cpu_second"`
		Scaling              float64        `json:"scaling_vs_1_node"`
		NodePeakRSS          int64          `json:"node_peak_rss_bytes_max"`
		Failed               bool           `json:"failed"`
	} `json:"summary"`
	BurstSummary []struct {
		Nodes             int            `json:"nodes"`
		Runs              int            `json:"runs"`
		SteadyRate        float64        `json:"steady_records_per_sec"`
		BurstRate         float64        `json:"burst_records_per_sec"`
		AchievedBurstRate benchutil.Stat `json:"achieved_burst_records_per_sec"`
		SteadyMaxLag      benchutil.Stat `json:"steady_max_lag"`
		MaxLag            benchutil.Stat `json:"max_lag"`
		MaxTrueLag        benchutil.Stat `json:"max_true_lag"`
		CatchUpSeconds    benchutil.Stat `json:"catch_up_seconds"`
		Failed            bool           `json:"failed"`
	} `json:"burst_summary"`
}

// statSpread renders a median and its min–max with format f.
func statSpread(s benchutil.Stat, f func(float64) string) string {
	return fmt.Sprintf("%s (%s–%s)", f(s.Median), f(s.Min), f(s.Max))
}

func countF(f float64) string { return count(int64(f + 0.5)) }
func oneDec(f float64) string { return fmt.Sprintf("%.1f", f) }
func twoDec(f float64) string { return fmt.Sprintf("%.2f", f) }

// kafkaLabel is runLabel for a Kafka run, whose spans per run are few
// next to the other benchmarks': quick means one run without warm-up.
func kafkaLabel(h benchutil.Header) string {
	s := fmt.Sprintf("%s spans per run, %d warm-up + %d timed run(s), %s", count(h.Records), h.WarmUp, h.Runs, machineLabel(h.Machine))
	if h.WarmUp == 0 && h.Runs == 1 {
		s = "**Quick run: noisy figures.** " + s
	}
	if l := h.Machine["loadavg"]; l != "" {
		s += "; load average at the start " + l
	}
	return s
}

func writeKafka(md *strings.Builder, fs []*named[kafkaBench]) {
	p := func(format string, a ...any) { fmt.Fprintf(md, format, a...) }
	r := &fs[0].r
	p("## Kafka consumer group (bench/run_kafka.sh)\n\n")
	p("bench/kafkabench: an in-process Kafka-protocol cluster (kfake, %d brokers, otlp_spans with %d partitions) and K\n", r.Params.Brokers, r.Params.Partitions)
	p("`shredduck serve --kafka-brokers` nodes as processes, one consumer group, each node on its own DuckDB file (`%s`).\n", r.Params.NodeFlags)
	p("Records are OTLP/protobuf trace export requests of S spans (S = 1 is what the Collector's kafkaexporter writes with\n")
	p("`partition_traces_by_id` for traces of one span); spans: %s. Each run: new cluster and nodes; once\n", r.Params.SpanShape)
	p("the group has given every node its partitions the nodes are stopped (SIGSTOP), the run's spans are produced, the\n")
	p("nodes are continued, and the clock runs until their `shredduck_sources` hold every partition's end offset. Every run\n")
	p("is then checked: the nodes' tables attached together hold each span once (count and distinct span ids), every node\n")
	p("some.\n\n")
	p("**The machine is shared.** The K nodes share its 2 cores with each other and with the driver, in which the Kafka\n")
	p("cluster runs (its CPU in the same window is the \"cluster CPU\" column: subtract it for a real Kafka elsewhere), and\n")
	p("other work (tests, builds) ran beside them. Read the wall-clock rates as what 2 cores did; \"node CPU s / 1M spans\" and\n")
	p("\"spans per node CPU s\" are the per-node cost, which holds on dedicated cores. Scaling is spans/s over 1 node's; \"nodes'\n")
	p("cores busy\" is the nodes' CPU seconds per second, out of 2, what they got beside the rest.\n\n")
	for _, f := range fs {
		writeKafkaFile(md, f)
	}
	md.WriteString(kafkaNotes)
}

func writeKafkaFile(md *strings.Builder, f *named[kafkaBench]) {
	p := func(format string, a ...any) { fmt.Fprintf(md, format, a...) }
	r := &f.r
	p("### %s\n\n", f.name)
	p("%s\n\n", kafkaLabel(r.Header))
	p("| spans/record | nodes | records/s | spans/s | records/s per node | spans/s per node | node CPU s / 1M spans | node CPU µs / record | spans per node CPU s | nodes' cores busy | cluster CPU s / 1M spans | scaling | peak RSS per node |\n")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range r.Summary {
		if s.Failed {
			p("| %d | %d | FAILED | | | | | | | | | | |\n", s.SpansPerRecord, s.Nodes)
			continue
		}
		p("| %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d MiB |\n", s.SpansPerRecord, s.Nodes,
			statSpread(s.RecordsPerSec, countF), statSpread(s.SpansPerSec, countF), countF(s.RecordsPerSecPerNode), countF(s.SpansPerSecPerNode),
			statSpread(s.NodeCPUPerMSpans, oneDec), countF(s.NodeCPUPerMSpans.Median*float64(s.SpansPerRecord)), statSpread(s.SpansPerCPUSecond, countF),
			statSpread(s.NodeCores, twoDec), statSpread(s.DriverCPUPerMSpans, oneDec), twoDec(s.Scaling), s.NodePeakRSS>>20)
	}
	if len(r.BurstSummary) > 0 {
		b := r.Params
		p("\n**Lag under a burst**: the nodes consume records of one span produced at %s records/s for %s s, then %s× that for\n",
			countF(b.BurstRate), trim(b.SteadySeconds), trim(b.BurstFactor))
		p("%s s, then the steady rate again. Lag is the sum over partitions of the nodes' `shredduck_kafka_lag_records` (high\n", trim(b.BurstSeconds))
		p("watermark of the last fetch minus the stored offset), sampled every 200 ms; the true lag is records the cluster\n")
		p("acknowledged minus records the nodes had stored. Catch-up: from the end of the burst until the true lag was back at\n")
		p("its largest before the burst. The producer runs in the driver and shares the cores too (achieved rate).\n\n")
		p("| nodes | runs | steady records/s | burst records/s | achieved burst records/s | max lag before the burst | max lag (/metrics) | max true lag | catch-up s |\n")
		p("|---|---|---|---|---|---|---|---|---|\n")
		for _, s := range r.BurstSummary {
			if s.Failed {
				p("| %d | %d | %s | %s | FAILED | | | | |\n", s.Nodes, s.Runs, countF(s.SteadyRate), countF(s.BurstRate))
				continue
			}
			p("| %d | %d | %s | %s | %s | %s | %s | %s | %s |\n", s.Nodes, s.Runs, countF(s.SteadyRate), countF(s.BurstRate),
				statSpread(s.AchievedBurstRate, countF), statSpread(s.SteadyMaxLag, countF), statSpread(s.MaxLag, countF),
				statSpread(s.MaxTrueLag, countF), statSpread(s.CatchUpSeconds, oneDec))
		}
	}
	if r.Failed {
		p("\nFAILED runs:\n\n")
		for _, fl := range r.Failures {
			p("- %s\n", firstLine(fl))
		}
	}
	p("\n")
}

// kafkaNotes explain what a one-span record cost before a partition's
// records shared items, from CPU profiles of a node (bench/run_kafka.sh
// --profile).
const kafkaNotes = `**One-span records.** Each Kafka record used to be its own item for the loader, written to DuckDB as
its own chunk: a profile of one node catching up on 50,000 one-span records (` + "`bench/run_kafka.sh --nodes 1 --spans-per-record 1 --records 50000 --burst-rate 0 --profile DIR`" + `)
showed about 700 µs of CPU per record, 42% in ` + "`Tx.Write`" + ` (about 300 µs: a one-row Arrow batch built, exported
into a DuckDB data chunk, appended) and 47% in the garbage collector (tens of thousands of one-row batches live
against the soft memory limit). Now the records of a partition that one fetch returns are decoded into shared
items of up to 2,048 rows (serve/kafka.go, decodeMore; a bad record among them is rolled back out of the batch and
skipped with its offset): on the same machine and run, ` + "`bench/run_kafka.sh --runs 2 --nodes 1 --burst-rate 0`" + ` went
from 2,208 to 66,821 one-span records/s (node CPU 851 to 13.4 s per 1M spans), and 50-span records from 78.6k to 103k
spans/s. OTLP/HTTP requests of one span each are written one by one with ` + "`--ack commit`" + ` (a chunk each in the committer's
group); with ` + "`--ack log`" + ` the log's writer merges consecutive ones into runs of up to 2,048 rows (docs/SERVE.md).

**Pipelined COMMIT.** The Kafka loader's COMMIT runs in a goroutine of its own while it writes the next
transaction, as the ` + "`--ack log`" + ` loader's does (docs/SCALE-OUT.md). Interleaved A/B on 2026-12-02, one node, serial
build against pipelined, ` + "`kafkabench -nodes 1 -burst-rate 0 -warmup 1`" + `: 300,000 spans in 50-span records, 2 pairs of 3
runs: 98.3k and 97.4k spans/s serial, 124.9k and 121.7k pipelined (1.27x; node CPU per span the same, 9.4-9.6 s per
1M spans); 1,000,000 spans, 2 pairs of 2 runs (and a warm-up): serial 94-121k spans/s (0.85-1.02 cores), pipelined
either about 157-161k (1.34-1.35 cores) or 112-113k (0.94-0.96 cores) (the slow runs: two speeds, below);
medians 110k against 135k. 100,000 one-span records, one pair: 47.9k against 56.2k records/s (1.17x). The
kafka-1000000 run above is of the pipelined build; it is below the serial build's record of 2026-12-01 (143.5k
spans/s, 6.7 s of node CPU per 1M spans) because the machine was slower: that record's build (2057251) ran
at 98.3k spans/s beside the serial build's 99.3k on 2026-12-02 (300,000 spans, 3 runs each).

**Two speeds (issue 29).** One node catching up on 1M spans in 50-span records ran at either about 160-195k spans/s
(1.3 cores) or 103-115k (0.8-0.9 cores). The loader's own timings (each transaction's collect, write, wait and
COMMIT) were the same in both; in a slow run the source gave it nothing for 2.3-2.7 s once, mid-run. franz-go
counts a fetch against ` + "`MaxConcurrentFetches`" + ` (2 here, the memory bound) while a broker holds it in its long
poll, up to ` + "`FetchMaxWait`" + ` (5 s by default): when the partitions of two of the three brokers ran dry first,
their empty polls held both slots while the third broker's partitions still had a backlog. The consumer now polls
with ` + "`FetchMaxWait`" + ` 250 ms (source/kafka). Same machine, same day, ` + "`bench/run_kafka.sh --records 1000000 --runs 5 --nodes 1 --spans-per-record 50 --burst-rate 0`" + `:
before, 103k, 177k, 115k, 196k, 113k and 162k spans/s (warm-up first); after, 186k, 194k, 185k, 190k, 196k, 195k
and 199k (7 of 7 at 1.27-1.34 cores).

`
