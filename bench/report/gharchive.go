package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot/vg"

	"github.com/shredduck/shredduck/bench/internal/benchutil"
)

// kindGharchive is the kind of bench/run_gharchive.sh's results
// (gharchive-N.json, written by bench/ghbench, a main package that cannot
// be imported).
const kindGharchive = "gharchive"

// gharchive is bench/ghbench's Result: the variant format (same field
// names) plus shredduck's memory limit and the headline ratios.
type gharchive struct {
	benchutil.Variant
	MemoryLimit string    `json:"shredduck_memory_limit"` // empty: shredduck's default
	Ratios      []ghRatio `json:"ratios"`
}

// ghRatio is ghbench's Ratio: one headline comparison against its target.
type ghRatio struct {
	Name   string  `json:"name"`
	Value  float64 `json:"value"`
	Target string  `json:"target"`
	Met    bool    `json:"met"`
}

// informational reports whether a ratio has no target ("none ...").
func (r ghRatio) informational() bool { return strings.HasPrefix(r.Target, "none") }

// queryNames lists the queries of a result in the order they were run.
func (x v) queryNames() []string {
	return x.distinctQueryField(func(s benchutil.QuerySummary) string { return s.Query })
}

var ghPaths = []string{"shredded", "json_column", "read_json_auto"}

// writeGharchive writes the section of the GH Archive results: the one with
// the most records in full, the others (fs[1:]) one line each.
func writeGharchive(md *strings.Builder, fs []*named[gharchive], dir, rel string) error {
	p := func(format string, a ...any) { fmt.Fprintf(md, format, a...) }
	g := &fs[0].r
	x := v{&g.Variant, fs[0].name}
	p("## GH Archive events: %s\n\n", x.file)
	p("%s\n\n", ghLabel(g))
	p("bench/run_gharchive.sh: GH-Archive-shaped events (`%s`) loaded four ways, each into its own new database file\n", dataGen(x.Header))
	p("of storage version %s: `shredduck ingest --transform none` cold (new database) and warm (the same file again into\n", x.StorageVersion)
	p("that database, no column added), DuckDB `read_json_objects` into one JSON column, and DuckDB `read_json_auto` into\n")
	p("typed STRUCT columns. shredduck memory limit: %s. Every query answer is checked against the shredded table's.\n\n", orDefault(g.MemoryLimit, "not passed (shredduck's default, 256MB)"))

	writeGhUnfavourable(md, g, x)

	p("### Load\n\n")
	p("| encoding | median | min–max | records/s | MB/s | peak RSS | × read_json_auto |\n|---|---|---|---|---|---|---|\n")
	auto, autoOK := x.ingest("read_json_auto")
	for _, s := range x.IngestSummary {
		if _, ok := x.ingest(s.Encoding); !ok {
			p("| %s | FAILED | | | | | |\n", s.Encoding)
			continue
		}
		p("| %s | %s | %s–%s | %s | %.1f | %d MiB | %s |\n", s.Encoding, fmtSecs(s.Seconds.Median), trimSecs(s.Seconds.Min), trimSecs(s.Seconds.Max),
			count(int64(s.RecordsPerSec)), s.MBPerSec, s.PeakRSS>>20, orFailed(autoOK, fmtRatio(s.Seconds.Median/auto.Seconds.Median)+"×"))
	}
	p("\n× read_json_auto is the encoding's median over read_json_auto's (below 1 is faster). MB/s is NDJSON input\n")
	p("(10^6 bytes) per second at the median; peak RSS is the largest of the timed runs.\n")

	p("\n### Storage\n\nused_blocks × block_size from pragma_database_size() after CHECKPOINT (shredded: the cold load's database).\n\n")
	p("| encoding | bytes | MiB | × json_column |\n|---|---|---|---|\n")
	jc, jcOK := x.storage("json_column")
	for _, st := range x.Storage {
		if _, ok := x.storage(st.Encoding); !ok {
			p("| %s | FAILED: %s | | |\n", st.Encoding, firstLine(orDefault(st.Error, "no size")))
			continue
		}
		p("| %s | %s | %.1f | %s |\n", st.Encoding, count(st.Bytes), float64(st.Bytes)/(1<<20),
			orFailed(jcOK, fmt.Sprintf("%.2f", float64(st.Bytes)/float64(jc.Bytes))))
	}

	p("\n### Queries\n\nMedian (min–max) in ms; speedup = json_column median / shredded median.\n\n")
	p("| query | shredded | json_column | read_json_auto | speedup json_column / shredded |\n|---|---|---|---|---|\n")
	for _, q := range x.queryNames() {
		p("| %s |", q)
		for _, path := range ghPaths {
			o, ok := x.query(q, path)
			p(" %s |", orFailed(ok, fmtMsSpread(o.Seconds)))
		}
		s, okS := x.query(q, "shredded")
		j, okJ := x.query(q, "json_column")
		p(" %s |\n", orFailed(okS && okJ, fmtRatio(j.Seconds.Median/s.Seconds.Median)+"×"))
	}
	writeQueryFailuresAndSQL(md, x.QuerySummary)

	p("### Ratios\n\nAs computed by bench/ghbench; a ratio is absent when one of its paths FAILED.\n\n")
	p("| ratio | value | target | met |\n|---|---|---|---|\n")
	for _, r := range g.Ratios {
		met := "yes"
		switch {
		case r.informational():
			met = "for information"
		case !r.Met:
			met = "**NOT met**"
		}
		p("| %s | %s | %s | %s |\n", r.Name, fmtRatio(r.Value), r.Target, met)
	}
	if len(g.Ratios) == 0 {
		p("| (none: FAILED) | | | |\n")
	}
	p("\n")
	if g.Failed {
		p("**FAILED**:\n\n")
		for _, f := range g.Failures {
			p("- %s\n", firstLine(f))
		}
		p("\n")
	}

	svg := strings.TrimSuffix(x.file, ".json") + "-queries" + chartExt
	if err := ghQueryChart(x, filepath.Join(dir, svg)); err != nil {
		return err
	}
	p("![query times, shredded vs json_column](%s/%s)\n\n", rel, svg)

	if len(fs) > 1 {
		p("Smaller GH Archive runs:\n\n")
		for _, f := range fs[1:] {
			p("- %s\n", ghSummaryLine(f))
		}
		p("\n")
	}
	return nil
}

