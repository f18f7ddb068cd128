// Command ingestbench compares shredduck's ingest of generated OTLP traces
// with sql_typed (DuckDB's own JSON reader and hand-written SQL, see
// bench/sqltyped) on the same file, in the same run, interleaved: a warm-up
// of each, then R timed runs of each in turn. Every run loads into a new
// database file; a run counts only if its table holds exactly the
// generated spans and (for shredduck) the fields sql_typed extracted are
// equal row for row (compared through an order-independent hash).
//
// It prints a table of medians (min-max) and writes every sample, the
// machine and the versions as JSON.
package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/shredduck/shredduck/bench/internal/benchutil"
)

type sample struct {
	Path     string  `json:"path"`
	Run      int     `json:"run"`
	Seconds  float64 `json:"seconds"` // wall clock of the whole process, incl. final checkpoint
	PeakRSS  int64   `json:"peak_rss_bytes"`
	Rows     int64   `json:"rows"`
	DBBytes  int64   `json:"db_bytes"`
	Verified bool    `json:"verified"`
	Error    string  `json:"error,omitempty"`
}

type report struct {
	Command   string             `json:"command"`
	Started   time.Time          `json:"started"`
	Machine   map[string]string  `json:"machine"`
	Input     string             `json:"input"`
	InputSize int64              `json:"input_bytes"`
	Records   int64              `json:"records"`
	Samples   []sample           `json:"samples"`
	Median    map[string]float64 `json:"median_seconds"`
	Ratio     float64            `json:"speedup_vs_sql_typed"`
	Failed    bool               `json:"failed"`
}

const checkCols = `trace_id, span_id, parent_span_id, name, start_time, end_time, duration_ns, "http.method", "http.route", "http.status_code", retry, service_name`

func main() {
	shredduck := flag.String("shredduck", "", "shredduck binary")
	sqltyped := flag.String("sqltyped", "", "sqltyped binary")
	in := flag.String("in", "", "NDJSON traces file (bench/gen traces)")
	records := flag.Int64("records", 0, "spans in the file")
	runs := flag.Int("runs", 3, "timed runs per path")
	dir := flag.String("dir", os.TempDir(), "directory for the database files")
	out := flag.String("out", "", "write the JSON report here")
	flag.Parse()
	if *shredduck == "" || *sqltyped == "" || *in == "" || *records == 0 {
		fmt.Fprintln(os.Stderr, "usage: ingestbench -shredduck BIN -sqltyped BIN -in FILE -records N [-runs R] [-out FILE]")
		os.Exit(2)
	}
	fi, err := os.Stat(*in)
	if err != nil {
		fatal(err)
	}
	rep := report{Command: strings.Join(os.Args, " "), Started: time.Now().UTC(), Machine: benchutil.Machine(), Input: *in, InputSize: fi.Size(), Records: *records}
	paths := []string{"sql_typed", "shredduck"}
	var refHash string
	for run := 0; run <= *runs; run++ { // run 0 is the warm-up
		for _, p := range paths {
			db := filepath.Join(*dir, fmt.Sprintf("ingestbench-%s.duckdb", p))
			var cmd *exec.Cmd
			if p == "shredduck" {
				cmd = exec.Command(*shredduck, "ingest", "--json", "--progress=false", "--db", db, *in)
			} else {
				cmd = exec.Command(*sqltyped, "-db", db, "-in", *in)
			}
			s := ingestOnce(cmd, p, db, *records, &refHash)
			s.Run = run
			if run > 0 {
				rep.Samples = append(rep.Samples, s)
			}
			if s.Error != "" {
				rep.Failed = true
			}
			logSample(run, s)
		}
	}
	summarize(&rep, paths)
	if *out != "" {
		data, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(*out, append(data, '\n'), 0o644); err != nil {
			fatal(err)
		}
	}
	if rep.Failed {
		fmt.Println("FAILED: at least one run failed or did not verify")
		os.Exit(1)
	}
}

