package serve

import (
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/shredduck/shredduck/ingest"
)

// TestWideRequestBeforeDDL: a request whose keys would take a table past
// what DuckDB's memory limit allows is taken, its keys past the budget in
// the overflow, without the ALTER TABLEs that held 1.5 GB (outside
// DuckDB's limit, kept after) for 2,000 keys.
func TestWideRequestBeforeDDL(t *testing.T) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Skipf("cannot reset the peak RSS: %v", err)
	}
	ts := startServer(t, Config{})
	ts.good() // the table exists: its new keys are ALTERs
	td := ptrace.NewTraces()
	s := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	for i := range 5000 {
		s.Attributes().PutStr("key."+strconv.Itoa(i), "v")
	}
	body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	base := peakRSSSelf(t)
	os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
	start := time.Now()
	r := ts.post("/v1/traces", "application/x-protobuf", "", body)
	if r.status != http.StatusOK {
		t.Errorf("5,000 new keys at the default memory limit: %d %s", r.status, r.body)
	}
	if grown := peakRSSSelf(t) - base; grown > 256<<20 {
		t.Errorf("the request took %d MiB (%v)", grown>>20, time.Since(start))
	}
	if n := storedColumns(t, ts.db, "otel_traces"); n > 256 {
		t.Errorf("otel_traces has %d columns: past what 256MB allows", n)
	}
	var keys int
	if err := ts.db.SQL.QueryRow(`SELECT count(*) FROM shredduck_columns WHERE table_name = 'otel_traces' AND key LIKE 'key.%'`).Scan(&keys); err != nil || keys != 5000 {
		t.Errorf("catalog: %d of the 5,000 keys (%v)", keys, err)
	}
	ts.good()
}

// storedColumns counts the columns of table.
func storedColumns(t *testing.T, db *ingest.DB, table string) int {
	t.Helper()
	var n int
	if err := db.SQL.QueryRow(`SELECT count(*) FROM duckdb_columns() WHERE table_name = ?`, table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func peakRSSSelf(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}
