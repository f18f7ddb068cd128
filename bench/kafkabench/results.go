package main

import (
	"fmt"
	"io"
	"slices"

	"github.com/shredduck/shredduck/bench/internal/benchutil"
)

// Result is what kafkabench writes (kind "kafka"; bench/report reads it).
// Header.Records is the spans of one throughput run.
type Result struct {
	benchutil.Header
	Params       Params         `json:"params"`
	Samples      []Sample       `json:"samples"`
	Summary      []Summary      `json:"summary"`
	Bursts       []BurstSample  `json:"burst_samples"`
	BurstSummary []BurstSummary `json:"burst_summary"`
}

// Params are the settings of the run.
type Params struct {
	Nodes          []int   `json:"nodes"`
	SpansPerRecord []int   `json:"spans_per_record"`
	Brokers        int     `json:"brokers"`
	Partitions     int     `json:"partitions"`
	Topic          string  `json:"topic"`
	Encoding       string  `json:"encoding"`
	SpanShape      string  `json:"span_shape"`
	NodeFlags      string  `json:"node_flags"`
	BurstNodes     []int   `json:"burst_nodes"`
	BurstRate      float64 `json:"burst_steady_records_per_sec"`
	BurstFactor    float64 `json:"burst_factor"`
	BurstSeconds   float64 `json:"burst_seconds"`
	SteadySeconds  float64 `json:"burst_steady_seconds"`
}

// Sample is one throughput run: K nodes consuming a backlog.
type Sample struct {
	SpansPerRecord int     `json:"spans_per_record"`
	Nodes          int     `json:"nodes"`
	Run            int     `json:"run"`
	WarmUp         bool    `json:"warmup"`
	Records        int64   `json:"records"`
	Spans          int64   `json:"spans"`
	RecordBytes    int64   `json:"record_bytes"`    // the records' values, protobuf
	SettleSeconds  float64 `json:"settle_seconds"`  // from the cluster's start until the group had given every node its partitions
	ProduceSeconds float64 `json:"produce_seconds"` // producing the backlog, the nodes stopped
	// Seconds runs from SIGCONT until the nodes together had stored every
	// partition's end offset.
	Seconds     float64   `json:"seconds"`
	NodeCPU     []float64 `json:"node_cpu_seconds"`   // each node's utime+stime in that window
	DriverCPU   float64   `json:"driver_cpu_seconds"` // this process (the Kafka cluster, the polling) in that window
	NodePeakRSS []int64   `json:"node_peak_rss_bytes"`
	NodeSpans   []int64   `json:"node_spans"` // rows of each node's otel_traces afterwards
	Rows        int64     `json:"rows"`
	Distinct    int64     `json:"distinct_span_ids"`
	Verified    bool      `json:"verified"`
	Error       string    `json:"error,omitempty"`
}

func (s Sample) nodeCPU() float64 {
	var t float64
	for _, c := range s.NodeCPU {
		t += c
	}
	return t
}

func (s Sample) line() string {
	if s.Error != "" {
		return "FAILED: " + s.Error
	}
	return fmt.Sprintf("%7.2f s  %8.0f records/s  %8.0f spans/s  node CPU %6.2f s (%.2f cores)  driver CPU %5.2f s  spans per node %v",
		s.Seconds, float64(s.Records)/s.Seconds, float64(s.Spans)/s.Seconds, s.nodeCPU(), s.nodeCPU()/s.Seconds, s.DriverCPU, s.NodeSpans)
}

// Summary summarizes the timed runs of one shape and node count.
type Summary struct {
	SpansPerRecord int            `json:"spans_per_record"`
	Nodes          int            `json:"nodes"`
	Records        int64          `json:"records"`
	Spans          int64          `json:"spans"`
	Seconds        benchutil.Stat `json:"seconds"`
	RecordsPerSec  benchutil.Stat `json:"records_per_sec"`
	SpansPerSec    benchutil.Stat `json:"spans_per_sec"`
	// Per node: the total's median divided by the node count.
	RecordsPerSecPerNode float64 `json:"records_per_sec_per_node"`
	SpansPerSecPerNode   float64 `json:"spans_per_sec_per_node"`
	// The nodes' CPU together per million spans, and this process's (the
	// cluster's) in the same window.
	NodeCPUPerMSpans   benchutil.Stat `json:"node_cpu_seconds_per_million_spans"`
	DriverCPUPerMSpans benchutil.Stat `json:"driver_cpu_seconds_per_million_spans"`
	// NodeCores is the nodes' CPU seconds per wall second (of the 2 cores).
	NodeCores benchutil.Stat `json:"node_cores_busy"`
	// SpansPerCPUSecond is spans per second of node CPU: what a node
	// does per core it has to itself.
	SpansPerCPUSecond benchutil.Stat `json:"spans_per_node_cpu_second"`
	// Scaling is the spans/s median over that of 1 node (same shape); 0:
	// 1 node not measured.
	Scaling     float64 `json:"scaling_vs_1_node"`
	NodePeakRSS int64   `json:"node_peak_rss_bytes_max"`
	Failed      bool    `json:"failed"`
}

