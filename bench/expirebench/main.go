// Command expirebench measures the stall that `serve --export-dir` puts on
// ingestion when retention expires an hour: ingest.DB.ExpireExported
// deletes the hour's rows in one DELETE and commits it in the writer's
// turn (Committer.Exclusive: no group is written meanwhile), and the
// expirer then checkpoints in the writer's turn too (docs/RETENTION.md).
//
// For each N it builds a database of runs+after hours of N spans each
// (the spans of -template, bench/gen's traces, repeated with their start
// times spread evenly over each hour, inserted in time order as a server
// stores them), checkpoints it, sets what serve sets (--memory-limit,
// threads, max_vacuum_tasks = 0, checkpoint_threshold), then, for the
// oldest hours one after the other: writes the hour to Parquet as the
// roll-off does (ingest.DB.Export, outside the turn), expires it through
// ingest.DB.ExpireExported with a turn function that times what runs in
// the turn, and checkpoints as the expirer does. Each run is checked: the
// hour has no rows left, its file holds N, the other hours are whole.
//
//	bench/run_expire.sh [--quick] [--records N,N...] [--runs R] [--seed S] [--out DIR | --record]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/shredduck/shredduck/bench/internal/benchutil"
	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/shred"
	"github.com/shredduck/shredduck/transforms"
)

const table = "otel_traces"

// base is the first hour (2026-01-01T00:00:00Z).
var base = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Sample is one hour expired.
type Sample struct {
	Run int `json:"run"`
	// TurnMS is the writer's turn: the DELETE, the shredduck_meta row,
	// the rename and the COMMIT (ingestion waits for it).
	TurnMS float64 `json:"turn_ms"`
	// ExpireMS is all of ExpireExported: its count and file check before
	// the turn, and the turn.
	ExpireMS float64 `json:"expire_ms"`
	// CheckpointMS is the checkpoint the expirer runs after it, also in
	// the writer's turn.
	CheckpointMS float64 `json:"checkpoint_ms"`
	// RollOffMS is the hour's Parquet export (outside the turn).
	RollOffMS float64 `json:"rolloff_ms"`
	// PeakRSS* are the process's peak RSS (VmHWM, reset before each
	// step) during the turn and during the checkpoint.
	// RSSBefore is the RSS before the turn.
	RSSBefore         int64 `json:"rss_before_bytes"`
	PeakRSSTurn       int64 `json:"peak_rss_turn_bytes"`
	PeakRSSCheckpoint int64 `json:"peak_rss_checkpoint_bytes"`
	// WALBytes is the WAL after the COMMIT (the deletes logged).
	WALBytes int64  `json:"wal_bytes"`
	FileSize int64  `json:"db_file_bytes_after"`
	Deleted  int64  `json:"deleted"`
	Error    string `json:"error,omitempty"`
}

// Result is one N's runs.
type Result struct {
	Spans        int64                     `json:"spans_per_hour"`
	Hours        int                       `json:"hours_in_table"`
	BuildSeconds float64                   `json:"build_seconds"`
	DBBytes      int64                     `json:"db_file_bytes"`
	Samples      []Sample                  `json:"samples"`
	Summary      map[string]benchutil.Stat `json:"summary"`
}

// Output is the result file.
type Output struct {
	benchutil.Header
	MemoryLimit string   `json:"memory_limit"`
	Template    string   `json:"template"`
	Results     []Result `json:"results"`
}

