package pgwire

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	duckdb "github.com/duckdb/duckdb-go/v2"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/shredduck/shredduck/shred"
)

// psql's describe commands (\d, \d+, \dt+, \dn, \l, ...) query
// pg_catalog in PostgreSQL's dialect. DuckDB's pg_catalog has most of
// the tables; what it lacks or answers otherwise is rewritten here in the
// query's code (never in its strings, see mapCode), or made as temporary
// objects (dialect), and the result runs under the same policy as any
// query.

// codeRewrites are PostgreSQL spellings DuckDB does not parse.
var codeRewrites = []struct {
	re   *regexp.Regexp
	repl string
}{
	// a OPERATOR(pg_catalog.~) b: DuckDB's ~ is a full match, where
	// PostgreSQL's finds the pattern anywhere; psql's patterns are
	// anchored (^(...)$), so both agree on them.
	{regexp.MustCompile(`(?i)\bOPERATOR\s*\(\s*pg_catalog\s*\.\s*([~!=<>]+)\s*\)`), " $1 "},
	// PostgreSQL's default collation is DuckDB's.
	{regexp.MustCompile(`(?i)\bCOLLATE\s+pg_catalog\s*\.\s*(default\b|"default")`), ""},
	// DuckDB has no reg* types: an OID stays a number.
	{regexp.MustCompile(`(?i)::\s*(pg_catalog\s*\.\s*)?(regtype|regclass|regproc|regnamespace|regrole)\b`), ""},
	// pg_catalog.name: DuckDB's pg_catalog schema holds neither the
	// temporary objects nor most functions (array_to_string, ...), and
	// after :: DuckDB parses no qualified type name. Unqualified, a name
	// is looked up in temp, main and then pg_catalog.
	{regexp.MustCompile(`(?i)\bpg_catalog\s*\.\s*`), ""},
}

// psqlRewrites are psql's idioms that span code and strings, matched as
// psql writes them; the replacements hold no text of the query.
var psqlRewrites = []struct {
	has  string // what the query holds if re can match
	re   *regexp.Regexp
	repl string
}{
	// A policy of every role: an array literal DuckDB does not read.
	{"polroles", regexp.MustCompile(`(?i)\bpol\.polroles\s*=\s*'\{0\}'`), "pol.polroles = [0]"},
	// generate_series(...) s: in DuckDB, s is the row (a STRUCT), not
	// the value.
	{"prattrs", regexp.MustCompile(`(?i)(\bgenerate_series\s*\(\s*0\s*,\s*(?:pg_catalog\s*\.\s*)?array_upper\s*\(\s*pr\.prattrs\b[^()]*,\s*1\s*\)\s*\)\s*s)\s*,`), "$1(s),"},
}

// temp is a temporary object of dialect.
type temp struct {
	name, kind string
	// uses matches the queries that need it; nil: those naming it (as a
	// call for a macro).
	uses     *regexp.Regexp
	settings bool // def takes DuckDB's settings
	def      func(settings map[string]string) string
}

