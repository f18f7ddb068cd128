package serve

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/internal/duckdb15test"
	"github.com/shredduck/shredduck/shred"
)

// A key promoted from the overflow holds all of its values in its column,
// for readers that know nothing of the overflow: plain DuckDB (2.0 and
// 1.5) on the file and the Parquet export. late.key is on 10 of the first
// 5,000 spans, then on every span; the transaction that gives it a column
// also moves the 10 earlier values in.
func TestPromotedKeyWhole(t *testing.T) {
	path := filepath.Join(t.TempDir(), "promote.duckdb")
	ts := startServerDensity(t, path, Config{}, shred.DefaultDensity)
	ts.db.YoungColumns = 0 // the density rule alone, so that the key is overflowed first
	base := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	var want, sum int64
	for r := range 100 {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "promote")
		ss := rs.ScopeSpans().AppendEmpty()
		for s := range 100 {
			i := int64(r*100 + s)
			sp := ss.Spans().AppendEmpty()
			var tid pcommon.TraceID
			copy(tid[:], fmt.Sprintf("%016d", i))
			sp.SetTraceID(tid)
			sp.SetName("op")
			sp.SetStartTimestamp(pcommon.NewTimestampFromTime(base.Add(time.Duration(i) * time.Millisecond)))
			sp.SetEndTimestamp(pcommon.NewTimestampFromTime(base.Add(time.Duration(i+1) * time.Millisecond)))
			if i >= 5000 || i%500 == 7 {
				sp.Attributes().PutInt("late.key", i)
				want++
				sum += i
			}
		}
		body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
		if err != nil {
			t.Fatal(err)
		}
		if r := ts.post("/v1/traces", "application/x-protobuf", "", body); r.status != http.StatusOK {
			t.Fatalf("%d %s", r.status, r.body)
		}
	}
	ts.waitLoaded()
	var promoted bool
	if err := ts.db.SQL.QueryRow(`SELECT promoted IS NOT NULL FROM shredduck_columns WHERE table_name = 'otel_traces' AND key = 'late.key'`).Scan(&promoted); err != nil || !promoted {
		t.Fatalf("late.key was not promoted (%v): the test checks nothing", err)
	}
	check := func(who, got string) {
		t.Helper()
		if w := fmt.Sprintf("%d\t%d", want, sum); got != w {
			t.Errorf("%s: count and sum of late.key %q, want %q", who, got, w)
		}
	}
	var n, s int64
	if err := ts.db.SQL.QueryRow(`SELECT count("late.key"), sum("late.key") FROM otel_traces`).Scan(&n, &s); err != nil {
		t.Fatal(err)
	}
	check("plain DuckDB 2.0", fmt.Sprintf("%d\t%d", n, s))
	ts.close()
	out := filepath.Join(t.TempDir(), "export")
	db, err := ingest.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Export(t.Context(), ingest.ExportOptions{Dir: out}, nil); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	check("plain DuckDB 1.5", duckdb15test.MustQuery(t, path, `SELECT count("late.key"), sum("late.key") FROM otel_traces`))
	check("Parquet", duckdb15test.MustQuery(t, path, `SELECT count("late.key"), sum("late.key") FROM read_parquet('`+out+`/otel_traces/**/*.parquet')`))
}

// One request with more distinct attribute keys than --max-keys is
// refused whole (400, saying why) and adds nothing to the catalog; one
// at the limit is taken.
func TestMaxKeysPerRequest(t *testing.T) {
	ts := startServer(t, Config{Limits: Limits{MaxKeys: 1000}})
	ts.good()
	catalog := func() int {
		var n int
		if err := ts.db.SQL.QueryRow("SELECT count(*) FROM shredduck_columns").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	request := func(keys int) []byte {
		td := ptrace.NewTraces()
		ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
		for s := range 10 {
			sp := ss.Spans().AppendEmpty()
			sp.SetName("op")
			for k := s; k < keys; k += 10 {
				sp.Attributes().PutInt(fmt.Sprintf("flood.%d.%d", keys, k), int64(k))
			}
		}
		b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	before := catalog()
	r := ts.post("/v1/traces", "application/x-protobuf", "", request(20000))
	if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "more than 1000 distinct attribute keys") {
		t.Errorf("20,000 keys: %d %s", r.status, r.body)
	}
	if n := catalog(); n != before {
		t.Errorf("the catalog grew by %d rows for a refused request", n-before)
	}
	if r := ts.post("/v1/traces", "application/x-protobuf", "", request(1000)); r.status != http.StatusOK {
		t.Errorf("1,000 keys: %d %s", r.status, r.body)
	}
	if n := catalog(); n != before+1000 {
		t.Errorf("the catalog grew by %d rows for 1,000 keys", n-before)
	}
}