func main() {
	template := flag.String("template", "", "bench/gen traces NDJSON whose spans every hour repeats")
	spansFlag := flag.String("spans", "1000000,3600000", "spans per hour, comma-separated")
	runs := flag.Int("runs", 3, "hours expired per N (each a sample)")
	after := flag.Int("after", 1, "hours in the table after the expired ones")
	dir := flag.String("dir", os.TempDir(), "scratch directory (databases, export)")
	memLimit := flag.String("memory-limit", "256MB", "DuckDB's memory_limit (serve's --memory-limit default)")
	out := flag.String("out", "", "result JSON file")
	command := flag.String("command", "", "the script's command line, recorded")
	seed := flag.Uint64("seed", 1, "the template's seed, recorded")
	flag.Parse()
	if *template == "" {
		fatal(fmt.Errorf("-template is required"))
	}
	var spans []int64
	for _, s := range strings.Split(*spansFlag, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil || n <= 0 {
			fatal(fmt.Errorf("-spans %q: %v", s, err))
		}
		spans = append(spans, n)
	}
	start := time.Now()
	o := Output{Header: benchutil.Header{Kind: "expire", Command: *command, Driver: strings.Join(os.Args, " "),
		Started: start.UTC(), Machine: benchutil.Machine(), Seed: *seed, Runs: *runs},
		MemoryLimit: *memLimit, Template: *template}
	for _, n := range spans {
		r, err := measure(*template, *dir, n, *runs, *after, *memLimit)
		if err != nil {
			o.Failed = true
			o.Failures = append(o.Failures, fmt.Sprintf("%d spans: %v", n, err))
			fmt.Fprintf(os.Stderr, "%d spans: %v\n", n, err)
		}
		for _, s := range r.Samples {
			if s.Error != "" {
				o.Failed = true
				o.Failures = append(o.Failures, fmt.Sprintf("%d spans, run %d: %s", n, s.Run, s.Error))
			}
		}
		o.Results = append(o.Results, r)
		o.Records += n
	}
	o.Seconds = time.Since(start).Seconds()
	fmt.Printf("\n%-12s %-22s %-22s %-22s %-14s %-14s %-14s %s\n", "spans/hour", "turn ms (min-max)", "checkpoint ms", "expire ms", "RSS before MiB", "peak turn MiB", "peak ckpt MiB", "WAL MiB")
	for _, r := range o.Results {
		s := r.Summary
		if s == nil {
			continue
		}
		rng := func(st benchutil.Stat) string { return fmt.Sprintf("%.0f (%.0f-%.0f)", st.Median, st.Min, st.Max) }
		fmt.Printf("%-12d %-22s %-22s %-22s %-14.0f %-14.0f %-14.0f %.0f\n", r.Spans, rng(s["turn_ms"]), rng(s["checkpoint_ms"]), rng(s["expire_ms"]),
			s["rss_before_mib"].Median, s["peak_rss_turn_mib"].Median, s["peak_rss_checkpoint_mib"].Median, s["wal_mib"].Median)
	}
	if *out != "" {
		if err := benchutil.WriteJSON(*out, o); err != nil {
			fatal(err)
		}
		fmt.Fprintf(os.Stderr, "wrote %s\n", *out)
	}
	if o.Failed {
		os.Exit(1)
	}
}

func measure(template, dir string, n int64, runs, after int, memLimit string) (Result, error) {
	ctx := context.Background()
	r := Result{Spans: n, Hours: runs + after}
	path := filepath.Join(dir, fmt.Sprintf("expire-%d.duckdb", n))
	exportDir := filepath.Join(dir, fmt.Sprintf("expire-%d-export", n))
	benchutil.RemoveDB(path)
	os.RemoveAll(exportDir)
	defer benchutil.RemoveDB(path)
	defer os.RemoveAll(exportDir)
	t0 := time.Now()
	db, err := build(ctx, path, template, n, r.Hours, memLimit)
	if err != nil {
		return r, err
	}
	defer db.Close()
	r.BuildSeconds = time.Since(t0).Seconds()
	r.DBBytes = fileSize(path)
	fmt.Fprintf(os.Stderr, "%d spans/hour: %d hours built in %.0f s, %.1f GB\n", n, r.Hours, r.BuildSeconds, float64(r.DBBytes)/1e9)

	for run := range runs {
		hour := base.Add(time.Duration(run) * time.Hour)
		s := Sample{Run: run}
		err := expireOne(ctx, db, path, exportDir, hour, n, &s)
		if err == nil {
			err = verify(ctx, db, exportDir, hour, n, run, r.Hours)
		}
		if err != nil {
			s.Error = err.Error()
		}
		fmt.Fprintf(os.Stderr, "  run %d: turn %.0f ms, checkpoint %.0f ms, expire %.0f ms, roll-off %.0f ms, RSS %d, peak %d / %d MiB, WAL %d MiB %s\n",
			run, s.TurnMS, s.CheckpointMS, s.ExpireMS, s.RollOffMS, s.RSSBefore>>20, s.PeakRSSTurn>>20, s.PeakRSSCheckpoint>>20, s.WALBytes>>20, s.Error)
		r.Samples = append(r.Samples, s)
	}
	r.Summary = map[string]benchutil.Stat{}
	col := func(f func(Sample) float64) []float64 {
		var xs []float64
		for _, s := range r.Samples {
			if s.Error == "" {
				xs = append(xs, f(s))
			}
		}
		return xs
	}
	r.Summary["turn_ms"] = benchutil.Summarize(col(func(s Sample) float64 { return s.TurnMS }))
	r.Summary["checkpoint_ms"] = benchutil.Summarize(col(func(s Sample) float64 { return s.CheckpointMS }))
	r.Summary["expire_ms"] = benchutil.Summarize(col(func(s Sample) float64 { return s.ExpireMS }))
	r.Summary["rolloff_ms"] = benchutil.Summarize(col(func(s Sample) float64 { return s.RollOffMS }))
	r.Summary["rss_before_mib"] = benchutil.Summarize(col(func(s Sample) float64 { return float64(s.RSSBefore) / (1 << 20) }))
	r.Summary["peak_rss_turn_mib"] = benchutil.Summarize(col(func(s Sample) float64 { return float64(s.PeakRSSTurn) / (1 << 20) }))
	r.Summary["peak_rss_checkpoint_mib"] = benchutil.Summarize(col(func(s Sample) float64 { return float64(s.PeakRSSCheckpoint) / (1 << 20) }))
	r.Summary["wal_mib"] = benchutil.Summarize(col(func(s Sample) float64 { return float64(s.WALBytes) / (1 << 20) }))
	return r, nil
}

