package main

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot/vg"

	"github.com/shredduck/shredduck/bench/internal/benchutil"
)

// sparsePrefix names the files of bench/run_sparse.sh (sparse-N.json,
// written by bench/sparsebench, a main package that cannot be imported);
// they carry no kind.
const sparsePrefix = "sparse-"

// sparseBench is bench/sparsebench's report: per shape (the same traces
// with different extra attribute keys; the first shape is the baseline)
// an ingest phase and, when Stream is set, a streaming phase per run.
type sparseBench struct {
	Command string            `json:"command"`
	Started time.Time         `json:"started"`
	Machine map[string]string `json:"machine"`
	Records int64             `json:"records"`
	Shapes  []sparseShape     `json:"shapes"`
	Stream  *struct {
		Workers       int    `json:"workers"`
		LoadGenerator string `json:"load_generator"`
		Server        string `json:"server"`
	} `json:"stream"`
	Samples []sparseSample `json:"samples"`
	Failed  bool           `json:"failed"`
}

// sparseShape is one input file; SparseKey is its least frequent extra key.
type sparseShape struct {
	Name      string `json:"name"`
	Input     string `json:"input"`
	Bytes     int64  `json:"input_bytes"`
	SparseKey string `json:"sparse_key"`
}

// sparseSample is one timed run of one shape.
type sparseSample struct {
	Shape          string             `json:"shape"`
	Run            int                `json:"run"`
	Seconds        float64            `json:"seconds"`
	PeakRSS        int64              `json:"peak_rss_bytes"`
	DBBytes        int64              `json:"db_bytes"`
	Columns        int                `json:"columns"`
	KeysColumns    int                `json:"keys_with_column"`
	KeysOverflowed int                `json:"keys_overflowed"`
	KeysPromoted   *int               `json:"keys_promoted"` // nil: not recorded (older files)
	KeysTotal      int                `json:"keys_total"`
	QueryMs        map[string]float64 `json:"query_ms"`
	Verified       bool               `json:"verified"`
	Error          string             `json:"error"` // the ingest phase's
	Stream         *struct {
		Workers     int            `json:"workers"`
		Requests    int            `json:"requests"`
		Spans       int64          `json:"spans_sent"`
		Seconds     float64        `json:"seconds"`
		SpansPerSec float64        `json:"spans_per_sec"`
		RatioToBase float64        `json:"ratio_to_baseline"`
		Retries     int64          `json:"retries"`
		Statuses    map[string]int `json:"statuses"`
		Errors      int64          `json:"errors"`
		PeakRSS     int64          `json:"server_peak_rss_bytes"`
		StopSeconds float64        `json:"stop_seconds"`
		TableRows   int64          `json:"table_rows"`
		LogWarnings int            `json:"server_log_warnings"`
		Error       string         `json:"error"`
	} `json:"stream"`
}

// The queries of bench/sparsebench, in its order: the RawDuck ones, then
// the count on the shape's sparsest key.
var (
	sparseRawDuckQueries = []string{"errors_by_service", "p99_by_route", "status_codes"}
	sparseKeyQuery       = "sparse_key"
)

// The uniform sparse shape that issue #15's targets are about.
const sparseUniform = "sparse"

func (r *sparseBench) base() string {
	if len(r.Shapes) == 0 {
		return ""
	}
	return r.Shapes[0].Name
}

func (r *sparseBench) runs() int {
	n := 0
	for _, s := range r.Samples {
		if s.Shape == r.base() {
			n++
		}
	}
	return n
}

func (r *sparseBench) header() benchutil.Header {
	h := benchutil.Header{Command: r.Command, Started: r.Started, Machine: r.Machine, Records: r.Records, WarmUp: 1, Runs: r.runs()}
	for _, sh := range r.Shapes {
		h.Data = append(h.Data, benchutil.DataFile{Signal: "traces, shape " + sh.Name, Records: r.Records, Bytes: sh.Bytes, GenCommand: sh.Input})
	}
	return h
}