// dialect are the PostgreSQL functions and catalog tables DuckDB lacks or
// answers otherwise, made as temporary objects for the queries that name
// them (Grafana's data source and psql call them), in this order: a
// later one may use an earlier one.
var dialect = []temp{
	{name: "version", kind: "MACRO", def: constDef("() AS 'PostgreSQL " + ServerVersion + " (shredduck on DuckDB ' || system.main.version() || ')'")},
	{name: "current_setting", kind: "MACRO", settings: true, def: currentSetting},
	{name: "quote_ident", kind: "MACRO",
		def: constDef(`(s) AS CASE WHEN regexp_full_match(s, '[a-z_][a-z0-9_$]*') THEN s ELSE '"' || replace(s, '"', '""') || '"' END`)},
	{name: "parse_ident", kind: "MACRO",
		def: constDef(`(s) AS list_transform(string_split(s, '.'), lambda x: CASE WHEN x LIKE '"%"' THEN replace(x[2:-2], '""', '"') ELSE lower(x) END)`)},
	{name: "array_lower", kind: "MACRO", def: constDef("(a, d) AS CASE WHEN len(a) > 0 THEN 1 END")},
	{name: "array_upper", kind: "MACRO", def: constDef("(a, d) AS nullif(len(a), 0)")},
	{name: "pg_get_userbyid", kind: "MACRO", def: constDef("(id) AS 'shredduck'")},
	{name: "pg_extension", kind: "VIEW", def: constDef(" AS SELECT NULL::VARCHAR AS extname, NULL::VARCHAR AS extversion WHERE false")},
	{name: "shredduck_pg_type_oid", kind: "MACRO", uses: regexp.MustCompile(`(?i)\bpg_attribute\b`), def: constDef(typeOIDMacro())},
	{name: "pg_attribute", kind: "VIEW", def: constDef(pgAttributeView)},
	{name: "format_type", kind: "MACRO", def: constDef(formatTypeMacro())},
	{name: "pg_get_expr", kind: "MACRO", def: constDef(pgGetExpr)},
	{name: "pg_roles", kind: "VIEW", def: constDef(" AS SELECT 0::BIGINT AS oid, 'shredduck' AS rolname")},
	{name: "pg_policy", kind: "VIEW", def: emptyView("polname VARCHAR, polpermissive BOOLEAN, polroles BIGINT[], polqual VARCHAR, polwithcheck VARCHAR, polcmd VARCHAR, polrelid BIGINT")},
	{name: "pg_statistic_ext", kind: "VIEW", def: emptyView("oid BIGINT, stxrelid BIGINT, stxnamespace BIGINT, stxname VARCHAR, stxkind VARCHAR[], stxstattarget INTEGER")},
	{name: "pg_get_statisticsobjdef_columns", kind: "MACRO", def: constDef("(oid) AS NULL::VARCHAR")},
	{name: "pg_publication", kind: "VIEW", def: emptyView("oid BIGINT, pubname VARCHAR, puballtables BOOLEAN")},
	{name: "pg_publication_namespace", kind: "VIEW", def: emptyView("pnpubid BIGINT, pnnspid BIGINT")},
	{name: "pg_publication_rel", kind: "VIEW", def: emptyView("prpubid BIGINT, prrelid BIGINT, prqual VARCHAR, prattrs SMALLINT[]")},
	{name: "pg_relation_is_publishable", kind: "MACRO", def: constDef("(r) AS false")},
	{name: "pg_inherits", kind: "VIEW", def: emptyView("inhrelid BIGINT, inhparent BIGINT, inhseqno INTEGER, inhdetachpending BOOLEAN")},
	// DuckDB's pg_index has no rows; psql reads it for a table with a key.
	{name: "pg_get_indexdef", kind: "MACRO", def: constDef("(i) AS NULL::VARCHAR, (i, c, pretty) AS NULL::VARCHAR")},
	// psql unnests reloptions; relam names DuckDB's index method (art) and
	// relreplident none for tables, which psql prints.
	{name: "pg_class", kind: "VIEW", def: constDef(` AS SELECT * REPLACE (NULL::VARCHAR[] AS reloptions,
		CASE WHEN relkind = 'i' THEN relam END AS relam, 'd' AS relreplident), false AS relforcerowsecurity FROM pg_catalog.pg_class`)},
	{name: "pg_database", kind: "VIEW", def: constDef(` AS SELECT *, 0::BIGINT AS datdba, 6 AS encoding, 'C' AS datcollate, 'C' AS datctype,
		NULL::VARCHAR AS daticulocale, 'c' AS datlocprovider, NULL::VARCHAR[] AS datacl FROM pg_catalog.pg_database`)},
	{name: "pg_encoding_to_char", kind: "MACRO", def: constDef("(e) AS 'UTF8'")},
	// DuckDB keeps no size per table.
	{name: "pg_table_size", kind: "MACRO", def: constDef("(r) AS NULL::BIGINT")},
	{name: "pg_total_relation_size", kind: "MACRO", def: constDef("(r) AS NULL::BIGINT")},
	{name: "pg_size_pretty", kind: "MACRO", def: constDef("(b) AS format_bytes(b::BIGINT)")},
	{name: "obj_description", kind: "MACRO", def: constDef(`(o, c) AS (SELECT max(nullif(d.description, '')) FROM pg_catalog.pg_description d WHERE d.objoid = o AND d.objsubid = 0)`)},
	{name: "col_description", kind: "MACRO", def: constDef(`(o, n) AS (SELECT max(nullif(d.description, '')) FROM pg_catalog.pg_description d WHERE d.objoid = o AND d.objsubid = n)`)},
}

// emptyView is the definition of a view of no rows with these columns
// (name TYPE, ...), for a catalog table DuckDB lacks that can only be
// empty: no policies, publications, triggers, inheritance.
func emptyView(columns string) func(map[string]string) string {
	var sel []string
	for _, c := range strings.Split(columns, ", ") {
		name, typ, _ := strings.Cut(c, " ")
		sel = append(sel, "NULL::"+typ+" AS "+name)
	}
	return constDef(" AS SELECT " + strings.Join(sel, ", ") + " WHERE false")
}

