package queryhttp

import (
	"net/http"
	"strings"
	"testing"
)

// The byte limit cuts a result as the row limit does, in DuckDB before it
// materializes the rows and in the rendered body.
func TestQueryByteLimit(t *testing.T) {
	db := queryDB(t)
	const limit = 1 << 20
	h := NewHandler(db, Config{MaxBytes: limit})
	for _, accept := range []string{"application/json", "text/csv"} {
		r := postQuery(t, h, "/v1/query", "text/plain", "SELECT repeat('x', 100000) AS x FROM range(400)", "Accept", accept)
		if r.status != http.StatusOK || r.header.Get("X-Shredduck-Truncated") != "true" {
			t.Fatalf("%s: %d %v %.200s", accept, r.status, r.header, r.body)
		}
		if len(r.body) > limit || len(r.body) < limit*8/10 {
			t.Errorf("%s: %d-byte body for a %d-byte limit", accept, len(r.body), limit)
		}
		if n := r.header.Get("X-Shredduck-Rows"); n != "10" {
			t.Errorf("%s: %s rows, want 10", accept, n)
		}
	}
	res := decodeResult(t, postQuery(t, h, "/v1/query", "text/plain", "SELECT repeat('x', 100000) AS x FROM range(400)"))
	if !res.Truncated || len(res.Rows) != 10 || len(res.Rows[0][0]) != 100002 {
		t.Errorf("truncated %v, %d rows", res.Truncated, len(res.Rows))
	}
	// The query's order is kept up to the cut.
	res = decodeResult(t, postQuery(t, h, "/v1/query", "text/plain", "SELECT i, repeat('y', 50000) FROM range(1000) t(i) ORDER BY i DESC"))
	if !res.Truncated || len(res.Rows) < 15 || string(res.Rows[0][0]) != "999" || string(res.Rows[14][0]) != "985" {
		t.Errorf("ordered: truncated %v, %d rows, first %s", res.Truncated, len(res.Rows), res.Rows[0][0])
	}
	// JSON rendering is larger than DuckDB's sizes: the body is cut too.
	res = decodeResult(t, postQuery(t, h, "/v1/query", "text/plain", "SELECT repeat(chr(1), 50000) FROM range(100)"))
	if !res.Truncated || len(res.Rows) == 0 || len(res.Rows) > 4 {
		t.Errorf("escaped: truncated %v, %d rows", res.Truncated, len(res.Rows))
	}
	// Nested values count by their text.
	res = decodeResult(t, postQuery(t, h, "/v1/query", "text/plain", "SELECT [repeat('z', 1000) FOR x IN range(100)] FROM range(100)"))
	if !res.Truncated || len(res.Rows) > 11 {
		t.Errorf("lists: truncated %v, %d rows", res.Truncated, len(res.Rows))
	}
	// Under the limit nothing changes.
	res = decodeResult(t, postQuery(t, h, "/v1/query", "text/plain", "SELECT repeat('x', 1000) FROM range(100)"))
	if res.Truncated || len(res.Rows) != 100 {
		t.Errorf("small: truncated %v, %d rows", res.Truncated, len(res.Rows))
	}
	// A first row over the limit: 413.
	r := postQuery(t, NewHandler(db, Config{MaxBytes: 100 << 10}), "/v1/query", "text/plain", "SELECT repeat('x', 500000)")
	if r.status != http.StatusRequestEntityTooLarge || !strings.Contains(r.body, "larger than the response limit") {
		t.Errorf("one big row: %d %.200s", r.status, r.body)
	}
}