// ingested and streamed select the runs whose phase succeeded; a failed
// phase is shown as FAILED and never timed.
func ingested(s *sparseSample) bool { return s.Error == "" }
func streamed(s *sparseSample) bool { return s.Stream != nil && s.Stream.Error == "" }

// stat summarizes f over shape's samples that pass ok.
func (r *sparseBench) stat(shape string, ok func(*sparseSample) bool, f func(*sparseSample) float64) benchutil.Stat {
	var xs []float64
	for i := range r.Samples {
		if s := &r.Samples[i]; s.Shape == shape && ok(s) {
			xs = append(xs, f(s))
		}
	}
	return benchutil.Summarize(xs)
}

// ratio is shape's median of f over the baseline's, NaN if either has no
// successful run.
func (r *sparseBench) ratio(shape string, ok func(*sparseSample) bool, f func(*sparseSample) float64) float64 {
	a, b := r.stat(shape, ok, f), r.stat(r.base(), ok, f)
	return ratioOf(a.Median, b.Median, a.N > 0, b.N > 0)
}

// maxOf is the largest f over shape's samples that pass ok, NaN for none.
func (r *sparseBench) maxOf(shape string, ok func(*sparseSample) bool, f func(*sparseSample) float64) float64 {
	st := r.stat(shape, ok, f)
	if st.N == 0 {
		return math.NaN()
	}
	return st.Max
}

// statuses sums shape's streaming answers by status code over the runs.
func (r *sparseBench) statuses(shape string) map[string]int {
	m := map[string]int{}
	for _, s := range r.Samples {
		if s.Shape == shape && s.Stream != nil {
			for code, n := range s.Stream.Statuses {
				m[code] += n
			}
		}
	}
	return m
}

// queryNames lists the queries the samples carry: sparsebench's order,
// then any others sorted.
func (r *sparseBench) queryNames() []string {
	names := slices.Clone(sparseRawDuckQueries)
	var other []string
	for _, s := range r.Samples {
		for q := range s.QueryMs {
			if q != sparseKeyQuery && !slices.Contains(names, q) && !slices.Contains(other, q) {
				other = append(other, q)
			}
		}
	}
	slices.Sort(other)
	return append(append(names, other...), sparseKeyQuery)
}

// failures lists every failed phase of every run, first line only.
func (r *sparseBench) failures() []string {
	var out []string
	for _, s := range r.Samples {
		if s.Error != "" {
			out = append(out, fmt.Sprintf("%s run %d, ingest: %s", s.Shape, s.Run, firstLine(s.Error)))
		}
		if s.Stream != nil && s.Stream.Error != "" {
			out = append(out, fmt.Sprintf("%s run %d, streaming: %s", s.Shape, s.Run, firstLine(s.Stream.Error)))
		}
	}
	if r.Failed && len(out) == 0 {
		out = append(out, "the run is marked failed (a run did not verify)")
	}
	return out
}

// sparseTarget is one of issue #15's targets for the uniform sparse shape.
type sparseTarget struct {
	what, want, got string
	ok              bool
	miss            string
}