func constDef(def string) func(map[string]string) string {
	return func(map[string]string) string { return def }
}

func init() {
	for i := range dialect {
		d := &dialect[i]
		if d.uses == nil {
			call := ""
			if d.kind == "MACRO" {
				call = `\s*\(`
			}
			d.uses = regexp.MustCompile(`(?i)\b` + regexp.QuoteMeta(d.name) + `\b` + call)
		}
	}
}

// duckdbTypeNames are the names duckdb_columns() gives the types of
// scalarTypes; DECIMAL and ENUM carry their details (DECIMAL(18,3),
// ENUM('a', 'b')) and are matched by prefix.
var duckdbTypeNames = map[duckdb.Type]string{
	duckdb.TYPE_BOOLEAN: "BOOLEAN", duckdb.TYPE_TINYINT: "TINYINT", duckdb.TYPE_SMALLINT: "SMALLINT",
	duckdb.TYPE_INTEGER: "INTEGER", duckdb.TYPE_BIGINT: "BIGINT", duckdb.TYPE_UTINYINT: "UTINYINT",
	duckdb.TYPE_USMALLINT: "USMALLINT", duckdb.TYPE_UINTEGER: "UINTEGER", duckdb.TYPE_UBIGINT: "UBIGINT",
	duckdb.TYPE_HUGEINT: "HUGEINT", duckdb.TYPE_UHUGEINT: "UHUGEINT", duckdb.TYPE_BIGNUM: "BIGNUM",
	duckdb.TYPE_DECIMAL: "DECIMAL(", duckdb.TYPE_FLOAT: "FLOAT", duckdb.TYPE_DOUBLE: "DOUBLE",
	duckdb.TYPE_VARCHAR: "VARCHAR", duckdb.TYPE_ENUM: "ENUM(", duckdb.TYPE_BLOB: "BLOB", duckdb.TYPE_UUID: "UUID",
	duckdb.TYPE_DATE: "DATE", duckdb.TYPE_TIME: "TIME", duckdb.TYPE_TIME_TZ: "TIME WITH TIME ZONE",
	duckdb.TYPE_TIMESTAMP: "TIMESTAMP", duckdb.TYPE_TIMESTAMP_S: "TIMESTAMP_S", duckdb.TYPE_TIMESTAMP_MS: "TIMESTAMP_MS",
	duckdb.TYPE_TIMESTAMP_NS: "TIMESTAMP_NS", duckdb.TYPE_TIMESTAMP_TZ: "TIMESTAMP WITH TIME ZONE",
	duckdb.TYPE_INTERVAL: "INTERVAL",
}

// pgTypeNames are format_type's names of the types columns are sent as.
var pgTypeNames = map[uint32]string{
	pgtype.BoolOID: "boolean", pgtype.Int2OID: "smallint", pgtype.Int4OID: "integer", pgtype.Int8OID: "bigint",
	pgtype.Float4OID: "real", pgtype.Float8OID: "double precision", pgtype.NumericOID: "numeric",
	pgtype.TextOID: "text", pgtype.JSONOID: "json", pgtype.ByteaOID: "bytea", pgtype.UUIDOID: "uuid",
	pgtype.DateOID: "date", pgtype.TimeOID: "time without time zone", pgtype.TimetzOID: "time with time zone",
	pgtype.TimestampOID: "timestamp without time zone", pgtype.TimestamptzOID: "timestamp with time zone",
	pgtype.IntervalOID: "interval",
}

// listElements are the list elements sent as arrays (sqlpolicy sends
// lists of the others as JSON).
var listElements = []duckdb.Type{
	duckdb.TYPE_BOOLEAN, duckdb.TYPE_TINYINT, duckdb.TYPE_SMALLINT, duckdb.TYPE_INTEGER, duckdb.TYPE_BIGINT,
	duckdb.TYPE_FLOAT, duckdb.TYPE_DOUBLE, duckdb.TYPE_VARCHAR,
}

