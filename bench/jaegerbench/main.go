// Command jaegerbench measures shredduck's Jaeger query API
// (serve/jaegerapi) beside a real Jaeger v2 with memory storage on the same
// data: a trace by id, and searches (limit 20, as Grafana asks) by service,
// by service in a 5-minute window, and by service and tag.
//
//	jaegerbench -shredduck BIN [-jaeger BIN] -spans N [-seed S] [-ids 300] [-searches 60]
//	    [-warmup 5] [-jaeger-max-spans N] -dir DIR [-command CMD] -out FILE.json
//
// The data are generated from the seed: traces of 5-50 spans over 10
// services, starts spread over an hour, in requests of about 1,000 spans
// grouped by resource as a Collector forwards them. shredduck gets them by
// `shredduck ingest` (NDJSON of OTLP/JSON) into a new database, then
// `shredduck serve` at its default flags answers; Jaeger (when -jaeger is
// given and -spans is at most -jaeger-max-spans) gets them over OTLP/HTTP
// (protobuf). Requests go one at a time, each to shredduck and to Jaeger in
// turn (who goes first alternates), after -warmup requests of each kind
// that are not counted; the clock runs from sending a request to having
// read its whole answer. Every answer is checked: each trace has the span
// count it was generated with, a trace by id is the one asked for,
// shredduck's search answers are the expected traces in order (those with
// the latest matching spans), Jaeger's as many of the matching ones (it
// takes those it stored last). Any mismatch fails the run (exit 1).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/shredduck/shredduck/bench/internal/benchutil"
)

// kindJaeger is the kind of this benchmark's results (jaeger-N.json).
const kindJaeger = "jaeger"

const (
	targetShredduck = "shredduck"
	targetJaeger    = "jaeger"
)

// Result is what jaegerbench writes.
type Result struct {
	benchutil.Header
	Params  map[string]any `json:"params"`
	Load    []Load         `json:"load"`
	Summary []Summary      `json:"summary"`
	// JaegerSkipped says why Jaeger was not measured, if it was not.
	JaegerSkipped string `json:"jaeger_skipped,omitempty"`
}

// Load is how a target took the data.
type Load struct {
	Target      string  `json:"target"`
	How         string  `json:"how"`
	Seconds     float64 `json:"seconds"`
	SpansPerSec float64 `json:"spans_per_sec"`
	RSS         int64   `json:"rss_bytes"`      // of the server after the load (shredduck: serve's after the queries)
	PeakRSS     int64   `json:"peak_rss_bytes"` // of the loading process (shredduck ingest; Jaeger itself)
	DBBytes     int64   `json:"db_bytes,omitempty"`
}

// Summary is one query kind on one target.
type Summary struct {
	Query    string  `json:"query"`
	Target   string  `json:"target"`
	Requests int     `json:"requests"`
	P50ms    float64 `json:"p50_ms"`
	P99ms    float64 `json:"p99_ms"`
	MaxMs    float64 `json:"max_ms"`
	// CPUms is the server's CPU time (user and system, all its threads)
	// per timed request: unlike the times, it hardly depends on what else
	// the machine runs.
	CPUms   float64   `json:"server_cpu_ms_per_request"`
	Example string    `json:"example"`
	Failed  bool      `json:"failed"`
	Ms      []float64 `json:"ms"` // every timed request, in order
}

type config struct {
	shredduck, jaeger, dir, command, out string
	spans, ids, searches, warmup, jmax   int
	seed                                 uint64
}

func main() {
	var c config
	flag.StringVar(&c.shredduck, "shredduck", "", "the shredduck binary")
	flag.StringVar(&c.jaeger, "jaeger", "", "Jaeger v2's binary (tools/jaeger); empty: shredduck alone")
	flag.IntVar(&c.spans, "spans", 1000000, "spans to generate")
	flag.Uint64Var(&c.seed, "seed", 1, "seed of the data and the queries")
	flag.IntVar(&c.ids, "ids", 300, "traces fetched by id (each once)")
	flag.IntVar(&c.searches, "searches", 60, "requests of each search kind")
	flag.IntVar(&c.warmup, "warmup", 5, "requests of each kind before the clock (not counted)")
	flag.IntVar(&c.jmax, "jaeger-max-spans", 1000000, "Jaeger is measured up to this many spans (its memory store holds everything in RAM)")
	flag.StringVar(&c.dir, "dir", "", "scratch directory (the data and the database)")
	flag.StringVar(&c.command, "command", "", "the script's command line, for the record")
	flag.StringVar(&c.out, "out", "", "the result file")
	flag.Parse()
	if c.shredduck == "" || c.dir == "" || c.out == "" {
		fmt.Fprintln(os.Stderr, "jaegerbench: -shredduck, -dir and -out are required")
		os.Exit(2)
	}
	r, err := run(&c)
	if r != nil {
		if werr := benchutil.WriteJSON(c.out, r); werr != nil && err == nil {
			err = werr
		}
		fmt.Fprintf(os.Stderr, "wrote %s\n", c.out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "jaegerbench:", err)
		os.Exit(1)
	}
	if r.Failed {
		fmt.Fprintln(os.Stderr, "jaegerbench: FAILED:", strings.Join(r.Failures, "; "))
		os.Exit(1)
	}
}

