package keyview

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2"
)

func openMemory(t *testing.T) *sql.Conn {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func serialize(t *testing.T, c *sql.Conn, query string) string {
	t.Helper()
	var tree string
	if err := c.QueryRowContext(context.Background(), "SELECT CAST(json_serialize_sql(CAST(? AS VARCHAR)) AS VARCHAR)", query).Scan(&tree); err != nil {
		t.Fatal(err)
	}
	return tree
}

func sortedKeys(m map[string]bool) string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

func TestParseTree(t *testing.T) {
	c := openMemory(t)
	f := func(query, tables, columns string) {
		t.Helper()
		refs, ok, err := ParseTree(serialize(t, c, query))
		if err != nil || !ok {
			t.Fatalf("%s: ok %v, %v", query, ok, err)
		}
		if got := sortedKeys(refs.Tables); got != tables {
			t.Errorf("%s:\ntables  %q\nwant    %q", query, got, tables)
		}
		if got := sortedKeys(refs.Columns); got != columns {
			t.Errorf("%s:\ncolumns %q\nwant    %q", query, got, columns)
		}
	}
	f(`SELECT "http.x" FROM otel_traces`, "otel_traces", "http.x")
	// Case folds; quoted identifiers keep dots, quotes and $.
	f(`SELECT "HTTP.X", "a""b", "$x.y" FROM OTEL_Traces`, "otel_traces", "$x.y a\"b http.x")
	// Qualified names: main. is shadowed, a catalog is not.
	f(`SELECT t."k" FROM main.otel_traces t, memory.main.otel_logs`, "otel_traces", "k t")
	f(`SELECT k FROM "Main"."otel_logs"`, "otel_logs", "k")
	// Subqueries in FROM, WHERE and the select list, joins with USING.
	f(`SELECT (SELECT max(b) FROM otel_metrics) FROM (SELECT a FROM otel_logs) s
		JOIN otel_traces USING ("j") WHERE x IN (SELECT y FROM ndjson_t WHERE z > 1) ORDER BY w`,
		"ndjson_t otel_logs otel_metrics otel_traces", "a b j w x y z")
	// Expressions: functions, CASE, lambdas, GROUP BY, HAVING, windows.
	f(`SELECT list_transform(l, v -> v + 1), CASE WHEN c THEN d END, sum(e) OVER (PARTITION BY f ORDER BY g)
		FROM otel_traces GROUP BY h HAVING count(i) > 1`, "otel_traces", "c d e f g h i l v")
	// A CTE named like a table shadows it in the body, not in its own
	// definition; a later CTE sees an earlier one.
	f(`WITH otel_traces AS (SELECT k FROM otel_traces) SELECT * FROM otel_traces`, "otel_traces", "k")
	f(`WITH c1 AS (SELECT k FROM otel_logs), otel_traces AS (SELECT * FROM c1) SELECT m FROM otel_traces`, "otel_logs", "k m")
	f(`WITH x AS (SELECT 1) SELECT * FROM (WITH otel_traces AS (SELECT 2) SELECT * FROM otel_traces), otel_traces`, "otel_traces", "")
	f(`WITH RECURSIVE r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT n FROM r`, "", "n")
	// A column alias that is a key's name is still a reference where used.
	f(`SELECT upper("k") AS "k" FROM otel_traces ORDER BY "k"`, "otel_traces", "k")
	f(`SELECT 1 AS "k2" FROM otel_traces`, "otel_traces", "")
	// Set operations.
	f(`SELECT a FROM otel_traces UNION ALL SELECT b FROM otel_logs`, "otel_logs otel_traces", "a b")

	// Functions without a schema, lower-cased; a qualified call is not one
	// a temporary macro shadows.
	refs, _, _ := ParseTree(serialize(t, c, `SELECT NOW(), upper(x), system.main.get_current_timestamp(), main.f() FROM otel_traces`))
	if got := sortedKeys(refs.Functions); got != "now upper" {
		t.Errorf("functions %q, want %q", got, "now upper")
	}

	refs, ok, err := ParseTree(serialize(t, c, `CREATE TABLE x (a INT)`))
	if err != nil || ok || refs.Tables != nil {
		t.Errorf("CREATE: ok %v, %v, %+v", ok, err, refs)
	}
}
