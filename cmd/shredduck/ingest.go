package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"sort"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/shred"
)

func runIngest(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ingest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	db := fs.String("db", defaultDB, "DuckDB database `file` (created if missing)")
	table := fs.String("table", "", "target table (default: otel_traces, otel_logs or otel_metrics by signal; ndjson for transform none)")
	transform := fs.String("transform", "auto", "auto, otlp-traces, otlp-logs, otlp-metrics or none (any JSON objects, flattened into typed columns; auto sends JSON objects that are not OTLP requests there)")
	maxDepth := fs.Int("max-depth", 16, "transform none: object nesting flattened into columns; deeper objects are stored as JSON in the column where the limit is reached")
	batchRows := fs.Int("batch-rows", ingest.DefaultBatchRows, "rows per batch handed to DuckDB")
	maxErrors := fs.Int("max-errors", 0, "bad lines/requests to skip before failing (0: fail on the first, commit nothing)")
	maxColumns := fs.Int("max-columns", ingest.DefaultMaxColumns, "stored attribute columns per table at most (the memory limit may allow fewer); other keys go to the typed overflow maps")
	density := fs.Float64("column-density", shred.DefaultDensity, "share of a table's recent records (at least 20 records) that must carry an attribute key for it to get a stored column; rarer keys go to the typed overflow maps and still read as columns through shredduck query (docs/SCHEMA.md); 0: every key, up to --max-columns")
	young := fs.Int("young-columns", shred.DefaultYoung, "attribute columns a table has before --column-density decides: below it every key gets a stored column at once (docs/SCHEMA.md, 5.5); 0: the density rule from the first key")
	memLimit := fs.String("memory-limit", "256MB", "DuckDB's memory limit during the load (it spills to disk beyond it); empty: DuckDB's default, 80% of RAM")
	asJSON := fs.Bool("json", false, "print the summary as one JSON object")
	progress := fs.Bool("progress", true, "show a progress bar on a terminal for loads over a second")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the load to this file")
	noteEnv(fs, dbEnv)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: shredduck ingest [--db FILE.duckdb] [flags] PATH...\n\nLoads NDJSON of OTLP/JSON export requests, pretty-printed or concatenated\nOTLP/JSON, binary OTLP protobuf (.pb, .binpb), or NDJSON of any JSON objects\n(transform none); gzip and zstd are detected.\nParquet files or directories written by shredduck export load back into their\ntables (--table for files outside an export's TABLE/date=... layout).\nThe whole load is one transaction.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if _, code, ok := parseFlags(fs, args, dbEnv, os.LookupEnv, stderr); !ok {
		return code
	}
	if *density < 0 || *density > 1 {
		fmt.Fprintf(stderr, "shredduck ingest: --column-density %g: want a share between 0 and 1\n", *density)
		return exitUsage
	}
	if err := checkDB(*db); err != nil {
		fmt.Fprintf(stderr, "shredduck ingest: %v\n", err)
		return exitUsage
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "shredduck ingest: no input paths (use - for stdin)")
		return exitUsage
	}
	// A wrong --db is refused before anything else (ingest.Open checks
	// again): before the inputs are read or a profile file is written.
	if _, err := ingest.CheckPath(*db); err != nil {
		fmt.Fprintf(stderr, "shredduck ingest: %v\n", err)
		return exitError
	}
	if parquet := countParquet(fs.Args()); parquet > 0 {
		if parquet < fs.NArg() {
			fmt.Fprintln(stderr, "shredduck ingest: Parquet files (and directories of them) cannot be mixed with other inputs in one load")
			return exitUsage
		}
		return ingestParquet(ctx, *db, fs.Args(), *table, *maxColumns, *memLimit, *asJSON, stdout, stderr)
	}
	inputs, err := ingest.StatInputs(fs.Args())
	if err != nil {
		fmt.Fprintf(stderr, "shredduck ingest: %v\n", err)
		return exitUsage
	}
	d, err := ingest.Open(*db)
	if err != nil {
		fmt.Fprintf(stderr, "shredduck ingest: %v%s\n", err, lockedHint(err, "ingest"))
		return exitError
	}
	d.ColumnDensity, d.YoungColumns = *density, max(*young, 0) // checked with the other flags
	if d.Recovered != "" {
		fmt.Fprintf(stderr, "shredduck ingest: %s: %s\n", *db, d.Recovered)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "shredduck ingest: %v\n", err)
			return exitUsage
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "shredduck ingest: %v\n", err)
			return exitError
		}
		defer pprof.StopCPUProfile()
	}
	read := new(atomic.Int64)
	stopBar := func() {}
	if *progress && !*asJSON {
		stopBar = startProgress(stderr, inputs, read)
	}
	res, err := d.Load(ctx, inputs, ingest.Options{
		Table: *table, Transform: *transform, BatchRows: *batchRows,
		MaxErrors: *maxErrors, MaxColumns: *maxColumns, MaxDepth: *maxDepth, Read: read, MemoryLimit: *memLimit,
	})
	stopBar()
	cerr := d.Close()
	if err != nil {
		fmt.Fprintf(stderr, "shredduck ingest: %v\nnothing was committed\n", err)
		return exitError
	}
	if cerr != nil {
		fmt.Fprintf(stderr, "shredduck ingest: the load was committed, but closing the database failed: %v\n(the committed rows are in the write-ahead log and are checkpointed when the database is next opened)\n", cerr)
		return exitError
	}
	// Every record bad (within --max-errors): nothing was stored, which
	// is a failed load whatever the limit allowed.
	code := exitOK
	if res.Records == 0 && res.Errors > 0 {
		code = exitError
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		if err := enc.Encode(summary(res)); err != nil {
			return exitError
		}
		return code
	}
	printSummary(stdout, res)
	for _, s := range res.ErrorSamples {
		fmt.Fprintf(stderr, "skipped: %s\n", s)
	}
	if code != exitOK {
		fmt.Fprintf(stderr, "shredduck ingest: all %d records were bad: nothing was stored\n", res.Errors)
	}
	return code
}

