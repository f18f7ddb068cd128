// Package benchutil holds what the benchmark drivers in bench/ share: the
// machine description recorded with every result, sample statistics,
// running a timed child process, DuckDB file helpers, and the JSON result
// formats that bench/report reads.
package benchutil

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"

	_ "github.com/duckdb/duckdb-go/v2" // registers the "duckdb" driver
)

// StorageVersion is the DuckDB storage version of every database file the
// variant benchmark creates: the oldest that can hold VARIANT columns, the
// same for all encodings so that their sizes compare.
const StorageVersion = "v1.5.0"

// Machine describes the host: CPU model, logical CPUs, memory, OS, Go and
// DuckDB versions. The keys are those bench/ingestbench has always written.
func Machine() map[string]string {
	m := map[string]string{"goos": runtime.GOOS, "goarch": runtime.GOARCH, "cpus": fmt.Sprint(runtime.NumCPU()), "go": runtime.Version()}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(l, "model name") {
				m["cpu"] = strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
				break
			}
		}
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		m["memory"] = strings.TrimSpace(strings.TrimPrefix(strings.SplitN(string(data), "\n", 2)[0], "MemTotal:"))
	}
	if data, err := os.ReadFile("/etc/os-release"); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(l, "PRETTY_NAME=") {
				m["os"] = strings.Trim(strings.TrimPrefix(l, "PRETTY_NAME="), `"`)
			}
		}
	}
	if data, err := os.ReadFile("/proc/loadavg"); err == nil {
		// The load when the run started: a busy machine makes noisy numbers.
		m["loadavg"] = strings.Join(strings.Fields(string(data))[:3], " ")
	}
	if db, err := sql.Open("duckdb", ""); err == nil {
		var v string
		db.QueryRow("SELECT version()").Scan(&v)
		m["duckdb"] = v
		db.Close()
	}
	return m
}

// Stat summarizes the samples of one path.
type Stat struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// Summarize returns the median (mean of the middle two for an even count),
// minimum and maximum of xs; the zero Stat for no samples.
func Summarize(xs []float64) Stat {
	if len(xs) == 0 {
		return Stat{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Stat{N: len(s), Median: m, Min: s[0], Max: s[len(s)-1]}
}

// LastLine returns the last non-empty line of b.
func LastLine(b []byte) []byte {
	b = bytes.TrimSpace(b)
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		return b[i+1:]
	}
	return b
}

// Proc is a finished child process.
type Proc struct {
	Seconds float64 // wall clock from start to exit
	Stdout  []byte
	Stderr  []byte
}

// Run runs name with args and times it. A non-zero exit is an error that
// carries the child's stderr.
func Run(name string, args ...string) (Proc, error) {
	cmd := exec.Command(name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	p := Proc{Seconds: time.Since(start).Seconds(), Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}
	if err != nil {
		return p, fmt.Errorf("%s: %v: %s", name, err, strings.TrimSpace(stderr.String()))
	}
	return p, nil
}

// RemoveDB removes a database file and its WAL.
func RemoveDB(path string) {
	os.Remove(path)
	os.Remove(path + ".wal")
	os.RemoveAll(path + ".ingestlog") // serve --ack log's default --log-dir
}

// CreateDB creates a new, empty database file at path with storage version
// StorageVersion (which only takes effect when the file is created), after
// removing any file already there.
func CreateDB(path string) error {
	RemoveDB(path)
	db, err := sql.Open("duckdb", path+"?storage_compatibility_version="+StorageVersion)
	if err != nil {
		return err
	}
	if _, err := db.Exec("CHECKPOINT"); err != nil {
		db.Close()
		return err
	}
	return db.Close()
}

// QuoteString quotes s as an SQL string literal.
func QuoteString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// WriteJSON writes v, indented, to path.
func WriteJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