func run(c *config) (*Result, error) {
	r := &Result{Header: benchutil.Header{Kind: kindJaeger, Command: c.command, Driver: strings.Join(os.Args, " "),
		Started: time.Now().UTC(), Machine: benchutil.Machine(), Records: int64(c.spans), Seed: c.seed, WarmUp: c.warmup, Runs: 1}}
	begin := time.Now()
	defer func() { r.Seconds = time.Since(begin).Seconds() }()
	ndjson, proto := filepath.Join(c.dir, "traces.ndjson"), filepath.Join(c.dir, "traces.otlp")
	sp := specs(c.seed, 10)
	t0 := time.Now()
	w, err := generate(c.spans, c.seed, ndjson, proto, sp)
	if err != nil {
		return nil, fmt.Errorf("generating: %w", err)
	}
	fmt.Fprintf(os.Stderr, "generated %d spans, %d traces, %d requests in %.1fs\n", w.spans, len(w.traces), w.requests, time.Since(t0).Seconds())
	r.Records = int64(w.spans)
	r.Data = []benchutil.DataFile{{Signal: "traces", Records: int64(w.spans), Bytes: w.ndjsonBytes,
		GenCommand: fmt.Sprintf("bench/jaegerbench (gen.go), -spans %d -seed %d", c.spans, c.seed)}}
	r.Params = map[string]any{"spans": w.spans, "traces": len(w.traces), "requests": w.requests, "ndjson_bytes": w.ndjsonBytes,
		"otlp_proto_bytes": w.protoBytes, "limit": searchLimit, "ids": c.ids, "searches": c.searches, "jaeger_max_spans": c.jmax}
	spans := map[string]int{}
	for _, t := range w.traces {
		spans[t.id] = t.spans
	}
	sh, err := setUpShredduck(c, r, ndjson)
	if err != nil {
		return r, err
	}
	defer sh.stop()
	var jg *server
	switch {
	case c.jaeger == "":
		r.JaegerSkipped = "no Jaeger binary given"
	case w.spans > c.jmax:
		r.JaegerSkipped = fmt.Sprintf("%d spans are more than -jaeger-max-spans %d: Jaeger's memory store holds every span in RAM", w.spans, c.jmax)
	default:
		if jg, err = setUpJaeger(c, r, w, proto); err != nil {
			return r, err
		}
		defer jg.stop()
	}
	if r.JaegerSkipped != "" {
		fmt.Fprintln(os.Stderr, "jaeger skipped:", r.JaegerSkipped)
	}
	os.Remove(ndjson)
	os.Remove(proto)
	measure(r, plan(c.seed, w, sp, c.ids, c.searches), c.warmup, spans, sh, jg)
	cur, _ := rss(sh.cmd.Process.Pid)
	r.Load[0].RSS = cur
	return r, nil
}

// setUpShredduck ingests the NDJSON and starts serve on the database.
func setUpShredduck(c *config, r *Result, ndjson string) (*server, error) {
	db := filepath.Join(c.dir, "jaeger.duckdb")
	p, o, err := loadShredduck(c.shredduck, db, ndjson)
	if err != nil {
		return nil, fmt.Errorf("shredduck ingest: %w", err)
	}
	if o.Records != r.Records || o.Errors != 0 {
		return nil, fmt.Errorf("shredduck ingest: %d records, %d errors, want %d spans", o.Records, o.Errors, r.Records)
	}
	fi, _ := os.Stat(db)
	l := Load{Target: targetShredduck, How: "shredduck ingest (NDJSON of OTLP/JSON, one transaction)", Seconds: p.Seconds,
		SpansPerSec: float64(r.Records) / p.Seconds, PeakRSS: o.PeakRSS}
	if fi != nil {
		l.DBBytes = fi.Size()
	}
	r.Load = append(r.Load, l)
	fmt.Fprintf(os.Stderr, "shredduck ingest: %.1fs, %.0f spans/s, peak RSS %d MiB\n", p.Seconds, l.SpansPerSec, o.PeakRSS>>20)
	return startShredduck(c.shredduck, db)
}

