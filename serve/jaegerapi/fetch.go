package jaegerapi

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/shredduck/shredduck/shred"
)

// Every query costs the policy more than a trace lookup costs DuckDB: it
// parses the statement, reads the catalog for the key views, plans it
// three times (its columns, its plan check, its run) in a transaction of
// its own. A trace by id or a search is therefore one query (fetchSpans),
// on the schema an earlier request read, which the query checks itself:
// it also returns the catalog's fingerprint, and the schema is read again
// (and the query run again) only when that changed. bench/run_jaeger.sh
// measures it.

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

// spanQuery is what differs between the span queries: the rows they read
// and their order.
type spanQuery struct {
	extra string // one more column after the span's, named x, or ""
	from  string // what follows FROM: the table, its joins and conditions
	args  []any
	order string // the order of the rows (d.c0, d.x, ...) before their start and span id, or ""
}

// sql is the query on schema s: the spans' rows (spanColumns, then the
// keys' columns, named c0, c1, ...; then x), and last the catalog's
// fingerprint of the table (schema). The spans are joined to the
// fingerprint with LEFT JOIN, so that a query that finds no span still
// returns it, in a row whose other columns are NULL.
func (q *spanQuery) sql(s *schema, table string) string {
	cols := make([]string, 0, nCore+len(s.keys)+1)
	outer := make([]string, 0, nCore+len(s.keys)+2)
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
	for i := range cols {
		outer = append(outer, "d.c"+strconv.Itoa(i))
	}
	if q.extra != "" {
		cols, outer = append(cols, q.extra+" AS x"), append(outer, "d.x")
	}
	order := fmt.Sprintf("d.c%d, d.c%d", colStart, colSpanID)
	if q.order != "" {
		order = q.order + ", " + order
	}
	fp := fingerprintSQL(table)
	return `SELECT ` + strings.Join(outer, ", ") + `, f.fp FROM (SELECT ` + fp + ` AS fp) f LEFT JOIN (SELECT ` + strings.Join(cols, ", ") +
		` FROM ` + q.from + `) d ON true ORDER BY ` + order
}

// fingerprintSQL is the catalog's fingerprint of table (schema), as a
// scalar subquery: NULL when the table is not in the catalog.
func fingerprintSQL(table string) string {
	return `(SELECT hash(` + schemaList + `)` + fmt.Sprintf(schemaFrom, shred.QuoteString(table)) + `)`
}

// fetchSpans runs the span query that build makes for the table's schema
// and returns the traces of its rows, calling found (if not nil) with
// each trace's id in the order of the rows. It builds the query on the
// schema read last and reads the schema again, and runs the query again,
// when the query's fingerprint says that the catalog changed since, or
// the query failed on it for a reason other than the policy's refusals
// and timeouts (a column it names may be gone with a reopened database).
// A query on a schema just read is answered as it is.
func (h *Handler) fetchSpans(ctx context.Context, build func(*schema) spanQuery, found func(id string)) (traceSet, error) {
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
		res, cut, err := h.queryCut(ctx, q.sql(s, h.cfg.Table), q.args...)
		switch {
		case err != nil && (fresh || failureStatus(err) != http.StatusInternalServerError):
			return nil, err
		case err != nil, !fresh && (len(res) == 0 || res[0][len(res[0])-1] != s.fingerprint):
			s = nil
			continue
		}
		return buildTraces(s, res, cut, found)
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

// buildTraces rebuilds the traces of the span rows res (fetchSpans's),
// calling found with each trace's id when its first row comes. cut says
// that the policy cut the rows at its limits.
func buildTraces(s *schema, res [][]any, cut bool, found func(string)) (traceSet, error) {
	b := map[string]*traceBuilder{}
	for _, r := range res {
		id, _ := r[colTraceID].(string)
		if id == "" {
			continue // no span: the fingerprint's row alone
		}
		if b[id] == nil {
			b[id] = newTraceBuilder()
			if found != nil {
				found(id)
			}
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
