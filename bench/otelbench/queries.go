package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/shredduck/shredduck/bench/internal/benchutil"
)

// A query is written once over four field expressions; each path supplies
// its own way of reading the fields.
type query struct {
	name, title string
	sql         string // with {service}, {route}, {code}, {duration}, {table}
	floatCol    int    // index of a column compared with a relative tolerance, or -1
}

var queries = []query{
	{"errors", "errors by service", `SELECT {service} AS service, count(*) AS errors FROM {table} WHERE {code} >= 500 GROUP BY 1`, -1},
	{"p99", "p99 latency by route", `SELECT {route} AS route, quantile_cont({duration}, 0.99) AS p99_ns FROM {table} GROUP BY 1`, 1},
	{"status", "status-code distribution", `SELECT {code} AS http_status_code, count(*) AS spans FROM {table} GROUP BY 1`, -1},
}

// relTol is the relative tolerance for floating-point answers (p99).
const relTol = 1e-6

// A queryPath is one way of reading the fields of one encoding. The field
// expressions read the columns of the FROM item: the table itself, or for
// VARIANT, a projection that casts the VARIANT to a typed STRUCT of just the
// members the query reads (see casts).
type queryPath struct {
	enc, method                    string
	table                          string
	service, route, code, duration string
	// casts, for VARIANT paths: for each field the query may read, the
	// variant expression, the alias of its cast and the STRUCT member(s) the
	// field needs.
	casts map[string]variantCast
}

type variantCast struct{ src, alias, members string }

func (p queryPath) name() string {
	if strings.HasSuffix(p.enc, "_otlp") {
		return p.enc + "/" + p.method
	}
	return p.enc
}

var fieldNames = []string{"service", "route", "code", "duration"}

func (p queryPath) sql(q query) string {
	exprs := map[string]string{"service": p.service, "route": p.route, "code": p.code, "duration": p.duration}
	from := p.enc + "." + p.table
	if p.casts != nil {
		// One cast per variant expression, with the members of the fields
		// this query reads, in a fixed order.
		var aliases []string
		src := map[string]string{}
		members := map[string][]string{}
		for _, f := range fieldNames {
			c, ok := p.casts[f]
			if !ok || !strings.Contains(q.sql, "{"+f+"}") {
				continue
			}
			if _, seen := src[c.alias]; !seen {
				aliases = append(aliases, c.alias)
				src[c.alias] = c.src
			}
			if !slices.Contains(members[c.alias], c.members) {
				members[c.alias] = append(members[c.alias], c.members)
			}
		}
		var cols []string
		for _, a := range aliases {
			cols = append(cols, fmt.Sprintf("%s::STRUCT(%s) AS %s", src[a], strings.Join(members[a], ", "), a))
		}
		from = fmt.Sprintf("(SELECT %s FROM %s)", strings.Join(cols, ", "), from)
	}
	r := []string{"{table}", from}
	for _, f := range fieldNames {
		r = append(r, "{"+f+"}", exprs[f])
	}
	return strings.NewReplacer(r...).Replace(q.sql)
}

// OTLP/JSON: span fields, and the resource and span attributes either at
// the position the generator writes them (service.name first on the
// resource; http.method, http.route, http.status_code, retry on the span) or
// looked up by key. int64 values are strings in OTLP/JSON.
//
// VARIANT is read by casting it to a STRUCT of the members a query needs,
// attribute lists as STRUCT(key VARCHAR, value JSON)[]. In DuckDB 1.5.6, on
// 100k spans of checkpointed (shredded) VARIANT, this was the fastest
// formulation found: p99 on variant_otlp took about 2.2 s against 6.2 s
// with one path expression per field (doc.span.endTimeUnixNano::BIGINT,
// ...), and a key lookup through list_filter(doc.span.attributes::VARIANT[],
// a -> a.key::VARCHAR = ...) took about 6.6 s against 2.2 s.
const jsonDuration = `(doc->>'$.span.endTimeUnixNano')::BIGINT - (doc->>'$.span.startTimeUnixNano')::BIGINT`

func jsonKey(level, key, field string) string {
	return fmt.Sprintf(`json_extract_string(list_filter(json_extract(doc, '$.%s.attributes[*]'), lambda a: a->>'key' = '%s')[1], '$.value.%s')`, level, key, field)
}

func variantKey(alias, key, field string) string {
	return fmt.Sprintf(`(list_filter(%s.attributes, lambda a: a.key = '%s')[1].value->>'%s')`, alias, key, field)
}

const attrList = "attributes STRUCT(key VARCHAR, value JSON)[]"

var variantOTLPCasts = map[string]variantCast{
	"service":  {"doc.resource", "r", attrList},
	"route":    {"doc.span", "s", attrList},
	"code":     {"doc.span", "s", attrList},
	"duration": {"doc.span", "s", "startTimeUnixNano BIGINT, endTimeUnixNano BIGINT"},
}

