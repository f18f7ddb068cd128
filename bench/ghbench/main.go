// Command ghbench drives bench/run_gharchive.sh: GH-Archive-shaped events
// (go run ./bench/gen gharchive) loaded four ways, each into its own new
// database file of storage version v1.5.0:
//
//   - shredded_cold: shredduck ingest --transform none into a new database
//   - shredded_warm: the same file again into that database (no column added)
//   - json_column:   DuckDB read_json_objects into one JSON column
//   - read_json_auto: DuckDB read_json_auto into typed (STRUCT) columns
//
// then storage (used_blocks × block_size after CHECKPOINT) and five queries
// on the shredded table, the JSON column and the read_json_auto table, every
// answer checked against the shredded one. Loads and queries are
// interleaved, after a warm-up; a failed load or a differing answer marks
// the run FAILED and exits with status 1.
//
//	ghbench -shredduck BIN -in FILE -records N [-runs R] [-seed S] [-dir D] [-out F] [-command C] [-memory-limit M]
//	ghbench load -mode json_column|read_json_auto -db FILE -in FILE
//
// load is the child process timed for the DuckDB loads; it prints one JSON
// line {"rows":N,"seconds":S,"peak_rss_bytes":B}.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/shredduck/shredduck/bench/internal/benchutil"
)

// Kind is the result file's kind; bench/report renders its own section for it.
const Kind = "gharchive"

var ctx = context.Background()

const usage = `usage:
  ghbench -shredduck BIN -in FILE -records N [-runs R] [-seed S] [-dir D] [-out F] [-command C] [-memory-limit M]
  ghbench load -mode json_column|read_json_auto -db FILE -in FILE
`

var loadSQL = map[string]string{
	"json_column":    `CREATE TABLE gh AS SELECT json FROM read_json_objects({{FILE}}, format = 'newline_delimited')`,
	"read_json_auto": `CREATE TABLE gh AS SELECT * FROM read_json_auto({{FILE}})`,
}

var encodings = []benchutil.Encoding{
	{Name: "shredded_cold", Source: "ndjson", Table: "gh",
		Description: "shredduck ingest --transform none into a new database: one typed column per leaf path"},
	{Name: "shredded_warm", Source: "ndjson", Table: "gh",
		Description: "the same file again with shredduck ingest into the cold run's database (columns_added must be 0)"},
	{Name: "json_column", Source: "ndjson", Table: "gh",
		Description: "DuckDB read_json_objects: one JSON column", SQL: loadSQL["json_column"]},
	{Name: "read_json_auto", Source: "ndjson", Table: "gh",
		Description: "DuckDB read_json_auto: typed columns, nested objects as STRUCTs", SQL: loadSQL["read_json_auto"]},
}

// Result is bench/results/gharchive-N.json.
type Result struct {
	benchutil.Header
	StorageVersion string                     `json:"storage_version"`
	MemoryLimit    string                     `json:"shredduck_memory_limit"` // empty: shredduck's default
	Encodings      []benchutil.Encoding       `json:"encodings"`
	Ingest         []benchutil.VariantIngest  `json:"ingest_samples"`
	IngestSummary  []benchutil.IngestSummary  `json:"ingest_summary"`
	Storage        []benchutil.Storage        `json:"storage"`
	Queries        []benchutil.QuerySample    `json:"query_samples"`
	QuerySummary   []benchutil.QuerySummary   `json:"query_summary"`
	Answers        map[string][]benchutil.Row `json:"reference_answers"`
	Ratios         []Ratio                    `json:"ratios"`
}

// Ratio is one headline comparison against its target.
type Ratio struct {
	Name   string  `json:"name"`
	Value  float64 `json:"value"`
	Target string  `json:"target"`
	Met    bool    `json:"met"`
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "load" {
		os.Exit(runLoad(os.Args[2:]))
	}
	os.Exit(runBench(os.Args[1:]))
}

