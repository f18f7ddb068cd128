package benchutil

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"time"
)

// Result kinds, the "kind" field of a results file. Files of
// bench/ingestbench have no kind (they predate it); bench/report knows them
// by their name, ingest-traces-N.json.
const (
	KindOtelIngest = "otel-ingest" // bench/run_otel.sh: otel-ingest-N.json
	KindVariant    = "variant"     // bench/run_variant.sh: variant-N.json
	KindKafka      = "kafka"       // bench/run_kafka.sh: kafka-N.json (bench/kafkabench)
)

// Header is what every result file records besides its measurements.
type Header struct {
	Kind    string            `json:"kind"`
	Command string            `json:"command"`        // the script as invoked, e.g. bench/run_variant.sh --quick
	Driver  string            `json:"driver_command"` // the Go driver's own command line
	Started time.Time         `json:"started"`
	Seconds float64           `json:"seconds"` // the whole driver run
	Machine map[string]string `json:"machine"`
	Records int64             `json:"records"`
	Seed    uint64            `json:"seed"`
	WarmUp  int               `json:"warmup_runs"`
	Runs    int               `json:"timed_runs"`
	Data    []DataFile        `json:"data"`
	// Failed is true if any run failed or did not verify; Failures says
	// which (the same messages are in the samples).
	Failed   bool     `json:"failed"`
	Failures []string `json:"failures,omitempty"`
}

// DataFile is one generated input.
type DataFile struct {
	Signal     string `json:"signal"`
	Records    int64  `json:"records"`
	Bytes      int64  `json:"bytes"`
	GenCommand string `json:"gen_command"`
}

// OtelIngest is the result of bench/run_otel.sh: shredduck ingest of
// generated traces, logs and metrics, cold (new database) and warm (the same
// data again into the same database after DELETE FROM the table).
type OtelIngest struct {
	Header
	Samples []OtelSample  `json:"samples"`
	Summary []OtelSummary `json:"summary"`
}

// OtelSample is one shredduck ingest run. Run 0 is the warm-up; it is kept
// but not summarized.
type OtelSample struct {
	Signal       string  `json:"signal"`
	Mode         string  `json:"mode"` // cold or warm
	Run          int     `json:"run"`
	Seconds      float64 `json:"seconds"`      // wall clock of the shredduck process, incl. final checkpoint
	LoadSeconds  float64 `json:"load_seconds"` // shredduck's own "seconds" (the load, without open and close)
	PeakRSS      int64   `json:"peak_rss_bytes"`
	Rows         int64   `json:"rows"`       // rows shredduck reported
	TableRows    int64   `json:"table_rows"` // count(*) of the table afterwards
	Created      bool    `json:"created"`
	ColumnsAdded int     `json:"columns_added"`
	DBBytes      int64   `json:"db_bytes"` // file size afterwards
	Verified     bool    `json:"verified"`
	Error        string  `json:"error,omitempty"`
}

// OtelSummary summarizes the timed runs of one signal and mode.
type OtelSummary struct {
	Signal        string  `json:"signal"`
	Mode          string  `json:"mode"`
	Table         string  `json:"table"`
	Records       int64   `json:"records"`
	InputBytes    int64   `json:"input_bytes"`
	Seconds       Stat    `json:"seconds"`
	RecordsPerSec float64 `json:"records_per_sec"` // at the median
	MBPerSec      float64 `json:"mb_per_sec"`      // input MB (10^6 bytes) per second at the median
	PeakRSS       int64   `json:"peak_rss_bytes"`  // the largest of the timed runs
	Failed        bool    `json:"failed"`
}

// Variant is the result of bench/run_variant.sh: the same traces through
// every encoding.
type Variant struct {
	Header
	StorageVersion string           `json:"storage_version"`
	Encodings      []Encoding       `json:"encodings"`
	Ingest         []VariantIngest  `json:"ingest_samples"`
	IngestSummary  []IngestSummary  `json:"ingest_summary"`
	Storage        []Storage        `json:"storage"`
	Queries        []QuerySample    `json:"query_samples"`
	QuerySummary   []QuerySummary   `json:"query_summary"`
	Answers        map[string][]Row `json:"reference_answers"` // the shredded answer of each query
}

// Encoding describes how one encoding stores a span.
type Encoding struct {
	Name        string `json:"name"`
	Source      string `json:"source"` // ndjson (an ingest path) or shredded (encoded from the shredded table)
	Table       string `json:"table"`
	Description string `json:"description"`
	SQL         string `json:"sql,omitempty"` // how it is built, where built by SQL
}

// VariantIngest is one load (or encode) of one encoding. Run 0 is the
// warm-up.
type VariantIngest struct {
	Encoding string  `json:"encoding"`
	Run      int     `json:"run"`
	Seconds  float64 `json:"seconds"` // wall clock of the loading process, incl. final checkpoint
	PeakRSS  int64   `json:"peak_rss_bytes"`
	Rows     int64   `json:"rows"`
	DBBytes  int64   `json:"db_bytes"`
	Verified bool    `json:"verified"`
	Error    string  `json:"error,omitempty"`
}

// IngestSummary summarizes the timed loads of one encoding.
type IngestSummary struct {
	Encoding      string  `json:"encoding"`
	Source        string  `json:"source"`
	Seconds       Stat    `json:"seconds"`
	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"` // NDJSON MB (10^6 bytes) per second; 0 for encodings built from the shredded table
	PeakRSS       int64   `json:"peak_rss_bytes"`
	Failed        bool    `json:"failed"`
}

