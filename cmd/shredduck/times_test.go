package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// A span with a time TIMESTAMP_NS cannot hold (2^63-1 ns, its infinity,
// or later) fails a file load with its line and field, instead of being
// stored as infinity or wrapped to 1677; with --max-errors its request's
// other spans are loaded, and the table takes casts and SUMMARIZE. The
// latest time it holds is stored exactly.
func TestIngestTimePastTimestampNS(t *testing.T) {
	span := func(name, start string, end ...string) string {
		if end == nil {
			end = []string{"9223372036854775806"}
		}
		return `{"name":"` + name + `","traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","startTimeUnixNano":"` + start + `","endTimeUnixNano":"` + end[0] + `"}`
	}
	req := func(spans ...string) string {
		return `{"resourceSpans":[{"scopeSpans":[{"spans":[` + strings.Join(spans, ",") + `]}]}]}`
	}
	file := writeTemp(t, "late.jsonl", req(span("a", "1700000000000000000"))+"\n"+
		req(span("b", "1700000000000000000"), span("late", "9223372036854775808"))+"\n"+
		req(span("c", "1700000000000000000"), span("infinite", "1700000000000000000", "9223372036854775807"))+"\n")
	db := filepath.Join(t.TempDir(), "late.duckdb")
	code, _, e := ingestCmd(t, "--db", db, file)
	if code != exitError || !strings.Contains(e, file+":2") || !strings.Contains(e, "startTimeUnixNano") || !strings.Contains(e, "nothing was committed") {
		t.Errorf("exit %d, want %d and %s:2 naming startTimeUnixNano:\n%s", code, exitError, file, e)
	}
	if code, _, e := ingestCmd(t, "--db", db, "--max-errors", "2", file); code != exitOK || !strings.Contains(e, "endTimeUnixNano") {
		t.Fatalf("--max-errors 2: exit %d:\n%s", code, e)
	}
	code, out, e := queryCmd(t, "--db", db, "--csv", "SELECT name, start_time::VARCHAR AS s, end_time::VARCHAR AS e FROM otel_traces ORDER BY name")
	want := "name,s,e\n" +
		"a,2023-11-14 22:13:20,2262-04-11 23:47:16.854775806\n" +
		"b,2023-11-14 22:13:20,2262-04-11 23:47:16.854775806\n" +
		"c,2023-11-14 22:13:20,2262-04-11 23:47:16.854775806\n"
	if code != exitOK || out != want {
		t.Errorf("exit %d, stdout:\n%s\nwant:\n%s\nstderr: %s", code, out, want, e)
	}
	if code, _, e := queryCmd(t, "--db", db, "SUMMARIZE otel_traces"); code != exitOK {
		t.Errorf("SUMMARIZE: exit %d: %s", code, e)
	}
}
