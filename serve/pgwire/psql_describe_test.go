package pgwire_test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/serve"
	"github.com/shredduck/shredduck/serve/pgwire"
	"github.com/shredduck/shredduck/serve/sqlpolicy"
)

// typedTable has a column of each kind of type, to check that the
// catalog names the types columns are sent as.
const typedTable = `CREATE TABLE typed (
	b BOOLEAN NOT NULL, ti TINYINT, si SMALLINT, i INTEGER, bi BIGINT DEFAULT 7, ut UTINYINT, us USMALLINT, ui UINTEGER,
	ub UBIGINT, hi HUGEINT, uh UHUGEINT, bn BIGNUM, f FLOAT, d DOUBLE, dec DECIMAL(18,3), v VARCHAR DEFAULT 'x', bl BLOB, u UUID, dt DATE, tm TIME,
	ttz TIMETZ, ts TIMESTAMP, tss TIMESTAMP_S, tsms TIMESTAMP_MS, tsns TIMESTAMP_NS, tstz TIMESTAMPTZ, iv INTERVAL,
	e ENUM('a', 'b'), j JSON, li BIGINT[], lv VARCHAR[], lb BOOLEAN[], ld DOUBLE[], lui UINTEGER[], lts TIMESTAMP[],
	ll BIGINT[][], a3 INTEGER[3], st STRUCT(x INTEGER, y VARCHAR[]), m MAP(VARCHAR, VARCHAR), un UNION(n INTEGER, s VARCHAR)
)`