var queryPaths = []queryPath{
	{enc: "shredded", method: "column", table: "otel_traces",
		service: "service_name", route: `"http.route"`, code: `"http.status_code"`, duration: "duration_ns"},
	{enc: "sql_typed", method: "column", table: "spans",
		service: "service_name", route: `"http.route"`, code: `"http.status_code"`, duration: "duration_ns"},
	{enc: "json_flat", method: "key", table: "docs",
		service: `doc->>'service_name'`, route: `doc->>'http.route'`,
		code: `(doc->>'http.status_code')::BIGINT`, duration: `(doc->>'duration_ns')::BIGINT`},
	{enc: "variant_flat", method: "key", table: "docs",
		service: `d.service_name`, route: `d."http.route"`, code: `d."http.status_code"`, duration: `d.duration_ns`,
		casts: map[string]variantCast{
			"service":  {"doc", "d", "service_name VARCHAR"},
			"route":    {"doc", "d", `"http.route" VARCHAR`},
			"code":     {"doc", "d", `"http.status_code" BIGINT`},
			"duration": {"doc", "d", "duration_ns BIGINT"},
		}},
	{enc: "json_otlp", method: "position", table: "docs",
		service:  `doc->>'$.resource.attributes[0].value.stringValue'`,
		route:    `doc->>'$.span.attributes[1].value.stringValue'`,
		code:     `(doc->>'$.span.attributes[2].value.intValue')::BIGINT`,
		duration: jsonDuration},
	{enc: "json_otlp", method: "key", table: "docs",
		service:  jsonKey("resource", "service.name", "stringValue"),
		route:    jsonKey("span", "http.route", "stringValue"),
		code:     jsonKey("span", "http.status_code", "intValue") + "::BIGINT",
		duration: jsonDuration},
	{enc: "variant_otlp", method: "position", table: "docs",
		service:  `r.attributes[1].value->>'stringValue'`,
		route:    `s.attributes[2].value->>'stringValue'`,
		code:     `(s.attributes[3].value->>'intValue')::BIGINT`,
		duration: `s.endTimeUnixNano - s.startTimeUnixNano`,
		casts:    variantOTLPCasts},
	{enc: "variant_otlp", method: "key", table: "docs",
		service:  variantKey("r", "service.name", "stringValue"),
		route:    variantKey("s", "http.route", "stringValue"),
		code:     variantKey("s", "http.status_code", "intValue") + "::BIGINT",
		duration: `s.endTimeUnixNano - s.startTimeUnixNano`,
		casts:    variantOTLPCasts},
}

func render(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32)
	case []byte:
		return string(x)
	case string:
		return x
	}
	return fmt.Sprint(v)
}

// sameAnswer reports how got differs from want, or "" if it does not.
// Column floatCol is compared with a relative tolerance.
func sameAnswer(got, want []benchutil.Row, floatCol int) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d rows, want %d", len(got), len(want))
	}
	for i := range got {
		if len(got[i]) != len(want[i]) {
			return fmt.Sprintf("row %d has %d columns, want %d", i+1, len(got[i]), len(want[i]))
		}
		for j := range got[i] {
			g, w := got[i][j], want[i][j]
			if g == w {
				continue
			}
			if j == floatCol {
				gf, err1 := strconv.ParseFloat(g, 64)
				wf, err2 := strconv.ParseFloat(w, 64)
				if err1 == nil && err2 == nil && math.Abs(gf-wf) <= relTol*math.Max(math.Abs(gf), math.Abs(wf)) {
					continue
				}
			}
			return fmt.Sprintf("row %d: %v, want %v", i+1, got[i], want[i])
		}
	}
	return ""
}

// checkReference sanity-checks the shredded answers before they judge the
// others: every span is counted once in the status distribution, and the
// errors by service add up to the spans with a status code >= 500.
func checkReference(ref map[string][]benchutil.Row, records int64) error {
	var total, errs, byService int64
	for _, r := range ref["status"] {
		n, _ := strconv.ParseInt(r[1], 10, 64)
		total += n
		if c, err := strconv.ParseInt(r[0], 10, 64); err == nil && c >= 500 {
			errs += n
		}
	}
	for _, r := range ref["errors"] {
		n, _ := strconv.ParseInt(r[1], 10, 64)
		byService += n
	}
	switch {
	case total != records:
		return fmt.Errorf("status distribution counts %d spans, want %d", total, records)
	case errs == 0 || byService != errs:
		return fmt.Errorf("errors by service add up to %d, status codes >= 500 to %d", byService, errs)
	case len(ref["p99"]) == 0:
		return fmt.Errorf("p99 by route is empty")
	}
	return nil
}
