package keyview

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
)

func exec(t *testing.T, c Conn, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := c.ExecContext(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// A database without shredduck's catalog has no keys to read: no views,
// and the query runs as it is.
func TestCreateWithoutCatalog(t *testing.T) {
	c := openMemory(t)
	exec(t, c, `CREATE TABLE otel_traces (a INT)`)
	v, err := Create(context.Background(), c, `SELECT a FROM otel_traces`)
	if err != nil || v.Tables() != nil {
		t.Fatalf("views %v, %v", v.Tables(), err)
	}
	if err := v.Drop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A catalog written before keys could be promoted (no promoted column)
// still reads its overflowed keys; keys with quotes, dots and $ are
// quoted in the view's SQL.
func TestCreateOldCatalog(t *testing.T) {
	c := openMemory(t)
	ctx := context.Background()
	oldCatalog(t, c)
	q := `SELECT name, "A'B"".$C", "resource.n" FROM otel_traces ORDER BY name`
	v, err := Create(ctx, c, q)
	if err != nil {
		t.Fatal(err)
	}
	if got := v.Tables(); len(got) != 1 || got[0] != "otel_traces" {
		t.Fatalf("views of %v", got)
	}
	if got, want := queryText(t, c, q), "x v 7\ny <nil> <nil>"; got != want {
		t.Errorf("rows %q, want %q", got, want)
	}
	if err := v.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	if n := tempViews(t, c); n != 0 {
		t.Fatalf("%d temporary views after Drop", n)
	}
}

// Views made in a transaction keep reading as they were made while another
// connection promotes the key (DuckDB's transactions see the catalog as it
// was when they began), and ROLLBACK drops them.
func TestCreateInTransaction(t *testing.T) {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	c, _ := db.Conn(ctx)
	defer c.Close()
	other, _ := db.Conn(ctx)
	defer other.Close()
	oldCatalog(t, c)
	exec(t, c, `BEGIN TRANSACTION READ ONLY`)
	q := `SELECT name, "A'B"".$C" FROM otel_traces ORDER BY name`
	if _, err := Create(ctx, c, q); err != nil {
		t.Fatal(err)
	}
	// The promotion: a stored column, and the catalog says so.
	exec(t, other, `ALTER TABLE otel_traces ADD COLUMN "a'b"".$c" VARCHAR`,
		`UPDATE otel_traces SET "a'b"".$c" = 'stored' WHERE name = 'y'`,
		`UPDATE shredduck_columns SET overflow = false WHERE level = 'record'`)
	if got, want := queryText(t, c, q), "x v\ny <nil>"; got != want {
		t.Errorf("in the transaction: rows %q, want %q", got, want)
	}
	exec(t, c, `ROLLBACK`)
	if n := tempViews(t, c); n != 0 {
		t.Fatalf("%d temporary views after ROLLBACK", n)
	}
}

func tempViews(t *testing.T, c Conn) int {
	t.Helper()
	var n int
	if err := queryRow(context.Background(), c, `SELECT count(*) FROM duckdb_views() WHERE database_name = 'temp'`, nil, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// queryText returns the rows of q as lines of space-separated values.
func queryText(t *testing.T, c Conn, q string) string {
	t.Helper()
	rows, err := c.QueryContext(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var lines []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, strings.TrimSuffix(fmt.Sprintln(vals...), "\n"))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// oldCatalog makes a catalog of before promotion (no promoted column)
// with two overflowed keys, one of quotes, dots and $, and a table.
func oldCatalog(t *testing.T, c Conn) {
	t.Helper()
	exec(t, c,
		`CREATE TABLE shredduck_tables (table_name VARCHAR PRIMARY KEY, transform VARCHAR NOT NULL)`,
		`CREATE TABLE shredduck_columns (table_name VARCHAR, column_name VARCHAR, level VARCHAR, key VARCHAR, type VARCHAR,
			overflow BOOLEAN, first_seen TIMESTAMPTZ DEFAULT now())`,
		`INSERT INTO shredduck_tables VALUES ('otel_traces', 'otlp-traces')`,
		`INSERT INTO shredduck_columns (table_name, column_name, level, key, type, overflow) VALUES
			('otel_traces', 'a''b".$c', 'record', 'a''b".$c', 'VARCHAR', true),
			('otel_traces', 'resource.n', 'resource', 'n', 'BIGINT', true)`,
		`CREATE TABLE otel_traces (name VARCHAR, attributes_overflow JSON, attributes_str MAP(VARCHAR, VARCHAR), attributes_int MAP(VARCHAR, BIGINT),
			attributes_double MAP(VARCHAR, DOUBLE), attributes_bool MAP(VARCHAR, BOOLEAN),
			resource_attributes_overflow JSON, resource_attributes_int MAP(VARCHAR, BIGINT))`,
		`INSERT INTO otel_traces (name, attributes_str, resource_attributes_int) VALUES ('x', MAP {'a''b".$c': 'v'}, MAP {'n': 7}), ('y', NULL, NULL)`,
	)
}

// "The last hour" as everyone writes it: in a session far from UTC, now()
// and current_timestamp compare with UTC TIMESTAMP_NS columns and find
// exactly the rows of the last hour, in and out of a transaction; Drop
// (or ROLLBACK) gives the clocks back their own type.
func TestClocksCompareWithTimeColumns(t *testing.T) {
	c := openMemory(t)
	exec(t, c, `SET TimeZone = 'Asia/Tokyo'`,
		`CREATE TABLE otel_traces (start_time TIMESTAMP_NS)`,
		`INSERT INTO otel_traces SELECT timezone('UTC', now()) - INTERVAL (m) MINUTE FROM (VALUES (1), (30), (59), (61), (120), (600)) v(m)`)
	ctx := context.Background()
	for _, q := range []string{
		`SELECT count(*) FROM otel_traces WHERE start_time > now() - INTERVAL 1 HOUR`,
		`SELECT count(*) FROM otel_traces WHERE start_time > current_timestamp - INTERVAL '1 hour'`,
		`SELECT count(*) FROM otel_traces WHERE start_time BETWEEN get_current_timestamp() - INTERVAL 1 HOUR AND NOW()`,
		`SELECT count(*) FILTER (WHERE start_time > transaction_timestamp() - INTERVAL 1 HOUR) FROM otel_traces`,
	} {
		for _, tx := range []bool{false, true} {
			if tx {
				exec(t, c, `BEGIN TRANSACTION READ ONLY`)
			}
			v, err := Create(ctx, c, q)
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			if got := queryText(t, c, q); got != "3" {
				t.Errorf("%s (transaction %v): %s rows, want 3", q, tx, got)
			}
			if tx {
				exec(t, c, `ROLLBACK`)
			}
			if err := v.Drop(ctx); err != nil {
				t.Fatal(err)
			}
			if got := queryText(t, c, `SELECT typeof(now()) || ' ' || typeof(current_timestamp)`); got != "TIMESTAMP WITH TIME ZONE TIMESTAMP WITH TIME ZONE" {
				t.Fatalf("after Drop: %s", got)
			}
		}
	}
	// Only queries that call a clock get macros; a schema-qualified call
	// means DuckDB's own function.
	for _, q := range []string{`SELECT count(*) FROM otel_traces`, `SELECT system.main.now() IS NOT NULL`} {
		v, err := Create(ctx, c, q)
		if err != nil || len(v.macros) != 0 {
			t.Errorf("%s: macros %v, %v", q, v.macros, err)
		}
	}
}

// A key with a stored column and strays (docs/SCHEMA.md, 5.6) reads as
// both: its column, typed as stored (a comparison with a number works),
// and "<column>~stray", the text of its values in the overflow under the
// key, when the query names it; a DOUBLE column's strays include the
// integers beyond ±2^53, not those it would take.
func TestCreateStrays(t *testing.T) {
	c := openMemory(t)
	ctx := context.Background()
	exec(t, c,
		`CREATE TABLE shredduck_tables (table_name VARCHAR PRIMARY KEY, transform VARCHAR NOT NULL)`,
		`CREATE TABLE shredduck_columns (table_name VARCHAR, column_name VARCHAR, level VARCHAR, key VARCHAR, type VARCHAR,
			overflow BOOLEAN, first_seen TIMESTAMPTZ DEFAULT now(), promoted TIMESTAMPTZ, strays BIGINT DEFAULT 0)`,
		`INSERT INTO shredduck_tables VALUES ('otel_traces', 'otlp-traces')`,
		`INSERT INTO shredduck_columns (table_name, column_name, level, key, type, overflow, strays) VALUES
			('otel_traces', 'http.status_code', 'record', 'http.status_code', 'BIGINT', false, 3),
			('otel_traces', 'd', 'record', 'd', 'DOUBLE', false, 1)`,
		`CREATE TABLE otel_traces (name VARCHAR, "http.status_code" BIGINT, d DOUBLE, attributes_overflow JSON, attributes_str MAP(VARCHAR, VARCHAR),
			attributes_int MAP(VARCHAR, BIGINT), attributes_double MAP(VARCHAR, DOUBLE))`,
		`INSERT INTO otel_traces VALUES
			('a', 500, 0.5, NULL, NULL, NULL, NULL),
			('b', NULL, NULL, NULL, MAP {'http.status_code': 'notanint'}, MAP {'d': 9007199254740993}, NULL),
			('c', NULL, NULL, NULL, NULL, MAP {'d': 3}, MAP {'http.status_code': 2.0}),
			('e', NULL, NULL, '{"http.status_code":"AQID"}', NULL, NULL, NULL),
			('d', 200, NULL, NULL, NULL, NULL, NULL)`,
	)
	q := `SELECT name, "http.status_code", "http.status_code~stray", "d~stray" FROM otel_traces WHERE "http.status_code" >= 500 OR "http.status_code" IS NULL ORDER BY name`
	v, err := Create(ctx, c, q)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Drop(ctx)
	if got, want := queryText(t, c, q), "a 500 <nil> <nil>\nb <nil> notanint 9007199254740993\nc <nil> 2 <nil>\ne <nil> AQID <nil>"; got != want {
		t.Errorf("rows %q, want %q", got, want)
	}
}
