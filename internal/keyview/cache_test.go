package keyview

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
)

// countingConn counts the queries run on it.
type countingConn struct {
	Conn
	queries int
}

func (c *countingConn) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	c.queries++
	return c.Conn.QueryContext(ctx, query, args...)
}

// A query text's references are parsed once (a statement of its own on
// every query otherwise) and kept for at most maxParsed texts, none longer
// than maxParsedLen; the default database is read once.
func TestCacheKeepsParses(t *testing.T) {
	c := &countingConn{Conn: openMemory(t)}
	k := &Cache{}
	ctx := context.Background()
	q := `SELECT name, "http.route" FROM otel_traces WHERE trace_id = $1`
	refs, ok, err := k.refs(ctx, c, q)
	if err != nil || !ok || !refs.Tables["otel_traces"] || !refs.Columns["http.route"] {
		t.Fatalf("%+v %v %v", refs, ok, err)
	}
	before := c.queries
	again, ok, err := k.refs(ctx, c, q)
	if err != nil || !ok || !again.Columns["http.route"] || c.queries != before {
		t.Fatalf("parsed again (%d queries, %d before): %+v %v %v", c.queries, before, again, ok, err)
	}
	if _, ok, err := k.refs(ctx, c, "SELEC nonsense"); ok || err != nil {
		t.Errorf("a text DuckDB cannot parse: ok %v, %v", ok, err)
	}
	for i := range maxParsed + 10 {
		if _, _, err := k.refs(ctx, c, fmt.Sprintf("SELECT %d AS k FROM otel_traces", i)); err != nil {
			t.Fatal(err)
		}
	}
	if len(k.parsed) != maxParsed || len(k.order) != maxParsed {
		t.Errorf("%d texts kept (%d in order), want %d", len(k.parsed), len(k.order), maxParsed)
	}
	if _, kept := k.parsed[q]; kept {
		t.Error("the oldest text is still kept")
	}
	long := "SELECT name FROM otel_traces WHERE name <> '" + strings.Repeat("x", maxParsedLen) + "'"
	if _, ok, err := k.refs(ctx, c, long); !ok || err != nil {
		t.Fatalf("a long text: ok %v, %v", ok, err)
	}
	if _, kept := k.parsed[long]; kept {
		t.Error("a text over maxParsedLen is kept")
	}
	before = c.queries
	for range 3 {
		if name, err := k.database(ctx, c); err != nil || name != "memory" {
			t.Fatalf("database %q, %v", name, err)
		}
	}
	if c.queries != before+1 {
		t.Errorf("%d queries for three reads of the database's name", c.queries-before)
	}
}