// typeOIDMacro maps a DuckDB type's name (duckdb_columns().data_type) to
// the OID its values are sent as, as columnType does for a result: JSON,
// nested values and lists of other elements as json, lists of
// listElements as arrays, what has no counterpart as text.
func typeOIDMacro() string {
	var prefixed, scalars, arrays []string
	for dt, p := range scalarTypes {
		name := duckdbTypeNames[dt]
		if strings.HasSuffix(name, "(") {
			prefixed = append(prefixed, fmt.Sprintf(" WHEN starts_with(t, %s) THEN %d", shred.QuoteString(name), p.oid))
			continue
		}
		scalars = append(scalars, fmt.Sprintf(" WHEN %s THEN %d", shred.QuoteString(name), p.oid))
		if slices.Contains(listElements, dt) {
			arrays = append(arrays, fmt.Sprintf(" WHEN %s THEN %d", shred.QuoteString(name), arrayOIDs[p.oid]))
		}
	}
	slices.Sort(prefixed)
	slices.Sort(scalars)
	slices.Sort(arrays)
	var b strings.Builder
	fmt.Fprintf(&b, "(t) AS CASE WHEN t = 'JSON' THEN %d%s", pgtype.JSONOID, strings.Join(prefixed, ""))
	// A list's or fixed-size array's name ends with [] or [n]; a STRUCT,
	// MAP or UNION ends with ')', even when its last field is a list.
	fmt.Fprintf(&b, " WHEN regexp_matches(t, '\\[[0-9]*\\]$') THEN CASE regexp_replace(t, '\\[[0-9]*\\]$', '')%s ELSE %d END",
		strings.Join(arrays, ""), pgtype.JSONOID)
	fmt.Fprintf(&b, " WHEN regexp_matches(t, '^(STRUCT|MAP|UNION)\\(') THEN %d", pgtype.JSONOID)
	fmt.Fprintf(&b, " ELSE CASE t%s ELSE %d END END", strings.Join(scalars, ""), pgtype.TextOID)
	return b.String()
}

// formatTypeMacro is format_type(oid, typmod) over pg_attribute's OIDs
// (the wire's, see pgAttributeView).
func formatTypeMacro() string {
	var b strings.Builder
	b.WriteString("(t, m) AS CASE t")
	oids := make([]uint32, 0, len(pgTypeNames))
	for oid := range pgTypeNames {
		oids = append(oids, oid)
	}
	slices.Sort(oids)
	for _, oid := range oids {
		fmt.Fprintf(&b, " WHEN %d THEN %s", oid, shred.QuoteString(pgTypeNames[oid]))
	}
	elems := make([]uint32, 0, len(arrayOIDs))
	for e := range arrayOIDs {
		elems = append(elems, e)
	}
	slices.Sort(elems)
	for _, e := range elems {
		fmt.Fprintf(&b, " WHEN %d THEN %s", arrayOIDs[e], shred.QuoteString(pgTypeNames[e]+"[]"))
	}
	b.WriteString(" END")
	return b.String()
}

// pgGetExpr is pg_get_expr over DuckDB's pg_attrdef.adbin, a default's
// text: a literal in casts (CAST(CAST(0 AS "UINTEGER") AS "UINTEGER")) is
// shown as the literal, a NULL as no default, as PostgreSQL shows them.
// psql passes pretty = true.
const pgGetExpr = `(e, r) AS CASE
	WHEN regexp_matches(e::VARCHAR, '^(CAST\()+NULL AS ') THEN NULL
	WHEN regexp_matches(e::VARCHAR, '^(CAST\()+(''[^'']*''|-?[0-9][0-9.e+-]*|true|false) AS ')
		THEN regexp_extract(e::VARCHAR, '^(CAST\()+(''[^'']*''|[^ ]+) AS ', 2)
	ELSE e::VARCHAR END,
	(e, r, pretty) AS pg_get_expr(e, r)`

// pgAttributeView is DuckDB's pg_attribute with the type OIDs its columns
// are sent as (DuckDB's own are its type ids, which name other types in
// PostgreSQL: 20 is TIMESTAMP_NS) and their nullability, and the columns
// psql 15 reads that DuckDB's lacks.
const pgAttributeView = ` AS SELECT a.* REPLACE (
	coalesce(shredduck_pg_type_oid(c.data_type), 25) AS atttypid,
	coalesce(NOT c.is_nullable, a.attnotnull) AS attnotnull,
	-1 AS attstattarget,
	'p' AS attstorage,
	coalesce(NOT regexp_matches(c.column_default, '^(CAST\()+NULL AS '), false) AS atthasdef),
	'' AS attcompression
FROM pg_catalog.pg_attribute a
LEFT JOIN duckdb_columns() c ON c.table_oid = a.attrelid AND c.column_index = a.attnum`