func (r *sparseBench) targets() []sparseTarget {
	const mib, gib = 1 << 20, 1 << 30
	base, sh := r.base(), sparseUniform
	var ts []sparseTarget
	le := func(what, want string, v, limit float64, got func(float64) string) {
		t := sparseTarget{what: what, want: want, got: "FAILED"}
		switch {
		case math.IsNaN(v):
			t.miss = "not measured: every run FAILED"
		default:
			t.got, t.ok = got(v), v <= limit
			if !t.ok {
				t.miss = fmt.Sprintf("%.0f%% over", (v/limit-1)*100)
			}
		}
		ts = append(ts, t)
	}
	times := func(v float64) string { return fmtRatio(v) + "×" }
	le("ingest time, "+sh+" / "+base, "≤ 1.5×", r.ratio(sh, ingested, func(s *sparseSample) float64 { return s.Seconds }), 1.5, times)
	le("storage, "+sh+" / "+base, "≤ 1.5×", r.ratio(sh, ingested, func(s *sparseSample) float64 { return float64(s.DBBytes) }), 1.5, times)
	le("ingest peak RSS, "+sh+" (largest run)", "≤ 512 MiB", r.maxOf(sh, ingested, func(s *sparseSample) float64 { return float64(s.PeakRSS) }), 512*mib,
		func(v float64) string { return fmt.Sprintf("%.0f MiB", v/mib) })

	// Every key's count through its column: sparsebench checks it in every
	// run and sets the ingest phase's error otherwise.
	exact := sparseTarget{what: "every extra key's count exact through its column, " + sh, want: "verified in every run"}
	var runs, bad int
	var firstErr string
	for _, s := range r.Samples {
		if s.Shape != sh {
			continue
		}
		runs++
		if s.Error != "" {
			bad++
			if firstErr == "" {
				firstErr = firstLine(s.Error)
			}
		}
	}
	keys := r.stat(sh, ingested, func(s *sparseSample) float64 { return float64(s.KeysTotal) })
	switch {
	case runs == 0:
		exact.got, exact.miss = "FAILED", "no run"
	case bad > 0:
		exact.got, exact.miss = fmt.Sprintf("FAILED in %d of %d runs", bad, runs), firstErr
	default:
		exact.got, exact.ok = fmt.Sprintf("verified (%d of %d runs, %s keys)", runs, runs, count(int64(keys.Median))), true
	}
	ts = append(ts, exact)

	for _, q := range sparseRawDuckQueries {
		le(q+" query, "+sh+" / "+base, "≤ 2×", r.ratio(sh, ingested, func(s *sparseSample) float64 { return s.QueryMs[q] }), 2, times)
	}

	if r.Stream == nil {
		ts = append(ts, sparseTarget{what: "serve: streaming phase", want: "run", got: "not run (-stream-workers 0)", miss: "not measured"})
		return ts
	}
	st := r.statuses(sh)
	var other5xx, n503 int
	for code, n := range st {
		switch {
		case code == "503":
			n503 += n
		case code >= "500" && code < "600":
			other5xx += n
		}
	}
	no5xx := sparseTarget{what: "serve: 5xx answers other than 503 (503/429 are backpressure, retried), " + sh, want: "0",
		got: fmt.Sprintf("%d (503 retried: %d)", other5xx, n503), ok: other5xx == 0}
	if !no5xx.ok {
		no5xx.miss = fmt.Sprintf("%d 5xx answers", other5xx)
	}
	ts = append(ts, no5xx)
	rate := r.stat(sh, streamed, func(s *sparseSample) float64 { return s.Stream.RatioToBase })
	rateT := sparseTarget{what: "serve: spans/s, " + sh + " / " + base + " (same run, median)", want: "≥ 0.67×", got: "FAILED"}
	if rate.N == 0 {
		rateT.miss = "not measured: every streaming run FAILED"
	} else {
		rateT.got, rateT.ok = fmtRatio(rate.Median)+"×", rate.Median >= 2.0/3
		if !rateT.ok {
			rateT.miss = fmt.Sprintf("%.0f%% short", (1-rate.Median*1.5)*100)
		}
	}
	ts = append(ts, rateT)
	le("serve: server peak RSS, "+sh+" (largest run)", "≤ 1 GiB", r.maxOf(sh, streamed, func(s *sparseSample) float64 { return float64(s.Stream.PeakRSS) }), gib,
		func(v float64) string { return fmt.Sprintf("%.0f MiB", v/mib) })
	return ts
}

