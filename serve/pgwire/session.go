package pgwire

import (
	"regexp"
	"strings"

	"github.com/shredduck/shredduck/serve/sqlpolicy"
	"github.com/shredduck/shredduck/shred"
)

// ServerVersion is the PostgreSQL version the endpoint reports: clients
// pick their catalog queries and features by it.
const (
	ServerVersion    = "15.0"
	serverVersionNum = "150000"
)

// reported are the parameters sent on connect (ParameterStatus) and
// answered by SHOW and current_setting().
var reported = [][2]string{
	{"server_version", ServerVersion + " (shredduck)"},
	{"server_encoding", "UTF8"},
	{"client_encoding", "UTF8"},
	{"DateStyle", "ISO, MDY"},
	{"IntervalStyle", "postgres"},
	{"TimeZone", "UTC"},
	{"integer_datetimes", "on"},
	{"standard_conforming_strings", "on"},
	{"is_superuser", "off"},
	{"default_transaction_read_only", "on"},
	{"in_hot_standby", "off"},
}

// showOnly are answered by SHOW and current_setting() but not sent on
// connect.
var showOnly = map[string]string{
	"server_version_num":    serverVersionNum,
	"transaction_isolation": "repeatable read",
	"transaction_read_only": "on",
	"search_path":           "main",
	"max_identifier_length": "63",
	"extra_float_digits":    "1",
	"lc_collate":            "C",
	"lc_ctype":              "C",
}

// clientSettings are what clients SET on connect. A SET of one is
// acknowledged when its value is what the endpoint does anyway (results
// are UTF-8, times UTC, strings standard-conforming, sessions read-only)
// or changes nothing a client can see (application_name, planner knobs);
// accepted maps a setting to the values it takes ("" = any). Any other
// value is refused, as is a SET of anything else: DuckDB's settings are
// the server's, locked, and a SET answered but ignored would mislead.
var clientSettings = map[string][]string{
	"client_encoding": utf8Names, "names": utf8Names,
	"datestyle": {"iso", "iso, mdy", "iso,mdy", "iso, ymd", "iso,ymd", "iso, dmy", "iso,dmy"},
	"timezone":  utcNames, "time": utcNames,
	"standard_conforming_strings":   {"on", "true", "1"},
	"intervalstyle":                 {"postgres"},
	"bytea_output":                  {"hex"},
	"default_transaction_read_only": {"on", "true", "1"},
	"search_path":                   {`main`, `public`, `"$user", public`, `"$user",public`, `pg_catalog`, `main, pg_catalog`, `pg_catalog, main`, `public, pg_catalog`, `pg_catalog, public`},
	"schema":                        {`main`, `public`},
	// A timeout of 0 is the server's own: --query-timeout bounds every
	// query.
	"statement_timeout": {"0"}, "lock_timeout": {"0"}, "idle_in_transaction_session_timeout": {"0"}, "idle_session_timeout": {"0"},
	"extra_float_digits": {""}, "application_name": {""}, "client_min_messages": {""},
	"default_transaction_isolation": {""}, "transaction_isolation": {""},
	"transaction": {""},
	"session":     {""}, "geqo": {""}, "jit": {""}, "lc_messages": {""}, "lc_monetary": {""},
	"lc_numeric": {""}, "lc_time": {""}, "row_security": {""}, "synchronous_commit": {""},
	"plan_cache_mode": {""}, "escape_string_warning": {""}, "backslash_quote": {""},
	"tcp_keepalives_idle": {""}, "tcp_keepalives_interval": {""}, "tcp_keepalives_count": {""},
}

var (
	utf8Names = []string{"utf8", "utf-8", "unicode"}
	utcNames  = []string{"utc", "gmt", "z", "zulu", "etc/utc", "etc/gmt", "universal", "0", "+00", "+00:00"}
)

// setAccepted reports whether SET name to value (lower case, unquoted) is
// acknowledged; DEFAULT and a setting that takes any value always are.
func setAccepted(name, value string) bool {
	vals, ok := clientSettings[name]
	if !ok {
		return false
	}
	if value == "default" {
		return true
	}
	for _, v := range vals {
		if v == "" || v == value {
			return true
		}
	}
	return false
}

