package main

import (
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/shredduck/shredduck/bench/internal/benchutil"
)

type signal struct {
	name, file, table string
	bytes             int64
}

func runOtel(args []string) int {
	fs := flag.NewFlagSet("otel", flag.ContinueOnError)
	bin := fs.String("shredduck", "", "shredduck binary")
	traces := fs.String("traces", "", "NDJSON traces (bench/gen traces)")
	logs := fs.String("logs", "", "NDJSON logs (bench/gen logs)")
	metrics := fs.String("metrics", "", "NDJSON metrics (bench/gen metrics)")
	records := fs.Int64("records", 0, "records in each file")
	runs := fs.Int("runs", 3, "timed runs (after one warm-up)")
	seed := fs.Uint64("seed", 1, "the seed the files were generated with (recorded)")
	dir := fs.String("dir", os.TempDir(), "directory for the database files")
	out := fs.String("out", "", "write the JSON result here")
	command := fs.String("command", "", "the script command line (recorded)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *bin == "" || *traces == "" || *logs == "" || *metrics == "" || *records <= 0 || *runs < 1 {
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
	sigs := []*signal{
		{name: "traces", file: *traces, table: "otel_traces"},
		{name: "logs", file: *logs, table: "otel_logs"},
		{name: "metrics", file: *metrics, table: "otel_metrics"},
	}
	o := otelRun{bin: *bin, dir: *dir, records: *records, refHash: map[string]string{},
		res: benchutil.OtelIngest{Header: header(benchutil.KindOtelIngest, *command, *records, *seed, *runs)}}
	for _, s := range sigs {
		fi, err := os.Stat(s.file)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		s.bytes = fi.Size()
		o.res.Data = append(o.res.Data, dataFile(s.name, *records, s.bytes, *seed))
	}
	start := time.Now()
	for run := 0; run <= *runs; run++ {
		for _, s := range sigs {
			o.signalRun(run, s)
		}
	}
	o.res.Seconds = time.Since(start).Seconds()
	fmt.Printf("\nshredduck ingest, %d records per signal, %d timed runs (median, min-max):\n", *records, *runs)
	o.summarize(sigs)
	if *out != "" {
		if err := benchutil.WriteJSON(*out, o.res); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return exitStatus(&o.res.Header)
}

// otelRun is one `otelbench otel`: what every load needs and the result
// the loads fill in.
type otelRun struct {
	bin, dir string
	records  int64
	res      benchutil.OtelIngest
	// refHash is each signal's table hash after the first cold load: every
	// later load must store the same content.
	refHash map[string]string
}

// signalRun is one run of s: a cold load into a new database, then a warm
// load into the same database emptied, each checked and recorded.
func (o *otelRun) signalRun(run int, s *signal) {
	db := filepath.Join(o.dir, "otel-"+s.name+".duckdb")
	benchutil.RemoveDB(db)
	var coldHash string
	for _, mode := range []string{"cold", "warm"} {
		smp := benchutil.OtelSample{Signal: s.name, Mode: mode, Run: run}
		h, err := otelIngestOnce(o.bin, db, s, mode, o.records, &smp)
		switch {
		case err != nil:
		case mode == "cold" && o.refHash[s.name] == "":
			o.refHash[s.name] = h
		case mode == "cold" && h != o.refHash[s.name]:
			err = fmt.Errorf("table content differs from the first run's (hash %s vs %s)", h, o.refHash[s.name])
		case mode == "warm" && h != coldHash:
			err = fmt.Errorf("table content differs from the cold load's (hash %s vs %s)", h, coldHash)
		}
		if mode == "cold" {
			coldHash = h
		}
		if err == nil && mode == "cold" {
			// The warm load starts from the same database, emptied.
			err = deleteAll(db, s.table)
		}
		if err != nil {
			smp.Error = err.Error()
			fail(&o.res.Header, fmt.Sprintf("%s %s run %d: %v", s.name, mode, run, err))
		} else {
			smp.Verified = true
		}
		o.res.Samples = append(o.res.Samples, smp)
		benchutil.LogSample(run, s.name+"/"+mode, smp.Seconds, smp.PeakRSS, smp.Error)
		if err != nil && mode == "cold" {
			// No warm load on top of a failed cold one.
			w := benchutil.OtelSample{Signal: s.name, Mode: "warm", Run: run, Error: "cold load failed"}
			o.res.Samples = append(o.res.Samples, w)
			benchutil.LogSample(run, s.name+"/warm", 0, 0, w.Error)
			break
		}
	}
	benchutil.RemoveDB(db)
}

// summarize fills the summary of each signal and mode from the timed runs
// and prints it as a table.
func (o *otelRun) summarize(sigs []*signal) {
	fmt.Printf("%-8s %-5s %8s %17s %11s %8s %9s\n", "signal", "mode", "median", "min-max", "records/s", "MB/s", "peak RSS")
	for _, s := range sigs {
		for _, mode := range []string{"cold", "warm"} {
			sum := benchutil.OtelSummary{Signal: s.name, Mode: mode, Table: s.table, Records: o.records, InputBytes: s.bytes}
			var secs []float64
			for _, smp := range o.res.Samples {
				if smp.Signal != s.name || smp.Mode != mode {
					continue
				}
				if smp.Error != "" {
					sum.Failed = true
				}
				if smp.Run > 0 && smp.Error == "" {
					secs = append(secs, smp.Seconds)
					sum.PeakRSS = max(sum.PeakRSS, smp.PeakRSS)
				}
			}
			if !sum.Failed {
				sum.Seconds = benchutil.Summarize(secs)
				sum.RecordsPerSec = float64(o.records) / sum.Seconds.Median
				sum.MBPerSec = float64(s.bytes) / 1e6 / sum.Seconds.Median
				fmt.Printf("%-8s %-5s %7.2fs %7.2f-%7.2fs %11.0f %8.1f %5d MiB\n", s.name, mode, sum.Seconds.Median,
					sum.Seconds.Min, sum.Seconds.Max, sum.RecordsPerSec, sum.MBPerSec, sum.PeakRSS>>20)
			} else {
				fmt.Printf("%-8s %-5s FAILED\n", s.name, mode)
			}
			o.res.Summary = append(o.res.Summary, sum)
		}
	}
}

// otelIngestOnce runs one shredduck ingest of s into db, fills smp and checks
// the summary and the table. It returns an order-independent hash of the
// table's rows.
func otelIngestOnce(bin, db string, s *signal, mode string, records int64, smp *benchutil.OtelSample) (string, error) {
	p, err := benchutil.Run(bin, "ingest", "--json", "--progress=false", "--db", db, s.file)
	smp.Seconds = p.Seconds
	if err != nil {
		return "", err
	}
	var sum benchutil.IngestOutput
	if err := json.Unmarshal(benchutil.LastLine(p.Stdout), &sum); err != nil {
		return "", fmt.Errorf("cannot read shredduck's summary: %v", err)
	}
	smp.LoadSeconds, smp.PeakRSS = sum.Seconds, sum.PeakRSS
	if st, err := os.Stat(db); err == nil {
		smp.DBBytes = st.Size()
	}
	if len(sum.Tables) != 1 || sum.Tables[0].Table != s.table {
		return "", fmt.Errorf("summary names tables %+v, want only %s", sum.Tables, s.table)
	}
	t := sum.Tables[0]
	smp.Rows, smp.Created, smp.ColumnsAdded = t.Rows, t.Created, t.ColumnsAdded
	var n int64
	var h string
	n, h, err = tableHash(db, s.table)
	smp.TableRows = n
	switch {
	case err != nil:
		return "", err
	case sum.Errors != 0:
		return "", fmt.Errorf("shredduck skipped %d bad records", sum.Errors)
	case t.Rows != records || sum.Records != records:
		return "", fmt.Errorf("shredduck stored %d rows (%d records), want %d", t.Rows, sum.Records, records)
	case n != records:
		return "", fmt.Errorf("%s holds %d rows, want %d", s.table, n, records)
	case mode == "cold" && !t.Created:
		return "", errors.New("cold load did not create the table")
	case mode == "warm" && (t.Created || t.ColumnsAdded != 0):
		return "", fmt.Errorf("warm load: created=%v columns_added=%d, want false and 0", t.Created, t.ColumnsAdded)
	}
	return h, nil
}

// tableHash counts the rows of table and sums the hashes of whole rows.
func tableHash(path, table string) (int64, string, error) {
	db, err := sql.Open("duckdb", path+"?access_mode=read_only")
	if err != nil {
		return 0, "", err
	}
	defer db.Close()
	var n int64
	var h string
	err = db.QueryRow(fmt.Sprintf(`SELECT count(*), coalesce(sum(hash(t))::VARCHAR, '') FROM %s t`, table)).Scan(&n, &h)
	return n, h, err
}

// deleteAll empties table and checkpoints.
func deleteAll(path, table string) error {
	db, err := sql.Open("duckdb", path)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.Exec("DELETE FROM " + table); err != nil {
		return fmt.Errorf("DELETE FROM %s: %v", table, err)
	}
	if _, err := db.Exec("CHECKPOINT"); err != nil {
		return err
	}
	var n int64
	if err := db.QueryRow("SELECT count(*) FROM " + table).Scan(&n); err != nil || n != 0 {
		return fmt.Errorf("after DELETE FROM %s: %d rows, %v", table, n, err)
	}
	return db.Close()
}

// fail marks the result h heads failed, msg among its failures.
func fail(h *benchutil.Header, msg string) {
	h.Failed = true
	h.Failures = append(h.Failures, msg)
}

// exitStatus prints h's failures, if any, and returns the command's exit
// status: 1 if a run failed or did not verify.
func exitStatus(h *benchutil.Header) int {
	if !h.Failed {
		return 0
	}
	fmt.Println("FAILED:")
	for _, f := range h.Failures {
		fmt.Println("  " + f)
	}
	return 1
}

func header(kind, command string, records int64, seed uint64, runs int) benchutil.Header {
	return benchutil.Header{
		Kind: kind, Command: command, Driver: strings.Join(os.Args, " "), Started: time.Now().UTC(),
		Machine: benchutil.Machine(), Records: records, Seed: seed, WarmUp: 1, Runs: runs,
	}
}

func dataFile(sig string, records, bytes int64, seed uint64) benchutil.DataFile {
	return benchutil.DataFile{Signal: sig, Records: records, Bytes: bytes,
		GenCommand: fmt.Sprintf("go run ./bench/gen %s -n %d -seed %d", sig, records, seed)}
}
