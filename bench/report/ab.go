package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/shredduck/shredduck/bench/internal/benchutil"
)

// abDir is where bench/run_ab.sh --record writes: ab/LABEL/rK/*.json, one
// LABEL per build (its DuckDB version), one rK per round.
const abDir = "ab"

// abSide is one build's results over the rounds.
type abSide struct {
	label  string
	rounds []*files
}

// loadAB reads the A/B results under dir/ab; nil when there are none.
// The sides are ordered by label (the older DuckDB first).
func loadAB(dir string) ([]*abSide, error) {
	labels, err := os.ReadDir(filepath.Join(dir, abDir))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var sides []*abSide
	for _, l := range labels {
		if !l.IsDir() {
			continue
		}
		rounds, err := filepath.Glob(filepath.Join(dir, abDir, l.Name(), "r*"))
		if err != nil {
			return nil, err
		}
		side := &abSide{label: l.Name()}
		for _, r := range rounds {
			fs, err := load(r)
			if err != nil {
				return nil, err
			}
			side.rounds = append(side.rounds, fs)
		}
		sides = append(sides, side)
	}
	slices.SortFunc(sides, func(a, b *abSide) int { return strings.Compare(a.label, b.label) })
	return sides, nil
}

// abFigure is one measure of both sides: per round, the figure of that
// round's result (its median over the timed runs).
type abFigure struct {
	group, what, unit string
	lowerBetter       bool
	a, b              []float64
}

// figures collects every figure the sides have in common, in the order of
// the first side's results.
func abFigures(a, b *abSide) []*abFigure {
	var out []*abFigure
	index := map[string]*abFigure{}
	add := func(side int, group, what, unit string, lowerBetter bool, x float64) {
		key := group + "\x00" + what
		f := index[key]
		if f == nil {
			f = &abFigure{group: group, what: what, unit: unit, lowerBetter: lowerBetter}
			index[key] = f
			out = append(out, f)
		}
		if side == 0 {
			f.a = append(f.a, x)
		} else {
			f.b = append(f.b, x)
		}
	}
	for side, s := range []*abSide{a, b} {
		for _, fs := range s.rounds {
			for _, n := range fs.variant {
				variantFigures(func(g, w, u string, lb bool, x float64) { add(side, g, w, u, lb, x) }, "traces", &n.r)
			}
			for _, n := range fs.gharchive {
				variantFigures(func(g, w, u string, lb bool, x float64) { add(side, g, w, u, lb, x) }, "GH Archive", &n.r.Variant)
			}
			for _, n := range fs.streaming {
				streamingFigures(func(g, w, u string, lb bool, x float64) { add(side, g, w, u, lb, x) }, &n.r)
			}
		}
	}
	return slices.DeleteFunc(out, func(f *abFigure) bool { return len(f.a) == 0 || len(f.b) == 0 })
}

type addFigure func(group, what, unit string, lowerBetter bool, x float64)

// variantFigures adds a variant-shaped result's load times, storage and
// query times; failed ones are left out.
func variantFigures(add addFigure, data string, r *benchutil.Variant) {
	size := count(r.Records)
	for _, s := range r.IngestSummary {
		if !s.Failed && s.Seconds.N > 0 {
			add(data+" load, "+size+" records", s.Encoding, "s", true, s.Seconds.Median)
		}
	}
	for _, s := range r.Storage {
		if s.Error == "" && s.Bytes > 0 {
			add(data+" storage", s.Encoding, "MB", true, float64(s.Bytes)/1e6)
		}
	}
	for _, q := range r.QuerySummary {
		if !q.Failed && q.Seconds.N > 0 {
			add(data+" queries", q.Query+" on "+q.Path, "ms", true, q.Seconds.Median*1e3)
		}
	}
}

// streamingFigures adds a streaming result's rates and the server's peak
// RSS.
func streamingFigures(add addFigure, s *streaming) {
	group := fmt.Sprintf("streaming, %s sender, %s, %v workers", s.sender(), s.flags(), s.Params["workers"])
	for _, t := range s.Summary {
		add(group, t.Target+" spans/s", "spans/s", false, t.Median)
		if t.Target == "shredduck" {
			add(group, "shredduck peak RSS", "MiB", true, float64(t.PeakRSS>>20))
		}
	}
	add(group, "ratio shredduck / decode-only sink", "×", false, s.Ratio)
}

// writeAB writes the section of bench/run_ab.sh's results.
func writeAB(md *strings.Builder, sides []*abSide) {
	p := func(format string, a ...any) { fmt.Fprintf(md, format, a...) }
	if len(sides) != 2 {
		p("## DuckDB A/B\n\nbench/results/ab holds %d builds' results; the A/B needs two.\n\n", len(sides))
		return
	}
	a, b := sides[0], sides[1]
	p("## DuckDB A/B: %s against %s\n\n", a.label, b.label)
	p("`bench/run_ab.sh`: the same benchmark scripts in each build's own tree, alternated on one machine (round 1: A then B;\n")
	p("round 2: B then A; ...), so that every path, the JSON and VARIANT baselines and DuckDB's own readers included, runs on\n")
	p("the engine of its build. Each figure is the median over a round's timed runs, and over the rounds (%d and %d);\n", len(a.rounds), len(b.rounds))
	p("B/A below 1 is B lower. Where 2.0 is slower (millisecond GROUP BY queries), docs/ENGINE.md gives the profile. Runs:\n\n")
	for _, s := range sides {
		for _, fs := range s.rounds {
			for _, h := range abHeaders(fs) {
				p("- %s: %s (`%s`, started %s)\n", s.label, runLabel(h), h.Command, h.Started.UTC().Format("2006-01-02 15:04"))
			}
		}
	}
	p("\n")
	group := ""
	for _, f := range abFigures(a, b) {
		if f.group != group {
			group = f.group
			p("\n### %s\n\n| measure | %s | %s | B/A |\n|---|---|---|---|\n", group, a.label, b.label)
		}
		ma, mb := benchutil.Summarize(f.a).Median, benchutil.Summarize(f.b).Median
		ratio := "–"
		if ma > 0 {
			r := mb / ma
			ratio = fmt.Sprintf("%.2f", r)
			if (f.lowerBetter && r > 1.1) || (!f.lowerBetter && r < 0.9) {
				ratio = "**" + ratio + "**" // B worse by more than a tenth
			}
		}
		p("| %s | %s | %s | %s |\n", f.what, abValue(ma, f.unit), abValue(mb, f.unit), ratio)
	}
	p("\nBold: B worse than A by more than a tenth.\n\n")
}

func abValue(x float64, unit string) string {
	switch unit {
	case "s":
		return fmtSecs(x)
	case "ms":
		return fmt.Sprintf("%s ms", trim(x))
	case "spans/s":
		return countF(x)
	case "×":
		return fmt.Sprintf("%.2f", x)
	default:
		return fmt.Sprintf("%s %s", trim(x), unit)
	}
}

// abHeaders are the headers of a round's results, for their labels.
func abHeaders(fs *files) []benchutil.Header {
	var hs []benchutil.Header
	for _, n := range fs.variant {
		hs = append(hs, n.r.Header)
	}
	for _, n := range fs.gharchive {
		hs = append(hs, n.r.Header)
	}
	for _, n := range fs.streaming {
		hs = append(hs, n.r.Header)
	}
	return hs
}
