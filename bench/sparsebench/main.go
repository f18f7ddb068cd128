// Command sparsebench loads trace files that differ only in their extra
// attribute keys (bench/gen -keys: a few dense keys, or thousands of sparse
// ones) with `shredduck ingest`, interleaved, a warm-up and R timed runs
// each, and reports per shape: ingest time, peak RSS, storage, stored
// columns, the RawDuck queries and a query on one sparse key. Every run is
// checked: the row count, the RawDuck answers equal across shapes (the rest
// of the data is the same), and every extra key's count through its column
// equal to its count in the input file, for keys with a stored column and
// overflowed keys alike. Every query goes through shredduck's query path
// (keyview: the temporary views that read a key without a stored column
// as its column), and its time includes making and dropping them.
//
// Each run also has a streaming phase per shape (-stream-workers W, 0: none):
// a new `shredduck serve` with its default flags (memory limit, queues,
// backpressure) on a new database, the shape's file replayed into it by a
// light load generator (the file's lines, each an OTLP/JSON
// ExportTraceServiceRequest, read into memory first and POSTed by W workers;
// a 503 or 429 retried after its Retry-After), its peak RSS read before
// SIGTERM, and the table's count(*) checked in a read-only open after it
// exited. Any other 4xx or 5xx, a failed exit or a wrong count fails the run.
// Reported per shape: spans/s (all spans over the time from the first send
// to the last 2xx), its ratio to the baseline shape's in the same run,
// retries and the server's peak RSS, against issue #15's target.
package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/shredduck/shredduck/bench/internal/benchutil"
	"github.com/shredduck/shredduck/internal/keyview"
	"github.com/shredduck/shredduck/shred"
)

// The RawDuck queries (DESIGN.md) and one on a sparse key.
var queries = []struct{ name, sql string }{
	{"errors_by_service", `SELECT "resource.service.name", count(*) FROM otel_traces WHERE "http.status_code" >= 500 GROUP BY 1 ORDER BY 1`},
	{"p99_by_route", `SELECT "http.route", round(quantile_cont(duration_ns, 0.99)) FROM otel_traces GROUP BY 1 ORDER BY 1`},
	{"status_codes", `SELECT "http.status_code", count(*) FROM otel_traces GROUP BY 1 ORDER BY 1`},
}

type shape struct {
	Name  string         `json:"name"`
	Input string         `json:"input"`
	Bytes int64          `json:"input_bytes"`
	Keys  map[string]int `json:"-"` // extra key -> records carrying it
	// SparseKey is the shape's least frequent extra key.
	SparseKey string `json:"sparse_key"`
}

type sample struct {
	Shape       string  `json:"shape"`
	Run         int     `json:"run"`
	Seconds     float64 `json:"seconds"`
	PeakRSS     int64   `json:"peak_rss_bytes"`
	DBBytes     int64   `json:"db_bytes"`
	Columns     int     `json:"columns"`
	KeysColumns int     `json:"keys_with_column"`
	// KeysOverflowed are the extra keys without a stored column; their
	// counts are checked through their columns too.
	KeysOverflowed int `json:"keys_overflowed"`
	// KeysPromoted are the keys with a stored column that were
	// overflowed first (the catalog's promoted).
	KeysPromoted int                `json:"keys_promoted"`
	KeysTotal    int                `json:"keys_total"`
	QueryMs      map[string]float64 `json:"query_ms"`
	Verified     bool               `json:"verified"`
	Error        string             `json:"error,omitempty"`
	// Stream is the streaming phase of the same run (absent with
	// -stream-workers 0); its own Error does not set this Error.
	Stream  *streamSample `json:"stream,omitempty"`
	answers map[string]string
}

type report struct {
	Command string            `json:"command"`
	Started time.Time         `json:"started"`
	Machine map[string]string `json:"machine"`
	Records int64             `json:"records"`
	Shapes  []*shape          `json:"shapes"`
	// Stream describes the streaming phase (absent with -stream-workers 0).
	Stream  *streamInfo `json:"stream,omitempty"`
	Samples []sample    `json:"samples"`
	Failed  bool        `json:"failed"`
}

