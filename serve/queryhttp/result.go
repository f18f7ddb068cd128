package queryhttp

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"net/http"
	"strconv"

	"github.com/shredduck/shredduck/serve/sqlpolicy"
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

// DefaultMaxBytes is the default limit of a response body.
const DefaultMaxBytes = sqlpolicy.DefaultMaxBytes

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