func summarize(samples []Sample, cfg config) []Summary {
	var out []Summary
	for _, shape := range cfg.shapes {
		var one float64
		for _, k := range cfg.nodes {
			sm := Summary{SpansPerRecord: shape, Nodes: k}
			var secs, rps, sps, cpuM, drvM, cores, perCPU []float64
			for _, s := range samples {
				if s.SpansPerRecord != shape || s.Nodes != k {
					continue
				}
				if s.Error != "" || !s.Verified {
					sm.Failed = true
					continue
				}
				if s.WarmUp {
					continue
				}
				sm.Records, sm.Spans = s.Records, s.Spans
				cpu := s.nodeCPU()
				secs = append(secs, s.Seconds)
				rps = append(rps, float64(s.Records)/s.Seconds)
				sps = append(sps, float64(s.Spans)/s.Seconds)
				cpuM = append(cpuM, cpu/float64(s.Spans)*1e6)
				drvM = append(drvM, s.DriverCPU/float64(s.Spans)*1e6)
				cores = append(cores, cpu/s.Seconds)
				perCPU = append(perCPU, float64(s.Spans)/cpu)
				sm.NodePeakRSS = max(sm.NodePeakRSS, slices.Max(s.NodePeakRSS))
			}
			sm.Seconds, sm.RecordsPerSec, sm.SpansPerSec = benchutil.Summarize(secs), benchutil.Summarize(rps), benchutil.Summarize(sps)
			sm.NodeCPUPerMSpans, sm.DriverCPUPerMSpans = benchutil.Summarize(cpuM), benchutil.Summarize(drvM)
			sm.NodeCores, sm.SpansPerCPUSecond = benchutil.Summarize(cores), benchutil.Summarize(perCPU)
			sm.RecordsPerSecPerNode = sm.RecordsPerSec.Median / float64(k)
			sm.SpansPerSecPerNode = sm.SpansPerSec.Median / float64(k)
			if k == 1 && !sm.Failed {
				one = sm.SpansPerSec.Median
			}
			if one > 0 && !sm.Failed {
				sm.Scaling = sm.SpansPerSec.Median / one
			}
			out = append(out, sm)
		}
	}
	return out
}

// BurstSample is one burst run.
type BurstSample struct {
	Nodes             int     `json:"nodes"`
	Run               int     `json:"run"`
	SteadyRate        float64 `json:"steady_records_per_sec"`
	BurstRate         float64 `json:"burst_records_per_sec"`
	AchievedBurstRate float64 `json:"achieved_burst_records_per_sec"` // what the producer managed
	SteadySeconds     float64 `json:"steady_seconds"`
	BurstSeconds      float64 `json:"burst_seconds"`
	Records           int64   `json:"records"` // produced in all, one span each
	// Lags in records: "lag" is the sum of the nodes'
	// shredduck_kafka_lag_records; "true lag" is records acknowledged by
	// the cluster minus records the nodes had stored (shredduck_sources).
	SteadyMaxLag     int64 `json:"steady_max_lag"`
	SteadyMaxTrueLag int64 `json:"steady_max_true_lag"`
	MaxLag           int64 `json:"max_lag"`
	MaxTrueLag       int64 `json:"max_true_lag"`
	// CatchUpSeconds runs from the end of the burst until the true lag was
	// back at most at its steady maximum.
	CatchUpSeconds float64 `json:"catch_up_seconds"`
	// Series samples every 200 ms: seconds since the start, lag, true lag.
	Series   [][3]float64 `json:"series"`
	Verified bool         `json:"verified"`
	Error    string       `json:"error,omitempty"`
}