type streamInfo struct {
	Workers       int    `json:"workers"`
	LoadGenerator string `json:"load_generator"`
	Server        string `json:"server"`
}

var keyRe = regexp.MustCompile(`"key":"(app\.header\.x-[0-9]+)"`)

func main() {
	bin := flag.String("shredduck", "", "shredduck binary")
	var inputs multiFlag
	flag.Var(&inputs, "in", "NAME=FILE, a traces file (repeat; the first is the baseline)")
	records := flag.Int64("records", 0, "spans per file")
	runs := flag.Int("runs", 3, "timed runs per shape")
	qruns := flag.Int("query-runs", 5, "timed runs per query")
	dir := flag.String("dir", os.TempDir(), "directory for the database files")
	out := flag.String("out", "", "write the JSON report here")
	command := flag.String("command", "", "the script command line, recorded in the report (default: this program's)")
	streamWorkers := flag.Int("stream-workers", 8, "streaming phase: concurrent senders into shredduck serve; 0: no streaming phase")
	streamTimeout := flag.Duration("stream-timeout", 10*time.Minute, "streaming phase: limit of one run, server start to exit")
	flag.Parse()
	if *bin == "" || len(inputs) < 2 || *records == 0 || *streamWorkers < 0 {
		fmt.Fprintln(os.Stderr, "usage: sparsebench -shredduck BIN -in dense=FILE -in sparse=FILE -records N [-runs R] [-stream-workers W] [-out FILE]")
		os.Exit(2)
	}
	if *command == "" {
		*command = strings.Join(os.Args, " ")
	}
	rep := report{Command: *command, Started: time.Now().UTC(), Machine: benchutil.Machine(), Records: *records}
	for _, in := range inputs {
		name, file, _ := strings.Cut(in, "=")
		sh, err := scan(name, file)
		if err != nil {
			fatal(err)
		}
		rep.Shapes = append(rep.Shapes, sh)
		fmt.Fprintf(os.Stderr, "%s: %s, %d MB, %d extra keys, sparsest %s on %d spans\n", name, file, sh.Bytes>>20, len(sh.Keys), sh.SparseKey, sh.Keys[sh.SparseKey])
	}
	scfg := streamConfig{bin: *bin, workers: *streamWorkers, timeout: *streamTimeout}
	if scfg.workers > 0 {
		rep.Stream = &streamInfo{Workers: scfg.workers, LoadGenerator: loadGenerator,
			Server: "shredduck serve --db FILE --http 127.0.0.1:0 --grpc '' (default flags otherwise), a new server and database per run, stopped with SIGTERM"}
		fmt.Fprintf(os.Stderr, "streaming phase: %d workers; load generator: %s\n", scfg.workers, loadGenerator)
	}
	var ref map[string]string // the first verified answers
	for run := 0; run <= *runs; run++ {
		var baseRate float64 // the baseline shape's spans/s in this run
		for i, sh := range rep.Shapes {
			s := measure(*bin, filepath.Join(*dir, "sparsebench-"+sh.Name+".duckdb"), sh, *records, *qruns)
			s.Run = run
			if scfg.workers > 0 {
				st := stream(scfg, filepath.Join(*dir, "sparsebench-stream-"+sh.Name+".duckdb"), sh, *records)
				if i == 0 && st.Error == "" {
					baseRate = st.SpansPerSec
				}
				if st.Error == "" && baseRate > 0 {
					st.RatioToBase = st.SpansPerSec / baseRate
				}
				s.Stream = &st
			}
			if s.Error == "" {
				if ref == nil {
					ref = s.answers
				}
				for q, a := range s.answers {
					if ref[q] != a {
						s.Error = fmt.Sprintf("%s: answer differs from the first run's", q)
					}
				}
			}
			// Error is the ingest phase's; a failed streaming phase fails
			// the run too but leaves the ingest numbers summarized.
			s.Verified = s.Error == "" && (s.Stream == nil || s.Stream.Error == "")
			if !s.Verified {
				rep.Failed = true
			}
			label := fmt.Sprintf("run %d", run)
			if run == 0 {
				label = "warm-up"
			} else {
				rep.Samples = append(rep.Samples, s)
			}
			var problems []string
			if s.Error != "" {
				problems = append(problems, s.Error)
			}
			if s.Stream != nil && s.Stream.Error != "" {
				problems = append(problems, "stream: "+s.Stream.Error)
			}
			status := "ok"
			if len(problems) > 0 {
				status = "FAILED: " + strings.Join(problems, "; ")
			}
			streamed := ""
			if st := s.Stream; st != nil {
				streamed = fmt.Sprintf("  serve %7.0f spans/s %4.2fx %3d retries rss %4d MiB %4d columns stop %4.1fs %2d log warnings",
					st.SpansPerSec, st.RatioToBase, st.Retries, st.PeakRSS>>20, st.Columns, st.StopSeconds, st.LogWarnings)
			}
			fmt.Fprintf(os.Stderr, "%-8s %-8s %6.2fs rss %4d MiB  %5.1f MB  %4d columns%s  %s\n", label, sh.Name, s.Seconds, s.PeakRSS>>20, float64(s.DBBytes)/1e6, s.Columns, streamed, status)
		}
	}
	printTable(&rep)
	if rep.Stream != nil {
		printStreamTable(&rep)
	}
	if *out != "" {
		if err := benchutil.WriteJSON(*out, rep); err != nil {
			fatal(err)
		}
	}
	if rep.Failed {
		fmt.Println("FAILED: at least one run failed or did not verify")
		os.Exit(1)
	}
}

