package pgwire_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/internal/benchtraces"
	"github.com/shredduck/shredduck/serve"
	"github.com/shredduck/shredduck/serve/pgwire"
	"github.com/shredduck/shredduck/serve/sqlpolicy"
)

// grafanaMacro is the form of the PostgreSQL data source's macros:
// $__name(args), args up to the first ')'.
var grafanaMacro = regexp.MustCompile(`\$([_a-zA-Z0-9]+)\(([^\)]*)\)`)

// expandGrafana expands a query's macros as Grafana's PostgreSQL data
// source does (pkg/tsdb/grafana-postgresql-datasource/macros.go), after
// its global substitutions (pgx/sql_engine.go's Interpolate: $__interval_ms,
// $__interval, $__unixEpochFrom(), $__unixEpochTo()) and the dashboard's
// variables.
func expandGrafana(t testing.TB, sql string, from, to time.Time, vars map[string]string) string {
	t.Helper()
	sql = strings.ReplaceAll(sql, "$__unixEpochFrom()", fmt.Sprint(from.Unix()))
	sql = strings.ReplaceAll(sql, "$__unixEpochTo()", fmt.Sprint(to.Unix()))
	if iv, ok := vars["__interval"]; ok {
		d, err := time.ParseDuration(iv)
		if err != nil {
			t.Fatal(err)
		}
		sql = strings.ReplaceAll(sql, "$__interval_ms", fmt.Sprint(d.Milliseconds()))
	}
	for k, v := range vars {
		sql = strings.ReplaceAll(sql, "$"+k, v)
	}
	rfc := func(tm time.Time) string { return tm.UTC().Format(time.RFC3339Nano) }
	var expand func(name string, args []string) string
	expand = func(name string, args []string) string {
		seconds := func() float64 {
			if len(args) < 2 {
				t.Fatalf("$%s needs a column and an interval", name)
			}
			iv := strings.Trim(args[1], `'`)
			if strings.HasSuffix(iv, "d") {
				iv = strings.TrimSuffix(iv, "d") + "h" // Grafana's days, as hours below
			}
			d, err := time.ParseDuration(iv)
			if err != nil {
				t.Fatalf("$%s: interval %q: %v", name, args[1], err)
			}
			if strings.HasSuffix(strings.Trim(args[1], `'`), "d") {
				d *= 24
			}
			return d.Seconds()
		}
		switch name {
		case "__time":
			return args[0] + ` AS "time"`
		case "__timeEpoch":
			return fmt.Sprintf(`extract(epoch from %s) as "time"`, args[0])
		case "__timeFilter":
			return fmt.Sprintf("%s BETWEEN '%s' AND '%s'", args[0], rfc(from), rfc(to))
		case "__timeFrom":
			return "'" + rfc(from) + "'"
		case "__timeTo":
			return "'" + rfc(to) + "'"
		case "__timeGroup":
			s := seconds()
			return fmt.Sprintf("floor(extract(epoch from %s)/%v)*%v", args[0], s, s)
		case "__timeGroupAlias":
			return expand("__timeGroup", args) + ` AS "time"`
		case "__unixEpochFilter":
			return fmt.Sprintf("%s >= %d AND %s <= %d", args[0], from.Unix(), args[0], to.Unix())
		case "__unixEpochNanoFilter":
			return fmt.Sprintf("%s >= %d AND %s <= %d", args[0], from.UnixNano(), args[0], to.UnixNano())
		case "__unixEpochGroup":
			s := seconds()
			return fmt.Sprintf("floor((%s)/%v)*%v", args[0], s, s)
		case "__unixEpochGroupAlias":
			return expand("__unixEpochGroup", args) + ` AS "time"`
		}
		t.Fatalf("unknown macro $%s", name)
		return ""
	}
	return grafanaMacro.ReplaceAllStringFunc(sql, func(m string) string {
		g := grafanaMacro.FindStringSubmatch(m)
		name := g[1]
		// Grafana reads $__timeGroup(...) followed by a comma as
		// $__timeGroupAlias (before 5.3 it added the alias).
		if name == "__timeGroup" {
			if i := strings.Index(sql, m); i >= 0 && len(sql) > i+len(m) && sql[i+len(m)] == ',' {
				name = "__timeGroupAlias"
			}
		}
		args := strings.Split(g[2], ",")
		for i := range args {
			args[i] = strings.TrimSpace(args[i])
		}
		return expand(name, args)
	})
}