// writeSparse writes the section of one sparse-keys result.
func writeSparse(md *strings.Builder, f *named[sparseBench], dir, rel string) error {
	p := func(format string, a ...any) { fmt.Fprintf(md, format, a...) }
	r := &f.r
	base := r.base()
	p("## Sparse attribute keys (issue #15): %s\n\n", f.name)
	p("%s\n\n", sparseLabel(r))
	p("bench/run_sparse.sh (bench/sparsebench): the same generated traces with 10 extra string attributes per span whose keys\n")
	p("differ by shape, each loaded by `shredduck ingest` into a new database, shapes interleaved, one warm-up and %d timed\n", r.runs())
	p("run(s); the first shape (%s) is the baseline. Every run checks the row count, the RawDuck answers against the first\n", base)
	p("run's, and every extra key's count through its column (stored or overflowed) against its count in the input. Queries\n")
	p("go through shredduck's query path (keyview views for keys without a stored column), their time included. Medians\n")
	p("(min–max) over the runs whose phase succeeded; a failed phase is FAILED, not timed.\n\n")

	p("| shape | input | extra keys | sparsest key |\n|---|---|---|---|\n")
	for _, sh := range r.Shapes {
		keys := r.stat(sh.Name, func(*sparseSample) bool { return true }, func(s *sparseSample) float64 { return float64(s.KeysTotal) })
		p("| %s | %s | %s | `%s` |\n", sh.Name, fmtMB(sh.Bytes), count(int64(keys.Max)), sh.SparseKey)
	}
	p("\n")

	ts := r.targets()
	writeSparseUnfavourable(md, r, ts)

	p("### Ingest\n\n")
	p("| shape | ingest | × %s | peak RSS | storage | × %s | stored columns | keys stored / overflowed / promoted of total | verified runs |\n", base, base)
	p("|---|---|---|---|---|---|---|---|---|\n")
	for _, sh := range r.Shapes {
		n, verified := 0, 0
		for _, s := range r.Samples {
			if s.Shape == sh.Name {
				n++
				if s.Error == "" {
					verified++
				}
			}
		}
		st := func(f func(*sparseSample) float64) benchutil.Stat { return r.stat(sh.Name, ingested, f) }
		secs := st(func(s *sparseSample) float64 { return s.Seconds })
		if secs.N == 0 {
			p("| %s | FAILED | | | | | | | %d/%d |\n", sh.Name, verified, n)
			continue
		}
		rss := st(func(s *sparseSample) float64 { return float64(s.PeakRSS) / (1 << 20) })
		db := st(func(s *sparseSample) float64 { return float64(s.DBBytes) / 1e6 })
		promoted := "not recorded"
		if pr := r.stat(sh.Name, func(s *sparseSample) bool { return ingested(s) && s.KeysPromoted != nil },
			func(s *sparseSample) float64 { return float64(*s.KeysPromoted) }); pr.N > 0 {
			promoted = fmtSpreadInt(pr)
		}
		p("| %s | %s (%s–%s) | %s | %.0f MiB (%.0f–%.0f) | %.1f MB (%.1f–%.1f) | %s | %s | %s / %s / %s of %s | %d/%d |\n", sh.Name,
			fmtSecs(secs.Median), trimSecs(secs.Min), trimSecs(secs.Max),
			sparseRatio(r.ratio(sh.Name, ingested, func(s *sparseSample) float64 { return s.Seconds }), sh.Name == base),
			rss.Median, rss.Min, rss.Max, db.Median, db.Min, db.Max,
			sparseRatio(r.ratio(sh.Name, ingested, func(s *sparseSample) float64 { return float64(s.DBBytes) }), sh.Name == base),
			fmtSpreadInt(st(func(s *sparseSample) float64 { return float64(s.Columns) })),
			fmtSpreadInt(st(func(s *sparseSample) float64 { return float64(s.KeysColumns) })),
			fmtSpreadInt(st(func(s *sparseSample) float64 { return float64(s.KeysOverflowed) })), promoted,
			fmtSpreadInt(st(func(s *sparseSample) float64 { return float64(s.KeysTotal) })), verified, n)
	}
	p("\nSeconds are the wall clock of `shredduck ingest` (open, load, final checkpoint); peak RSS is its own; storage is the\n")
	p("database file's size; stored columns are otel_traces' columns; promoted keys have a stored column after being overflowed first.\n\n")

	p("### Queries\n\nMedian (min–max) in ms of each run's median query time, and × %s (the medians' ratio).\n\n", base)
	qs := r.queryNames()
	p("| shape |")
	for _, q := range qs {
		p(" %s | × %s |", q, base)
	}
	p("\n|---|%s\n", strings.Repeat("---|---|", len(qs)))
	for _, sh := range r.Shapes {
		p("| %s |", sh.Name)
		for _, q := range qs {
			ms := r.stat(sh.Name, ingested, func(s *sparseSample) float64 { return s.QueryMs[q] })
			if ms.N == 0 {
				p(" FAILED | |")
				continue
			}
			p(" %s (%s–%s) | %s |", fmtMsValue(ms.Median)+" ms", fmtMsValue(ms.Min), fmtMsValue(ms.Max),
				sparseRatio(r.ratio(sh.Name, ingested, func(s *sparseSample) float64 { return s.QueryMs[q] }), sh.Name == base))
		}
		p("\n")
	}
	p("\nsparse_key counts the rows carrying the shape's least frequent extra key (`… WHERE key IS NOT NULL`).\n\n")

	if r.Stream != nil {
		writeSparseStream(md, r)
	}

	p("### Targets (issue #15: the uniform sparse shape against %s, same run)\n\n", base)
	p("| target | wanted | measured | met |\n|---|---|---|---|\n")
	for _, t := range ts {
		met := "met"
		if !t.ok {
			met = "**NOT met**: " + t.miss
		}
		p("| %s | %s | %s | %s |\n", t.what, t.want, t.got, met)
	}
	if !slices.ContainsFunc(r.Shapes, func(sh sparseShape) bool { return sh.Name == sparseUniform }) {
		p("\nThis run has no shape named %q: the targets are not measured.\n", sparseUniform)
	}
	p("\n")

	svg := strings.TrimSuffix(f.name, ".json") + chartExt
	if err := sparseChart(r, filepath.Join(dir, svg)); err != nil {
		return err
	}
	p("![shapes relative to %s](%s/%s)\n\n", base, rel, svg)
	return nil
}