// setValue is the value of SET name {= | TO} value (after the name's
// words), lower case, with quotes around it removed; "" when missing.
func setValue(words []string, name string) string {
	for i, w := range words {
		w = strings.Trim(w, `"`)
		if j := strings.IndexByte(w, '='); j >= 0 && strings.HasPrefix(w, name) {
			rest := append([]string{w[j+1:]}, words[i+1:]...)
			return unquoteValue(strings.Join(rest, " "))
		}
		if w == name {
			rest := words[i+1:]
			if name == "time" && len(rest) > 0 && rest[0] == "zone" { // SET TIME ZONE value
				rest = rest[1:]
			}
			if len(rest) > 0 && (rest[0] == "=" || rest[0] == "to") {
				rest = rest[1:]
			} else if len(rest) > 0 && strings.HasPrefix(rest[0], "=") {
				rest = append([]string{rest[0][1:]}, rest[1:]...)
			}
			return unquoteValue(strings.Join(rest, " "))
		}
	}
	return ""
}

func unquoteValue(v string) string {
	v = strings.TrimSpace(v)
	parts := strings.Split(v, ",")
	for i, p := range parts {
		parts[i] = strings.Trim(strings.TrimSpace(p), `'`)
	}
	return strings.Join(parts, ", ")
}

// commandKind is a statement the endpoint answers itself.
type commandKind int

const (
	cmdNone       commandKind = iota // SQL for DuckDB
	cmdEmpty                         // only comments and semicolons
	cmdSet                           // SET of a client setting: acknowledged
	cmdRefuse                        // SET of anything else
	cmdShow                          // SHOW of a reported parameter
	cmdBegin                         // BEGIN, START TRANSACTION
	cmdCommit                        // COMMIT, END
	cmdRollback                      // ROLLBACK, ABORT
	cmdReset                         // RESET, DISCARD
	cmdDeallocate                    // DEALLOCATE name
	cmdCopy                          // COPY ... TO STDOUT: a SELECT sent as COPY data
	cmdRefuseCopy                    // another COPY form the endpoint cannot send
)

// command is a classified statement.
type command struct {
	kind commandKind
	tag  string // CommandComplete's tag
	name string // SET's and SHOW's parameter, DEALLOCATE's statement; cmdRefuseCopy: why
	// cmdRefuse of a client setting: the value it cannot take.
	value string
	// cmdCopy: the SELECT and the format.
	copySQL string
	copy    copyFormat
}

// classify tells the statements the endpoint answers itself from those
// DuckDB runs. Text of more than one statement goes to DuckDB, which the
// policy refuses as a whole.
func classify(sql string) command {
	clean, multi := scanSQL(sql)
	stmt := trimStatement(clean)
	if stmt == "" {
		return command{kind: cmdEmpty}
	}
	if multi {
		return command{}
	}
	words := strings.Fields(strings.ToLower(stmt))
	switch words[0] {
	case "set":
		name := setName(words[1:])
		value := setValue(words[1:], name)
		if setAccepted(name, value) {
			return command{kind: cmdSet, tag: "SET", name: name}
		}
		if _, ok := clientSettings[name]; ok {
			return command{kind: cmdRefuse, tag: "SET", name: name, value: value}
		}
		return command{kind: cmdRefuse, tag: "SET", name: name}
	case "reset":
		// RESET ALL and a client setting's RESET give what the session
		// has anyway; a RESET of DuckDB's settings would change nothing.
		name := ""
		if len(words) == 2 {
			name = strings.Trim(words[1], `"`)
		}
		if _, ok := clientSettings[name]; ok || name == "all" {
			return command{kind: cmdReset, tag: "RESET"}
		}
		return command{kind: cmdRefuse, tag: "RESET", name: name}
	case "discard":
		return command{kind: cmdReset, tag: "DISCARD " + strings.ToUpper(strings.Join(words[1:], " "))}
	case "show":
		if len(words) == 2 {
			name := strings.Trim(words[1], `"`)
			if _, ok := setting(name); ok {
				return command{kind: cmdShow, tag: "SHOW", name: name}
			}
		}
	case "begin", "start":
		if words[0] == "begin" || (len(words) > 1 && words[1] == "transaction") {
			return command{kind: cmdBegin, tag: "BEGIN"}
		}
	case "commit", "end":
		return command{kind: cmdCommit, tag: "COMMIT"}
	case "rollback", "abort":
		return command{kind: cmdRollback, tag: "ROLLBACK"}
	case "copy":
		query, f, ok, why := parseCopy(stmt)
		if ok {
			return command{kind: cmdCopy, tag: "COPY", copySQL: query, copy: f}
		}
		if why != "" {
			return command{kind: cmdRefuseCopy, name: why}
		}
	case "deallocate":
		rest := words[1:]
		if len(rest) > 0 && rest[0] == "prepare" {
			rest = rest[1:]
		}
		if len(rest) == 1 {
			// The name as written (identifiers fold to lower case).
			f := strings.Fields(stmt)
			return command{kind: cmdDeallocate, tag: "DEALLOCATE", name: strings.Trim(f[len(f)-1], `"`)}
		}
	}
	return command{}
}

