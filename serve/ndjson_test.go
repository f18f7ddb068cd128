package serve

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/shredduck/shredduck/source"
)

func TestNDJSONEndpoint(t *testing.T) {
	ts := startServer(t, Config{})
	traces := readTestdata(t, "traces.jsonl")

	r := ts.post("/v1/ndjson/my_traces", "application/x-ndjson", "", traces)
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	var sum ndjsonSummary
	if err := json.Unmarshal(r.body, &sum); err != nil {
		t.Fatalf("summary %q: %v", r.body, err)
	}
	if sum.Rows != 19 || sum.Errors != 0 || len(sum.Tables) != 1 || sum.Tables[0].Table != "my_traces" || sum.Tables[0].Transform != "otlp-traces" {
		t.Errorf("summary %+v", sum)
	}
	if n := ts.count("my_traces"); n != 19 {
		t.Errorf("my_traces has %d rows, want 19", n)
	}

	// gzip, a fixed transform, metrics.
	metrics := readTestdata(t, "metrics_sum.jsonl")
	r = ts.post("/v1/ndjson/m?transform=otlp-metrics", "", "gzip", gzipBytes(t, metrics))
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}

	// One bad line: nothing of the body is committed.
	before := ts.count("my_traces")
	lines := strings.SplitAfter(string(traces), "\n")
	bad := strings.Join(lines[:2], "") + "{\"resourceSpans\": [}\n" + strings.Join(lines[2:], "")
	r = ts.post("/v1/ndjson/my_traces", "", "", []byte(bad))
	st := wantStatus(t, r, http.StatusBadRequest, formatJSON, codeInvalidArgument)
	if !strings.Contains(st.Message, "line 3") {
		t.Errorf("message %q does not name line 3", st.Message)
	}
	if n := ts.count("my_traces"); n != before {
		t.Errorf("a bad body committed %d rows", n-before)
	}

	// Logs into a traces table: 409 before anything is written.
	r = ts.post("/v1/ndjson/my_traces", "", "", readTestdata(t, "logs.jsonl"))
	wantStatus(t, r, http.StatusConflict, formatJSON, codeFailedPrecondition)
	r = ts.post("/v1/ndjson/MY_TRACES", "", "", readTestdata(t, "logs.jsonl"))
	wantStatus(t, r, http.StatusConflict, formatJSON, codeFailedPrecondition)

	// Generic JSON (the none transform), detected or named.
	if source.GenericJSON != nil {
		for _, q := range []string{"", "?transform=none"} {
			r = ts.post("/v1/ndjson/events"+q, "", "", []byte("{\"type\":\"push\",\"n\":1}\n{\"type\":\"pull\",\"repo\":{\"name\":\"x\"}}\n"))
			if r.status != http.StatusOK || !bytes.Contains(r.body, []byte(`"transform":"none"`)) {
				t.Errorf("generic JSON%s: %d %s", q, r.status, r.body)
			}
		}
		if n := ts.count("events"); n != 4 {
			t.Errorf("events has %d rows, want 4", n)
		}
	}

	// An empty body.
	r = ts.post("/v1/ndjson/empty", "", "", nil)
	if r.status != http.StatusOK || !bytes.Contains(r.body, []byte(`"rows":0`)) {
		t.Errorf("empty body: %d %s", r.status, r.body)
	}
	ts.good()
}

// Wide NDJSON (725 columns of GH Archive events) through the server: the
// query endpoint locks DuckDB's configuration, so a new table gets the
// stored columns the memory limit allows and its other keys go to the
// overflow maps; with a larger limit, all of them are columns.
func TestWideNDJSONTable(t *testing.T) {
	body, err := os.ReadFile("../testdata/gharchive/pinot-2021-07-21-few-hours.json")
	if err != nil {
		t.Fatal(err)
	}
	post := func(ts *testServer) response {
		return ts.post("/v1/ndjson/gh?transform=none", "application/x-ndjson", "", body)
	}
	ts := startServer(t, Config{})
	if r := post(ts); r.status != http.StatusOK {
		t.Fatalf("a new 725-key table at 256MB: %d %q", r.status, r.body)
	}
	if got := ts.count("gh"); got != 800 {
		t.Fatalf("gh has %d rows, want 800", got)
	}
	var keys, overflowed int
	ts.db.SQL.QueryRow(`SELECT count(*), count(*) FILTER (WHERE overflow) FROM shredduck_columns WHERE table_name = 'gh'`).Scan(&keys, &overflowed)
	if n := storedColumns(t, ts.db, "gh"); keys != 725 || overflowed == 0 || n > 256 {
		t.Errorf("gh: %d keys, %d overflowed, %d columns; want 725 keys, some overflowed, at most 256 columns", keys, overflowed, n)
	}
	ts.good() // the server keeps serving

	ts = startServer(t, Config{MemoryLimit: "1GB"})
	for i := 1; i <= 2; i++ {
		if r := post(ts); r.status != http.StatusOK {
			t.Fatalf("request %d: %d %q", i, r.status, r.body)
		}
	}
	if got := ts.count("gh"); got != 1600 {
		t.Fatalf("gh has %d rows, want 1600", got)
	}
}
