// Command kafkabench measures `shredduck serve --kafka-brokers` nodes
// consuming OTLP traces from Kafka as one consumer group: records and spans
// per second with K nodes, the nodes' CPU per million spans, and the lag
// under a burst.
//
//	kafkabench -shredduck BIN [-nodes 1,2,3] [-spans-per-record 1,50] [-spans 100000] \
//	    [-runs 3] [-warmup 1] [-burst-rate 500] [-burst-factor 10] [-burst-seconds 3] \
//	    [-dir DIR] [-profile DIR] [-command ...] [-out kafka-N.json]
//
// Every measurement starts a new in-process Kafka-protocol cluster
// (kfake: 3 brokers, the traces topic otlp_spans with 6 partitions) and K
// new nodes as real processes, each on its own DuckDB file, and waits until
// the group has given every node its share of the partitions.
//
// Throughput: the nodes are stopped (SIGSTOP), -spans spans are produced
// as records of S spans each (keyed by trace id), the nodes are continued
// (SIGCONT) and the clock runs until the nodes together have stored every
// partition's end offset (their shredduck_sources, through /v1/query).
// Reported: records/s and spans/s in total and per node, the nodes' CPU
// (utime+stime from /proc) per million spans, and this process's own CPU
// in the same window (the cluster's: nothing else runs here then).
//
// Burst: the nodes consume records produced at -burst-rate records/s (one
// span each) for -steady-seconds, then -burst-factor times that for
// -burst-seconds, then the steady rate again until the backlog is gone.
// Reported: the largest lag the nodes' /metrics showed
// (shredduck_kafka_lag_records, summed over partitions), the largest
// produced-minus-stored lag, and the time from the end of the burst until
// the lag was back to its largest before the burst.
//
// Every run is checked once its nodes have exited: their tables attached
// together hold each produced span exactly once (count and distinct span
// ids) and every node holds some. A run that fails is reported as failed,
// never timed; any failure makes the exit status non-zero.
// bench/run_kafka.sh builds shredduck and runs this.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/shredduck/shredduck/bench/internal/benchutil"
)