// setName is the parameter of SET [SESSION | LOCAL] name {= | TO} ....
func setName(words []string) string {
	if len(words) > 0 && (words[0] == "session" || words[0] == "local") && len(words) > 1 && words[1] != "characteristics" {
		words = words[1:]
	}
	if len(words) == 0 {
		return ""
	}
	name := words[0]
	if i := strings.IndexAny(name, "= "); i >= 0 {
		name = name[:i]
	}
	return strings.Trim(name, `"`)
}

// setting is the value of a reported parameter (lower-case name).
func setting(name string) (string, bool) {
	for _, p := range reported {
		if strings.EqualFold(p[0], name) {
			return p[1], true
		}
	}
	v, ok := showOnly[strings.ToLower(name)]
	return v, ok
}

// currentSetting answers the reported parameters, and DuckDB's settings
// (read once: they are locked) as DuckDB's current_setting does. A CASE
// over constants: DuckDB's own takes only a constant, and a subquery
// would not pass inside generate_series, where Grafana calls it.
func currentSetting(settings map[string]string) string {
	var b strings.Builder
	b.WriteString("(setting_name) AS CASE lower(setting_name)")
	seen := map[string]bool{}
	add := func(name, value string) {
		name = strings.ToLower(name)
		if seen[name] {
			return
		}
		seen[name] = true
		b.WriteString(" WHEN " + shred.QuoteString(name) + " THEN " + shred.QuoteString(value))
	}
	for _, p := range reported {
		add(p[0], p[1])
	}
	for k, v := range showOnly {
		add(k, v)
	}
	for k, v := range settings {
		add(k, v)
	}
	b.WriteString(" END")
	return b.String()
}

// searchPathSchemas is Grafana's filter of the schemas on the search path
// (buildSchemaConstraint in its postgresMetaQuery.ts), which selects from
// a scalar function in FROM, as DuckDB cannot: the same filter, for
// DuckDB's one schema of tables.
var searchPathSchemas = regexp.MustCompile(`(?is)\bIN\s*\(\s*SELECT\s+CASE\s+WHEN\s+trim\(\s*s\[i\]\s*\)\s*=\s*'"\$user"'\s+THEN\s+user\s+ELSE\s+trim\(\s*s\[i\]\s*\)\s+END\s+FROM\s+generate_series\(.*?\)\s*as\s+i\s*,\s*string_to_array\(\s*current_setting\(\s*'search_path'\s*\)\s*,\s*','\s*\)\s*s\s*\)`)

// rewrite makes PostgreSQL idioms that DuckDB cannot run DuckDB's.
func rewrite(sql string) string {
	for _, r := range psqlRewrites {
		if strings.Contains(sql, r.has) {
			sql = r.re.ReplaceAllString(sql, r.repl)
		}
	}
	if strings.Contains(sql, "search_path") {
		sql = searchPathSchemas.ReplaceAllLiteralString(sql, "IN (current_schema())")
	}
	if strings.Contains(sql, "pg_catalog") || strings.Contains(sql, "::") {
		sql = mapCode(sql, func(code string) string {
			for _, r := range codeRewrites {
				code = r.re.ReplaceAllString(code, r.repl)
			}
			return code
		})
	}
	return sql
}

// dialectTemps returns the temporary objects sql needs.
func dialectTemps(sql string, settings func() map[string]string) []sqlpolicy.Temp {
	var temps []sqlpolicy.Temp
	for _, d := range dialect {
		if d.uses.MatchString(sql) {
			var s map[string]string
			if d.settings {
				s = settings()
			}
			temps = append(temps, sqlpolicy.Temp{Kind: d.kind, Name: d.name, Def: d.def(s)})
		}
	}
	return temps
}