// scan counts the records that carry each extra key.
func scan(name, file string) (*shape, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, _ := f.Stat()
	sh := &shape{Name: name, Input: file, Bytes: fi.Size(), Keys: make(map[string]int)}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	for sc.Scan() {
		for _, m := range keyRe.FindAllSubmatch(sc.Bytes(), -1) {
			sh.Keys[string(m[1])]++ // generated keys are distinct within a record
		}
	}
	for k, n := range sh.Keys {
		if sh.SparseKey == "" || n < sh.Keys[sh.SparseKey] || (n == sh.Keys[sh.SparseKey] && k < sh.SparseKey) {
			sh.SparseKey = k
		}
	}
	return sh, sc.Err()
}

// measure loads sh into a new database db and measures it: the ingest,
// the table's row count, columns and every key's count checked, then the
// queries timed. A failed step ends it with s.Error set.
func measure(bin, db string, sh *shape, records int64, qruns int) (s sample) {
	s = sample{Shape: sh.Name, QueryMs: map[string]float64{}, answers: map[string]string{}, KeysTotal: len(sh.Keys)}
	benchutil.RemoveDB(db)
	defer benchutil.RemoveDB(db)
	if !releaseMemory() {
		s.Error = "cannot reset this process's peak RSS (/proc/self/clear_refs), which the ingest's peak RSS would include"
		return s
	}
	if err := ingest(bin, db, sh, &s); err != nil {
		s.Error = err.Error()
		return s
	}
	pool, err := sql.Open("duckdb", db+"?access_mode=read_only")
	if err != nil {
		s.Error = err.Error()
		return s
	}
	defer pool.Close()
	// One connection: the views are temporary objects of theirs.
	ctx := context.Background()
	conn, err := pool.Conn(ctx)
	if err != nil {
		s.Error = err.Error()
		return s
	}
	defer conn.Close()
	var n int64
	if err := conn.QueryRowContext(ctx, "SELECT count(*) FROM otel_traces").Scan(&n); err != nil || n != records {
		s.Error = fmt.Sprintf("%d rows, want %d (%v)", n, records, err)
		return s
	}
	cols, err := tableColumns(ctx, conn)
	if err != nil {
		s.Error = err.Error()
		return s
	}
	s.Columns = len(cols)
	if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM shredduck_columns WHERE table_name = 'otel_traces' AND promoted IS NOT NULL`).Scan(&s.KeysPromoted); err != nil {
		s.Error = "catalog: " + err.Error()
		return s
	}
	if err := checkKeyCounts(ctx, conn, sh, cols, &s); err != nil {
		s.Error = err.Error()
		return s
	}
	if err := timeQueries(ctx, conn, sh, qruns, &s); err != nil {
		s.Error = err.Error()
	}
	return s
}

// ingest runs shredduck ingest of sh's file into db, timed, and records
// the time, its peak RSS and the file's size in s.
func ingest(bin, db string, sh *shape, s *sample) error {
	cmd := exec.Command(bin, "ingest", "--json", "--progress=false", "--db", db, sh.Input)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	s.Seconds = time.Since(start).Seconds()
	if err != nil {
		return fmt.Errorf("ingest: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	var o struct {
		PeakRSS int64 `json:"peak_rss_bytes"`
	}
	json.Unmarshal(benchutil.LastLine(stdout.Bytes()), &o)
	s.PeakRSS = o.PeakRSS
	if fi, err := os.Stat(db); err == nil {
		s.DBBytes = fi.Size()
	}
	return nil
}

// tableColumns is the set of otel_traces' column names.
func tableColumns(ctx context.Context, conn *sql.Conn) (map[string]bool, error) {
	cols := make(map[string]bool)
	rows, err := conn.QueryContext(ctx, "SELECT column_name FROM duckdb_columns() WHERE table_name = 'otel_traces'")
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var c string
		rows.Scan(&c)
		cols[c] = true
	}
	rows.Close()
	return cols, nil
}

// checkKeyCounts checks every extra key's count through its column, stored
// (in cols) or not, against the input's, 500 columns a query, and counts
// the keys of each kind in s.
func checkKeyCounts(ctx context.Context, conn *sql.Conn, sh *shape, cols map[string]bool, s *sample) error {
	var keys []string
	for k := range sh.Keys {
		keys = append(keys, k)
		if cols[k] {
			s.KeysColumns++
		} else {
			s.KeysOverflowed++
		}
	}
	slices.Sort(keys)
	for len(keys) > 0 {
		chunk := keys[:min(500, len(keys))]
		keys = keys[len(chunk):]
		var sel []string
		for _, k := range chunk {
			sel = append(sel, "count("+shred.QuoteIdent(k)+")")
		}
		got := make([]int64, len(chunk))
		ptrs := make([]any, len(chunk))
		for i := range got {
			ptrs[i] = &got[i]
		}
		err := withViews(ctx, conn, "SELECT "+strings.Join(sel, ", ")+" FROM otel_traces", func(q string) error {
			return conn.QueryRowContext(ctx, q).Scan(ptrs...)
		})
		if err != nil {
			return err
		}
		for i, k := range chunk {
			if int(got[i]) != sh.Keys[k] {
				how := "stored"
				if !cols[k] {
					how = "overflowed"
				}
				return fmt.Errorf("%s key %s: %d rows through its column, %d in the input", how, k, got[i], sh.Keys[k])
			}
		}
	}
	return nil
}

// timeQueries runs the RawDuck queries and the sparse-key query qruns
// times each, records their median milliseconds and answers in s, and
// checks the sparse key's count against the input's.
func timeQueries(ctx context.Context, conn *sql.Conn, sh *shape, qruns int, s *sample) error {
	qs := append([]struct{ name, sql string }{}, queries...)
	qs = append(qs, struct{ name, sql string }{"sparse_key", "SELECT count(*) FROM otel_traces WHERE " + shred.QuoteIdent(sh.SparseKey) + " IS NOT NULL"})
	for _, q := range qs {
		var times []float64
		var answer string
		for range qruns {
			t0 := time.Now()
			a, err := run(ctx, conn, q.sql)
			times = append(times, float64(time.Since(t0).Microseconds())/1000)
			if err != nil {
				return fmt.Errorf("%s: %s", q.name, err)
			}
			answer = a
		}
		s.QueryMs[q.name] = benchutil.Summarize(times).Median
		if q.name == "sparse_key" {
			if answer != fmt.Sprint(sh.Keys[sh.SparseKey]) {
				return fmt.Errorf("sparse key: %s rows, want %d", answer, sh.Keys[sh.SparseKey])
			}
			continue
		}
		s.answers[q.name] = answer
	}
	return nil
}

// withViews runs f(q) with the views q needs (keyview) on conn.
func withViews(ctx context.Context, conn *sql.Conn, q string, f func(q string) error) error {
	views, err := keyview.Create(ctx, conn, q)
	if err != nil {
		return err
	}
	err = f(q)
	if derr := views.Drop(ctx); derr != nil {
		return errors.Join(err, derr)
	}
	return err
}

// run returns a query's rows as text, read as shredduck's query paths
// read them (keyview).
func run(ctx context.Context, conn *sql.Conn, q string) (text string, err error) {
	views, err := keyview.Create(ctx, conn, q)
	if err != nil {
		return "", err
	}
	defer func() { err = errors.Join(err, views.Drop(ctx)) }()
	rows, err := conn.QueryContext(ctx, q)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var sb strings.Builder
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return "", err
		}
		fmt.Fprintln(&sb, vals...)
	}
	return strings.TrimSpace(sb.String()), rows.Err()
}

func printTable(rep *report) {
	med := func(shape string, f func(sample) float64) float64 {
		var xs []float64
		for _, s := range rep.Samples {
			if s.Shape == shape && s.Error == "" {
				xs = append(xs, f(s))
			}
		}
		return benchutil.Summarize(xs).Median
	}
	base := rep.Shapes[0].Name
	fmt.Printf("%-8s %9s %9s %9s %8s %17s", "shape", "ingest", "peak RSS", "storage", "columns", "keys stored/over")
	for _, q := range queries {
		fmt.Printf(" %18s", q.name)
	}
	fmt.Printf(" %12s\n", "sparse_key")
	for _, sh := range rep.Shapes {
		secs := med(sh.Name, func(s sample) float64 { return s.Seconds })
		fmt.Printf("%-8s %8.2fs %5.0f MiB %6.1f MB %8.0f %17s", sh.Name, secs, med(sh.Name, func(s sample) float64 { return float64(s.PeakRSS >> 20) }),
			med(sh.Name, func(s sample) float64 { return float64(s.DBBytes) / 1e6 }), med(sh.Name, func(s sample) float64 { return float64(s.Columns) }),
			fmt.Sprintf("%.0f/%.0f of %d", med(sh.Name, func(s sample) float64 { return float64(s.KeysColumns) }),
				med(sh.Name, func(s sample) float64 { return float64(s.KeysOverflowed) }), len(sh.Keys)))
		for _, q := range append(queries, struct{ name, sql string }{"sparse_key", ""}) {
			m := med(sh.Name, func(s sample) float64 { return s.QueryMs[q.name] })
			b := med(base, func(s sample) float64 { return s.QueryMs[q.name] })
			if b > 0 && sh.Name != base {
				fmt.Printf(" %9.1f ms %5.2fx", m, m/b)
			} else {
				fmt.Printf(" %9.1f ms       ", m)
			}
		}
		if sh.Name != base {
			fmt.Printf("   ingest %.2fx, storage %.2fx of %s", secs/med(base, func(s sample) float64 { return s.Seconds }),
				med(sh.Name, func(s sample) float64 { return float64(s.DBBytes) })/med(base, func(s sample) float64 { return float64(s.DBBytes) }), base)
		}
		fmt.Println()
	}
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func fatal(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