func writeSparseStream(md *strings.Builder, r *sparseBench) {
	p := func(format string, a ...any) { fmt.Fprintf(md, format, a...) }
	base := r.base()
	p("### Streaming into `shredduck serve`\n\n")
	gen := r.Stream.LoadGenerator
	if w := fmt.Sprintf("%d workers", r.Stream.Workers); strings.Contains(gen, "W workers") {
		gen = strings.ReplaceAll(gen, "W workers", w)
	} else {
		gen += "; " + w
	}
	p("Load generator: %s.  \nServer: %s.  \n", gen, r.Stream.Server)
	p("spans/s is all spans over the time from the first send to the last 2xx; × %s is the ratio to %s's rate in the same run\n", base, base)
	p("(median and min–max over runs); retries are 503/429 answers retried after their Retry-After; the server's peak RSS is its\n")
	p("VmHWM just before SIGTERM; the row count is checked after it exits.\n\n")
	p("| shape | spans/s | × %s | retries | server peak RSS | answers (all runs) | stop after SIGTERM | rows checked | runs ok |\n", base)
	p("|---|---|---|---|---|---|---|---|---|\n")
	for _, sh := range r.Shapes {
		n, ok := 0, 0
		for _, s := range r.Samples {
			if s.Shape == sh.Name && s.Stream != nil {
				n++
				if s.Stream.Error == "" {
					ok++
				}
			}
		}
		answers := sparseAnswers(r.statuses(sh.Name))
		st := func(f func(*sparseSample) float64) benchutil.Stat { return r.stat(sh.Name, streamed, f) }
		rate := st(func(s *sparseSample) float64 { return s.Stream.SpansPerSec })
		if rate.N == 0 {
			p("| %s | FAILED | | | | %s | | | %d/%d |\n", sh.Name, answers, ok, n)
			continue
		}
		ratio := "—"
		if sh.Name != base {
			rt := st(func(s *sparseSample) float64 { return s.Stream.RatioToBase })
			ratio = fmt.Sprintf("%s× (%s–%s)", fmtRatio(rt.Median), fmtRatio(rt.Min), fmtRatio(rt.Max))
		}
		rss := st(func(s *sparseSample) float64 { return float64(s.Stream.PeakRSS) / (1 << 20) })
		stop := st(func(s *sparseSample) float64 { return s.Stream.StopSeconds })
		p("| %s | %s (%s–%s) | %s | %s | %.0f MiB (%.0f–%.0f) | %s | %s (%s–%s) | %s | %d/%d |\n", sh.Name,
			count(int64(rate.Median)), count(int64(rate.Min)), count(int64(rate.Max)), ratio,
			fmtSpreadInt(st(func(s *sparseSample) float64 { return float64(s.Stream.Retries) })),
			rss.Median, rss.Min, rss.Max, answers, fmtSecs(stop.Median), trimSecs(stop.Min), trimSecs(stop.Max),
			count(int64(st(func(s *sparseSample) float64 { return float64(s.Stream.TableRows) }).Median)), ok, n)
	}
	p("\n")
}

