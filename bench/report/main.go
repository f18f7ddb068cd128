// Command report turns the benchmark results in bench/results/*.json into
// bench/RESULTS.md and charts beside the results (bench/results/*.svg, or
// PNG with -format png).
//
//	go run ./bench/report [-results bench/results] [-out bench/RESULTS.md] [-charts DIR] [-format svg|png]
//
// It reads the files of bench/run_variant.sh (variant-N.json),
// bench/run_otel.sh (otel-ingest-N.json), bench/run_ingest.sh
// (ingest-traces-N.json, written by bench/ingestbench),
// bench/run_gharchive.sh (gharchive-N.json, written by bench/ghbench) and
// bench/run_sparse.sh (sparse-N.json, written by bench/sparsebench),
// bench/run_kafka.sh (kafka-N.json, written by bench/kafkabench),
// bench/run_jaeger.sh (jaeger-N.json, written by bench/jaegerbench) and
// bench/run_ab.sh (ab/LABEL/rK/*.json: the same scripts on two builds). The
// headline is taken from the variant run with the most spans; every file
// gets its own section with its machine, versions, data and command, except
// the smaller GH Archive runs, which get one line each.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot/vg"

	"github.com/shredduck/shredduck/bench/internal/benchutil"
)

// ingestBench is the format bench/ingestbench writes.
type ingestBench struct {
	Command   string            `json:"command"`
	Started   time.Time         `json:"started"`
	Machine   map[string]string `json:"machine"`
	InputSize int64             `json:"input_bytes"`
	Records   int64             `json:"records"`
	Samples   []struct {
		Path     string  `json:"path"`
		Run      int     `json:"run"`
		Seconds  float64 `json:"seconds"`
		PeakRSS  int64   `json:"peak_rss_bytes"`
		Rows     int64   `json:"rows"`
		DBBytes  int64   `json:"db_bytes"`
		Verified bool    `json:"verified"`
		Error    string  `json:"error"`
	} `json:"samples"`
	Median map[string]float64 `json:"median_seconds"`
	Ratio  float64            `json:"speedup_vs_sql_typed"`
	Failed bool               `json:"failed"`
}

// streaming is the part of bench/run_streaming.sh's results (kind
// "streaming", streaming-PROTO-wW-N.json) that the report shows; that
// format belongs to bench/streaming and is read leniently.
type streaming struct {
	benchutil.Header
	Params   map[string]any    `json:"params"`
	Versions map[string]string `json:"versions"`
	Ratio    float64           `json:"ratio_shredduck_over_ceiling"`
	// RatioSustained counts the time until every span was visible.
	RatioSustained float64 `json:"ratio_sustained"`
	Summary        []struct {
		Target    string  `json:"target"`
		Runs      int     `json:"runs"`
		Median    float64 `json:"spans_per_sec_median"`
		Min       float64 `json:"spans_per_sec_min"`
		Max       float64 `json:"spans_per_sec_max"`
		P50ms     float64 `json:"p50_ms_median"`
		P99ms     float64 `json:"p99_ms_median"`
		PeakRSS   int64   `json:"server_peak_rss_bytes_max"`
		Visible   float64 `json:"visible_after_seconds_median"`
		Sustained float64 `json:"sustained_spans_per_sec_median"`
	} `json:"summary"`
}

// sender and ack are the load generator and the server's --ack of a
// result (older results: the SDK senders, --ack commit).
func (s *streaming) sender() string { return paramOr(s.Params, "sender", "sdk") }
func (s *streaming) ack() string    { return paramOr(s.Params, "ack", "commit") }

// defaults reports whether the server ran at its default flags (a
// result that records its server flags as none).
func (s *streaming) defaults() bool {
	f, ok := s.Params["server_flags"].(string)
	return ok && f == ""
}

// flags names the server's flags of a result: "default flags (--ack log)"
// or "--ack MODE".
func (s *streaming) flags() string {
	if s.defaults() {
		return "default flags (--ack " + s.ack() + ")"
	}
	return "--ack " + s.ack()
}

func paramOr(p map[string]any, k, def string) string {
	if v, ok := p[k].(string); ok && v != "" {
		return v
	}
	return def
}

// fillHeader copies what the streaming format keeps in params and versions
// into the common header fields.
func (s *streaming) fillHeader() {
	num := func(k string) int64 {
		f, _ := s.Params[k].(float64)
		return int64(f)
	}
	if s.Records == 0 {
		s.Records = num("records")
	}
	if s.Runs == 0 {
		s.Runs = int(num("runs"))
	}
	if s.WarmUp == 0 {
		s.WarmUp = int(num("warmup"))
	}
	if s.Machine != nil && s.Machine["duckdb"] == "" && s.Versions["duckdb"] != "" {
		s.Machine["duckdb"] = s.Versions["duckdb"]
	}
}

type files struct {
	variant   []*named[benchutil.Variant]
	otel      []*named[benchutil.OtelIngest]
	ingest    []*named[ingestBench]
	streaming []*named[streaming]
	gharchive []*named[gharchive]
	sparse    []*named[sparseBench]
	kafka     []*named[kafkaBench]
	fair      []*named[fairBench]
	jaeger    []*named[jaegerBench]
	ab        []*abSide // bench/run_ab.sh's, under ab/
}

func (fs *files) n() int {
	return len(fs.variant) + len(fs.otel) + len(fs.ingest) + len(fs.streaming) + len(fs.gharchive) + len(fs.sparse) + len(fs.kafka) + len(fs.fair) + len(fs.jaeger)
}

type named[T any] struct {
	name string // file name, without directory
	r    T
}

