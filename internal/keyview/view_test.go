//go:build duckdb_arrow

package keyview

import (
	"context"
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
	q := `SELECT name, "A'B"".$C", "resource.n" FROM otel_traces ORDER BY name`
	v, err := Create(ctx, c, q)
	if err != nil {
		t.Fatal(err)
	}
	if got := v.Tables(); len(got) != 1 || got[0] != "otel_traces" {
		t.Fatalf("views of %v", got)
	}
	rows, err := c.QueryContext(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	var got []any
	for rows.Next() {
		var name string
		var s, n any
		if err := rows.Scan(&name, &s, &n); err != nil {
			t.Fatal(err)
		}
		got = append(got, name, s, n)
	}
	rows.Close()
	if want := []any{"x", "v", int64(7), "y", nil, nil}; len(got) != len(want) || got[1] != want[1] || got[2] != want[2] || got[4] != nil || got[5] != nil {
		t.Errorf("rows %v, want %v", got, want)
	}
	if err := v.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := c.QueryRowContext(ctx, `SELECT count(*) FROM duckdb_views() WHERE database_name = 'temp'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d temporary views after Drop (%v)", n, err)
	}
}