// ghLabel is the one line of command, records, input size and machine.
func ghLabel(g *gharchive) string {
	h := g.Header
	s := fmt.Sprintf("`%s`: %s events (seed %d), %s NDJSON, %d warm-up + %d timed run(s); %s",
		h.Command, count(h.Records), h.Seed, fmtMB(dataBytes(h)), h.WarmUp, h.Runs, machineLabel(h.Machine))
	if strings.Contains(h.Command, "--quick") {
		s = "**Quick run: noisy figures.** " + s
	}
	if h.Machine["loadavg"] != "" {
		s += fmt.Sprintf("; load average at the start %s", h.Machine["loadavg"])
	}
	return s
}

// writeGhUnfavourable lists the targets missed, failures, and where another
// path beats shredded.
func writeGhUnfavourable(md *strings.Builder, g *gharchive, x v) {
	var bad []string
	for _, r := range g.Ratios {
		if !r.Met && !r.informational() {
			bad = append(bad, fmt.Sprintf("%s = %s, target %s: NOT met", r.Name, fmtRatio(r.Value), r.Target))
		}
	}
	for _, f := range g.Failures {
		bad = append(bad, "FAILED: "+firstLine(f))
	}
	if sh, ok := x.ingest("shredded_cold"); ok {
		for _, enc := range []string{"json_column", "read_json_auto"} {
			if o, ok := x.ingest(enc); ok && o.Seconds.Median < sh.Seconds.Median {
				bad = append(bad, fmt.Sprintf("%s loads faster than shredded_cold (%s vs %s)", enc, fmtSecs(o.Seconds.Median), fmtSecs(sh.Seconds.Median)))
			}
		}
	}
	if s, ok := x.storage("shredded"); ok {
		for _, st := range x.Storage {
			if _, okO := x.storage(st.Encoding); okO && st.Encoding != "shredded" && st.Bytes < s.Bytes {
				bad = append(bad, fmt.Sprintf("%s is smaller than shredded (%s vs %s)", st.Encoding, fmtMB(st.Bytes), fmtMB(s.Bytes)))
			}
		}
	}
	for _, q := range x.queryNames() {
		b, okB := x.query(q, "shredded")
		for _, path := range ghPaths[1:] {
			if o, ok := x.query(q, path); ok && okB && o.Seconds.Median < b.Seconds.Median {
				bad = append(bad, fmt.Sprintf("%s query is faster on %s than on shredded (%s vs %s)", q, path, fmtMs(o.Seconds.Median), fmtMs(b.Seconds.Median)))
			}
		}
	}
	if len(bad) == 0 {
		fmt.Fprintf(md, "**Unfavourable cases**: none; every target is met and shredded is best everywhere.\n\n")
		return
	}
	fmt.Fprintf(md, "**Unfavourable cases**:\n\n")
	for _, b := range bad {
		fmt.Fprintf(md, "- %s\n", b)
	}
	fmt.Fprintf(md, "\n")
}

