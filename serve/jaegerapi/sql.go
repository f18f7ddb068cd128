package jaegerapi

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/shredduck/shredduck/serve/sqlpolicy"
	"github.com/shredduck/shredduck/shred"
)

// rows collects a result; the policy's sink contract lets it keep copies.
type rows struct {
	cols []sqlpolicy.Column
	vals [][]any
}

func (s *rows) Columns(c []sqlpolicy.Column) error { s.cols = c; return nil }

func (s *rows) Row(v []any) (bool, error) {
	s.vals = append(s.vals, slices.Clone(v))
	return true, nil
}

func (h *Handler) query(ctx context.Context, sql string, args ...any) ([][]any, error) {
	res, _, err := h.runQuery(ctx, sqlpolicy.Query{SQL: sql, Args: args})
	return res, err
}

// runQuery runs q and returns its rows, and whether the policy cut them
// at its row or byte limit.
func (h *Handler) runQuery(ctx context.Context, q sqlpolicy.Query) ([][]any, bool, error) {
	var out rows
	res, err := h.run.RunBuilt(ctx, q, &out)
	return out.vals, res.Truncated, err
}

// attrColumn is a key of the traces table as the catalog records it: the
// column it reads as (stored or, through the policy's key views, from the
// overflow maps) and that column's type.
type attrColumn struct {
	level  shred.Level
	key    string
	column string
	typ    string
}

// schema is what the catalog says of the traces table.
type schema struct {
	exists bool
	keys   []attrColumn
	// fingerprint is the hash of the catalog's list the keys were read
	// from: a query that computes it again finds out whether they changed.
	fingerprint any
	// gen is the catalog's generation (Runner.KeysGen) the keys were read
	// at, when genOK: a query run while it stays the same needs no
	// fingerprint, which costs more than a trace lookup.
	gen   int64
	genOK bool
	// stored says that every key is a column the table stores, none read
	// through the policy's key views (sqlpolicy.Query.Stored).
	stored bool
}

// overflowColumns are the JSON columns an earlier release put overflowed
// keys into as members; such keys have no column of their own to read.
var overflowColumns = map[string]bool{
	"attributes_overflow": true, "resource_attributes_overflow": true, "scope_attributes_overflow": true,
}

// schemaList is the catalog's keys of the table as one list, in the
// order they were first seen; schemaFrom the rest of the query that reads
// it, for the table named by its one parameter (or literal).
const (
	schemaList = `list([c.level, c.key, c.column_name, c.type,
			CAST(NOT c.overflow AND coalesce(c.strays, 0) > 0 AS VARCHAR),
			CAST(NOT c.overflow AND c.promoted IS NULL AS VARCHAR)] ORDER BY c.first_seen, c.rowid)
			FILTER (WHERE c.key IS NOT NULL)`
	schemaFrom = ` FROM shredduck_tables t LEFT JOIN shredduck_columns c ON c.table_name = t.table_name
		WHERE t.table_name = %s GROUP BY t.table_name`
)

// schema reads the table's keys from the catalog, in the order they were
// first seen, as one row (a list), so that the policy's row limit cannot
// cut it; a key with strays twice: its column, and its strays' text
// (shred.StraySuffix). It remembers what it read for fetchSpans.
func (h *Handler) schema(ctx context.Context) (*schema, error) {
	gen := h.run.KeysGen()
	res, _, err := h.runQuery(ctx, sqlpolicy.Query{SQL: `SELECT ` + schemaList + `, hash(` + schemaList + `)` + fmt.Sprintf(schemaFrom, "?"),
		Args: []any{h.cfg.Table}, Stored: true})
	if err != nil {
		return nil, err
	}
	s := &schema{exists: len(res) > 0, gen: gen, genOK: gen%2 == 0 && h.run.KeysGen() == gen, stored: true}
	if !s.exists {
		h.cache.store(nil)
		return s, nil
	}
	keys, _ := res[0][0].([]any)
	for _, k := range keys {
		f, _ := k.([]any)
		if len(f) != 6 {
			return nil, fmt.Errorf("unexpected catalog row %v", k)
		}
		level, key, col, typ := str(f[0]), str(f[1]), str(f[2]), str(f[3])
		lv, ok := shred.ParseLevel(level)
		if !ok || overflowColumns[col] {
			continue
		}
		s.keys = append(s.keys, attrColumn{level: lv, key: key, column: col, typ: typ})
		s.stored = s.stored && str(f[5]) == "true" && str(f[4]) != "true"
		if str(f[4]) == "true" {
			// The key's stray values (docs/SCHEMA.md 5.6), as text: a tag
			// of the span where the typed column has none.
			s.keys = append(s.keys, attrColumn{level: lv, key: key, column: col + shred.StraySuffix, typ: "VARCHAR"})
		}
	}
	s.fingerprint = res[0][1]
	h.cache.store(s)
	return s, nil
}