// SummarizeIngest summarizes the timed runs (Run > 0) of one encoding's
// loads of records records from inputBytes of NDJSON; any failed run marks
// the summary failed, with no figures.
func SummarizeIngest(samples []VariantIngest, e Encoding, records, inputBytes int64) IngestSummary {
	s := IngestSummary{Encoding: e.Name, Source: e.Source}
	var secs []float64
	for _, smp := range samples {
		if smp.Encoding != e.Name {
			continue
		}
		if smp.Error != "" {
			s.Failed = true
		} else if smp.Run > 0 {
			secs = append(secs, smp.Seconds)
			s.PeakRSS = max(s.PeakRSS, smp.PeakRSS)
		}
	}
	if s.Failed {
		return s
	}
	s.Seconds = Summarize(secs)
	s.RecordsPerSec = float64(records) / s.Seconds.Median
	if e.Source == "ndjson" {
		s.MBPerSec = float64(inputBytes) / 1e6 / s.Seconds.Median
	}
	return s
}

// Storage is the size of one encoding's database after CHECKPOINT.
type Storage struct {
	Encoding   string `json:"encoding"`
	UsedBlocks int64  `json:"used_blocks"`
	BlockSize  int64  `json:"block_size"`
	Bytes      int64  `json:"bytes"` // used_blocks × block_size
	FileBytes  int64  `json:"file_bytes"`
	Error      string `json:"error,omitempty"`
}

// QuerySample is one run of one query on one path. A failed or mismatched
// run has OK false and no time.
type QuerySample struct {
	Query   string  `json:"query"`
	Path    string  `json:"path"` // encoding, or encoding/method for the OTLP-shaped ones
	Run     int     `json:"run"`
	Seconds float64 `json:"seconds,omitempty"`
	Rows    int     `json:"rows"`
	OK      bool    `json:"ok"`
	Error   string  `json:"error,omitempty"`
}

// QuerySummary summarizes the timed runs of one query on one path. A path
// with any failed run is Failed and has no time.
type QuerySummary struct {
	Query    string `json:"query"`
	Path     string `json:"path"`
	Encoding string `json:"encoding"`
	Method   string `json:"method"` // column, key (lookup by attribute key) or position
	SQL      string `json:"sql"`
	Seconds  Stat   `json:"seconds"`
	Failed   bool   `json:"failed"`
	Error    string `json:"error,omitempty"`
}

// Row is one row of a query answer, rendered as text.
type Row []string

// QueryRows runs q on conn and returns its rows rendered as text by render,
// and the seconds from sending the query to having read the last row.
func QueryRows(ctx context.Context, conn *sql.Conn, q string, render func(any) string) ([]Row, float64, error) {
	start := time.Now()
	rows, err := conn.QueryContext(ctx, q)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, 0, err
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var out []Row
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, 0, err
		}
		r := make(Row, len(vals))
		for i, v := range vals {
			r[i] = render(v)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	return out, time.Since(start).Seconds(), nil
}

// MeasureStorage attaches the database file at path as name, checkpoints
// it, records its size (used_blocks × block_size, and the file size) in
// st, checks its storage version, and detaches it.
func MeasureStorage(ctx context.Context, conn *sql.Conn, name, path string, st *Storage) error {
	if fi, err := os.Stat(path); err == nil {
		st.FileBytes = fi.Size()
	}
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("ATTACH %s AS %s", QuoteString(path), name)); err != nil {
		return err
	}
	defer conn.ExecContext(ctx, "DETACH "+name)
	if _, err := conn.ExecContext(ctx, "CHECKPOINT "+name); err != nil {
		return err
	}
	if err := conn.QueryRowContext(ctx, `SELECT used_blocks, block_size FROM pragma_database_size() WHERE database_name = ?`, name).
		Scan(&st.UsedBlocks, &st.BlockSize); err != nil {
		return err
	}
	st.Bytes = st.UsedBlocks * st.BlockSize
	var version string
	if err := conn.QueryRowContext(ctx, `SELECT tags['storage_version'] FROM duckdb_databases() WHERE database_name = ?`, name).
		Scan(&version); err != nil {
		return err
	}
	if !strings.HasPrefix(version, StorageVersion) {
		return fmt.Errorf("storage version %s, want %s", version, StorageVersion)
	}
	return nil
}

// IngestOutput is the part of `shredduck ingest --json` that the benchmarks
// check.
type IngestOutput struct {
	Tables []struct {
		Table        string `json:"table"`
		Rows         int64  `json:"rows"`
		Created      bool   `json:"created"`
		ColumnsAdded int    `json:"columns_added"`
	} `json:"tables"`
	Records int64   `json:"records"`
	Errors  int64   `json:"errors"`
	Seconds float64 `json:"seconds"`
	PeakRSS int64   `json:"peak_rss_bytes"`
}

// LogSample prints one timed (or warm-up, run 0) sample to stderr.
func LogSample(run int, path string, secs float64, rss int64, errMsg string) {
	label := fmt.Sprintf("run %d", run)
	if run == 0 {
		label = "warm-up"
	}
	status := "ok"
	if errMsg != "" {
		status = "FAILED: " + errMsg
	}
	fmt.Fprintf(os.Stderr, "%-8s %-30s %7.3fs  rss %5d MiB  %s\n", label, path, secs, rss>>20, status)
}