func TestExpandGrafana(t *testing.T) {
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	to := from.Add(time.Hour)
	for in, want := range map[string]string{
		"WHERE $__timeFilter(t)":            "WHERE t BETWEEN '2026-01-01T00:00:00Z' AND '2026-01-01T01:00:00Z'",
		"SELECT $__timeGroupAlias(t, 1m)":   `SELECT floor(extract(epoch from t)/60)*60 AS "time"`,
		"SELECT $__timeGroup(t, '5m'), x":   `SELECT floor(extract(epoch from t)/300)*300 AS "time", x`,
		"$__timeFrom() $__timeTo()":         "'2026-01-01T00:00:00Z' '2026-01-01T01:00:00Z'",
		"$__unixEpochNanoFilter(n)":         "n >= 1767225600000000000 AND n <= 1767229200000000000",
		"$__timeGroupAlias(t, $__interval)": `floor(extract(epoch from t)/1)*1 AS "time"`,
	} {
		if got := expandGrafana(t, in, from, to, map[string]string{"__interval": "1s"}); got != want {
			t.Errorf("%s:\n got %s\nwant %s", in, got, want)
		}
	}
}

// grafanaServer is a server holding traces, logs and metrics, with the
// PostgreSQL endpoint on a listener; it returns pgx connection strings.
func grafanaServer(t *testing.T) string {
	t.Helper()
	db, err := ingest.Open(filepath.Join(t.TempDir(), "grafana.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := serve.New(db, serve.Config{MemoryLimit: "256MB"})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	post := func(path, ct string, body []byte) {
		t.Helper()
		resp, err := http.Post(hs.URL+path, ct, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
	}
	for _, line := range benchtraces.Lines(2000, 1) {
		post("/v1/traces", "application/json", line)
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	logs := plog.NewLogs()
	lr := logs.ResourceLogs().AppendEmpty()
	lr.Resource().Attributes().PutStr("service.name", "checkout")
	recs := lr.ScopeLogs().AppendEmpty().LogRecords()
	for i := range 300 {
		r := recs.AppendEmpty()
		r.SetTimestamp(pcommon.NewTimestampFromTime(base.Add(time.Duration(i) * 10 * time.Millisecond)))
		r.SetSeverityText([]string{"INFO", "INFO", "WARN", "ERROR", ""}[i%5])
		r.Body().SetStr(fmt.Sprintf("line %d", i))
	}
	body, _ := plogotlp.NewExportRequestFromLogs(logs).MarshalProto()
	post("/v1/logs", "application/x-protobuf", body)
	metrics := pmetric.NewMetrics()
	mr := metrics.ResourceMetrics().AppendEmpty()
	mr.Resource().Attributes().PutStr("service.name", "checkout")
	m := mr.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("http.server.active_requests")
	pts := m.SetEmptyGauge().DataPoints()
	for i := range 120 {
		p := pts.AppendEmpty()
		p.SetTimestamp(pcommon.NewTimestampFromTime(base.Add(time.Duration(i) * 20 * time.Millisecond)))
		p.SetIntValue(int64(i % 17))
	}
	body, _ = pmetricotlp.NewExportRequestFromMetrics(metrics).MarshalProto()
	post("/v1/metrics", "application/x-protobuf", body)
	hs.Close()

	if err := sqlpolicy.LockDown(db); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pg := pgwire.New(sqlpolicy.New(db, sqlpolicy.Config{}), pgwire.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pg.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		<-done
		srv.Close()
		db.Close()
	})
	return "postgres://grafana:x@" + l.Addr().String() + "/shredduck?sslmode=disable"
}

// Every query of docs/grafana/dashboard.json, its macros expanded as
// Grafana expands them, runs against a server with data and returns rows,
// as Grafana sends it (pgconn's Exec: the simple protocol, text results,
// its pgx/sql_engine.go) and through pgx's default extended protocol; so
// do the data source's own queries: its health check, version,
// TimescaleDB probe, table and column lists (public/app/plugins/
// datasource/grafana-postgresql-datasource/postgresMetaQuery.ts).
func TestGrafanaDashboard(t *testing.T) {
	url := grafanaServer(t)
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("health check: %v", err)
	}

	raw, err := os.ReadFile("../../docs/grafana/dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ RawSQL string }
		}
		Templating struct {
			List []struct{ Name, Query string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	to := from.Add(10 * time.Minute)
	vars := map[string]string{"__interval": "1s"}
	for _, v := range dash.Templating.List {
		rows, _ := c.Query(ctx, v.Query)
		vals, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil || len(vals) == 0 {
			t.Fatalf("variable %s: %v %v", v.Name, vals, err)
		}
		vars[v.Name] = vals[0]
	}
	queries := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			sql := expandGrafana(t, tg.RawSQL, from, to, vars)
			results, err := c.PgConn().Exec(ctx, sql).ReadAll()
			if err != nil || len(results) != 1 || results[0].Err != nil || len(results[0].Rows) == 0 {
				t.Errorf("%s, as Grafana sends it: %v %v\n%s", p.Title, err, results, sql)
			} else if f := results[0].FieldDescriptions; strings.Contains(tg.RawSQL, "$__timeGroupAlias") && f[0].Name != "time" {
				t.Errorf("%s: the first column is %q, not Grafana's time column", p.Title, f[0].Name)
			}
			rows, err := c.Query(ctx, sql)
			if err != nil {
				t.Errorf("%s: %v\n%s", p.Title, err, sql)
				continue
			}
			n := 0
			for rows.Next() {
				vals, err := rows.Values()
				if err != nil {
					t.Errorf("%s: %v", p.Title, err)
					break
				}
				if n == 0 {
					t.Logf("%s: %v %v", p.Title, fieldNames(rows), vals)
				}
				n++
			}
			if err := rows.Err(); err != nil {
				t.Errorf("%s: %v\n%s", p.Title, err, sql)
			}
			if n == 0 {
				t.Errorf("%s: no rows\n%s", p.Title, sql)
			}
			queries++
		}
	}
	if queries != 6 {
		t.Errorf("%d dashboard queries", queries)
	}

	// The data source's own queries.
	var version float64
	if err := c.QueryRow(ctx, "SELECT current_setting('server_version_num')::int/100 as version").Scan(&version); err != nil || version != 1500 {
		t.Errorf("version: %v %v", version, err)
	}
	rows, err := c.Query(ctx, "SELECT extversion FROM pg_extension WHERE extname = 'timescaledb'")
	if err != nil {
		t.Errorf("timescaledb probe: %v", err)
	} else if rows.Next() {
		t.Error("timescaledb probe found it")
	}
	rows.Close()
	schemaConstraint := `
          quote_ident(table_schema) IN (
          SELECT
            CASE WHEN trim(s[i]) = '"$user"' THEN user ELSE trim(s[i]) END
          FROM
            generate_series(
              array_lower(string_to_array(current_setting('search_path'),','),1),
              array_upper(string_to_array(current_setting('search_path'),','),1)
            ) as i,
            string_to_array(current_setting('search_path'),',') s
          )`
	tables := `SELECT
    CASE WHEN ` + schemaConstraint + `
      THEN quote_ident(table_name)
      ELSE quote_ident(table_schema) || '.' || quote_ident(table_name)
    END AS "table"
    FROM information_schema.tables
    WHERE quote_ident(table_schema) NOT IN ('information_schema',
                             'pg_catalog',
                             '_timescaledb_cache',
                             '_timescaledb_catalog',
                             '_timescaledb_internal',
                             '_timescaledb_config',
                             'timescaledb_information',
                             'timescaledb_experimental')
    ORDER BY CASE WHEN ` + schemaConstraint + ` THEN 0 ELSE 1 END, 1`
	rows, _ = c.Query(ctx, tables)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || !contains(names, "otel_traces") || !contains(names, "otel_logs") || !contains(names, "otel_metrics") {
		t.Errorf("tables: %v %v", names, err)
	}
	columns := func(table string) []string {
		lit := "'" + strings.ReplaceAll(table, "'", "''") + "'"
		q := `SELECT quote_ident(column_name) AS "column", data_type AS "type"
    FROM information_schema.columns
    WHERE
      CASE WHEN array_length(parse_ident(` + lit + `),1) = 2
        THEN quote_ident(table_schema) = (parse_ident(` + lit + `))[1]
          AND quote_ident(table_name) = (parse_ident(` + lit + `))[2]
        ELSE quote_ident(table_name) = ` + lit + `
          AND ` + schemaConstraint + `
      END`
		rows, _ := c.Query(ctx, q)
		cols, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
			var name, typ string
			err := r.Scan(&name, &typ)
			return name + " " + typ, err
		})
		if err != nil {
			t.Errorf("columns of %s: %v", table, err)
		}
		return cols
	}
	if cols := columns("otel_traces"); !contains(cols, "service_name VARCHAR") || !contains(cols, `"http.route" VARCHAR`) {
		t.Errorf("columns: %v", cols)
	}
	if cols := columns("main.otel_logs"); !contains(cols, "severity_text VARCHAR") {
		t.Errorf("columns of main.otel_logs: %v", cols)
	}
}

func fieldNames(rows pgx.Rows) []string {
	var out []string
	for _, f := range rows.FieldDescriptions() {
		out = append(out, f.Name)
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