// ghQueryChart draws the query medians (min–max) on shredded and on the
// JSON column, log scale.
func ghQueryChart(x v, path string) error {
	qs := x.queryNames()
	var ss []series
	for i, p := range ghPaths[:2] {
		sr := series{name: p, colorIdx: i}
		for _, q := range qs {
			sr.addMillis(x.query(q, p))
		}
		ss = append(ss, sr)
	}
	return chart{title: fmt.Sprintf("GH Archive queries on %s events (log scale; missing bar = FAILED)", count(x.Records)), ylabel: "ms (median, min–max)",
		categories: qs, series: ss, log: true}.save(path, 8*vg.Inch, 4.5*vg.Inch)
}

// ghSummaryLine sums up a smaller run in one line.
func ghSummaryLine(f *named[gharchive]) string {
	g := &f.r
	x := v{&g.Variant, f.name}
	s := fmt.Sprintf("%s (`%s`, %s events)", f.name, g.Command, count(g.Records))
	if c, ok := x.ingest("shredded_cold"); ok {
		s += fmt.Sprintf(": shredded_cold %s", fmtSecs(c.Seconds.Median))
	} else {
		s += ": shredded_cold FAILED"
	}
	if a, ok := x.ingest("read_json_auto"); ok {
		s += fmt.Sprintf(", read_json_auto %s", fmtSecs(a.Seconds.Median))
	} else {
		s += ", read_json_auto FAILED"
	}
	var miss []string
	met, n := 0, 0
	for _, r := range g.Ratios {
		switch {
		case r.informational():
		case r.Met:
			met++
			n++
		default:
			n++
			miss = append(miss, fmt.Sprintf("%s = %s (target %s)", r.Name, fmtRatio(r.Value), r.Target))
		}
	}
	s += fmt.Sprintf("; %d of %d ratio targets met", met, n)
	if len(miss) > 0 {
		s += "; NOT met: " + strings.Join(miss, ", ")
	}
	if g.Failed {
		s += "; **FAILED**"
		if len(g.Failures) > 0 {
			s += ": " + firstLine(g.Failures[0])
			if len(g.Failures) > 1 {
				s += fmt.Sprintf(" (and %d more)", len(g.Failures)-1)
			}
		}
	}
	return s + "."
}

func dataGen(h benchutil.Header) string {
	if len(h.Data) > 0 {
		return h.Data[0].GenCommand
	}
	return "go run ./bench/gen gharchive"
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
