package jaegerapi

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/shredduck/shredduck/serve/sqlpolicy"
	"github.com/shredduck/shredduck/shred"
)

// Every query costs the policy more than a trace lookup costs DuckDB: it
// reads the catalog for the key views and runs the query in a
// transaction of its own. A trace by id or a search is therefore one
// query (fetchSpans), on the schema an earlier request read. While the
// catalog's generation (Runner.KeysGen) is the one the schema was read
// at, before the query and after, the schema is the query's, and a
// schema of stored columns needs no views (sqlpolicy.Query.Stored).
// Otherwise the query checks itself: it also returns the catalog's
// fingerprint, and the schema is read again (and the query run again)
// when that changed. bench/run_jaeger.sh measures it.

// schemaCache is the schema read last (Handler.schema), shared by the
// handler's requests.
type schemaCache struct {
	mu sync.Mutex
	s  *schema
}

func (c *schemaCache) load() *schema {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.s
}

func (c *schemaCache) store(s *schema) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.s = s
}

// current returns the schema read last if the catalog's generation is
// still the one it was read at, else nil. A query that finds the same
// generation after it ran saw that catalog.
func (h *Handler) current() *schema {
	s := h.cache.load()
	if s == nil || !s.genOK || h.run.KeysGen() != s.gen {
		return nil
	}
	return s
}

// onCurrent runs f on the current schema, if there is one, and reports
// whether its answer stands: the catalog's generation was the same after
// it, or f failed with a refusal or timeout of the policy (err). Else (no
// current schema, a changed generation, a failure that a column of a
// changed catalog may explain) the caller runs its checked query.
func (h *Handler) onCurrent(f func(*schema) error) (done bool, err error) {
	s := h.current()
	if s == nil {
		return false, nil
	}
	switch err := f(s); {
	case err == nil:
		return h.run.KeysGen() == s.gen, nil
	case failureStatus(err) != http.StatusInternalServerError:
		return true, err
	}
	return false, nil
}

// spanQuery is what differs between the span queries: the rows they
// read.
type spanQuery struct {
	from string // what follows FROM: the table, its joins and conditions
	args []any
}

// columns are the span rows' columns on schema s: spanColumns, then the
// keys' columns, named c0, c1, ...
func columns(s *schema) []string {
	cols := make([]string, 0, nCore+len(s.keys))
	for i, c := range spanColumns {
		cols = append(cols, c+" AS c"+strconv.Itoa(i))
	}
	for i, k := range s.keys {
		col := shred.QuoteIdent(k.column)
		if strings.EqualFold(k.typ, "JSON") { // as text, which the driver would otherwise parse
			col = "CAST(" + col + " AS VARCHAR)"
		}
		cols = append(cols, col+" AS c"+strconv.Itoa(nCore+i))
	}
	return cols
}

// plainSQL is the query of the spans' rows (columns) on schema s, by
// their start and span id.
func (q *spanQuery) plainSQL(s *schema) string {
	return fmt.Sprintf("SELECT %s FROM %s ORDER BY c%d, c%d", strings.Join(columns(s), ", "), q.from, colStart, colSpanID)
}

// checkedSQL is plainSQL with, last, the catalog's fingerprint of the
// table (schema). The spans are joined to the fingerprint with LEFT
// JOIN, so that a query that finds no span still returns it, in a row
// whose other columns are NULL.
func (q *spanQuery) checkedSQL(s *schema, table string) string {
	cols := columns(s)
	outer := make([]string, len(cols))
	for i := range cols {
		outer[i] = "d.c" + strconv.Itoa(i)
	}
	return `SELECT ` + strings.Join(outer, ", ") + `, f.fp FROM (SELECT ` + fingerprintSQL(table) + ` AS fp) f LEFT JOIN (SELECT ` +
		strings.Join(cols, ", ") + ` FROM ` + q.from + fmt.Sprintf(`) d ON true ORDER BY d.c%d, d.c%d`, colStart, colSpanID)
}

// fingerprintSQL is the catalog's fingerprint of table (schema), as a
// scalar subquery: NULL when the table is not in the catalog.
func fingerprintSQL(table string) string {
	return `(SELECT hash(` + schemaList + `)` + fmt.Sprintf(schemaFrom, shred.QuoteString(table)) + `)`
}

// fetchSpans runs the span query that build makes for the table's schema
// and returns the traces of its rows. On the current schema (onCurrent)
// it runs it as it is. Otherwise it builds the query on the schema read
// last, with the fingerprint, and reads the schema again, and runs the
// query again, when the fingerprint says that the catalog changed since,
// or the query failed on it for a reason other than the policy's refusals
// and timeouts (a column it names may be gone with a reopened database).
// A query on a schema just read is answered as it is.
func (h *Handler) fetchSpans(ctx context.Context, build func(*schema) spanQuery) (traceSet, error) {
	var on *schema
	var res [][]any
	var cut bool
	if done, err := h.onCurrent(func(s *schema) (err error) {
		q := build(s)
		on = s
		res, cut, err = h.runQuery(ctx, sqlpolicy.Query{SQL: q.plainSQL(s), Args: q.args, Stored: s.stored})
		return err
	}); done {
		if err != nil {
			return nil, err
		}
		return buildTraces(on, res, cut)
	}
	s := h.cache.load()
	fresh := false
	for {
		if s == nil {
			var err error
			if s, err = h.schema(ctx); err != nil || !s.exists {
				return nil, err
			}
			fresh = true
		}
		q := build(s)
		res, cut, err := h.runQuery(ctx, sqlpolicy.Query{SQL: q.checkedSQL(s, h.cfg.Table), Args: q.args})
		switch {
		case err != nil && (fresh || failureStatus(err) != http.StatusInternalServerError):
			return nil, err
		case err != nil, !fresh && (len(res) == 0 || res[0][len(res[0])-1] != s.fingerprint):
			s = nil
			continue
		}
		return buildTraces(s, res, cut)
	}
}

// traceSet is traces by id.
type traceSet map[string]trace

// inOrder returns the traces with the ids given, in that order, those
// not in the set left out; an id given twice is answered once.
func (ts traceSet) inOrder(ids []string) []trace {
	var out []trace
	for _, id := range ids {
		if t, ok := ts[id]; ok {
			out = append(out, t)
			delete(ts, id)
		}
	}
	return out
}

// buildTraces rebuilds the traces of the span rows res (fetchSpans's).
// cut says that the policy cut the rows at its limits.
func buildTraces(s *schema, res [][]any, cut bool) (traceSet, error) {
	b := map[string]*traceBuilder{}
	for _, r := range res {
		id, _ := r[colTraceID].(string)
		if id == "" {
			continue // no span: the fingerprint's row alone
		}
		if b[id] == nil {
			b[id] = newTraceBuilder()
		}
		if err := b[id].add(s, r); err != nil {
			return nil, fmt.Errorf("trace %s: %w", id, err)
		}
	}
	ts := traceSet{}
	for id, tb := range b {
		ts[id] = trace{id: id, traces: tb.td, cut: cut}
	}
	return ts, nil
}