// describeServer is a server holding one span with the attribute
// http.method (a column of its own: density 0) and typedTable; it
// returns a connection string.
func describeServer(t *testing.T) string {
	t.Helper()
	db, err := ingest.Open(filepath.Join(t.TempDir(), "describe.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	db.ColumnDensity = 0
	srv, err := serve.New(db, serve.Config{MemoryLimit: "256MB"})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	span := `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"svc"}}]},
	"scopeSpans":[{"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","name":"GET /",
	"kind":2,"startTimeUnixNano":"1700000000000000000","endTimeUnixNano":"1700000001000000000",
	"attributes":[{"key":"http.method","value":{"stringValue":"GET"}}]}]}]}]}`
	resp, err := http.Post(hs.URL+"/v1/traces", "application/json", strings.NewReader(span))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	hs.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/v1/traces: %d", resp.StatusCode)
	}
	if _, err := db.SQL.Exec(typedTable); err != nil {
		t.Fatal(err)
	}
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
	return "postgres://tester@" + l.Addr().String() + "/shredduck?sslmode=disable"
}

// psql's describe commands (Debian 12's psql 15: their catalog queries
// in PostgreSQL's dialect) show the tables, their columns with the types
// they are sent as, and nullability.
func TestPGPsqlDescribe(t *testing.T) {
	psql, err := exec.LookPath("psql")
	if err != nil {
		t.Skip("psql is not installed (apt-get install postgresql-client)")
	}
	url := describeServer(t)
	run := func(cmd string) (string, string) {
		t.Helper()
		c := exec.Command(psql, "-X", "-c", cmd, url)
		c.Env = append(os.Environ(), "PGCONNECT_TIMEOUT=10")
		var stdout, stderr bytes.Buffer
		c.Stdout, c.Stderr = &stdout, &stderr
		err := c.Run()
		if err != nil && !strings.Contains(stderr.String(), "Did not find") {
			t.Errorf("psql -c %q: %v\n%s%s", cmd, err, stdout.String(), stderr.String())
		}
		return stdout.String(), stderr.String()
	}
	// want are lines of the output, spaces squeezed.
	f := func(cmd string, want ...string) {
		t.Helper()
		out, stderr := run(cmd)
		lines := map[string]bool{}
		for l := range strings.SplitSeq(out+stderr, "\n") {
			lines[strings.Join(strings.Fields(l), " ")] = true
		}
		for _, w := range want {
			if !lines[w] {
				t.Errorf("psql -c %q: no line %q in\n%s%s", cmd, w, out, stderr)
			}
		}
	}
	f(`\d otel_traces`,
		`Table "main.otel_traces"`,
		`Column | Type | Collation | Nullable | Default`,
		`trace_id | text | | |`,
		`flags | bigint | | |`,
		`start_time | timestamp without time zone | | |`,
		`duration_ns | bigint | | |`,
		`dropped_attributes_count | bigint | | | 0`,
		`events | json | | |`,
		`http.method | text | | |`,
		`resource.service.name | text | | |`)
	f(`\d+ typed`,
		`Column | Type | Collation | Nullable | Default | Storage | Compression | Stats target | Description`,
		`b | boolean | | not null | | plain | | |`,
		`bi | bigint | | | 7 | plain | | |`,
		`v | text | | | 'x' | plain | | |`)
	// A table with a key: psql reads its indexes too.
	f(`\d shredduck_columns`, `Table "main.shredduck_columns"`, `table_name | text | | not null |`,
		`first_seen | timestamp with time zone | | not null | now()`)
	f(`\d`, `List of relations`, `Schema | Name | Type | Owner`, `main | otel_traces | table | shredduck`, `main | typed | table | shredduck`)
	f(`\dt+`, `main | typed | table | shredduck | permanent | | |`)
	f(`\dv`, `Did not find any relations.`)
	f(`\dn`, `List of schemas`, `main | shredduck`)
	f(`\l`, `List of databases`, `describe | shredduck | UTF8 | C | C | | libc |`)
	f(`\d nosuch`, `Did not find any relation named "nosuch".`)
	// psql puts the name in a string literal of the pattern: it stays
	// there, and nothing but a catalog query runs.
	f(`\d "x'; DROP TABLE typed; --"`, `Did not find any relation named ""x'; DROP TABLE typed; --"".`)
	f(`\d "x'')$' UNION SELECT 1, 2, 3; --"`, `Did not find any relation named ""x'')$' UNION SELECT 1, 2, 3; --"".`)
	f(`\d typed`, `b | boolean | | not null |`) // still there

	// The catalog's type of every column is the type its values are sent
	// as.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT a.attname, a.atttypid, pg_catalog.format_type(a.atttypid, a.atttypmod)
		FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
		WHERE c.relname = 'typed' ORDER BY a.attnum`, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatal(err)
	}
	type col struct {
		name, typ string
		oid       uint32
	}
	var cols []col
	for rows.Next() {
		var c col
		if err := rows.Scan(&c.name, &c.oid, &c.typ); err != nil {
			t.Fatal(err)
		}
		cols = append(cols, c)
	}
	if err := rows.Err(); err != nil || len(cols) != 40 {
		t.Fatalf("%d columns, %v", len(cols), err)
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = `"` + c.name + `"`
	}
	rows, err = conn.Query(ctx, "SELECT "+strings.Join(names, ", ")+" FROM typed", pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatal(err)
	}
	fds := rows.FieldDescriptions()
	rows.Close()
	var got []string
	for i, c := range cols {
		if fds[i].DataTypeOID != c.oid {
			t.Errorf("column %s: pg_attribute says type %d (%s), the wire %d", c.name, c.oid, c.typ, fds[i].DataTypeOID)
		}
		got = append(got, c.name+" "+c.typ)
	}
	want := "b boolean, ti smallint, si smallint, i integer, bi bigint, ut smallint, us integer, ui bigint, " +
		"ub numeric, hi numeric, uh numeric, bn numeric, f real, d double precision, dec numeric, v text, bl bytea, u uuid, dt date, " +
		"tm time without time zone, ttz time with time zone, ts timestamp without time zone, " +
		"tss timestamp without time zone, tsms timestamp without time zone, tsns timestamp without time zone, " +
		"tstz timestamp with time zone, iv interval, e text, j json, li bigint[], lv text[], lb boolean[], " +
		"ld double precision[], lui json, lts json, ll json, a3 integer[], st json, m json, un json"
	if g := strings.Join(got, ", "); g != want {
		t.Errorf("types\n got %s\nwant %s", g, want)
	}
}

// The rewrites of psql's dialect touch code, never a string's value.
func TestPGRewriteKeepsStrings(t *testing.T) {
	url := describeServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	const s = `x OPERATOR(pg_catalog.~) y COLLATE pg_catalog.default ::pg_catalog.regtype pg_catalog.version()`
	var got string
	if err := conn.QueryRow(ctx, `SELECT '`+s+`' COLLATE pg_catalog.default -- pg_catalog.x`).Scan(&got); err != nil || got != s {
		t.Errorf("got %q %v", got, err)
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_catalog.pg_class c WHERE c.relname OPERATOR(pg_catalog.~) '^(typed)$' COLLATE pg_catalog.default`).Scan(&n); err != nil || n != 1 {
		t.Errorf("got %d %v", n, err)
	}
}