type tableSummary struct {
	*ingest.TableStats
	Seconds       float64 `json:"seconds"`
	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"`
}

type loadSummary struct {
	Tables       []tableSummary `json:"tables"`
	Records      int64          `json:"records"`
	Errors       int            `json:"errors"`
	ErrorSamples []string       `json:"error_samples,omitempty"`
	Bytes        int64          `json:"bytes"`
	Seconds      float64        `json:"seconds"`
	PeakRSS      int64          `json:"peak_rss_bytes"`
}

func summary(r *ingest.Result) loadSummary {
	s := loadSummary{Records: r.Records, Errors: r.Errors, ErrorSamples: r.ErrorSamples, Bytes: r.Bytes, Seconds: r.Seconds, PeakRSS: peakRSS()}
	sort.Slice(r.Tables, func(i, j int) bool { return r.Tables[i].Table < r.Tables[j].Table })
	for _, t := range r.Tables {
		ts := tableSummary{TableStats: t, Seconds: r.Seconds}
		if r.Seconds > 0 {
			ts.RecordsPerSec = float64(t.Rows) / r.Seconds
			ts.MBPerSec = float64(t.Bytes) / 1e6 / r.Seconds
		}
		s.Tables = append(s.Tables, ts)
	}
	if s.Tables == nil {
		s.Tables = []tableSummary{}
	}
	return s
}

func printSummary(w io.Writer, r *ingest.Result) {
	s := summary(r)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "table\trows\tcreated\tcolumns_added\tcolumns_widened\tkeys_overflowed\tstrays\terrors\tseconds\trecords/s\tMB/s\t")
	for _, t := range s.Tables {
		fmt.Fprintf(tw, "%s\t%d\t%v\t%d\t%d\t%d\t%d\t%d\t%.2f\t%.0f\t%.1f\t\n", t.Table, t.Rows, t.Created, t.ColumnsAdded,
			t.ColumnsWidened, t.KeysOverflowed, t.Strays, r.Errors, t.Seconds, t.RecordsPerSec, t.MBPerSec)
	}
	tw.Flush()
	if len(s.Tables) == 0 {
		fmt.Fprintf(w, "no records (%d errors)\n", r.Errors)
	}
}

// startProgress shows a bar of bytes read once a load has run for a
// second, when stderr is a terminal. The returned func stops it.
func startProgress(stderr io.Writer, inputs []ingest.Input, read *atomic.Int64) func() {
	f, ok := stderr.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return func() {}
	}
	var total int64
	for _, in := range inputs {
		if in.Size == 0 {
			total = -1 // stdin: size unknown
			break
		}
		total += in.Size
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		select {
		case <-done:
			return
		case <-time.After(time.Second):
		}
		bar := progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(stderr),
			progressbar.OptionShowBytes(true),
			progressbar.OptionSetDescription("reading"),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				bar.Set64(read.Load())
				bar.Finish()
				return
			case <-t.C:
				bar.Set64(read.Load())
			}
		}
	}()
	return func() { close(done); <-finished }
}

func countParquet(paths []string) int {
	n := 0
	for _, p := range paths {
		if ingest.IsParquetPath(p) {
			n++
		}
	}
	return n
}

// ingestParquet loads Parquet (shredduck export's) in one transaction.
func ingestParquet(ctx context.Context, db string, paths []string, table string, maxColumns int, memLimit string, asJSON bool, stdout, stderr io.Writer) int {
	d, err := ingest.Open(db)
	if err != nil {
		fmt.Fprintf(stderr, "shredduck ingest: %v%s\n", err, lockedHint(err, "ingest"))
		return exitError
	}
	if memLimit != "" {
		if _, err := d.SQL.ExecContext(ctx, "SET memory_limit = "+shred.QuoteString(memLimit)); err != nil {
			d.Close()
			fmt.Fprintf(stderr, "shredduck ingest: --memory-limit %q: %v\n", memLimit, err)
			return exitUsage
		}
	}
	start := time.Now()
	res, err := d.ImportParquet(ctx, paths, table, maxColumns)
	cerr := d.Close()
	if err != nil {
		fmt.Fprintf(stderr, "shredduck ingest: %v\nnothing was committed\n", err)
		return exitError
	}
	if cerr != nil {
		fmt.Fprintf(stderr, "shredduck ingest: the load was committed, but closing the database failed: %v\n", cerr)
		return exitError
	}
	if asJSON {
		json.NewEncoder(stdout).Encode(res)
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "table\tfiles\trows\tcreated\tseconds\t")
	for _, t := range res.Tables {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%v\t%.2f\t\n", t.Table, t.Files, t.Rows, t.Created, time.Since(start).Seconds())
	}
	tw.Flush()
	return exitOK
}