// setUpJaeger starts Jaeger and loads the data into it.
func setUpJaeger(c *config, r *Result, w *written, proto string) (*server, error) {
	jg, otlp, err := startJaeger(c.jaeger, c.dir, len(w.traces)+1000)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	if err := loadJaeger(otlp, proto); err != nil {
		jg.stop()
		return nil, fmt.Errorf("loading jaeger: %w", err)
	}
	secs := time.Since(t0).Seconds()
	cur, peak := rss(jg.cmd.Process.Pid)
	r.Load = append(r.Load, Load{Target: targetJaeger, How: "OTLP/HTTP protobuf, 4 workers, memory storage", Seconds: secs,
		SpansPerSec: float64(w.spans) / secs, RSS: cur, PeakRSS: peak})
	fmt.Fprintf(os.Stderr, "jaeger load: %.1fs, %.0f spans/s, RSS %d MiB (peak %d MiB)\n", secs, float64(w.spans)/secs, cur>>20, peak>>20)
	return jg, nil
}

// measure runs the plan's requests of each kind on both targets in turn and
// summarizes them; a failed check marks the result failed.
func measure(r *Result, p map[string][]query, warmup int, spans map[string]int, sh, jg *server) {
	client := &http.Client{Timeout: 2 * time.Minute}
	targets := []*server{sh}
	names := []string{targetShredduck}
	if jg != nil {
		targets, names = append(targets, jg), append(names, targetJaeger)
	}
	for _, k := range append([]string{kindByID}, searchKinds...) {
		qs := p[k]
		ms := make([][]float64, len(targets))
		failed := make([]bool, len(targets))
		cpu := make([]time.Duration, len(targets))
		for i := -warmup; i < len(qs); i++ {
			q := qs[(i+len(qs))%len(qs)]
			if i == 0 {
				for t := range targets {
					cpu[t] = procCPU(targets[t].cmd.Process.Pid)
				}
			}
			for n := range targets {
				t := (n + max(i, 0)) % len(targets) // who goes first alternates
				d, body, err := get(client, targets[t].url+q.path)
				if err == nil {
					err = q.check(names[t], body, spans)
				}
				if err != nil {
					if !failed[t] {
						r.Failures = append(r.Failures, err.Error())
					}
					failed[t], r.Failed = true, true
					continue
				}
				if i >= 0 {
					ms[t] = append(ms[t], d.Seconds()*1000)
				}
			}
		}
		for t := range targets {
			cpu[t] = procCPU(targets[t].cmd.Process.Pid) - cpu[t]
			s := summarize(k, names[t], ms[t], failed[t])
			if len(qs) > 0 {
				s.CPUms = cpu[t].Seconds() * 1000 / float64(len(qs))
			}
			s.Example = qs[0].path
			r.Summary = append(r.Summary, s)
			fmt.Fprintf(os.Stderr, "%-50s %-9s p50 %8.2f ms  p99 %8.2f ms  CPU %7.2f ms/request  (%d requests)%s\n", k, names[t], s.P50ms, s.P99ms, s.CPUms, s.Requests, map[bool]string{true: "  FAILED"}[s.Failed])
		}
	}
}

func summarize(kind, target string, ms []float64, failed bool) Summary {
	s := Summary{Query: kind, Target: target, Requests: len(ms), Failed: failed, Ms: ms}
	if len(ms) == 0 {
		return s
	}
	sorted := slices.Sorted(slices.Values(ms))
	s.P50ms = benchutil.Summarize(ms).Median
	s.P99ms = sorted[min(len(sorted)-1, int(float64(len(sorted))*0.99))]
	s.MaxMs = sorted[len(sorted)-1]
	return s
}

// get fetches url and returns the time until its whole body was read.
func get(c *http.Client, url string) (time.Duration, []byte, error) {
	ctx := context.Background()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	d := time.Since(start)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s: %.200s", url, resp.Status, body)
	}
	return d, body, err
}