// sparseAnswers renders status counts: "200: 7,500, 503: 12".
func sparseAnswers(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	codes := make([]string, 0, len(m))
	for c := range m {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	for i, c := range codes {
		codes[i] = fmt.Sprintf("%s: %s", c, count(int64(m[c])))
	}
	return strings.Join(codes, ", ")
}

// writeSparseUnfavourable lists the targets missed, the failed phases, and
// where a shape is worse than the baseline by more than the targets allow.
func writeSparseUnfavourable(md *strings.Builder, r *sparseBench, ts []sparseTarget) {
	var bad []string
	for _, t := range ts {
		if !t.ok {
			bad = append(bad, fmt.Sprintf("%s = %s, wanted %s: NOT met (%s)", t.what, t.got, t.want, t.miss))
		}
	}
	for _, f := range r.failures() {
		bad = append(bad, "FAILED: "+f)
	}
	// The other shapes (zipf) have no target of their own; say where they
	// fall outside the uniform shape's.
	for _, sh := range r.Shapes[min(1, len(r.Shapes)):] {
		if sh.Name == sparseUniform {
			continue
		}
		for _, c := range []struct {
			what  string
			v     float64
			limit float64
		}{
			{"ingest time", r.ratio(sh.Name, ingested, func(s *sparseSample) float64 { return s.Seconds }), 1.5},
			{"storage", r.ratio(sh.Name, ingested, func(s *sparseSample) float64 { return float64(s.DBBytes) }), 1.5},
		} {
			if c.v > c.limit {
				bad = append(bad, fmt.Sprintf("%s: %s %s× %s (the uniform shape's target: ≤ %s×)", sh.Name, c.what, fmtRatio(c.v), r.base(), trim(c.limit)))
			}
		}
		for _, q := range sparseRawDuckQueries {
			if v := r.ratio(sh.Name, ingested, func(s *sparseSample) float64 { return s.QueryMs[q] }); v > 2 {
				bad = append(bad, fmt.Sprintf("%s: %s query %s× %s (the uniform shape's target: ≤ 2×)", sh.Name, q, fmtRatio(v), r.base()))
			}
		}
		if rt := r.stat(sh.Name, streamed, func(s *sparseSample) float64 { return s.Stream.RatioToBase }); rt.N > 0 && rt.Median < 2.0/3 {
			bad = append(bad, fmt.Sprintf("%s: serve spans/s %s× %s (the uniform shape's target: ≥ 0.67×)", sh.Name, fmtRatio(rt.Median), r.base()))
		}
	}
	if len(bad) == 0 {
		fmt.Fprintf(md, "**Unfavourable cases**: none; every target is met and no run failed.\n\n")
		return
	}
	fmt.Fprintf(md, "**Unfavourable cases**:\n\n")
	for _, b := range bad {
		fmt.Fprintf(md, "- %s\n", b)
	}
	fmt.Fprintf(md, "\n")
}

// sparseChart draws each non-baseline shape's ingest time, peak RSS,
// storage, RawDuck query time and streaming rate over the baseline's.
func sparseChart(r *sparseBench, path string) error {
	base := r.base()
	type measure struct {
		name string
		f    func(shape string) float64
	}
	ms := []measure{
		{"ingest time", func(sh string) float64 {
			return r.ratio(sh, ingested, func(s *sparseSample) float64 { return s.Seconds })
		}},
		{"ingest peak RSS", func(sh string) float64 {
			return r.ratio(sh, ingested, func(s *sparseSample) float64 { return float64(s.PeakRSS) })
		}},
		{"storage", func(sh string) float64 {
			return r.ratio(sh, ingested, func(s *sparseSample) float64 { return float64(s.DBBytes) })
		}},
	}
	for _, q := range sparseRawDuckQueries {
		ms = append(ms, measure{q, func(sh string) float64 {
			return r.ratio(sh, ingested, func(s *sparseSample) float64 { return s.QueryMs[q] })
		}})
	}
	if r.Stream != nil {
		ms = append(ms, measure{"serve spans/s", func(sh string) float64 {
			st := r.stat(sh, streamed, func(s *sparseSample) float64 { return s.Stream.RatioToBase })
			if st.N == 0 {
				return math.NaN()
			}
			return st.Median
		}})
	}
	var cats []string
	for _, m := range ms {
		cats = append(cats, m.name)
	}
	var ss []series
	for i, sh := range r.Shapes[min(1, len(r.Shapes)):] {
		sr := series{name: sh.Name, colorIdx: i}
		for _, m := range ms {
			sr.vals = append(sr.vals, m.f(sh.Name))
		}
		ss = append(ss, sr)
	}
	return chart{title: fmt.Sprintf("Attribute-key shapes, %s spans, relative to %s (missing bar = FAILED)", count(r.Records), base),
		ylabel: "× " + base + " (medians; spans/s: same-run ratio)", categories: cats, series: ss,
		horizontalRef: 1, refLabel: "= " + base}.save(path, 9*vg.Inch, 4.5*vg.Inch)
}

// sparseLabel is the line of records, runs and machine.
func sparseLabel(r *sparseBench) string {
	s := fmt.Sprintf("%s spans per shape, %d shapes, 1 warm-up + %d timed run(s), %s", count(r.Records), len(r.Shapes), r.runs(), machineLabel(r.Machine))
	if strings.Contains(r.Command, "--quick") || r.Records < 100_000 {
		s = "**Quick run: noisy figures, " + count(r.Records) + " spans.** " + s
	}
	if r.Machine["loadavg"] != "" {
		s += fmt.Sprintf("; load average at the start %s", r.Machine["loadavg"])
	}
	if r.Failed {
		s += ". **FAILED**: at least one run failed or did not verify"
	}
	return s
}

// sparseRatio renders a ratio to the baseline, "—" on the baseline itself.
func sparseRatio(v float64, isBase bool) string {
	switch {
	case isBase:
		return "—"
	case math.IsNaN(v):
		return "FAILED"
	}
	return fmtRatio(v) + "×"
}

// fmtSpreadInt renders a count's median, with its min–max if they differ.
func fmtSpreadInt(s benchutil.Stat) string {
	if s.Min == s.Max {
		return count(int64(s.Median))
	}
	return fmt.Sprintf("%s (%s–%s)", count(int64(math.Round(s.Median))), count(int64(s.Min)), count(int64(s.Max)))
}

// fmtMsValue renders milliseconds as trimMs does seconds.
func fmtMsValue(ms float64) string { return trimMs(ms / 1e3) }