func main() {
	dir := flag.String("results", "bench/results", "directory of the result JSON files; the charts are written there too")
	out := flag.String("out", "bench/RESULTS.md", "the Markdown report to write")
	charts := flag.String("charts", "", "directory for the charts (default: the results directory)")
	format := flag.String("format", "svg", "chart format: svg or png")
	flag.Parse()
	if *format != "svg" && *format != "png" {
		fmt.Fprintln(os.Stderr, "report: -format must be svg or png")
		os.Exit(2)
	}
	chartExt = "." + *format
	if *charts == "" {
		charts = dir
	}
	fs, err := load(*dir)
	if err == nil {
		fs.ab, err = loadAB(*dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
	if fs.n() == 0 && len(fs.ab) == 0 {
		fmt.Fprintf(os.Stderr, "report: no results in %s; run bench/run_variant.sh, bench/run_otel.sh, bench/run_ingest.sh, bench/run_gharchive.sh, bench/run_sparse.sh or bench/run_kafka.sh first\n", *dir)
		os.Exit(1)
	}
	rel, err := filepath.Rel(filepath.Dir(*out), *charts)
	if err != nil {
		rel = *charts
	}
	var md strings.Builder
	if err := write(&md, fs, *charts, filepath.ToSlash(rel)); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, []byte(md.String()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
	fmt.Printf("wrote %s from %d result files\n", *out, fs.n())
}

func load(dir string) (*files, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	fs := &files{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var k struct {
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal(data, &k); err != nil {
			return nil, fmt.Errorf("%s: %v", p, err)
		}
		base := filepath.Base(p)
		switch {
		case k.Kind == benchutil.KindVariant:
			n := &named[benchutil.Variant]{name: base}
			err = json.Unmarshal(data, &n.r)
			fs.variant = append(fs.variant, n)
		case k.Kind == benchutil.KindOtelIngest:
			n := &named[benchutil.OtelIngest]{name: base}
			err = json.Unmarshal(data, &n.r)
			fs.otel = append(fs.otel, n)
		case k.Kind == "streaming":
			n := &named[streaming]{name: base}
			err = json.Unmarshal(data, &n.r)
			n.r.fillHeader()
			fs.streaming = append(fs.streaming, n)
		case k.Kind == benchutil.KindKafka:
			n := &named[kafkaBench]{name: base}
			err = json.Unmarshal(data, &n.r)
			fs.kafka = append(fs.kafka, n)
		case k.Kind == kindFair:
			n := &named[fairBench]{name: base}
			err = json.Unmarshal(data, &n.r)
			fs.fair = append(fs.fair, n)
		case k.Kind == kindJaeger:
			n := &named[jaegerBench]{name: base}
			err = json.Unmarshal(data, &n.r)
			fs.jaeger = append(fs.jaeger, n)
		case k.Kind == kindGharchive:
			n := &named[gharchive]{name: base}
			err = json.Unmarshal(data, &n.r)
			fs.gharchive = append(fs.gharchive, n)
		case k.Kind == "" && strings.HasPrefix(base, "ingest-traces-"):
			n := &named[ingestBench]{name: base}
			err = json.Unmarshal(data, &n.r)
			fs.ingest = append(fs.ingest, n)
		case k.Kind == "" && strings.HasPrefix(base, sparsePrefix):
			n := &named[sparseBench]{name: base}
			err = json.Unmarshal(data, &n.r)
			fs.sparse = append(fs.sparse, n)
		default:
			fmt.Fprintf(os.Stderr, "report: skipping %s (unknown kind %q)\n", p, k.Kind)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %v", p, err)
		}
	}
	// Most records first; the first variant file is the headline.
	slices.SortFunc(fs.variant, func(a, b *named[benchutil.Variant]) int { return int(b.r.Records - a.r.Records) })
	slices.SortFunc(fs.otel, func(a, b *named[benchutil.OtelIngest]) int { return int(b.r.Records - a.r.Records) })
	slices.SortFunc(fs.ingest, func(a, b *named[ingestBench]) int { return int(b.r.Records - a.r.Records) })
	slices.SortFunc(fs.streaming, func(a, b *named[streaming]) int { return strings.Compare(a.name, b.name) })
	slices.SortFunc(fs.gharchive, func(a, b *named[gharchive]) int { return int(b.r.Records - a.r.Records) })
	slices.SortFunc(fs.sparse, func(a, b *named[sparseBench]) int { return int(b.r.Records - a.r.Records) })
	slices.SortFunc(fs.kafka, func(a, b *named[kafkaBench]) int { return int(b.r.Records - a.r.Records) })
	slices.SortFunc(fs.jaeger, func(a, b *named[jaegerBench]) int { return int(a.r.Records - b.r.Records) })
	return fs, nil
}

// RawDuck's published figures: DuckDB 1.5.5, Apple M3 Ultra, 32 cores,
// 1M spans.
var rawDuck = struct {
	ingest  map[string]float64    // seconds
	queries map[string][3]float64 // ms: errors, p99, status
	storage map[string]float64    // MB
}{
	ingest: map[string]float64{"shredded": 0.99, "json_otlp": 4.72, "variant_otlp": 11.96},
	queries: map[string][3]float64{
		"shredded": {1.5, 3.2, 2.5}, "json_flat": {39, 99, 35}, "json_otlp/key": {344, 418, 304},
		"variant_flat": {436, 1225, 416}, "variant_otlp/key": {1493, 3658, 1404},
	},
	storage: map[string]float64{"shredded": 39.5, "variant_flat": 35.8, "json_flat": 143, "json_otlp": 241},
}

// chartExt is the file name extension of the charts, which selects the format.
var chartExt = ".svg"

var queryNames = []string{"errors", "p99", "status"}

var queryTitles = map[string]string{
	"errors": "errors by service (count where status code >= 500)",
	"p99":    "p99 latency by route (quantile_cont(duration, 0.99))",
	"status": "status-code distribution (count by status code)",
}

// v is a variant result with lookups.
type v struct {
	*benchutil.Variant
	file string
}

func (x v) ingest(enc string) (benchutil.IngestSummary, bool) {
	for _, s := range x.IngestSummary {
		if s.Encoding == enc {
			return s, !s.Failed && s.Seconds.N > 0
		}
	}
	return benchutil.IngestSummary{}, false
}

func (x v) query(q, path string) (benchutil.QuerySummary, bool) {
	for _, s := range x.QuerySummary {
		if s.Query == q && s.Path == path {
			return s, !s.Failed && s.Seconds.N > 0
		}
	}
	return benchutil.QuerySummary{}, false
}

func (x v) storage(enc string) (benchutil.Storage, bool) {
	for _, s := range x.Storage {
		if s.Encoding == enc {
			return s, s.Error == "" && s.Bytes > 0
		}
	}
	return benchutil.Storage{}, false
}

func (x v) queryPaths() []string {
	return x.distinctQueryField(func(s benchutil.QuerySummary) string { return s.Path })
}

// distinctQueryField lists the distinct values of a field of the query
// summaries, in the order they first appear.
func (x v) distinctQueryField(field func(benchutil.QuerySummary) string) []string {
	var out []string
	for _, s := range x.QuerySummary {
		if f := field(s); !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// ratio returns a/b of two medians, NaN if either is missing.
func ratioOf(a, b float64, okA, okB bool) float64 {
	if !okA || !okB || b == 0 {
		return math.NaN()
	}
	return a / b
}

// A target of the issue and how the headline run fares.
type target struct {
	what     string
	want     string
	got      float64 // NaN: not measured (a path failed)
	min      float64 // met if got >= min (speedups) ...
	maxRatio float64 // ... or got <= maxRatio (storage), when > 0
	ok       bool
	miss     string
}

func targets(x v, st []*named[streaming]) []target {
	sh, shOK := x.ingest("shredded")
	var ts []target
	for _, c := range []struct {
		enc string
		min float64
	}{{"sql_typed", 1}, {"json_otlp", 1.4}, {"variant_otlp", 5}} {
		o, ok := x.ingest(c.enc)
		ts = append(ts, target{what: "ingest speedup over " + c.enc, want: fmt.Sprintf("≥ %s×", trim(c.min)),
			got: ratioOf(o.Seconds.Median, sh.Seconds.Median, ok, shOK), min: c.min})
	}
	for _, q := range queryNames {
		a, okA := x.query(q, "json_flat")
		b, okB := x.query(q, "shredded")
		ts = append(ts, target{what: q + " query speedup over json_flat", want: "≥ 30×",
			got: ratioOf(a.Seconds.Median, b.Seconds.Median, okA, okB), min: 30})
	}
	s, okS := x.storage("shredded")
	vf, okV := x.storage("variant_flat")
	ts = append(ts, target{what: "storage, shredded / variant_flat", want: "≤ 1.00",
		got: ratioOf(float64(s.Bytes), float64(vf.Bytes), okS, okV), maxRatio: 1})
	for _, r := range headlineStreaming(st) {
		got := r.r.Ratio
		if r.r.RatioSustained > 0 {
			got = r.r.RatioSustained // with --ack log: until every span is visible
		}
		want := 0.6
		if r.r.defaults() && r.r.sender() == "replay" {
			want = 0.8 // issue #29: the default path, against the light sender
		}
		ts = append(ts, target{what: fmt.Sprintf("streaming spans/s, shredduck / decode-only ceiling (%s: %v workers, %s, %s sender, %s)",
			r.name, r.r.Params["workers"], r.r.Params["protocol"], r.r.sender(), r.r.flags()), want: "≥ " + trim(want) + "×", got: got, min: want})
	}
	for i := range ts {
		t := &ts[i]
		switch {
		case math.IsNaN(t.got):
			t.miss = "not measured: a path FAILED"
		case t.maxRatio > 0:
			t.ok = t.got <= t.maxRatio
			if !t.ok {
				t.miss = fmt.Sprintf("shredded is %.0f%% larger than variant_flat", (t.got-1)*100)
			}
		default:
			t.ok = t.got >= t.min
			if !t.ok {
				t.miss = fmt.Sprintf("%s× instead of ≥ %s× (%.0f%% short)", fmtRatio(t.got), trim(t.min), (1-t.got/t.min)*100)
			}
		}
	}
	return ts
}

// headlineStreaming picks the streaming results the target is
// about: 16 workers over OTLP/HTTP, the most records, for each sender and
// --ack; the light sender's first (the SDK senders' own CPU halves the
// ceiling they are measured against).
func headlineStreaming(st []*named[streaming]) []*named[streaming] {
	best := map[[2]string]*named[streaming]{}
	for _, r := range st {
		w, _ := r.r.Params["workers"].(float64)
		if w != 16 || r.r.Params["protocol"] != "http" || r.r.Ratio <= 0 {
			continue
		}
		k := [2]string{r.r.sender(), r.r.flags()}
		if b := best[k]; b == nil || r.r.Records > b.r.Records {
			best[k] = r
		}
	}
	var out []*named[streaming]
	for _, r := range best {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *named[streaming]) int {
		if a.r.sender() != b.r.sender() {
			return strings.Compare(a.r.sender(), b.r.sender()) // replay before sdk
		}
		return strings.Compare(a.r.flags(), b.r.flags())
	})
	return out
}

func write(md *strings.Builder, fs *files, dir, rel string) error {
	p := func(format string, a ...any) { fmt.Fprintf(md, format, a...) }
	p("# Benchmark results\n\n")
	p("Generated by `go run ./bench/report` from `bench/results/*.json`; do not edit by hand.\n")
	p("The scripts that produce the results: `bench/run_variant.sh`, `bench/run_otel.sh`, `bench/run_ingest.sh`,\n")
	p("`bench/run_gharchive.sh`, `bench/run_sparse.sh`, `bench/run_kafka.sh`, `bench/run_jaeger.sh` (each with `--quick` for a small run, `--records N --runs R`). Protocol: the same data for every path, in the\n")
	p("same run, interleaved (A, B, A, B, ...), one warm-up, then R timed runs; medians with min–max; every sample is in\n")
	p("the JSON. Every query answer is checked against the shredded table's; a failed or wrong run is shown as FAILED,\n")
	p("never timed and never replaced.\n\n")

	if len(fs.variant) > 0 {
		x := v{&fs.variant[0].r, fs.variant[0].name}
		p("## Headline (%s)\n\n", x.file)
		p("%s\n\n", runLabel(x.Header))
		writeHeadline(md, x, fs.streaming)
		p("### Targets\n\n")
		p("| target | wanted | measured | met |\n|---|---|---|---|\n")
		for _, t := range targets(x, fs.streaming) {
			got := "FAILED"
			if !math.IsNaN(t.got) {
				got = fmtRatio(t.got) + "×"
				if t.maxRatio > 0 {
					got = fmt.Sprintf("%.2f", t.got)
				}
			}
			met := "yes"
			if !t.ok {
				met = "**no**: " + t.miss
			}
			p("| %s | %s | %s | %s |\n", t.what, t.want, got, met)
		}
		p("\n")
		writeRawDuck(md, x, fs.streaming)
	}
	for _, f := range fs.variant {
		x := v{&f.r, f.name}
		if err := writeVariant(md, x, dir, rel); err != nil {
			return err
		}
	}
	for _, f := range fs.otel {
		if err := writeOtel(md, f, dir, rel); err != nil {
			return err
		}
	}
	for _, f := range fs.ingest {
		writeIngestBench(md, f)
	}
	if len(fs.streaming) > 0 {
		writeStreaming(md, fs.streaming)
	}
	if len(fs.gharchive) > 0 {
		if err := writeGharchive(md, fs.gharchive, dir, rel); err != nil {
			return err
		}
	}
	for _, f := range fs.sparse {
		if err := writeSparse(md, f, dir, rel); err != nil {
			return err
		}
	}
	if len(fs.kafka) > 0 {
		writeKafka(md, fs.kafka)
	}
	if len(fs.fair) > 0 {
		writeFair(md, fs.fair)
	}
	if len(fs.jaeger) > 0 {
		writeJaeger(md, fs.jaeger)
	}
	if len(fs.ab) > 0 {
		writeAB(md, fs.ab)
	}
	p("%s", notes)
	p("## Environment and commands\n\n")
	for _, f := range fs.variant {
		writeEnv(md, f.name, f.r.Header)
	}
	for _, f := range fs.otel {
		writeEnv(md, f.name, f.r.Header)
	}
	for _, f := range fs.streaming {
		writeEnv(md, f.name, f.r.Header)
	}
	for _, f := range fs.gharchive {
		writeEnv(md, f.name, f.r.Header)
	}
	for _, f := range fs.sparse {
		writeEnv(md, f.name, f.r.header())
	}
	for _, f := range fs.kafka {
		writeEnv(md, f.name, f.r.Header)
	}
	for _, f := range fs.jaeger {
		writeEnv(md, f.name, f.r.Header)
	}
	for _, f := range fs.ingest {
		r := f.r
		writeEnv(md, f.name, benchutil.Header{Command: r.Command, Started: r.Started, Machine: r.Machine, Records: r.Records,
			Data: []benchutil.DataFile{{Signal: "traces", Records: r.Records, Bytes: r.InputSize, GenCommand: "see bench/run_ingest.sh (seed 1 unless --seed)"}}})
	}
	return nil
}

func runLabel(h benchutil.Header) string {
	m := h.Machine
	s := fmt.Sprintf("%s records, %d warm-up + %d timed run(s), %s", count(h.Records), h.WarmUp, h.Runs, machineLabel(m))
	if h.Records < 1_000_000 {
		s = "**Quick run: noisy figures, " + count(h.Records) + " records.** " + s
	}
	if m["loadavg"] != "" {
		s += fmt.Sprintf("; load average at the start %s", m["loadavg"])
	}
	return s
}

// machineLabel is the machine part of a run's label: CPU, cores, memory,
// DuckDB and Go.
func machineLabel(m map[string]string) string {
	return fmt.Sprintf("%s, %s CPUs, %s, DuckDB %s, %s", m["cpu"], m["cpus"], memory(m["memory"]), m["duckdb"], m["go"])
}

func writeHeadline(md *strings.Builder, x v, st []*named[streaming]) {
	p := func(format string, a ...any) { fmt.Fprintf(md, format, a...) }
	sh, shOK := x.ingest("shredded")
	if shOK {
		p("- **Ingest**: shredduck loads %s spans in %s (%s spans/s)", count(x.Records), fmtSecs(sh.Seconds.Median), count(int64(sh.RecordsPerSec)))
		for _, enc := range []string{"sql_typed", "json_otlp", "variant_otlp"} {
			if o, ok := x.ingest(enc); ok {
				p("; %s× as fast as %s", fmtRatio(o.Seconds.Median/sh.Seconds.Median), enc)
			} else {
				p("; %s FAILED", enc)
			}
		}
		p(".\n")
	} else {
		p("- **Ingest**: shredded FAILED.\n")
	}
	p("- **Queries**: on the shredded table")
	for i, q := range queryNames {
		a, okA := x.query(q, "json_flat")
		b, okB := x.query(q, "shredded")
		sep := ","
		if i == 0 {
			sep = ""
		}
		if okA && okB {
			p("%s %s %s (%s× faster than json_flat)", sep, q, fmtMs(b.Seconds.Median), fmtRatio(a.Seconds.Median/b.Seconds.Median))
		} else {
			p("%s %s FAILED", sep, q)
		}
	}
	p(".\n")
	s, okS := x.storage("shredded")
	vf, okV := x.storage("variant_flat")
	if okS && okV {
		p("- **Storage**: shredded %s, variant_flat %s (ratio %.2f).\n", fmtMB(s.Bytes), fmtMB(vf.Bytes), float64(s.Bytes)/float64(vf.Bytes))
	}
	var bad []string
	for _, t := range targets(x, st) {
		if !t.ok {
			bad = append(bad, fmt.Sprintf("%s: %s", t.what, t.miss))
		}
	}
	// Where another encoding beats shredded.
	for _, enc := range []string{"sql_typed", "json_otlp", "variant_otlp"} {
		if o, ok := x.ingest(enc); ok && shOK && o.Seconds.Median < sh.Seconds.Median {
			bad = append(bad, fmt.Sprintf("%s loads faster than shredded (%s vs %s)", enc, fmtSecs(o.Seconds.Median), fmtSecs(sh.Seconds.Median)))
		}
	}
	for _, st := range x.Storage {
		if st.Encoding != "shredded" && st.Error == "" && okS && st.Bytes < s.Bytes {
			bad = append(bad, fmt.Sprintf("%s is smaller than shredded (%s vs %s)", st.Encoding, fmtMB(st.Bytes), fmtMB(s.Bytes)))
		}
	}
	for _, q := range queryNames {
		b, okB := x.query(q, "shredded")
		for _, path := range x.queryPaths() {
			if path == "shredded" {
				continue
			}
			if o, ok := x.query(q, path); ok && okB && o.Seconds.Median < b.Seconds.Median {
				bad = append(bad, fmt.Sprintf("%s query is faster on %s than on shredded (%s vs %s)", q, path, fmtMs(o.Seconds.Median), fmtMs(b.Seconds.Median)))
			}
		}
	}
	for _, f := range x.Failures {
		bad = append(bad, "FAILED: "+firstLine(f))
	}
	if len(bad) == 0 {
		p("- **Unfavourable cases**: none; every target is met and shredded is best everywhere.\n\n")
		return
	}
	p("- **Unfavourable cases**:\n")
	for _, b := range bad {
		p("  - %s\n", b)
	}
	p("\n")
}

func writeRawDuck(md *strings.Builder, x v, st []*named[streaming]) {
	p := func(format string, a ...any) { fmt.Fprintf(md, format, a...) }
	p("### Beside RawDuck's published figures\n\n")
	p("RawDuck's figures: DuckDB 1.5.5, Apple M3 Ultra, 32 cores, 1M spans; streaming 250k spans/s with 16 workers.\n")
	p("Absolute times do not compare across machines, so both are also given as the\n")
	p("factor by which each path is slower (or larger) than shredded on the same machine. Ours: %s.\n\n", runLabel(x.Header))
	p("| measure | path | RawDuck | RawDuck × shredded | ours | ours × shredded |\n|---|---|---|---|---|---|\n")
	sh, shOK := x.ingest("shredded")
	for _, enc := range []string{"shredded", "json_otlp", "variant_otlp"} {
		o, ok := x.ingest(enc)
		p("| ingest | %s | %s | %s | %s | %s |\n", enc, fmtSecs(rawDuck.ingest[enc]), fmtRatio(rawDuck.ingest[enc]/rawDuck.ingest["shredded"])+"×",
			orFailed(ok, fmtSecs(o.Seconds.Median)), orFailed(ok && shOK, fmtRatio(o.Seconds.Median/sh.Seconds.Median)+"×"))
	}
	for i, q := range queryNames {
		b, okB := x.query(q, "shredded")
		for _, path := range []string{"shredded", "json_flat", "json_otlp/key", "variant_flat", "variant_otlp/key"} {
			o, ok := x.query(q, path)
			rd := rawDuck.queries[path][i]
			p("| %s query | %s | %s | %s | %s | %s |\n", q, path, fmtMs(rd/1e3), fmtRatio(rd/rawDuck.queries["shredded"][i])+"×",
				orFailed(ok, fmtMs(o.Seconds.Median)), orFailed(ok && okB, fmtRatio(o.Seconds.Median/b.Seconds.Median)+"×"))
		}
	}
	s, okS := x.storage("shredded")
	for _, enc := range []string{"shredded", "variant_flat", "json_flat", "json_otlp"} {
		o, ok := x.storage(enc)
		p("| storage | %s | %.1f MB | %s | %s | %s |\n", enc, rawDuck.storage[enc], fmtRatio(rawDuck.storage[enc]/rawDuck.storage["shredded"])+"×",
			orFailed(ok, fmtMB(o.Bytes)), orFailed(ok && okS, fmtRatio(float64(o.Bytes)/float64(s.Bytes))+"×"))
	}
	p("| streaming | shredded | 250k spans/s (16 workers) | – |")
	if len(st) == 0 {
		p(" not measured here | – |\n")
	} else {
		var parts []string
		for _, f := range st {
			for _, sm := range f.r.Summary {
				if sm.Target == "shredduck" {
					parts = append(parts, fmt.Sprintf("%s spans/s (%v, %v workers, %s records)", count(int64(sm.Median)), f.r.Params["protocol"], f.r.Params["workers"], count(f.r.Records)))
				}
			}
		}
		p(" %s (bench/run_streaming.sh, below) | – |\n", strings.Join(parts, "; "))
	}
	p("\n")
}

// writeVariant writes the section of one variant-N.json: the encodings,
// then its load, storage and query tables, then its charts.
func writeVariant(md *strings.Builder, x v, dir, rel string) error {
	p := func(format string, a ...any) { fmt.Fprintf(md, format, a...) }
	p("## Encodings: %s\n\n", x.file)
	p("%s\n\n", runLabel(x.Header))
	p("Each encoding in its own database file, storage version %s. Ingest paths load the NDJSON file (%s);\n", x.StorageVersion, fmtMB(dataBytes(x.Header)))
	p("json_flat and variant_flat are encoded from the shredded table (their time is an encode time, not an ingest time).\n\n")
	p("| encoding | how |\n|---|---|\n")
	for _, e := range x.Encodings {
		p("| %s | %s |\n", e.Name, e.Description)
	}
	writeVariantLoad(md, x)
	writeVariantStorage(md, x)
	writeVariantQueries(md, x)
	return writeVariantCharts(md, x, dir, rel)
}

// writeVariantLoad writes the load table: each encoding's times and the
// shredded load's speedup over those that read the same NDJSON file.
func writeVariantLoad(md *strings.Builder, x v) {
	p := func(format string, a ...any) { fmt.Fprintf(md, format, a...) }
	p("\n### Load\n\n")
	p("| encoding | source | median | min–max | records/s | MB/s | peak RSS | shredded speedup over it |\n|---|---|---|---|---|---|---|---|\n")
	sh, shOK := x.ingest("shredded")
	for _, s := range x.IngestSummary {
		if s.Failed || s.Seconds.N == 0 {
			p("| %s | %s | FAILED | | | | | |\n", s.Encoding, s.Source)
			continue
		}
		mbs := "–"
		if s.MBPerSec > 0 {
			mbs = fmt.Sprintf("%.1f", s.MBPerSec)
		}
		sp := "–"
		if s.Source == "ndjson" && shOK {
			sp = fmtRatio(s.Seconds.Median/sh.Seconds.Median) + "×"
		}
		p("| %s | %s | %s | %s–%s | %s | %s | %d MiB | %s |\n", s.Encoding, s.Source, fmtSecs(s.Seconds.Median),
			trimSecs(s.Seconds.Min), trimSecs(s.Seconds.Max), count(int64(s.RecordsPerSec)), mbs, s.PeakRSS>>20, sp)
	}
}

// writeVariantStorage writes the storage table, each encoding beside
// shredded and variant_flat.
func writeVariantStorage(md *strings.Builder, x v) {
	p := func(format string, a ...any) { fmt.Fprintf(md, format, a...) }
	p("\n### Storage\n\nused_blocks × block_size from pragma_database_size() after CHECKPOINT.\n\n")
	p("| encoding | storage | × shredded | × variant_flat | file size |\n|---|---|---|---|---|\n")
	s, okS := x.storage("shredded")
	vf, okV := x.storage("variant_flat")
	for _, st := range x.Storage {
		if st.Error != "" {
			p("| %s | FAILED: %s | | | |\n", st.Encoding, firstLine(st.Error))
			continue
		}
		p("| %s | %s | %s | %s | %s |\n", st.Encoding, fmtMB(st.Bytes), orFailed(okS, fmtRatio(float64(st.Bytes)/float64(s.Bytes))+"×"),
			orFailed(okV, fmt.Sprintf("%.2f", float64(st.Bytes)/float64(vf.Bytes))), fmtMB(st.FileBytes))
	}
}

// writeVariantQueries writes the queries, a table of each path's times
// with shredded's speedup over it, one of the speedups over json_flat, and
// the failures and SQL.
func writeVariantQueries(md *strings.Builder, x v) {
	p := func(format string, a ...any) { fmt.Fprintf(md, format, a...) }
	p("\n### Queries\n\n")
	for _, q := range queryNames {
		p("- **%s**: %s\n", q, queryTitles[q])
	}
	p("\nMedian (min–max) in ms; in brackets the speedup of shredded over that path. `position` reads an attribute\n")
	p("at its index in the OTLP key/value list, `key` finds it by key (list_filter); `column` and `key` on the flat\n")
	p("encodings read a column or a top-level key. VARIANT is read through a cast to a STRUCT of the members needed.\n\n")
	p("| path | errors | p99 | status |\n|---|---|---|---|\n")
	for _, path := range x.queryPaths() {
		p("| %s |", path)
		for _, q := range queryNames {
			o, ok := x.query(q, path)
			b, okB := x.query(q, "shredded")
			switch {
			case !ok:
				p(" FAILED |")
			case path == "shredded" || !okB:
				p(" %s |", fmtMsSpread(o.Seconds))
			default:
				p(" %s [%s×] |", fmtMsSpread(o.Seconds), fmtRatio(o.Seconds.Median/b.Seconds.Median))
			}
		}
		p("\n")
	}
	p("\nSpeedup over json_flat (json_flat median / path median; above 1 is faster than json_flat):\n\n")
	p("| path | errors | p99 | status |\n|---|---|---|---|\n")
	for _, path := range x.queryPaths() {
		p("| %s |", path)
		for _, q := range queryNames {
			o, ok := x.query(q, path)
			jf, okJ := x.query(q, "json_flat")
			p(" %s |", orFailed(ok && okJ, fmtRatio(jf.Seconds.Median/o.Seconds.Median)+"×"))
		}
		p("\n")
	}
	writeQueryFailuresAndSQL(md, x.QuerySummary)
}

// writeVariantCharts saves the load, query, storage and RawDuck charts of
// x in dir, named after its file, and links them from md (rel is dir as
// RESULTS.md sees it).
func writeVariantCharts(md *strings.Builder, x v, dir, rel string) error {
	base := strings.TrimSuffix(x.file, ".json")
	var cats []string
	var med, lo, hi []float64
	for _, s := range x.IngestSummary {
		cats = append(cats, s.Encoding)
		if s.Failed || s.Seconds.N == 0 {
			med, lo, hi = append(med, math.NaN()), append(lo, math.NaN()), append(hi, math.NaN())
			continue
		}
		med, lo, hi = append(med, s.Seconds.Median), append(lo, s.Seconds.Min), append(hi, s.Seconds.Max)
	}
	ingestSVG := base + "-ingest" + chartExt
	err := chart{title: fmt.Sprintf("Load %s spans (json_flat, variant_flat: encode from shredded)", count(x.Records)), ylabel: "seconds (median, min–max)",
		categories: cats, series: []series{{name: "load seconds", vals: med, lo: lo, hi: hi}}}.save(filepath.Join(dir, ingestSVG), 7*vg.Inch, 4*vg.Inch)
	if err != nil {
		return err
	}
	var qs []series
	paths := x.queryPaths()
	for i, q := range queryNames {
		sr := series{name: q, colorIdx: i}
		for _, path := range paths {
			sr.addMillis(x.query(q, path))
		}
		qs = append(qs, sr)
	}
	querySVG := base + "-queries" + chartExt
	if err := (chart{title: fmt.Sprintf("Queries on %s spans (log scale; missing bar = FAILED)", count(x.Records)), ylabel: "ms (median, min–max)",
		categories: paths, series: qs, log: true}).save(filepath.Join(dir, querySVG), 8*vg.Inch, 4.5*vg.Inch); err != nil {
		return err
	}
	var scats []string
	var mb []float64
	for _, st := range x.Storage {
		scats = append(scats, st.Encoding)
		if st.Error != "" {
			mb = append(mb, math.NaN())
		} else {
			mb = append(mb, float64(st.Bytes)/1e6)
		}
	}
	storageSVG := base + "-storage" + chartExt
	if err := (chart{title: fmt.Sprintf("Storage of %s spans (storage version %s)", count(x.Records), x.StorageVersion), ylabel: "MB",
		categories: scats, series: []series{{name: "used blocks × block size", vals: mb, colorIdx: 2}}}).save(filepath.Join(dir, storageSVG), 7*vg.Inch, 4*vg.Inch); err != nil {
		return err
	}
	rawSVG := base + "-vs-rawduck" + chartExt
	if err := rawDuckChart(x, filepath.Join(dir, rawSVG)); err != nil {
		return err
	}
	for _, c := range []struct{ alt, file string }{{"load times", ingestSVG}, {"query times", querySVG}, {"storage", storageSVG}, {"factors beside RawDuck's", rawSVG}} {
		fmt.Fprintf(md, "![%s](%s/%s)\n\n", c.alt, rel, c.file)
	}
	return nil
}

// rawDuckChart draws, for each comparison RawDuck published, the factor by
// which the other path is slower or larger than shredded: ours and theirs.
func rawDuckChart(x v, path string) error {
	var cats []string
	ours := series{name: fmt.Sprintf("ours (%s spans)", count(x.Records)), colorIdx: 0}
	theirs := series{name: "RawDuck (1M spans, M3 Ultra)", colorIdx: 1, hatched: true}
	add := func(cat string, o, t float64) {
		cats = append(cats, cat)
		ours.vals = append(ours.vals, o)
		theirs.vals = append(theirs.vals, t)
	}
	sh, shOK := x.ingest("shredded")
	for _, enc := range []string{"json_otlp", "variant_otlp"} {
		o, ok := x.ingest(enc)
		add("ingest "+enc, ratioOf(o.Seconds.Median, sh.Seconds.Median, ok, shOK), rawDuck.ingest[enc]/rawDuck.ingest["shredded"])
	}
	for _, path := range []string{"json_flat", "json_otlp/key", "variant_flat", "variant_otlp/key"} {
		for i, q := range queryNames {
			o, ok := x.query(q, path)
			b, okB := x.query(q, "shredded")
			add(q+" "+path, ratioOf(o.Seconds.Median, b.Seconds.Median, ok, okB), rawDuck.queries[path][i]/rawDuck.queries["shredded"][i])
		}
	}
	s, okS := x.storage("shredded")
	for _, enc := range []string{"variant_flat", "json_flat", "json_otlp"} {
		o, ok := x.storage(enc)
		add("storage "+enc, ratioOf(float64(o.Bytes), float64(s.Bytes), ok, okS), rawDuck.storage[enc]/rawDuck.storage["shredded"])
	}
	return chart{title: "How much slower (or larger) than shredded: ours vs RawDuck's", ylabel: "× shredded (log scale)",
		categories: cats, series: []series{ours, theirs}, log: true, horizontalRef: 1, refLabel: "= shredded"}.save(path, 10*vg.Inch, 5*vg.Inch)
}

func writeOtel(md *strings.Builder, f *named[benchutil.OtelIngest], dir, rel string) error {
	p := func(format string, a ...any) { fmt.Fprintf(md, format, a...) }
	r := f.r
	p("## Bulk ingest per signal: %s\n\n", f.name)
	p("%s\n\n", runLabel(r.Header))
	p("`shredduck ingest` of generated traces, logs and metrics: cold into a new database; warm is the same data again into\n")
	p("the same database after `DELETE FROM` the table (no column added). Seconds are the wall clock of the shredduck\n")
	p("process (open, load, final checkpoint); MB/s is NDJSON input per second.\n\n")
	p("| signal | mode | input | median | min–max | records/s | MB/s | peak RSS |\n|---|---|---|---|---|---|---|---|\n")
	var cats []string
	cold := series{name: "cold", colorIdx: 0}
	warm := series{name: "warm", colorIdx: 1}
	for _, s := range r.Summary {
		if !slices.Contains(cats, s.Signal) {
			cats = append(cats, s.Signal)
		}
		sr := &cold
		if s.Mode == "warm" {
			sr = &warm
		}
		if s.Failed || s.Seconds.N == 0 {
			p("| %s | %s | %s | FAILED | | | | |\n", s.Signal, s.Mode, fmtMB(s.InputBytes))
			sr.vals, sr.lo, sr.hi = append(sr.vals, math.NaN()), append(sr.lo, math.NaN()), append(sr.hi, math.NaN())
			continue
		}
		p("| %s | %s | %s | %s | %s–%s | %s | %.1f | %d MiB |\n", s.Signal, s.Mode, fmtMB(s.InputBytes), fmtSecs(s.Seconds.Median),
			trimSecs(s.Seconds.Min), trimSecs(s.Seconds.Max), count(int64(s.RecordsPerSec)), s.MBPerSec, s.PeakRSS>>20)
		k := float64(s.Records) / 1e3
		sr.vals = append(sr.vals, s.RecordsPerSec/1e3)
		sr.lo, sr.hi = append(sr.lo, k/s.Seconds.Max), append(sr.hi, k/s.Seconds.Min)
	}
	if r.Failed {
		p("\nFAILED runs:\n\n")
		for _, fl := range r.Failures {
			p("- %s\n", firstLine(fl))
		}
	}
	svg := strings.TrimSuffix(f.name, ".json") + chartExt
	if err := (chart{title: fmt.Sprintf("shredduck ingest, %s records per signal", count(r.Records)), ylabel: "thousand records/s (median, min–max)",
		categories: cats, series: []series{cold, warm}}).save(filepath.Join(dir, svg), 6*vg.Inch, 4*vg.Inch); err != nil {
		return err
	}
	p("\n![ingest per signal](%s/%s)\n\n", rel, svg)
	return nil
}

func writeIngestBench(md *strings.Builder, f *named[ingestBench]) {
	p := func(format string, a ...any) { fmt.Fprintf(md, format, a...) }
	r := f.r
	p("## shredduck vs sql_typed: %s\n\n", f.name)
	p("%s\n\n", runLabel(benchutil.Header{Records: r.Records, Machine: r.Machine, WarmUp: 1, Runs: countRuns(r)}))
	p("bench/run_ingest.sh: the same traces file (%s) loaded by shredduck and by sql_typed (bench/sqltyped), each into a\n", fmtMB(r.InputSize))
	p("new database, interleaved; the rows sql_typed extracts are compared with shredduck's through a hash.\n\n")
	p("| path | median | min–max | records/s | peak RSS | verified runs |\n|---|---|---|---|---|---|\n")
	for _, path := range []string{"shredduck", "sql_typed"} {
		var secs []float64
		var rss int64
		verified, total := 0, 0
		for _, s := range r.Samples {
			if s.Path != path {
				continue
			}
			total++
			if s.Error == "" {
				secs = append(secs, s.Seconds)
				rss = max(rss, s.PeakRSS)
			}
			if s.Verified {
				verified++
			}
		}
		st := benchutil.Summarize(secs)
		if st.N == 0 || verified < total {
			p("| %s | FAILED | | | | %d/%d |\n", path, verified, total)
			continue
		}
		p("| %s | %s | %s–%s | %s | %d MiB | %d/%d |\n", path, fmtSecs(st.Median), trimSecs(st.Min), trimSecs(st.Max),
			count(int64(float64(r.Records)/st.Median)), rss>>20, verified, total)
	}
	if r.Ratio > 0 {
		p("\nshredduck speedup over sql_typed: %s× (target ≥ 1×)", fmtRatio(r.Ratio))
		if r.Ratio < 1 {
			p(" — **missed** by %.0f%%", (1-r.Ratio)*100)
		}
		p(".\n")
	}
	if r.Failed {
		p("\n**FAILED**: at least one run failed or did not verify.\n")
	}
	p("\n")
}

func countRuns(r ingestBench) int {
	n := 0
	for _, s := range r.Samples {
		if s.Path == "shredduck" {
			n++
		}
	}
	return n
}

func writeEnv(md *strings.Builder, name string, h benchutil.Header) {
	p := func(format string, a ...any) { fmt.Fprintf(md, format, a...) }
	m := h.Machine
	p("**%s**: started %s", name, h.Started.Format(time.RFC3339))
	if h.Seconds > 0 {
		p(", took %.0f s", h.Seconds)
	}
	p(".  \nMachine: %s, %s CPUs, %s; %s; %s/%s; Go %s; DuckDB %s", m["cpu"], m["cpus"], memory(m["memory"]), m["os"], m["goos"], m["goarch"], m["go"], m["duckdb"])
	if m["loadavg"] != "" {
		p("; load average at the start %s", m["loadavg"])
	}
	p(".  \n")
	for _, d := range h.Data {
		p("Data: %s, %s records, %s NDJSON: `%s`.  \n", d.Signal, count(d.Records), fmtMB(d.Bytes), d.GenCommand)
	}
	if h.Seed != 0 {
		p("Seed %d. ", h.Seed)
	}
	if h.Command != "" {
		p("Command: `%s`", h.Command)
	}
	if h.Driver != "" {
		p("; driver: `%s`", h.Driver)
	}
	p("\n\n")
}

func dataBytes(h benchutil.Header) int64 {
	var n int64
	for _, d := range h.Data {
		n += d.Bytes
	}
	return n
}

// Formatting.

func fmtSecs(s float64) string { return trimSecs(s) + " s" }

func trimSecs(s float64) string {
	if s < 10 {
		return fmt.Sprintf("%.2f", s)
	}
	return fmt.Sprintf("%.1f", s)
}

func fmtMs(s float64) string { return trimMs(s) + " ms" }

// fmtMsSpread renders a timing as "median ms (min–max)".
func fmtMsSpread(s benchutil.Stat) string {
	return fmt.Sprintf("%s (%s–%s)", fmtMs(s.Median), trimMs(s.Min), trimMs(s.Max))
}

func trimMs(s float64) string {
	ms := s * 1e3
	switch {
	case ms < 10:
		return fmt.Sprintf("%.1f", ms)
	default:
		return fmt.Sprintf("%.0f", ms)
	}
}

func fmtRatio(r float64) string {
	switch {
	case r < 10:
		return fmt.Sprintf("%.2f", r)
	case r < 100:
		return fmt.Sprintf("%.1f", r)
	default:
		return fmt.Sprintf("%.0f", r)
	}
}

func trim(f float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", f), "0"), ".")
}

func fmtMB(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/1e6) }

// count writes n with thin separators: 1,000,000.
func count(n int64) string {
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func memory(kb string) string {
	var n int64
	if _, err := fmt.Sscanf(kb, "%d kB", &n); err != nil {
		return kb
	}
	return fmt.Sprintf("%.0f GiB RAM", float64(n)/(1<<20))
}

func orFailed(ok bool, s string) string {
	if !ok {
		return "FAILED"
	}
	return s
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// notes are observations made while building the benchmark (DuckDB 1.5.6,
// duckdb-go v2.10506.0) that explain some of the figures.
const notes = `## Notes and limitations

- **VARIANT is shredded at CHECKPOINT and slow to read back.** DuckDB shreds a VARIANT column when a row group holds at
  least ` + "`variant_minimum_shredding_size`" + ` (30,000) rows, which is why variant_flat and variant_otlp are small. Reading a
  field of a checkpointed VARIANT column was about 25 times slower than reading the same VARIANT values from an
  in-memory table (100k spans, ` + "`doc.service_name`" + ` grouped: about 2.2 s against 0.08 s on the 2-core machine). The
  benchmark uses the defaults, as a user would. Without shredding (` + "`SET variant_minimum_shredding_size = -1`" + ` before
  the checkpoint) variant_flat of 100k spans took 27.8 MB instead of 7.6 MB, and the errors query about 0.14 s instead
  of 2.5 s: VARIANT trades its small size for slow reads. Below 30,000 rows per row group nothing is shredded, so
  small runs say nothing about VARIANT.
- **The Go driver cannot scan VARIANT.** VARIANT is written by SQL casts (` + "`json_object(...)::VARIANT`" + `,
  ` + "`to_json(t)::VARIANT`" + `) and read through casts (` + "`::VARCHAR`, `::BIGINT`" + `).
- **VARIANT is read by casting it to a STRUCT of the members a query needs** (attribute lists as
  ` + "`STRUCT(key VARCHAR, value JSON)[]`" + `), then by position or with list_filter on the typed key. That was the
  fastest formulation found: one path expression per field (` + "`doc.span.endTimeUnixNano::BIGINT`" + `, ...) made p99 on
  variant_otlp about 3 times slower, and a key lookup over ` + "`doc.span.attributes::VARIANT[]`" + ` comparing
  ` + "`a.key::VARCHAR`" + ` about 3 times slower too. Such a cast fails if any row lacks a member it names (missing keys
  are an error, extra keys are ignored), so it only works on data of a known shape. JSON is read with JSON paths
  (` + "`doc->>'...'`" + `); JSON key lookup is ` + "`list_filter(json_extract(doc, '$.span.attributes[*]'), ...)`" + `. The
  exact SQL of every query is in each section.
- **json_otlp / variant_otlp loads** explode the NDJSON with ` + "`read_json_objects` + `json_transform`" + ` to JSON leaves;
  ` + "`read_json(columns = {...})`" + ` with the deep STRUCT schema is many times slower on these 37 KB lines in 1.5.6.
- **sql_typed keeps only the 14 fields it names**; it is the yardstick for load speed, not a lossless store, so its
  table is smaller than shredded. **json_flat / variant_flat** hold every shredded column, NULLs included.
- **Storage** counts whole 256 KiB blocks and, for shredded, includes shredduck's catalog tables; at 100k spans the
  sizes are coarse.
- **Quick runs (100k records)** fit each table in one row group (122,880 rows), so DuckDB scans with one thread; at 1M
  the scans use every core, which changes the ratios. The quick runs exist to check that everything works and
  matches; quote the 1M runs.

`

func writeStreaming(md *strings.Builder, fs []*named[streaming]) {
	p := func(format string, a ...any) { fmt.Fprintf(md, format, a...) }
	p("## Streaming (bench/run_streaming.sh)\n\n")
	p("Read as written by bench/streaming: OTLP export requests from W workers into `shredduck serve`\n")
	p("(target shredduck) and into a decode-only server (target ceiling). Senders: `sdk`, an OpenTelemetry Go SDK\n")
	p("TracerProvider per worker (its CPU halves the ceiling on 2 cores); `replay`, requests encoded before the clock.\n")
	p("With `--ack log` a 2xx comes once the request is in the ingest log: \"sustained\" counts the time until every span\n")
	p("was visible, \"visible\" is that time after the last answer.\n\n")
	p("| file | protocol | sender | --ack | workers | target | spans/s median | min–max | sustained spans/s | visible s | p50 / p99 export ms | server peak RSS |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, f := range fs {
		r := f.r
		for _, sm := range r.Summary {
			sustained := "–"
			if sm.Sustained > 0 {
				sustained = count(int64(sm.Sustained))
			}
			p("| %s | %v | %s | %s | %v | %s | %s | %s–%s | %s | %.2f | %.0f / %.0f | %d MiB |\n", f.name, r.Params["protocol"], r.sender(), r.ack(),
				r.Params["workers"], sm.Target, count(int64(sm.Median)), count(int64(sm.Min)), count(int64(sm.Max)), sustained, sm.Visible,
				sm.P50ms, sm.P99ms, sm.PeakRSS>>20)
		}
		if r.Failed {
			p("| %s | | | | | **FAILED** | | | | | | |\n", f.name)
		}
	}
	p("\n")
	for _, f := range fs {
		if f.r.Ratio > 0 {
			sustained := ""
			if f.r.RatioSustained > 0 {
				sustained = fmt.Sprintf(" (sustained %.2f)", f.r.RatioSustained)
			}
			p("%s: shredduck / ceiling = %.2f%s. %s\n\n", f.name, f.r.Ratio, sustained, runLabel(f.r.Header))
		}
	}
}

// writeQueryFailuresAndSQL lists the queries that FAILED, with their
// first error line, and the SQL of every query in a collapsed block.
func writeQueryFailuresAndSQL(md *strings.Builder, summary []benchutil.QuerySummary) {
	p := func(format string, a ...any) { fmt.Fprintf(md, format, a...) }
	var failed []string
	for _, qs := range summary {
		if qs.Failed {
			failed = append(failed, fmt.Sprintf("%s on %s: %s", qs.Query, qs.Path, firstLine(qs.Error)))
		}
	}
	if len(failed) > 0 {
		p("\nFAILED queries:\n\n")
		for _, f := range failed {
			p("- %s\n", f)
		}
	}
	p("\n<details><summary>The SQL of every query</summary>\n\n")
	for _, qs := range summary {
		p("%s on %s:\n```sql\n%s\n```\n", qs.Query, qs.Path, qs.SQL)
	}
	p("</details>\n\n")
}

// addMillis appends a query's median and min–max in ms, or gaps (NaN) for
// a FAILED query.
func (sr *series) addMillis(o benchutil.QuerySummary, ok bool) {
	if !ok {
		sr.vals, sr.lo, sr.hi = append(sr.vals, math.NaN()), append(sr.lo, math.NaN()), append(sr.hi, math.NaN())
		return
	}
	sr.vals, sr.lo, sr.hi = append(sr.vals, o.Seconds.Median*1e3), append(sr.lo, o.Seconds.Min*1e3), append(sr.hi, o.Seconds.Max*1e3)
}