// runLoad builds one DuckDB table in an existing database file,
// checkpoints, closes, and prints its row count and peak RSS.
func runLoad(args []string) int {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	mode := fs.String("mode", "", "json_column or read_json_auto")
	dbPath := fs.String("db", "", "database file")
	in := fs.String("in", "", "NDJSON file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	q, ok := loadSQL[*mode]
	if !ok || *dbPath == "" || *in == "" {
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
	start := time.Now()
	n, err := func() (int64, error) {
		db, err := sql.Open("duckdb", *dbPath)
		if err != nil {
			return 0, err
		}
		defer db.Close()
		conn, err := db.Conn(ctx)
		if err != nil {
			return 0, err
		}
		defer conn.Close()
		for _, s := range []string{strings.Replace(q, "{{FILE}}", benchutil.QuoteString(*in), 1), "CHECKPOINT"} {
			if _, err := conn.ExecContext(ctx, s); err != nil {
				return 0, err
			}
		}
		var n int64
		err = conn.QueryRowContext(ctx, "SELECT count(*) FROM gh").Scan(&n)
		if err == nil {
			err = conn.Close()
		}
		if err == nil {
			err = db.Close()
		}
		return n, err
	}()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", *mode, err)
		return 1
	}
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	fmt.Printf("{\"rows\":%d,\"seconds\":%.3f,\"peak_rss_bytes\":%d}\n", n, time.Since(start).Seconds(), ru.Maxrss*1024)
	return 0
}

// bench is one ghbench run: its flags, where its database files go, and
// the result it fills in. The steps below run in the order runBench calls
// them; each appends its samples to res and its failures through fail.
type bench struct {
	shredduck, self, in, dir, memLimit string
	records                            int64
	runs                               int
	inBytes                            int64
	res                                Result
	// lastOK holds, per encoding, whether its last load succeeded: the
	// warm load needs the cold one, storage and queries the last file.
	lastOK map[string]bool
}

func runBench(args []string) int {
	b, out, code := newBench(args)
	if b == nil {
		return code
	}
	start := time.Now()
	b.loadAll()
	fmt.Fprintf(os.Stderr, "loads took %.0f s\n", time.Since(start).Seconds())
	ingestMedian := b.summarizeIngest()

	// Storage, then the queries, all files attached to one in-memory database.
	qdb, err := sql.Open("duckdb", "")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer qdb.Close()
	conn, err := qdb.Conn(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer conn.Close()
	conn.ExecContext(ctx, "SET TimeZone = 'UTC'")
	storage, attached := b.measureStorage(conn)
	qstart := time.Now()
	sums := b.runQueries(conn, attached)
	fmt.Fprintf(os.Stderr, "queries took %.0f s\n", time.Since(qstart).Seconds())
	qMedian := b.summarizeQueries(sums)
	b.res.Ratios = ratios(storage, ingestMedian, qMedian)

	b.res.Seconds = time.Since(start).Seconds()
	printResult(&b.res)
	if out != "" {
		if err := benchutil.WriteJSON(out, b.res); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	conn.Close()
	qdb.Close()
	for _, f := range b.queryDBs() {
		benchutil.RemoveDB(f)
	}
	benchutil.RemoveDB(b.file("shredded"))
	if b.res.Failed {
		fmt.Println("FAILED:")
		for _, f := range b.res.Failures {
			fmt.Println("  " + f)
		}
		return 1
	}
	return 0
}

// newBench parses runBench's flags and starts the result. On a usage
// error or a missing input it returns nil and the exit status; out is
// where the JSON result goes ("" for nowhere).
func newBench(args []string) (b *bench, out string, code int) {
	fs := flag.NewFlagSet("ghbench", flag.ContinueOnError)
	shredduck := fs.String("shredduck", "", "shredduck binary")
	in := fs.String("in", "", "NDJSON events (go run ./bench/gen gharchive)")
	records := fs.Int64("records", 0, "events in the file")
	runs := fs.Int("runs", 3, "timed runs (after one warm-up)")
	seed := fs.Uint64("seed", 1, "the seed the file was generated with (recorded)")
	dir := fs.String("dir", os.TempDir(), "directory for the database files")
	outFlag := fs.String("out", "", "write the JSON result here")
	command := fs.String("command", "", "the script command line (recorded)")
	memLimit := fs.String("memory-limit", "", "shredduck --memory-limit (empty: not passed, shredduck's own default of 256MB)")
	if err := fs.Parse(args); err != nil {
		return nil, "", 2
	}
	if *shredduck == "" || *in == "" || *records <= 0 || *runs < 1 || fs.NArg() > 0 {
		fmt.Fprint(os.Stderr, usage)
		return nil, "", 2
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return nil, "", 1
	}
	fi, err := os.Stat(*in)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return nil, "", 1
	}
	b = &bench{shredduck: *shredduck, self: self, in: *in, dir: *dir, memLimit: *memLimit,
		records: *records, runs: *runs, inBytes: fi.Size(), lastOK: map[string]bool{}}
	b.res = Result{
		Header: benchutil.Header{Kind: Kind, Command: *command, Driver: strings.Join(os.Args, " "), Started: time.Now().UTC(),
			Machine: benchutil.Machine(), Records: *records, Seed: *seed, WarmUp: 1, Runs: *runs},
		StorageVersion: benchutil.StorageVersion, MemoryLimit: *memLimit, Encodings: encodings,
		Answers: map[string][]benchutil.Row{},
	}
	b.res.Data = []benchutil.DataFile{{Signal: "gharchive", Records: *records, Bytes: fi.Size(),
		GenCommand: fmt.Sprintf("go run ./bench/gen gharchive -n %d -seed %d", *records, *seed)}}
	return b, *outFlag, 0
}

func (b *bench) fail(msg string) {
	b.res.Failed = true
	b.res.Failures = append(b.res.Failures, msg)
}

func (b *bench) file(name string) string { return filepath.Join(b.dir, "gh-"+name+".duckdb") }

// dbOf is the database file each encoding loads into: the warm load goes
// into the cold load's file.
func (b *bench) dbOf(enc string) string {
	if enc == "shredded_cold" || enc == "shredded_warm" {
		return b.file("shredded")
	}
	return b.file(enc)
}

// queryDBs are the files storage and queries read, by query path: the
// shredded one is the last cold load's, copied before the warm load doubles it.
func (b *bench) queryDBs() map[string]string {
	return map[string]string{"shredded": b.file("shredded-q"), "json_column": b.file("json_column"), "read_json_auto": b.file("read_json_auto")}
}

// loadAll runs the warm-up and the timed loads, the encodings interleaved.
func (b *bench) loadAll() {
	for run := 0; run <= b.runs; run++ {
		for _, e := range encodings {
			b.load(run, e)
		}
	}
}

// load runs one load of e, checks its table's row count and records the sample.
func (b *bench) load(run int, e benchutil.Encoding) {
	db := b.dbOf(e.Name)
	smp := benchutil.VariantIngest{Encoding: e.Name, Run: run}
	var p benchutil.Proc
	var err error
	want := b.records
	switch e.Name {
	case "shredded_cold", "shredded_warm":
		p, want, err = b.loadShredded(run, e.Name == "shredded_cold", db, &smp)
	default:
		p, err = b.loadDuckDB(e.Name, db, &smp)
	}
	smp.Seconds = p.Seconds
	if err == nil {
		smp.Rows, err = countRows(db)
		if err == nil && smp.Rows != want {
			err = fmt.Errorf("gh holds %d rows, want %d", smp.Rows, want)
		}
	}
	if st, ferr := os.Stat(db); ferr == nil {
		smp.DBBytes = st.Size()
	}
	if err != nil {
		smp.Error, smp.Seconds = err.Error(), 0
		b.fail(fmt.Sprintf("load %s run %d: %v", e.Name, run, err))
	} else {
		smp.Verified = true
	}
	b.lastOK[e.Name] = err == nil
	b.res.Ingest = append(b.res.Ingest, smp)
	benchutil.LogSample(run, "load "+e.Name, p.Seconds, smp.PeakRSS, smp.Error)
}

// loadShredded runs shredduck ingest into db, cold (a new database) or
// warm (on top of the cold load), and checks its summary; want is the
// rows db must then hold. Before the last run's warm load the cold
// database is copied for storage and queries.
func (b *bench) loadShredded(run int, cold bool, db string, smp *benchutil.VariantIngest) (p benchutil.Proc, want int64, err error) {
	want = b.records
	if cold {
		err = benchutil.CreateDB(db)
	} else if !b.lastOK["shredded_cold"] {
		err = fmt.Errorf("the cold load failed")
	}
	if !cold {
		want = 2 * b.records
		if run == b.runs && err == nil {
			// Keep the cold database (N rows) for storage and queries.
			err = copyFile(db, b.queryDBs()["shredded"])
		}
	}
	if err != nil {
		return p, want, err
	}
	a := []string{"ingest", "--json", "--progress=false", "--transform", "none", "--table", "gh", "--db", db}
	if b.memLimit != "" {
		a = append(a, "--memory-limit", b.memLimit)
	}
	if p, err = benchutil.Run(b.shredduck, append(a, b.in)...); err != nil {
		return p, want, err
	}
	var so benchutil.IngestOutput
	if err = json.Unmarshal(benchutil.LastLine(p.Stdout), &so); err != nil {
		return p, want, fmt.Errorf("cannot read shredduck's output: %v", err)
	}
	smp.PeakRSS = so.PeakRSS
	switch {
	case len(so.Tables) != 1 || so.Tables[0].Table != "gh":
		err = fmt.Errorf("shredduck loaded tables %+v, want gh", so.Tables)
	case so.Errors != 0 || so.Tables[0].Rows != b.records:
		err = fmt.Errorf("shredduck loaded %d rows with %d errors, want %d", so.Tables[0].Rows, so.Errors, b.records)
	case cold && !so.Tables[0].Created:
		err = fmt.Errorf("cold load did not create the table")
	case !cold && (so.Tables[0].Created || so.Tables[0].ColumnsAdded != 0):
		err = fmt.Errorf("warm load: created %v, columns_added %d, want false, 0", so.Tables[0].Created, so.Tables[0].ColumnsAdded)
	}
	return p, want, err
}

// loadDuckDB runs this command's load child (loadSQL[enc]) into a new db.
func (b *bench) loadDuckDB(enc, db string, smp *benchutil.VariantIngest) (benchutil.Proc, error) {
	var p benchutil.Proc
	err := benchutil.CreateDB(db)
	if err == nil {
		p, err = benchutil.Run(b.self, "load", "-mode", enc, "-db", db, "-in", b.in)
	}
	if err == nil {
		var lo struct {
			PeakRSS int64 `json:"peak_rss_bytes"`
		}
		if err = json.Unmarshal(benchutil.LastLine(p.Stdout), &lo); err != nil {
			err = fmt.Errorf("cannot read the loader's output: %v", err)
		}
		smp.PeakRSS = lo.PeakRSS
	}
	return p, err
}

// summarizeIngest fills the ingest summary and returns the median seconds
// of each encoding that did not fail.
func (b *bench) summarizeIngest() map[string]float64 {
	median := map[string]float64{}
	for _, e := range encodings {
		s := benchutil.SummarizeIngest(b.res.Ingest, e, b.records, b.inBytes)
		if !s.Failed {
			median[e.Name] = s.Seconds.Median
		}
		b.res.IngestSummary = append(b.res.IngestSummary, s)
	}
	return median
}

// measureStorage measures each query path's file and attaches it to conn
// under the path's name; it returns the bytes of each and which attached.
func (b *bench) measureStorage(conn *sql.Conn) (storage map[string]int64, attached map[string]bool) {
	storage, attached = map[string]int64{}, map[string]bool{}
	queryDB := b.queryDBs()
	for _, name := range []string{"shredded", "json_column", "read_json_auto"} {
		st := benchutil.Storage{Encoding: name}
		loaded := map[string]string{"shredded": "shredded_warm", "json_column": "json_column", "read_json_auto": "read_json_auto"}[name]
		err := fmt.Errorf("its last load failed")
		if b.lastOK[loaded] {
			err = benchutil.MeasureStorage(ctx, conn, name, queryDB[name], &st)
		}
		if err == nil {
			_, err = conn.ExecContext(ctx, fmt.Sprintf("ATTACH %s AS %s (READ_ONLY)", benchutil.QuoteString(queryDB[name]), name))
		}
		if err != nil {
			st.Error = err.Error()
			b.fail(fmt.Sprintf("storage %s: %v", name, err))
		} else {
			storage[name] = st.Bytes
			attached[name] = true
		}
		b.res.Storage = append(b.res.Storage, st)
	}
	return storage, attached
}

// runQueries runs the warm-up and the timed queries on every attached
// path, interleaved, each answer checked against the shredded one (none
// run without the shredded table). It returns the summaries by "query path".
func (b *bench) runQueries(conn *sql.Conn, attached map[string]bool) map[string]*benchutil.QuerySummary {
	sums := map[string]*benchutil.QuerySummary{}
	for _, q := range queries {
		for _, p := range paths {
			sums[q.name+" "+p.name] = &benchutil.QuerySummary{Query: q.name, Path: p.name, Encoding: p.name, Method: p.method, SQL: p.sql(q)}
		}
	}
	for run := 0; run <= b.runs && attached["shredded"]; run++ {
		for _, q := range queries {
			for _, p := range paths {
				b.query(conn, run, q, p, attached[p.name], sums[q.name+" "+p.name])
			}
		}
	}
	return sums
}

// query runs q on path p once, checks the answer and records the sample;
// the first shredded answer becomes the reference.
func (b *bench) query(conn *sql.Conn, run int, q query, p queryPath, attached bool, s *benchutil.QuerySummary) {
	smp := benchutil.QuerySample{Query: q.name, Path: p.name, Run: run}
	var rows []benchutil.Row
	var secs float64
	err := fmt.Errorf("not loaded")
	if attached {
		rows, secs, err = benchutil.QueryRows(ctx, conn, s.SQL, render)
	}
	if err == nil && p.name == "shredded" && b.res.Answers[q.name] == nil {
		b.res.Answers[q.name] = rows
		if len(rows) == 0 {
			err = fmt.Errorf("the shredded answer is empty")
		}
	}
	if err == nil {
		if d := sameAnswer(rows, b.res.Answers[q.name]); d != "" {
			err = fmt.Errorf("answer differs from shredded: %s", d)
		}
	}
	smp.Rows = len(rows)
	if err != nil {
		smp.Error = err.Error()
		if s.Error == "" {
			s.Error = smp.Error
		}
		s.Failed = true
		b.fail(fmt.Sprintf("query %s on %s run %d: %v", q.name, p.name, run, err))
	} else {
		smp.OK, smp.Seconds = true, secs
	}
	b.res.Queries = append(b.res.Queries, smp)
	benchutil.LogSample(run, q.name+" "+p.name, smp.Seconds, 0, smp.Error)
}

// summarizeQueries fills the query summary from the timed runs and
// returns the median seconds by "query path" of those that did not fail.
func (b *bench) summarizeQueries(sums map[string]*benchutil.QuerySummary) map[string]float64 {
	median := map[string]float64{}
	for _, q := range queries {
		for _, p := range paths {
			s := sums[q.name+" "+p.name]
			if !s.Failed {
				var secs []float64
				for _, smp := range b.res.Queries {
					if smp.Query == q.name && smp.Path == p.name && smp.Run > 0 {
						secs = append(secs, smp.Seconds)
					}
				}
				s.Seconds = benchutil.Summarize(secs)
				median[q.name+" "+p.name] = s.Seconds.Median
			}
			b.res.QuerySummary = append(b.res.QuerySummary, *s)
		}
	}
	return median
}

// ratios are the headline comparisons against their targets, from the
// storage bytes, ingest medians and query medians (by "query path").
func ratios(storage map[string]int64, ingestMedian, qMedian map[string]float64) []Ratio {
	var rs []Ratio
	if storage["shredded"] > 0 && storage["json_column"] > 0 {
		v := float64(storage["shredded"]) / float64(storage["json_column"])
		rs = append(rs, Ratio{"storage shredded / json_column", v, "<= 0.4", v <= 0.4})
	}
	if c, a := ingestMedian["shredded_cold"], ingestMedian["read_json_auto"]; c > 0 && a > 0 {
		rs = append(rs, Ratio{"ingest seconds shredded_cold / read_json_auto", c / a, "<= 1", c <= a})
	}
	for _, q := range queries {
		s, j := qMedian[q.name+" shredded"], qMedian[q.name+" json_column"]
		switch {
		case s <= 0 || j <= 0:
		case q.info:
			rs = append(rs, Ratio{"query " + q.name + " speedup json_column / shredded", j / s, "none (shown for information)", true})
		default:
			rs = append(rs, Ratio{"query " + q.name + " speedup json_column / shredded", j / s, ">= 30", j/s >= 30})
		}
	}
	return rs
}

func copyFile(src, dst string) error {
	benchutil.RemoveDB(dst)
	if _, err := os.Stat(src + ".wal"); err == nil {
		return fmt.Errorf("%s has a WAL; cannot copy it", src)
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func countRows(path string) (int64, error) {
	db, err := sql.Open("duckdb", path+"?access_mode=read_only")
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var n int64
	err = db.QueryRow("SELECT count(*) FROM gh").Scan(&n)
	return n, err
}

func printResult(r *Result) {
	fmt.Printf("\n%d events (%.0f MB), %d timed runs (median, min-max)\n\n", r.Records, float64(r.Data[0].Bytes)/1e6, r.Runs)
	fmt.Printf("%-15s %8s %17s %11s %10s\n", "load", "median", "min-max", "records/s", "peak RSS")
	for _, s := range r.IngestSummary {
		if s.Failed {
			fmt.Printf("%-15s FAILED\n", s.Encoding)
			continue
		}
		fmt.Printf("%-15s %7.2fs %7.2f-%7.2fs %11.0f %6d MiB\n", s.Encoding, s.Seconds.Median, s.Seconds.Min, s.Seconds.Max, s.RecordsPerSec, s.PeakRSS>>20)
	}
	fmt.Printf("\n%-15s %12s\n", "storage", "MB")
	for _, st := range r.Storage {
		fmt.Printf("%-15s %12.1f\n", st.Encoding, float64(st.Bytes)/1e6)
	}
	fmt.Printf("\n%-16s", "query (ms)")
	for _, p := range paths {
		fmt.Printf(" %26s", p.name)
	}
	fmt.Println()
	for _, q := range queries {
		fmt.Printf("%-16s", q.name)
		for _, p := range paths {
			i := slices.IndexFunc(r.QuerySummary, func(s benchutil.QuerySummary) bool { return s.Query == q.name && s.Path == p.name })
			if s := r.QuerySummary[i]; s.Failed {
				fmt.Printf(" %26s", "FAILED")
			} else {
				fmt.Printf(" %9.1f (%6.1f-%7.1f)", s.Seconds.Median*1e3, s.Seconds.Min*1e3, s.Seconds.Max*1e3)
			}
		}
		fmt.Println()
	}
	fmt.Println()
	for _, x := range r.Ratios {
		met := "met"
		if !x.Met {
			met = "NOT met"
		}
		fmt.Printf("%-52s %8.3f  target %s: %s\n", x.Name, x.Value, x.Target, met)
	}
}
