package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/shredduck/shredduck/bench/internal/benchutil"
)

var contextBG = context.Background()

var encodings = []benchutil.Encoding{
	{Name: "shredded", Source: "ndjson", Table: "otel_traces",
		Description: "shredduck ingest: typed core columns plus one typed column per attribute key"},
	{Name: "sql_typed", Source: "ndjson", Table: "spans",
		Description: "bench/sqltyped: read_json_objects + json_transform + hand-written SQL into typed columns (only the fields it names)"},
	{Name: "json_otlp", Source: "ndjson", Table: "docs",
		Description: "one JSON object {resource, span} per span, OTLP/JSON as received (attributes as key/value lists)", SQL: loadSQL["json_otlp"]},
	{Name: "variant_otlp", Source: "ndjson", Table: "docs",
		Description: "the json_otlp objects cast to VARIANT", SQL: loadSQL["variant_otlp"]},
	{Name: "json_flat", Source: "shredded", Table: "docs",
		Description: "to_json of each shredded row (all columns, NULLs included), stored as JSON", SQL: loadSQL["json_flat"]},
	{Name: "variant_flat", Source: "shredded", Table: "docs",
		Description: "to_json of each shredded row cast to VARIANT", SQL: loadSQL["variant_flat"]},
}

type loadOutput struct {
	Rows    int64 `json:"rows"`
	PeakRSS int64 `json:"peak_rss_bytes"`
}

// variantRun is one `otelbench variant`: its flags, where its database
// files go, and the result it fills in. runVariant calls its steps in
// order; each appends its samples to res and its failures through fail.
type variantRun struct {
	shredduck, sqltyped, self, in, dir string
	records                            int64
	runs                               int
	inBytes                            int64
	res                                benchutil.Variant
	// lastOK holds, per encoding, whether its last load succeeded: the
	// flat encodings need the shredded table, storage and queries the file.
	lastOK map[string]bool
}