// build makes the database: the template loaded as shredduck ingest
// loads it (its columns and catalog), then hours of n spans copied from
// it in time order, in transactions of the template's size.
func build(ctx context.Context, path, template string, n int64, hours int, memLimit string) (*ingest.DB, error) {
	db, err := ingest.Open(path)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*ingest.DB, error) { db.Close(); return nil, err }
	in, err := ingest.StatInputs([]string{template})
	if err != nil {
		return fail(err)
	}
	if _, err := db.Load(ctx, in, ingest.Options{}); err != nil {
		return fail(err)
	}
	for _, q := range []string{
		"CREATE TEMP TABLE tpl AS SELECT *, row_number() OVER (ORDER BY start_time) - 1 AS rn FROM " + table,
		"DELETE FROM " + table,
		"CHECKPOINT",
	} {
		if _, err := db.SQL.ExecContext(ctx, q); err != nil {
			return fail(fmt.Errorf("%s: %w", q, err))
		}
	}
	var k int64
	if err := db.SQL.QueryRowContext(ctx, "SELECT count(*) FROM tpl").Scan(&k); err != nil {
		return fail(err)
	}
	if err := serverSettings(db, memLimit); err != nil {
		return fail(err)
	}
	// The stored columns (not the virtual ones of shredduck_virtual_columns).
	var cols []string
	rows, err := db.SQL.QueryContext(ctx, `SELECT column_name FROM duckdb_columns() WHERE table_name = ? AND column_name NOT IN
		(SELECT column_name FROM shredduck_virtual_columns WHERE table_name = ?) ORDER BY column_index`, table, table)
	if err != nil {
		return fail(err)
	}
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			rows.Close()
			return fail(err)
		}
		cols = append(cols, c)
	}
	rows.Close()
	step := int64(time.Hour) / n
	for h := range hours {
		hourStart := base.Add(time.Duration(h) * time.Hour).UnixNano()
		for off := int64(0); off < n; off += k {
			start := fmt.Sprintf("make_timestamp_ns(%d + (rn + %d) * %d)", hourStart, off, step)
			var sel, ins []string
			for _, c := range cols {
				ins = append(ins, shred.QuoteIdent(c))
				switch c {
				case "start_time":
					sel = append(sel, start)
				case "end_time":
					sel = append(sel, start+" + (end_time - start_time)")
				default:
					sel = append(sel, shred.QuoteIdent(c))
				}
			}
			q := fmt.Sprintf(`INSERT INTO %s (%s) SELECT %s FROM tpl WHERE rn < %d ORDER BY rn`,
				table, strings.Join(ins, ", "), strings.Join(sel, ", "), min(k, n-off))
			if _, err := db.SQL.ExecContext(ctx, q); err != nil {
				return fail(fmt.Errorf("hour %d: %w", h, err))
			}
		}
	}
	if _, err := db.SQL.ExecContext(ctx, "DROP TABLE tpl"); err != nil {
		return fail(err)
	}
	if err := db.Checkpoint(ctx); err != nil {
		return fail(err)
	}
	return db, nil
}