// hasColumn reports whether a key of s reads as the column name, as
// DuckDB compares names (ignoring case).
func (s *schema) hasColumn(name string) bool {
	return slices.ContainsFunc(s.keys, func(k attrColumn) bool { return strings.EqualFold(k.column, name) })
}

func (h *Handler) table() string { return shred.QuoteIdent(h.cfg.Table) }

func (h *Handler) serviceNames(ctx context.Context) ([]string, error) {
	s, err := h.schema(ctx)
	if err != nil || !s.exists {
		return nil, err
	}
	res, err := h.query(ctx, `SELECT DISTINCT service_name FROM `+h.table()+` WHERE service_name <> '' ORDER BY 1`)
	var out []string
	for _, r := range res {
		out = append(out, r[0].(string))
	}
	return out, err
}

// operation is a span name of a service with its kind in Jaeger's words
// ("server", ...; "" for UNSPECIFIED).
type operation struct {
	Name     string `json:"name"`
	SpanKind string `json:"spanKind"`
}

// operationList returns the operations of service; kind, when not "",
// keeps those of that kind (as Jaeger compares it: "unspecified" matches
// none).
func (h *Handler) operationList(ctx context.Context, service, kind string) ([]operation, error) {
	s, err := h.schema(ctx)
	if err != nil || !s.exists {
		return nil, err
	}
	sql := `SELECT DISTINCT name, CASE WHEN kind = 'UNSPECIFIED' THEN '' ELSE lower(CAST(kind AS VARCHAR)) END AS k
		FROM ` + h.table() + ` WHERE service_name = ?`
	args := []any{service}
	if kind != "" {
		sql += ` AND kind <> 'UNSPECIFIED' AND lower(CAST(kind AS VARCHAR)) = ?`
		args = append(args, kind)
	}
	res, err := h.query(ctx, sql+` ORDER BY 1, 2`, args...)
	var out []operation
	for _, r := range res {
		out = append(out, operation{Name: r[0].(string), SpanKind: r[1].(string)})
	}
	return out, err
}

// findTraces returns the traces findTraceIDs finds, in its order: the
// search (foundIDs), then one query of their spans (tracesByID), both on
// the schema read last and checked as fetchSpans checks.
func (h *Handler) findTraces(ctx context.Context, q *searchQuery) ([]trace, error) {
	ids, err := h.foundIDs(ctx, q)
	if err != nil {
		return nil, err
	}
	return h.tracesByID(ctx, ids)
}

// foundIDs is findTraceIDs on the schema read last, checked as fetchSpans
// checks its queries: by the catalog's generation (onCurrent), else with
// the catalog's fingerprint, read again when it changed. That query's one
// column is the id and the fingerprint, joined: DuckDB cannot describe
// the columns of this query when the policy prepares it with the search's
// parameters (in a lambda, or through the key views of overflowed keys),
// and takes it for a query of one column.
func (h *Handler) foundIDs(ctx context.Context, q *searchQuery) ([]string, error) {
	var ids []string
	if done, err := h.onCurrent(func(s *schema) (err error) {
		ids, err = h.findTraceIDs(ctx, s, q)
		return err
	}); done {
		return ids, err
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
		where, args := searchWhere(s, q)
		res, err := h.query(ctx, `SELECT coalesce(i.trace_id, '') || ' ' || coalesce(CAST(f.fp AS VARCHAR), '')
			FROM (SELECT `+fingerprintSQL(h.cfg.Table)+` AS fp) f LEFT JOIN (SELECT trace_id, max(start_time) AS m FROM `+h.table()+
			` WHERE `+where+` GROUP BY trace_id ORDER BY m DESC, trace_id LIMIT `+strconv.Itoa(q.limit)+`) i ON true
			ORDER BY i.m DESC, i.trace_id`, args...)
		if err != nil {
			if fresh || failureStatus(err) != http.StatusInternalServerError {
				return nil, err
			}
			s = nil
			continue
		}
		var ids []string
		fp := ""
		for _, r := range res {
			id, f, _ := strings.Cut(str(r[0]), " ")
			if fp = f; id != "" {
				ids = append(ids, id)
			}
		}
		if !fresh && fp != fmt.Sprint(s.fingerprint) {
			s = nil
			continue
		}
		return ids, nil
	}
}