// ingestOnce runs cmd, the load of path p into a new database db, times
// it and checks the table: records rows, the same content as the first
// load that verified (refHash, set by that load). db is removed after.
func ingestOnce(cmd *exec.Cmd, p, db string, records int64, refHash *string) sample {
	os.Remove(db)
	os.Remove(db + ".wal")
	defer os.Remove(db)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	s := sample{Path: p, Seconds: time.Since(start).Seconds()}
	if err != nil {
		s.Error = fmt.Sprintf("%v: %s", err, strings.TrimSpace(stderr.String()))
		return s
	}
	var o struct {
		PeakRSS int64 `json:"peak_rss_bytes"`
	}
	json.Unmarshal(benchutil.LastLine(stdout.Bytes()), &o)
	s.PeakRSS = o.PeakRSS
	table := "spans"
	if p == "shredduck" {
		table = "otel_traces"
	}
	var h string
	s.Rows, h, err = check(db, table)
	if st, e := os.Stat(db); e == nil {
		s.DBBytes = st.Size()
	}
	switch {
	case err != nil:
		s.Error = err.Error()
	case s.Rows != records:
		s.Error = fmt.Sprintf("%d rows, want %d", s.Rows, records)
	case *refHash == "":
		*refHash = h
		s.Verified = true
	case h != *refHash:
		s.Error = "rows differ from the first run's (hash " + h + " vs " + *refHash + ")"
	default:
		s.Verified = true
	}
	return s
}

// logSample prints one load's line on stderr as it finishes.
func logSample(run int, s sample) {
	status := "ok"
	if s.Error != "" {
		status = "FAILED: " + s.Error
	}
	label := fmt.Sprintf("run %d", run)
	if run == 0 {
		label = "warm-up"
	}
	fmt.Fprintf(os.Stderr, "%-8s %-10s %6.2fs  rss %4d MiB  %s\n", label, s.Path, s.Seconds, s.PeakRSS>>20, status)
}

// summarize sets each path's median seconds over its timed runs that did
// not fail and their ratio, printing a table of them.
func summarize(rep *report, paths []string) {
	rep.Median = map[string]float64{}
	fmt.Printf("%-10s %8s %15s %10s %12s\n", "path", "median", "min-max", "rec/s", "peak RSS")
	for _, p := range paths {
		var secs []float64
		var rss []int64
		for _, s := range rep.Samples {
			if s.Path == p && s.Error == "" {
				secs = append(secs, s.Seconds)
				rss = append(rss, s.PeakRSS)
			}
		}
		if len(secs) == 0 {
			fmt.Printf("%-10s FAILED\n", p)
			continue
		}
		slices.Sort(secs)
		slices.Sort(rss)
		m := secs[len(secs)/2]
		if len(secs)%2 == 0 {
			m = (secs[len(secs)/2-1] + secs[len(secs)/2]) / 2
		}
		rep.Median[p] = m
		fmt.Printf("%-10s %7.2fs %6.2f-%6.2fs %10.0f %8d MiB\n", p, m, secs[0], secs[len(secs)-1], float64(rep.Records)/m, rss[len(rss)-1]>>20)
	}
	if a, b := rep.Median["sql_typed"], rep.Median["shredduck"]; a > 0 && b > 0 {
		rep.Ratio = a / b
		fmt.Printf("shredduck speed vs sql_typed: %.2fx (median sql_typed / median shredduck)\n", rep.Ratio)
	}
}

// check counts the rows and hashes the fields both paths extract.
func check(path, table string) (int64, string, error) {
	db, err := sql.Open("duckdb", path+"?access_mode=read_only")
	if err != nil {
		return 0, "", err
	}
	defer db.Close()
	var n int64
	var h string
	err = db.QueryRow(fmt.Sprintf(`SELECT count(*), coalesce(sum(hash(%s))::VARCHAR, '') FROM %s`, checkCols, table)).Scan(&n, &h)
	return n, h, err
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