// serverSettings sets what serve.New sets (serve/server.go): the memory
// limit, one thread fewer than the cores, the vacuum off, DuckDB's
// checkpoint threshold at four times the default --checkpoint-threshold.
func serverSettings(db *ingest.DB, memLimit string) error {
	for _, q := range []string{
		"SET memory_limit = " + benchutil.QuoteString(memLimit),
		fmt.Sprintf("SET threads = %d", max(1, runtime.NumCPU()-1)),
		"SET max_vacuum_tasks = 0",
		"SET checkpoint_threshold = '512MB'",
	} {
		if _, err := db.SQL.Exec(q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// expireOne rolls the hour off to Parquet, then expires it as the
// expirer does, timing the writer's turn, then checkpoints.
func expireOne(ctx context.Context, db *ingest.DB, path, dir string, hour time.Time, n int64, s *Sample) error {
	t := time.Now()
	if _, err := db.Export(ctx, ingest.ExportOptions{Dir: dir, Tables: []string{table}, Since: hour, Until: hour.Add(time.Hour)}, nil); err != nil {
		return err
	}
	s.RollOffMS = ms(time.Since(t))
	turn := func(fn func() error) error {
		resetPeakRSS()
		s.RSSBefore = peakRSS()
		t := time.Now()
		err := fn()
		s.TurnMS = ms(time.Since(t))
		s.PeakRSSTurn = peakRSS()
		return err
	}
	file := ingest.HourFile(dir, table, hour)
	t = time.Now()
	deleted, err := db.ExpireExported(ctx, table, transforms.OTLPTraces, hour.UnixNano(), file, turn,
		"expired_through:"+table, strconv.FormatInt(hour.Add(time.Hour).UnixNano(), 10))
	s.ExpireMS = ms(time.Since(t))
	s.Deleted = deleted
	if err != nil {
		return err
	}
	if deleted != n {
		return fmt.Errorf("expired %d rows, want %d", deleted, n)
	}
	if s.WALBytes, err = db.WALSize(); err != nil {
		return err
	}
	resetPeakRSS()
	t = time.Now()
	if err := db.Checkpoint(ctx); err != nil {
		return err
	}
	s.CheckpointMS = ms(time.Since(t))
	s.PeakRSSCheckpoint = peakRSS()
	s.FileSize = fileSize(path)
	return nil
}

// verify checks a run: the hour's rows are gone, its file holds n, the
// later hours are whole.
func verify(ctx context.Context, db *ingest.DB, dir string, hour time.Time, n int64, run, hours int) error {
	var left, kept, inFile int64
	q := fmt.Sprintf("SELECT count(*) FILTER (WHERE start_time < make_timestamp_ns(%d)), count(*) FROM %s", hour.Add(time.Hour).UnixNano(), table)
	if err := db.SQL.QueryRowContext(ctx, q).Scan(&left, &kept); err != nil {
		return err
	}
	if left != 0 {
		return fmt.Errorf("%d rows of the expired hours are still in the table", left)
	}
	if want := n * int64(hours-run-1); kept != want {
		return fmt.Errorf("the table keeps %d rows, want %d", kept, want)
	}
	file := ingest.HourFile(dir, table, hour)
	if err := db.SQL.QueryRowContext(ctx, "SELECT count(*) FROM read_parquet("+benchutil.QuoteString(file)+")").Scan(&inFile); err != nil {
		return err
	}
	if inFile != n {
		return fmt.Errorf("%s holds %d rows, want %d", file, inFile, n)
	}
	return nil
}

// resetPeakRSS resets the process's VmHWM (Linux: /proc/self/clear_refs).
func resetPeakRSS() { os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSS returns VmHWM in bytes (0 where there is none).
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "expirebench:", err)
	os.Exit(1)
}