// tracesByID returns the traces with the ids given, in that order, those
// without rows left out.
func (h *Handler) tracesByID(ctx context.Context, ids []string) ([]trace, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	// One id is a comparison that DuckDB pushes into the scan. Several
	// are a list parameter, so that the statement's text is the same for
	// any ids; DuckDB pushes no list into the scan, and reads every column
	// of every row for it, but it pushes the range of the rowids a join
	// takes into the scan of the other side: the rows of the ids are
	// found by their trace_id alone, then read by rowid (20 traces a
	// search finds in 1M spans: 25 ms, by rowid 11). The key views have
	// no rowid, and a key stored as a column "rowid" would hide DuckDB's.
	tr, err := h.fetchSpans(ctx, func(s *schema) spanQuery {
		switch {
		case len(ids) == 1:
			return spanQuery{from: h.table() + ` WHERE trace_id = ?`, args: []any{ids[0]}}
		case s.stored && !s.hasColumn("rowid"):
			return spanQuery{from: h.table() + ` WHERE rowid IN (SELECT rowid FROM ` + h.table() + ` WHERE trace_id = ANY(CAST(? AS VARCHAR[])))`, args: []any{ids}}
		}
		return spanQuery{from: h.table() + ` WHERE trace_id = ANY(CAST(? AS VARCHAR[]))`, args: []any{ids}}
	})
	if err != nil {
		return nil, err
	}
	return tr.inOrder(ids), nil
}

// findTraceIDs returns the ids of the traces with a span that meets every
// condition of q, the latest first, at most q.limit.
func (h *Handler) findTraceIDs(ctx context.Context, s *schema, q *searchQuery) ([]string, error) {
	if !s.exists {
		return nil, nil
	}
	where, args := searchWhere(s, q)
	res, _, err := h.runQuery(ctx, sqlpolicy.Query{SQL: `SELECT trace_id FROM ` + h.table() + ` WHERE ` + where +
		` GROUP BY trace_id ORDER BY max(start_time) DESC, trace_id LIMIT ` + strconv.Itoa(q.limit), Args: args, Stored: s.stored})
	var ids []string
	for _, r := range res {
		ids = append(ids, r[0].(string))
	}
	return ids, err
}

// searchWhere is the condition on a span of a search: it meets every
// condition of q. Its parameters are cast to their types: a parameter
// whose type DuckDB leaves open when it prepares a statement (one in a
// lambda) makes it describe the result as one column, and the policy then
// runs the statement once more to learn its columns.
func searchWhere(s *schema, q *searchQuery) (string, []any) {
	var where []string
	var args []any
	cond := func(c string, a ...any) { where = append(where, c); args = append(args, a...) }
	cond("trace_id IS NOT NULL")
	if q.service != "" {
		cond("service_name = CAST(? AS VARCHAR)", q.service)
	}
	if q.operation != "" {
		cond("name = CAST(? AS VARCHAR)", q.operation)
	}
	if !q.startMin.IsZero() {
		cond("start_time >= make_timestamp_ns(CAST(? AS BIGINT))", q.startMin.UnixNano())
	}
	if !q.startMax.IsZero() {
		cond("start_time <= make_timestamp_ns(CAST(? AS BIGINT))", q.startMax.UnixNano())
	}
	if q.durMin != 0 {
		cond("duration_ns >= CAST(? AS BIGINT)", int64(q.durMin))
	}
	if q.durMax != 0 {
		cond("duration_ns <= CAST(? AS BIGINT)", int64(q.durMax))
	}
	for _, k := range slices.Sorted(maps.Keys(q.tags)) {
		c, a := tagCondition(s, k, q.tags[k])
		cond(c, a...)
	}
	return strings.Join(where, " AND "), args
}