func (s BurstSample) line() string {
	if s.Error != "" {
		return "FAILED: " + s.Error
	}
	return fmt.Sprintf("steady %.0f/s, burst %.0f/s (achieved %.0f/s) for %.0f s: max lag %d (true %d; steady %d, true %d), caught up %.1f s after the burst",
		s.SteadyRate, s.BurstRate, s.AchievedBurstRate, s.BurstSeconds, s.MaxLag, s.MaxTrueLag, s.SteadyMaxLag, s.SteadyMaxTrueLag, s.CatchUpSeconds)
}

// BurstSummary summarizes the burst runs of one node count.
type BurstSummary struct {
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
}

func summarizeBursts(bursts []BurstSample, cfg config) []BurstSummary {
	if cfg.burstRate == 0 {
		return nil
	}
	var out []BurstSummary
	for _, k := range cfg.burstNodes {
		sm := BurstSummary{Nodes: k, SteadyRate: cfg.burstRate, BurstRate: cfg.burstRate * cfg.burstFactor}
		var ach, steady, lag, trueLag, catch []float64
		for _, s := range bursts {
			if s.Nodes != k {
				continue
			}
			if s.Error != "" || !s.Verified {
				sm.Failed = true
				continue
			}
			ach = append(ach, s.AchievedBurstRate)
			steady = append(steady, float64(s.SteadyMaxLag))
			lag = append(lag, float64(s.MaxLag))
			trueLag = append(trueLag, float64(s.MaxTrueLag))
			catch = append(catch, s.CatchUpSeconds)
		}
		sm.Runs = len(lag)
		sm.AchievedBurstRate, sm.SteadyMaxLag, sm.MaxLag = benchutil.Summarize(ach), benchutil.Summarize(steady), benchutil.Summarize(lag)
		sm.MaxTrueLag, sm.CatchUpSeconds = benchutil.Summarize(trueLag), benchutil.Summarize(catch)
		out = append(out, sm)
	}
	return out
}

func printSummary(w io.Writer, r *Result) {
	fmt.Fprintf(w, "\nKafka → shredduck nodes: %d spans per run, medians of %d timed runs (min–max)\n", r.Records, r.Runs)
	fmt.Fprintf(w, "%-12s %-5s %-26s %-26s %-16s %-16s %-22s %-22s %-7s\n", "spans/record", "nodes", "records/s", "spans/s",
		"records/s/node", "spans/s/node", "node CPU s / 1M spans", "driver CPU s / 1M spans", "scaling")
	for _, s := range r.Summary {
		if s.Failed {
			fmt.Fprintf(w, "%-12d %-5d FAILED\n", s.SpansPerRecord, s.Nodes)
			continue
		}
		fmt.Fprintf(w, "%-12d %-5d %-26s %-26s %-16.0f %-16.0f %-22s %-22s %-7.2f\n", s.SpansPerRecord, s.Nodes, spread(s.RecordsPerSec, "%.0f"),
			spread(s.SpansPerSec, "%.0f"), s.RecordsPerSecPerNode, s.SpansPerSecPerNode, spread(s.NodeCPUPerMSpans, "%.1f"), spread(s.DriverCPUPerMSpans, "%.1f"), s.Scaling)
	}
	if len(r.BurstSummary) > 0 {
		fmt.Fprintf(w, "\nBurst: %.0f records/s, then %.0fx for %.0f s\n", r.Params.BurstRate, r.Params.BurstFactor, r.Params.BurstSeconds)
		fmt.Fprintf(w, "%-5s %-24s %-24s %-24s %-24s %-24s\n", "nodes", "achieved burst/s", "steady max lag", "max lag (/metrics)", "max lag (true)", "catch-up s")
		for _, s := range r.BurstSummary {
			if s.Failed {
				fmt.Fprintf(w, "%-5d FAILED\n", s.Nodes)
				continue
			}
			fmt.Fprintf(w, "%-5d %-24s %-24s %-24s %-24s %-24s\n", s.Nodes, spread(s.AchievedBurstRate, "%.0f"), spread(s.SteadyMaxLag, "%.0f"),
				spread(s.MaxLag, "%.0f"), spread(s.MaxTrueLag, "%.0f"), spread(s.CatchUpSeconds, "%.1f"))
		}
	}
}

func spread(s benchutil.Stat, f string) string {
	return fmt.Sprintf(f+" ("+f+"–"+f+")", s.Median, s.Min, s.Max)
}
