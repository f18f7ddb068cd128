package serve

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	duckdb "github.com/duckdb/duckdb-go/v2"
)

// The byte limit. The row limit alone let SELECT repeat('x', 1000000) FROM
// range(400) take 2.9 GB: DuckDB materializes a result before the driver
// reads it (outside memory_limit for such strings), and the response was
// built whole, twice. Now:
//
//   - In DuckDB, the wrapper (wrapQuery) sums each row's size over a
//     streaming window and returns the rows past the limit as NULLs with a
//     flag, so that the materialized result holds at most the limit (and
//     the row limit's NULL rows); the scan stops at the row limit.
//   - In Go, the response is rendered row by row into one buffer and cut
//     before the row that would take it past the limit.
//
// A cut result is marked as the row limit marks it: "truncated": true and
// X-Shredduck-Truncated: true. When not even the first row fits, the answer
// is 413.

// DefaultQueryMaxBytes is the default limit of a response body.
const DefaultQueryMaxBytes = 16 << 20

// resultBody renders a result into a buffer of at most max bytes.
type resultBody struct {
	buf       bytes.Buffer
	max       int
	asCSV     bool
	csv       *csv.Writer
	rows      int
	truncated bool
	rec       []string
}

func newResultBody(columns, types []string, max int, asCSV bool) *resultBody {
	b := &resultBody{max: max, asCSV: asCSV}
	if asCSV {
		b.csv = csv.NewWriter(&b.buf)
		b.csv.Write(columns)
		b.csv.Flush()
		b.rec = make([]string, len(columns))
		return b
	}
	cb, _ := marshalJSON(columns)
	tb, _ := marshalJSON(types)
	b.buf.WriteString(`{"columns":`)
	b.buf.Write(cb)
	b.buf.WriteString(`,"types":`)
	b.buf.Write(tb)
	b.buf.WriteString(`,"rows":[`)
	return b
}

// add appends a row; it returns false, and leaves the body as it was,
// when the row does not fit.
func (b *resultBody) add(row []any) (bool, error) {
	mark := b.buf.Len()
	if b.asCSV {
		for i, v := range row {
			b.rec[i] = cellText(v)
		}
		b.csv.Write(b.rec)
		b.csv.Flush()
		if err := b.csv.Error(); err != nil {
			return false, err
		}
	} else {
		rb, err := marshalJSON(row)
		if err != nil {
			return false, fmt.Errorf("cannot encode the result: %w", err)
		}
		if b.rows > 0 {
			b.buf.WriteByte(',')
		}
		b.buf.Write(rb)
	}
	// The closing `],"truncated":false}` and newline count too.
	if b.buf.Len()+32 > b.max {
		b.buf.Truncate(mark)
		b.truncated = true
		return false, nil
	}
	b.rows++
	return true, nil
}

// finish closes the body and returns it.
func (b *resultBody) finish() []byte {
	if !b.asCSV {
		fmt.Fprintf(&b.buf, `],"truncated":%v}`+"\n", b.truncated)
	}
	return b.buf.Bytes()
}

// queryOutput is a rendered result.
type queryOutput struct {
	body      []byte
	asCSV     bool
	rows      int
	truncated bool
}

func writeQueryOutput(w http.ResponseWriter, out *queryOutput) {
	w.Header().Set("X-Shredduck-Truncated", strconv.FormatBool(out.truncated))
	w.Header().Set("X-Shredduck-Rows", strconv.Itoa(out.rows))
	if out.asCSV {
		w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(out.body)))
	w.Write(out.body)
}

// sizeSQL is a DuckDB expression of the size of the value of column ref (a
// positional reference, cast as selectExpr casts it): its bytes for text
// and blobs, its text's bytes for nested values, 40 for the rest.
func sizeSQL(col column, ref string) string {
	expr := selectExpr(col, ref)
	if col.cast != castNone {
		return "coalesce(strlen(" + expr + "), 0)"
	}
	t := duckdb.TYPE_INVALID
	if col.info != nil {
		t = col.info.InternalType()
	}
	switch t {
	case duckdb.TYPE_VARCHAR:
		return "coalesce(strlen(" + expr + "), 0)"
	case duckdb.TYPE_BLOB, duckdb.TYPE_BIT:
		return "coalesce(octet_length(" + expr + "), 0)"
	case duckdb.TYPE_INVALID, duckdb.TYPE_LIST, duckdb.TYPE_ARRAY, duckdb.TYPE_STRUCT, duckdb.TYPE_MAP,
		duckdb.TYPE_UNION, duckdb.TYPE_ENUM:
		return "coalesce(strlen(CAST(" + expr + " AS VARCHAR)), 0)"
	}
	return "40"
}

// selectExpr selects column ref as the driver can scan it.
func selectExpr(col column, ref string) string {
	switch col.cast {
	case castRawJSON, castText:
		return ref + "::VARCHAR"
	case castVariant:
		return ref + "::JSON::VARCHAR"
	}
	return ref
}

// wrapQuery selects the columns of query by position, cast where needed,
// with the row limit and the byte limit (maxBytes, over the sizes of
// sizeSQL): rows past the byte limit come as NULLs with the last column,
// shredduck_over, true. The window is a streaming one (no ORDER BY or
// PARTITION BY), so the query's order is kept and nothing waits for the
// whole result. The result is prepared as one statement again, so text
// that closes the parenthesis early cannot add a statement.
func wrapQuery(query string, cols []column, limit int, maxBytes int64) string {
	// A trailing semicolon is fine alone but not inside parentheses.
	query = strings.TrimRightFunc(query, func(r rune) bool { return r == ';' || r == ' ' || r == '\t' || r == '\n' || r == '\r' })
	var inner, sizes, mid, outer strings.Builder
	for i, col := range cols {
		ref := "#" + strconv.Itoa(i+1)
		name := "shredduck_c" + strconv.Itoa(i+1)
		if i > 0 {
			sizes.WriteString(" + ")
		}
		fmt.Fprintf(&inner, "%s AS %s, ", selectExpr(col, ref), name)
		sizes.WriteString(sizeSQL(col, ref))
		fmt.Fprintf(&mid, "%s, ", name)
		fmt.Fprintf(&outer, "CASE WHEN shredduck_over THEN NULL ELSE %s END, ", name)
	}
	return fmt.Sprintf("SELECT %sshredduck_over FROM (\n"+
		"SELECT %ssum(shredduck_size) OVER (ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) > %d AS shredduck_over FROM (\n"+
		"SELECT %s%s AS shredduck_size FROM (\n%s\n) LIMIT %d))",
		outer.String(), mid.String(), maxBytes, inner.String(), sizes.String(), query, limit)
}