// tagCondition is the SQL of one tag of a search: the key's value, read
// as text the way pdata's Value.AsString writes it, equals value in the
// span's attributes, its scope's, its resource's or one of its events'
// (Jaeger's findKeyValInTrace). Each column is compared in its own type,
// so that the comparison scans the column. The key error is the span's
// status instead: true is ERROR, false OK.
func tagCondition(s *schema, key, value string) (string, []any) {
	if key == "error" {
		switch value {
		case "true":
			return "status_code = 'ERROR'", nil
		default:
			return "status_code = 'OK'", nil
		}
	}
	var ors []string
	var args []any
	for _, c := range s.keys {
		if c.key != key {
			continue
		}
		col := shred.QuoteIdent(c.column)
		switch c.typ {
		case "VARCHAR":
			ors, args = append(ors, col+" = CAST(? AS VARCHAR)"), append(args, value)
		case "BIGINT":
			if n, err := strconv.ParseInt(value, 10, 64); err == nil && strconv.FormatInt(n, 10) == value {
				ors, args = append(ors, col+" = CAST(? AS BIGINT)"), append(args, n)
			}
		case "DOUBLE":
			if f, err := strconv.ParseFloat(value, 64); err == nil && pcommon.NewValueDouble(f).AsString() == value {
				ors, args = append(ors, col+" = CAST(? AS DOUBLE)"), append(args, f)
			}
		case "BOOLEAN":
			if value == "true" || value == "false" {
				ors, args = append(ors, col+" = CAST(? AS BOOLEAN)"), append(args, value == "true")
			}
		case "BLOB":
			ors, args = append(ors, "base64("+col+") = CAST(? AS VARCHAR)"), append(args, value)
		default: // JSON: its compact text
			ors, args = append(ors, "CAST("+col+" AS VARCHAR) = CAST(? AS VARCHAR)"), append(args, value)
		}
	}
	ors = append(ors, "len(list_filter(events, lambda e: json_extract_string(CAST(e.attributes AS JSON), CAST(? AS VARCHAR)) = CAST(? AS VARCHAR))) > 0")
	args = append(args, jsonPointer(key), value)
	return "(" + strings.Join(ors, " OR ") + ")", args
}

// jsonPointer is the RFC 6901 pointer to the member key of an object.
func jsonPointer(key string) string {
	return "/" + strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
}

// dependencyLink is one caller → callee pair of services.
type dependencyLink struct {
	Parent    string `json:"parent"`
	Child     string `json:"child"`
	CallCount uint64 `json:"callCount"`
}

// dependencyLinks counts, over the traces that start after from and end
// before to (Jaeger's memory store keeps those), the spans whose parent is
// in their trace, by the parent's service and theirs.
func (h *Handler) dependencyLinks(ctx context.Context, from, to time.Time) ([]dependencyLink, error) {
	out := []dependencyLink{}
	s, err := h.schema(ctx)
	if err != nil || !s.exists {
		return out, err
	}
	t := h.table()
	res, err := h.query(ctx, `WITH tr AS (SELECT trace_id FROM `+t+` WHERE trace_id IS NOT NULL GROUP BY trace_id
			HAVING min(start_time) > make_timestamp_ns(?) AND max(end_time) < make_timestamp_ns(?))
		SELECT coalesce(p.service_name, ''), coalesce(c.service_name, ''), count(*)
		FROM `+t+` c JOIN `+t+` p ON p.trace_id = c.trace_id AND p.span_id = c.parent_span_id
		WHERE c.trace_id IN (SELECT trace_id FROM tr)
		GROUP BY ALL ORDER BY 1, 2`, from.UnixNano(), to.UnixNano())
	for _, r := range res {
		out = append(out, dependencyLink{Parent: r[0].(string), Child: r[1].(string), CallCount: uint64(r[2].(int64))})
	}
	return out, err
}
