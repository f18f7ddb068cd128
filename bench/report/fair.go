package main

import (
	"fmt"
	"strings"

	"github.com/shredduck/shredduck/bench/internal/benchutil"
)

// kindFair is the kind of bench/run_fairquery.sh's result (fairquery.json,
// written by bench/fairquery, a main package that cannot be imported).
const kindFair = "fairquery"

// fairBench is bench/fairquery's Result.
type fairBench struct {
	benchutil.Header
	Phases []struct {
		Surface        string  `json:"surface"`
		Seconds        float64 `json:"seconds"`
		DashboardOK    int64   `json:"dashboard_ok"`
		DashboardTries int64   `json:"dashboard_tries"`
		DashboardShare float64 `json:"dashboard_ok_share"`
		HeavyStopped   int64   `json:"heavy_stopped"`
		HeavyOther     int64   `json:"heavy_other"`
		FirstRefusal   string  `json:"first_dashboard_refusal"`
	} `json:"phases"`
	AckedRequests int64   `json:"acked_requests"`
	Refused       int64   `json:"refused_requests"`
	SpansAcked    int64   `json:"spans_acked"`
	Rows          int64   `json:"rows"`
	VisibleAfter  float64 `json:"visible_after_seconds"`
	ExitCode      int     `json:"server_exit_code"`
	PeakRSS       int64   `json:"server_peak_rss_bytes"`
}

// writeFair writes the section of the fair-query runs.
func writeFair(md *strings.Builder, fs []*named[fairBench]) {
	p := func(format string, a ...any) { fmt.Fprintf(md, format, a...) }
	p("## Fair queries\n\n")
	p("bench/run_fairquery.sh: `shredduck serve` at its default flags (plus `--pg`) takes spans from 4 workers (80-span\n")
	p("OTLP/HTTP requests) while two clients loop a query that needs more than `--query-max-memory` (a `DISTINCT` of 3M\n")
	p("strings) and a third loops a dashboard query (`SELECT name, count(*) ... GROUP BY ALL ORDER BY c DESC LIMIT 5`),\n")
	p("over `/v1/query`, then over PostgreSQL. Target (issue 29): at least 90%% of the dashboard queries answered, rows\n")
	p("equal to the spans acknowledged.\n\n")
	p("| run | surface | dashboard answered | heavy stopped / other | spans acknowledged | rows | server exit | peak RSS |\n|---|---|---|---|---|---|---|---|\n")
	for _, f := range fs {
		r := f.r
		for _, ph := range r.Phases {
			p("| %s | %s | %s of %s (%.1f%%) | %d / %d | %s | %s | %d | %d MiB |\n", f.name, ph.Surface, count(ph.DashboardOK), count(ph.DashboardTries),
				100*ph.DashboardShare, ph.HeavyStopped, ph.HeavyOther, count(r.SpansAcked), count(r.Rows), r.ExitCode, r.PeakRSS>>20)
		}
	}
	// A fair-query run is timed, not counted: runLabel's record count
	// (0) would call it a quick run.
	h := fs[0].r.Header
	p("\n%s", machineLabel(h.Machine))
	if la := h.Machine["loadavg"]; la != "" {
		p("; load average at the start %s", la)
	}
	p("\n\n")
}