type config struct {
	bin           string
	nodes         []int
	shapes        []int // spans per record
	spans         int64
	runs, warmup  int
	burstRate     float64
	burstFactor   float64
	burstSeconds  float64
	steadySeconds float64
	burstNodes    []int
	dir, profile  string
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "kafkabench:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("kafkabench", flag.ContinueOnError)
	var cfg config
	fs.StringVar(&cfg.bin, "shredduck", "", "the shredduck binary")
	nodes := fs.String("nodes", "1,2,3", "node counts to measure")
	shapes := fs.String("spans-per-record", "1,50", "spans per Kafka record, one shape each")
	fs.Int64Var(&cfg.spans, "spans", 100_000, "spans produced per throughput run")
	fs.IntVar(&cfg.runs, "runs", 3, "timed runs of each configuration")
	fs.IntVar(&cfg.warmup, "warmup", 1, "warm-up runs of each configuration (not summarized)")
	fs.Float64Var(&cfg.burstRate, "burst-rate", 500, "burst test: the steady rate, records (of one span) per second; 0: no burst test")
	fs.Float64Var(&cfg.burstFactor, "burst-factor", 10, "burst test: the burst's rate as a multiple of the steady rate")
	fs.Float64Var(&cfg.burstSeconds, "burst-seconds", 3, "burst test: how long the burst lasts")
	fs.Float64Var(&cfg.steadySeconds, "steady-seconds", 5, "burst test: steady production before the burst")
	burstNodes := fs.String("burst-nodes", "", "burst test: node counts (default: -nodes)")
	fs.StringVar(&cfg.dir, "dir", "", "scratch directory for the database files and logs (default: a new temporary one)")
	fs.StringVar(&cfg.profile, "profile", "", "write each node's CPU profile (--cpuprofile) to this directory")
	command := fs.String("command", "", "the script's command line, recorded with the results")
	out := fs.String("out", "", "write the results (JSON) to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var err error
	if cfg.nodes, err = ints(*nodes); err != nil {
		return fmt.Errorf("-nodes: %w", err)
	}
	if cfg.shapes, err = ints(*shapes); err != nil {
		return fmt.Errorf("-spans-per-record: %w", err)
	}
	cfg.burstNodes = cfg.nodes
	if *burstNodes != "" {
		if cfg.burstNodes, err = ints(*burstNodes); err != nil {
			return fmt.Errorf("-burst-nodes: %w", err)
		}
	}
	if cfg.bin == "" || cfg.spans < 1 || cfg.runs < 1 || cfg.warmup < 0 || cfg.burstRate < 0 || cfg.burstFactor < 1 {
		return errors.New("want -shredduck, -spans >= 1, -runs >= 1, -warmup >= 0, -burst-rate >= 0, -burst-factor >= 1")
	}
	for _, k := range append(cfg.nodes, cfg.burstNodes...) {
		if k > partitions {
			return fmt.Errorf("%d nodes: more than the %d partitions, some would hold none", k, partitions)
		}
	}
	if cfg.dir == "" {
		d, err := os.MkdirTemp("", "kafkabench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		cfg.dir = d
	}
	if cfg.profile != "" {
		if err := os.MkdirAll(cfg.profile, 0o755); err != nil {
			return err
		}
	}

	started := time.Now()
	res := &Result{Header: benchutil.Header{Kind: benchutil.KindKafka, Command: *command, Driver: strings.Join(os.Args, " "),
		Started: started.UTC(), Machine: benchutil.Machine(), Records: cfg.spans, WarmUp: cfg.warmup, Runs: cfg.runs},
		Params: Params{Nodes: cfg.nodes, SpansPerRecord: cfg.shapes, Brokers: 3, Partitions: partitions, Topic: tracesTopic,
			Encoding: "otlp_proto", SpanShape: "internal/benchtraces.StreamingRequest (bench/streaming's light sender), one trace per record, keyed by trace id",
			BurstNodes: cfg.burstNodes, BurstRate: cfg.burstRate, BurstFactor: cfg.burstFactor, BurstSeconds: cfg.burstSeconds, SteadySeconds: cfg.steadySeconds,
			NodeFlags: "serve --http 127.0.0.1:0 --grpc off --kafka-topics " + tracesTopic + ",, (defaults otherwise)"}}
	b, err := newBench(cfg)
	if err != nil {
		return err
	}
	ctx := context.Background()
	fmt.Fprintf(os.Stderr, "kafkabench: %d spans per run; nodes %v; spans per record %v; %d warm-up + %d timed runs each, interleaved\n",
		cfg.spans, cfg.nodes, cfg.shapes, cfg.warmup, cfg.runs)
	for run := range cfg.warmup + cfg.runs {
		for _, shape := range cfg.shapes {
			for _, k := range order(cfg.nodes, run) {
				s := b.throughput(ctx, shape, k, run)
				s.WarmUp = run < cfg.warmup
				res.Samples = append(res.Samples, s)
				if s.Error != "" {
					res.Failures = append(res.Failures, fmt.Sprintf("throughput, %d spans/record, %d nodes, run %d: %s", shape, k, run, s.Error))
				}
				fmt.Fprintf(os.Stderr, "  run %d  %3d spans/record  %d nodes  %s\n", run, shape, k, s.line())
			}
		}
		if cfg.burstRate > 0 && run >= cfg.warmup {
			for _, k := range order(cfg.burstNodes, run) {
				s := b.burst(ctx, k, run)
				res.Bursts = append(res.Bursts, s)
				if s.Error != "" {
					res.Failures = append(res.Failures, fmt.Sprintf("burst, %d nodes, run %d: %s", k, run, s.Error))
				}
				fmt.Fprintf(os.Stderr, "  run %d  burst            %d nodes  %s\n", run, k, s.line())
			}
		}
	}
	res.Failed = len(res.Failures) > 0
	res.Summary = summarize(res.Samples, cfg)
	res.BurstSummary = summarizeBursts(res.Bursts, cfg)
	res.Seconds = time.Since(started).Seconds()
	printSummary(os.Stdout, res)
	if *out != "" {
		if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
			return err
		}
		if err := benchutil.WriteJSON(*out, res); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "kafkabench: wrote %s\n", *out)
	}
	if res.Failed {
		return fmt.Errorf("%d runs failed: %s", len(res.Failures), strings.Join(res.Failures, "; "))
	}
	return nil
}

// order is the node counts of a round, reversed every other round, so
// that no configuration always runs first.
func order(ks []int, run int) []int {
	if run%2 == 0 {
		return ks
	}
	out := make([]int, len(ks))
	for i, k := range ks {
		out[len(ks)-1-i] = k
	}
	return out
}

func ints(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q: want positive integers, comma-separated", s)
		}
		out = append(out, n)
	}
	return out, nil
}