func runVariant(args []string) int {
	v, out, code := newVariantRun(args)
	if v == nil {
		return code
	}
	start := time.Now()
	v.loadAll()
	fmt.Fprintf(os.Stderr, "loads took %.0f s\n", time.Since(start).Seconds())
	for _, e := range encodings {
		v.res.IngestSummary = append(v.res.IngestSummary, benchutil.SummarizeIngest(v.res.Ingest, e, v.records, v.inBytes))
	}

	// Storage, then the queries, all files attached to one in-memory database.
	qdb, err := sql.Open("duckdb", "")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer qdb.Close()
	conn, err := qdb.Conn(contextBG)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer conn.Close()
	v.measureStorage(conn)
	qstart := time.Now()
	sums := v.runQueries(conn)
	fmt.Fprintf(os.Stderr, "queries took %.0f s\n", time.Since(qstart).Seconds())
	v.summarizeQueries(sums)
	v.res.Seconds = time.Since(start).Seconds()
	printVariant(&v.res)
	if out != "" {
		if err := benchutil.WriteJSON(out, v.res); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	for _, e := range encodings {
		benchutil.RemoveDB(v.file(e.Name))
	}
	return exitStatus(&v.res.Header)
}

// newVariantRun parses runVariant's flags and starts the result. On a
// usage error or a missing input it returns nil and the exit status; out
// is where the JSON result goes ("" for nowhere).
func newVariantRun(args []string) (v *variantRun, out string, code int) {
	fs := flag.NewFlagSet("variant", flag.ContinueOnError)
	shredduck := fs.String("shredduck", "", "shredduck binary")
	sqltyped := fs.String("sqltyped", "", "bench/sqltyped binary")
	in := fs.String("in", "", "NDJSON traces (bench/gen traces)")
	records := fs.Int64("records", 0, "spans in the file")
	runs := fs.Int("runs", 3, "timed runs (after one warm-up)")
	seed := fs.Uint64("seed", 1, "the seed the file was generated with (recorded)")
	dir := fs.String("dir", os.TempDir(), "directory for the database files")
	outFlag := fs.String("out", "", "write the JSON result here")
	command := fs.String("command", "", "the script command line (recorded)")
	if err := fs.Parse(args); err != nil {
		return nil, "", 2
	}
	if *shredduck == "" || *sqltyped == "" || *in == "" || *records <= 0 || *runs < 1 {
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
	v = &variantRun{shredduck: *shredduck, sqltyped: *sqltyped, self: self, in: *in, dir: *dir,
		records: *records, runs: *runs, inBytes: fi.Size(), lastOK: map[string]bool{}}
	v.res = benchutil.Variant{Header: header(benchutil.KindVariant, *command, *records, *seed, *runs),
		StorageVersion: benchutil.StorageVersion, Encodings: encodings, Answers: map[string][]benchutil.Row{}}
	v.res.Data = append(v.res.Data, dataFile("traces", *records, fi.Size(), *seed))
	return v, *outFlag, 0
}

func (v *variantRun) file(enc string) string { return filepath.Join(v.dir, "variant-"+enc+".duckdb") }

// loadAll runs the warm-up and the timed loads, interleaved; the files of
// the last run stay for the queries.
func (v *variantRun) loadAll() {
	for run := 0; run <= v.runs; run++ {
		for _, e := range encodings {
			v.load(run, e)
		}
	}
}

// load loads e into a new database file with its loader, checks the row
// count and records the sample.
func (v *variantRun) load(run int, e benchutil.Encoding) {
	db := v.file(e.Name)
	smp := benchutil.VariantIngest{Encoding: e.Name, Run: run}
	var p benchutil.Proc
	var lo loadOutput
	err := benchutil.CreateDB(db)
	if err == nil {
		p, err = v.runLoader(e.Name, db)
	}
	smp.Seconds = p.Seconds
	if err == nil {
		if err = json.Unmarshal(benchutil.LastLine(p.Stdout), &lo); err != nil {
			err = fmt.Errorf("cannot read the loader's output: %v", err)
		}
	}
	smp.PeakRSS = lo.PeakRSS
	if err == nil {
		smp.Rows, err = countRows(db, e.Table)
		if err == nil && smp.Rows != v.records {
			err = fmt.Errorf("%s holds %d rows, want %d", e.Table, smp.Rows, v.records)
		}
	}
	if st, ferr := os.Stat(db); ferr == nil {
		smp.DBBytes = st.Size()
	}
	if err != nil {
		smp.Error = err.Error()
		smp.Seconds = 0
		fail(&v.res.Header, fmt.Sprintf("load %s run %d: %v", e.Name, run, err))
	} else {
		smp.Verified = true
	}
	v.lastOK[e.Name] = err == nil
	v.res.Ingest = append(v.res.Ingest, smp)
	benchutil.LogSample(run, "load "+e.Name, p.Seconds, smp.PeakRSS, smp.Error)
}

// runLoader runs the process that loads encoding enc into db.
func (v *variantRun) runLoader(enc, db string) (benchutil.Proc, error) {
	switch enc {
	case "shredded":
		return benchutil.Run(v.shredduck, "ingest", "--json", "--progress=false", "--db", db, v.in)
	case "sql_typed":
		return benchutil.Run(v.sqltyped, "-db", db, "-in", v.in)
	case "json_otlp", "variant_otlp":
		return benchutil.Run(v.self, "load", "-encoding", enc, "-db", db, "-in", v.in)
	default: // built from this run's shredded table
		if !v.lastOK["shredded"] {
			return benchutil.Proc{}, fmt.Errorf("no shredded table to encode")
		}
		return benchutil.Run(v.self, "load", "-encoding", enc, "-db", db, "-from", v.file("shredded"))
	}
}

// measureStorage measures each encoding's file and attaches it to conn
// under the encoding's name.
func (v *variantRun) measureStorage(conn *sql.Conn) {
	for _, e := range encodings {
		st := benchutil.Storage{Encoding: e.Name}
		err := fmt.Errorf("its last load failed")
		if v.lastOK[e.Name] {
			err = benchutil.MeasureStorage(contextBG, conn, e.Name, v.file(e.Name), &st)
		}
		if err == nil {
			_, err = conn.ExecContext(contextBG, fmt.Sprintf("ATTACH %s AS %s (READ_ONLY)", benchutil.QuoteString(v.file(e.Name)), e.Name))
		}
		if err != nil {
			st.Error = err.Error()
			fail(&v.res.Header, fmt.Sprintf("storage %s: %v", e.Name, err))
		}
		v.res.Storage = append(v.res.Storage, st)
	}
}

// runQueries runs the warm-up and the timed queries on every path,
// interleaved, and returns their summaries by "query path".
func (v *variantRun) runQueries(conn *sql.Conn) map[string]*benchutil.QuerySummary {
	sums := map[string]*benchutil.QuerySummary{}
	for _, q := range queries {
		for _, p := range queryPaths {
			sums[q.name+" "+p.name()] = &benchutil.QuerySummary{Query: q.name, Path: p.name(), Encoding: p.enc, Method: p.method, SQL: p.sql(q)}
		}
	}
	for run := 0; run <= v.runs; run++ {
		for _, q := range queries {
			for _, p := range queryPaths {
				v.query(conn, run, q, p, sums[q.name+" "+p.name()])
			}
		}
	}
	return sums
}

// query runs q on path p once, checks the answer against the shredded one
// and records the sample. The first shredded answers become the reference,
// checked for plausibility once every query has one.
func (v *variantRun) query(conn *sql.Conn, run int, q query, p queryPath, s *benchutil.QuerySummary) {
	smp := benchutil.QuerySample{Query: q.name, Path: p.name(), Run: run}
	rows, secs, err := benchutil.QueryRows(contextBG, conn, s.SQL, render)
	// Sorted after the timing: answers compare as sets of rows.
	slices.SortFunc(rows, func(a, b benchutil.Row) int { return slices.Compare(a, b) })
	if err == nil && p.enc == "shredded" && v.res.Answers[q.name] == nil {
		v.res.Answers[q.name] = rows
		if len(v.res.Answers) == len(queries) {
			if err = checkReference(v.res.Answers, v.records); err != nil {
				err = fmt.Errorf("the shredded answers are implausible: %v", err)
			}
		}
	}
	if err == nil {
		if d := sameAnswer(rows, v.res.Answers[q.name], q.floatCol); d != "" {
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
		fail(&v.res.Header, fmt.Sprintf("query %s on %s run %d: %v", q.name, p.name(), run, err))
	} else {
		smp.OK, smp.Seconds = true, secs
	}
	v.res.Queries = append(v.res.Queries, smp)
	benchutil.LogSample(run, q.name+" "+p.name(), smp.Seconds, 0, smp.Error)
}

// summarizeQueries fills the query summary from the timed runs.
func (v *variantRun) summarizeQueries(sums map[string]*benchutil.QuerySummary) {
	for _, q := range queries {
		for _, p := range queryPaths {
			s := sums[q.name+" "+p.name()]
			if !s.Failed {
				var secs []float64
				for _, smp := range v.res.Queries {
					if smp.Query == q.name && smp.Path == p.name() && smp.Run > 0 {
						secs = append(secs, smp.Seconds)
					}
				}
				s.Seconds = benchutil.Summarize(secs)
			}
			v.res.QuerySummary = append(v.res.QuerySummary, *s)
		}
	}
}

func countRows(path, table string) (int64, error) {
	db, err := sql.Open("duckdb", path+"?access_mode=read_only")
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var n int64
	err = db.QueryRow("SELECT count(*) FROM " + table).Scan(&n)
	return n, err
}

func printVariant(r *benchutil.Variant) {
	fmt.Printf("\n%d spans, %d timed runs (median, min-max)\n\n", r.Records, r.Runs)
	fmt.Printf("%-13s %8s %17s %11s %10s %10s\n", "load", "median", "min-max", "records/s", "peak RSS", "storage")
	for i, s := range r.IngestSummary {
		st := r.Storage[i]
		if s.Failed {
			fmt.Printf("%-13s FAILED\n", s.Encoding)
			continue
		}
		fmt.Printf("%-13s %7.2fs %7.2f-%7.2fs %11.0f %6d MiB %6.1f MB\n", s.Encoding, s.Seconds.Median, s.Seconds.Min, s.Seconds.Max,
			s.RecordsPerSec, s.PeakRSS>>20, float64(st.Bytes)/1e6)
	}
	fmt.Printf("\n%-22s", "query (ms)")
	for _, q := range queries {
		fmt.Printf(" %22s", q.name)
	}
	fmt.Println()
	for _, p := range queryPaths {
		fmt.Printf("%-22s", p.name())
		for _, q := range queries {
			for _, s := range r.QuerySummary {
				if s.Query == q.name && s.Path == p.name() {
					if s.Failed {
						fmt.Printf(" %22s", "FAILED")
					} else {
						fmt.Printf(" %8.1f (%5.1f-%5.1f)", s.Seconds.Median*1e3, s.Seconds.Min*1e3, s.Seconds.Max*1e3)
					}
				}
			}
		}
		fmt.Println()
	}
}
