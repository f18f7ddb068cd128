package ingest_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/shredduck/shredduck/ingest"
)

// A request decoded after others into one batch (a file's lines, a Kafka
// item, a loader item of --ack log) whose rejected span makes the decoder
// roll the batch back and decode it again: a NULL that a span's duplicate
// key set must stay NULL in the table. The span's first value of the key
// padded the key's column (its 64th value, rows 0 to 63: padded in place),
// or a second one widened it (now: is a stray, in a column of its own
// kind, which the NULL clears too: no stray is stored), and the NULL cleared the first value's bit
// in buffers the column saved for the rollback shares; the rollback then
// miscounted the column's NULLs (one too few: none), and the Arrow array
// handed to DuckDB had no validity bitmap, so the NULL was stored as 0
// or "".
func TestRollbackKeepsADuplicateKeysNull(t *testing.T) {
	span := func(name, attrs, extra string) string {
		return `{"name":"` + name + `","traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","startTimeUnixNano":"1","attributes":[` + attrs + `]` + extra + `}`
	}
	request := func(spans ...string) string {
		return `{"resourceSpans":[{"scopeSpans":[{"spans":[` + strings.Join(spans, ",") + `]}]}]}`
	}
	rejected := span("bad", "", `,"endTimeUnixNano":"18446744073709551615"`) // after 2262
	for _, c := range []struct {
		name   string
		before int // spans with k before
		first  string
		want   string
	}{
		{"padded in place", 63, `{"key":"k","value":{"intValue":5}}`, "BIGINT"},
		{"a stray", 3, `{"key":"k","value":{"intValue":5}},{"key":"k","value":{"stringValue":"x"}}`, "BIGINT"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var before []string
			for i := range c.before {
				before = append(before, span(fmt.Sprint("a", i), fmt.Sprintf(`{"key":"k","value":{"intValue":%d}}`, i), `,"endTimeUnixNano":"2"`))
			}
			dup := span("dup", c.first+`,{"key":"k","value":{}}`, `,"endTimeUnixNano":"2"`) // the last, NULL, wins
			db := openDB(t)
			dir := t.TempDir()
			mustLoad(t, db, ingest.Options{MaxErrors: 1}, ndjson(t, dir, "traces.jsonl", request(before...), request(dup, rejected)))
			got := queryStrings(t, db, `SELECT coalesce(k::VARCHAR, 'NULL'), typeof(k) FROM otel_traces WHERE name = 'dup'`)
			if len(got) != 1 || got[0][0] != "NULL" || got[0][1] != c.want {
				t.Errorf("the span whose duplicate key is NULL holds %v, want [[NULL %s]]", got, c.want)
			}
			if c := catalogEntry(t, db, "otel_traces", "record", "k"); c.Strays != 0 {
				t.Errorf("%d strays of k stored, want none: the NULL wins over the string too", c.Strays)
			}
			if n := rowCount(t, db, "otel_traces"); n != int64(c.before+1) {
				t.Errorf("%d spans stored, want %d (the rejected one left out)", n, c.before+1)
			}
		})
	}
}
