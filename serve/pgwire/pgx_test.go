package pgwire

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/shredduck/shredduck/serve/sqlpolicy"
)

// typesTable holds one row of every type the endpoint maps.
var typesTable = []string{
	`CREATE TYPE mood AS ENUM ('ok', 'sad')`,
	`CREATE TABLE types AS SELECT
		true AS b, 7::TINYINT AS ti, 300::SMALLINT AS si, 70000::INTEGER AS i, 5000000000::BIGINT AS bi,
		200::UTINYINT AS uti, 4000000000::UINTEGER AS ui, 18000000000000000000::UBIGINT AS ub,
		170141183460469231731687303715884105727::HUGEINT AS hi,
		1.5::FLOAT AS f, 2.25::DOUBLE AS d, 123.45::DECIMAL(10,2) AS dec,
		'text é' AS s, 'ok'::mood AS e, '{"a":[1,2]}'::JSON AS j, '\x01\x02'::BLOB AS bl,
		'00112233-4455-6677-8899-aabbccddeeff'::UUID AS u, DATE '2026-01-02' AS dt,
		TIME '03:04:05.123456' AS tm,
		TIMESTAMP '2026-01-02 03:04:05.123456' AS ts, TIMESTAMP_NS '2026-01-02 03:04:05.123456789' AS tsns,
		TIMESTAMPTZ '2026-01-02 03:04:05.5+00' AS tstz, INTERVAL '1 year 2 months 3 days 04:05:06.5' AS iv,
		[1, 2, NULL]::BIGINT[] AS li, ['a', 'b c', NULL] AS ls, {'k': 1, 'v': 'x'} AS st, MAP {'a': 1} AS mp,
		[{'x': 1}] AS ln, NULL::VARCHAR AS nul`,
}

// Every column arrives as the Go type pgx decodes its PostgreSQL type
// into, in the binary format pgx asks for and in the simple protocol's
// text, with the type OIDs of the mapping.
func TestPGTypes(t *testing.T) {
	p := startPG(t, Config{}, sqlpolicy.Config{}, typesTable...)
	ctx := context.Background()
	wantOIDs := map[string]uint32{
		"b": pgtype.BoolOID, "ti": pgtype.Int2OID, "si": pgtype.Int2OID, "i": pgtype.Int4OID, "bi": pgtype.Int8OID,
		"uti": pgtype.Int2OID, "ui": pgtype.Int8OID, "ub": pgtype.NumericOID, "hi": pgtype.NumericOID,
		"f": pgtype.Float4OID, "d": pgtype.Float8OID, "dec": pgtype.NumericOID, "s": pgtype.TextOID, "e": pgtype.TextOID,
		"j": pgtype.JSONOID, "bl": pgtype.ByteaOID, "u": pgtype.UUIDOID, "dt": pgtype.DateOID, "tm": pgtype.TimeOID,
		"ts": pgtype.TimestampOID, "tsns": pgtype.TimestampOID, "tstz": pgtype.TimestamptzOID, "iv": pgtype.IntervalOID,
		"li": pgtype.Int8ArrayOID, "ls": pgtype.TextArrayOID, "st": pgtype.JSONOID, "mp": pgtype.JSONOID, "ln": pgtype.JSONOID,
		"nul": pgtype.TextOID,
	}
	want := map[string]any{
		"b": true, "ti": int16(7), "si": int16(300), "i": int32(70000), "bi": int64(5000000000),
		"uti": int16(200), "ui": int64(4000000000), "f": float32(1.5), "d": 2.25,
		"s": "text é", "e": "ok", "j": map[string]any{"a": []any{1.0, 2.0}}, "bl": []byte{1, 2},
		"u":    [16]byte{0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff},
		"dt":   time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC),
		"ts":   time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC),
		"tsns": time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC), // microseconds, PostgreSQL's precision
		"iv":   pgtype.Interval{Months: 14, Days: 3, Microseconds: (4*3600+5*60+6)*1e6 + 5e5, Valid: true},
		"li":   []any{int64(1), int64(2), nil}, "ls": []any{"a", "b c", nil},
		"st": map[string]any{"k": 1.0, "v": "x"}, "mp": map[string]any{"a": 1.0}, "ln": []any{map[string]any{"x": 1.0}},
		"nul": nil,
	}
	check := func(mode pgx.QueryExecMode) {
		t.Helper()
		c := p.connect("", "")
		rows, err := c.Query(ctx, "SELECT * FROM types", mode)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		if !rows.Next() {
			t.Fatalf("%v: no row: %v", mode, rows.Err())
		}
		vals, err := rows.Values()
		if err != nil {
			t.Fatalf("%v: %v", mode, err)
		}
		for i, fd := range rows.FieldDescriptions() {
			if w, ok := wantOIDs[fd.Name]; !ok || fd.DataTypeOID != w {
				t.Errorf("%v: column %s: OID %d, want %d", mode, fd.Name, fd.DataTypeOID, w)
			}
			got := vals[i]
			switch fd.Name {
			case "ub", "hi", "dec":
				n, ok := got.(pgtype.Numeric)
				wantNum := map[string]string{"ub": "18000000000000000000", "hi": "170141183460469231731687303715884105727", "dec": "123.45"}[fd.Name]
				if s, _ := n.MarshalJSON(); !ok || string(s) != wantNum {
					t.Errorf("%v: %s = %#v, want %s", mode, fd.Name, got, wantNum)
				}
				continue
			case "tstz":
				if tm, ok := got.(time.Time); !ok || !tm.Equal(time.Date(2026, 1, 2, 3, 4, 5, 5e8, time.UTC)) {
					t.Errorf("%v: tstz = %#v", mode, got)
				}
				continue
			case "tm":
				if tm, ok := got.(pgtype.Time); !ok || tm.Microseconds != (3*3600+4*60+5)*1e6+123456 {
					t.Errorf("%v: tm = %#v", mode, got)
				}
				continue
			}
			if !reflect.DeepEqual(got, want[fd.Name]) {
				t.Errorf("%v: %s = %#v (%T), want %#v", mode, fd.Name, got, got, want[fd.Name])
			}
		}
	}
	check(pgx.QueryExecModeCacheStatement) // extended protocol, binary results
	check(pgx.QueryExecModeSimpleProtocol) // text
	check(pgx.QueryExecModeExec)           // extended, unnamed statement
	check(pgx.QueryExecModeCacheDescribe)  // Describe cached, unnamed statements
	check(pgx.QueryExecModeDescribeExec)   // Describe, then Bind and Execute
}

// Parameters bind as DuckDB's prepared statement parameters, by the
// types DuckDB expects (sent in binary by pgx) or as text.
func TestPGParameters(t *testing.T) {
	p := startPG(t, Config{}, sqlpolicy.Config{},
		`CREATE TABLE t AS SELECT i, 'n' || i AS name, TIMESTAMP '2026-01-01' + i * INTERVAL 1 HOUR AS ts FROM range(10) r(i)`)
	c := p.connect("", "")
	ctx := context.Background()
	var n int64
	var name string
	if err := c.QueryRow(ctx, "SELECT count(*), max(name) FROM t WHERE i >= $1 AND name <> $2", 5, "n9").Scan(&n, &name); err != nil {
		t.Fatal(err)
	}
	if n != 4 || name != "n8" {
		t.Errorf("got %d %q", n, name)
	}
	if err := c.QueryRow(ctx, "SELECT count(*) FROM t WHERE ts BETWEEN $1 AND $2",
		time.Date(2026, 1, 1, 2, 0, 0, 0, time.UTC), time.Date(2026, 1, 1, 4, 0, 0, 0, time.UTC)).Scan(&n); err != nil || n != 3 {
		t.Errorf("time range: %d %v", n, err)
	}
	var s string
	if err := c.QueryRow(ctx, "SELECT $1::VARCHAR || '!'", "hi").Scan(&s); err != nil || s != "hi!" {
		t.Errorf("text parameter: %q %v", s, err)
	}
	var ok bool
	var f float64
	if err := c.QueryRow(ctx, "SELECT $1::DOUBLE * 2", 1.25).Scan(&f); err != nil || f != 2.5 {
		t.Errorf("double parameter: %v %v", f, err)
	}
	// The simple protocol: pgx interpolates the parameters itself.
	if err := c.QueryRow(ctx, "SELECT count(*) FROM t WHERE name = $1", pgx.QueryExecModeSimpleProtocol, "n3").Scan(&n); err != nil || n != 1 {
		t.Errorf("simple protocol: %d %v", n, err)
	}
	if err := c.QueryRow(ctx, "SELECT count(*) FROM t WHERE i = $1", nil).Scan(&n); err != nil || n != 0 {
		t.Errorf("NULL parameter: %d %v", n, err)
	}
	// DuckDB leaves a DECIMAL parameter's type open: it is announced as
	// text, as PostgreSQL types an unknown one, and takes a string.
	var num pgtype.Numeric
	if err := c.QueryRow(ctx, "SELECT $1::DECIMAL(3,1) * 2", "1.5").Scan(&num); err != nil {
		t.Errorf("DECIMAL parameter: %v", err)
	} else if f, _ := num.Float64Value(); f.Float64 != 3 {
		t.Errorf("DECIMAL parameter: %v", f)
	}
	if err := c.QueryRow(ctx, "SELECT $1::HUGEINT + 1", int64(1)<<62).Scan(&num); err != nil {
		t.Errorf("HUGEINT parameter: %v", err)
	} else if b, _ := num.MarshalJSON(); string(b) != "4611686018427387905" {
		t.Errorf("HUGEINT parameter: %s", b)
	}
	if err := c.QueryRow(ctx, "SELECT $1::TIMESTAMP = TIMESTAMP '2026-01-01 02:00:00'", "2026-01-01 02:00:00").Scan(&ok); err != nil || !ok {
		t.Errorf("text for a TIMESTAMP parameter: %v %v", ok, err)
	}
	// A parameter DuckDB cannot type leaves the whole result undescribed
	// (one column "unknown"): it is taken as text, as PostgreSQL does.
	rows, err := c.Query(ctx, "SELECT $1::INTEGER + 1 AS n, $2 AS s, count(*) AS c FROM t WHERE i < $1::INTEGER", 3, "x'; --")
	if err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, f := range rows.FieldDescriptions() {
		cols = append(cols, f.Name)
	}
	vals, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([]any, error) { return r.Values() })
	if got := fmt.Sprint(cols, vals); err != nil || got != "[n s c] [[4 x'; -- 3]]" {
		t.Errorf("an untyped parameter: %s %v", got, err)
	}
}

// What clients send on connect and to check a connection works.
func TestPGSession(t *testing.T) {
	p := startPG(t, Config{}, sqlpolicy.Config{})
	c := p.connect("", "application_name=tester")
	ctx := context.Background()
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("ping: %v", err)
	}
	if v := c.PgConn().ParameterStatus("server_version"); !strings.HasPrefix(v, ServerVersion) {
		t.Errorf("server_version %q", v)
	}
	for _, q := range []string{"SET extra_float_digits = 3", "SET application_name = 'x'", "SET SESSION TimeZone TO 'UTC'",
		"SET search_path TO main", "BEGIN", "COMMIT", "ROLLBACK", "DISCARD ALL", "RESET ALL", ";", "-- nothing"} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Errorf("%s: %v", q, err)
		}
	}
	var v string
	for q, want := range map[string]string{
		"SHOW server_version": ServerVersion + " (shredduck)", "SHOW TimeZone": "UTC", "SHOW transaction_isolation": "repeatable read",
		"SELECT current_setting('server_version_num')": serverVersionNum, "SELECT current_setting('lock_configuration')": "true",
		"SELECT 1::VARCHAR": "1",
	} {
		if err := c.QueryRow(ctx, q).Scan(&v); err != nil || v != want {
			t.Errorf("%s: %q %v, want %q", q, v, err, want)
		}
	}
	if err := c.QueryRow(ctx, "SELECT version()").Scan(&v); err != nil || !strings.HasPrefix(v, "PostgreSQL 15") || !strings.Contains(v, "DuckDB") {
		t.Errorf("version(): %q %v", v, err)
	}
	var n int32
	if err := c.QueryRow(ctx, "SELECT current_setting('server_version_num')::int/100 AS version").Scan(&v); err != nil {
		t.Errorf("Grafana's version query: %v", err)
	}
	if err := c.QueryRow(ctx, "select 1").Scan(&n); err != nil || n != 1 {
		t.Errorf("select 1: %d %v", n, err)
	}
}

// Statements that write, reach the host or change settings get an
// ErrorResponse with SQLSTATE 42501 (or DuckDB's own refusal), and the
// connection stays usable.
func TestPGRefusals(t *testing.T) {
	p := startPG(t, Config{}, sqlpolicy.Config{}, `CREATE TABLE t AS SELECT 1 AS i`)
	ctx := context.Background()
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheStatement} {
		c := p.connect("", "")
		for _, c2 := range []struct{ sql, code, msg string }{
			{"DELETE FROM t", "42501", "only SELECT"},
			{"DROP TABLE t", "42501", "only SELECT"},
			{"INSERT INTO t VALUES (2)", "42501", "only SELECT"},
			{"COPY t TO '/tmp/shredduck-pg-copy.csv'", "42501", "got COPY"},
			{"SELECT * FROM read_csv('/etc/passwd')", "42501", "disabled"},
			{"ATTACH '/tmp/shredduck-pg.duckdb' AS x", "42501", "only SELECT"},
			{"SET enable_external_access = true", "42501", "not allowed"},
			{"SET memory_limit = '10GB'", "42501", "not allowed"},
			{"SELECT 1; DROP TABLE t", "42501", "one statement"},
			{"SELECT * FROM checkpoint()", "42501", "not allowed"},
			{"SELECT length(repeat('x', 100000000))", "54000", "limit"},
			{"SELEC 1", "42601", "syntax"},
			{"SELECT * FROM nope", "42P01", "nope"},
		} {
			_, err := c.Exec(ctx, c2.sql, mode)
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != c2.code || !strings.Contains(pe.Message, c2.msg) {
				t.Errorf("%v: %s: %v, want %s %q", mode, c2.sql, err, c2.code, c2.msg)
			}
			var n int32
			if err := c.QueryRow(ctx, "SELECT count(*) FROM t", mode).Scan(&n); err != nil || n != 1 {
				t.Fatalf("%v: after %s: %d %v", mode, c2.sql, n, err)
			}
		}
	}
}

// A SET or RESET is acknowledged only when the session then is as the
// client asked: a value the endpoint does not use, or a RESET of one of
// DuckDB's settings (which changes nothing), is refused, not answered as
// done.
func TestPGSetReset(t *testing.T) {
	p := startPG(t, Config{}, sqlpolicy.Config{})
	ctx := context.Background()
	c := p.connect("", "")
	for _, q := range []string{"SET TIME ZONE 'UTC'", "SET TimeZone = 'Etc/UTC'", "SET NAMES 'UTF8'", "SET client_encoding TO 'utf8'",
		"SET DateStyle = 'ISO, MDY'", "SET statement_timeout = 0", "SET search_path = \"$user\", public", "SET TimeZone TO DEFAULT",
		"RESET TimeZone", "RESET ALL", "RESET statement_timeout", "SET default_transaction_read_only = on", "SET jit = off"} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Errorf("%s: %v", q, err)
		}
	}
	for _, q := range []struct{ sql, msg string }{
		{"RESET memory_limit", "RESET memory_limit is not allowed"},
		{"RESET threads", "RESET threads is not allowed"},
		{"SET TIME ZONE 'Europe/Paris'", "SET time = 'europe/paris' is not supported"},
		{"SET TimeZone = 'America/New_York'", "is not supported"},
		{"SET client_encoding = 'LATIN1'", "is not supported"},
		{"SET statement_timeout = '5min'", "is not supported"},
		{"SET DateStyle = 'German'", "is not supported"},
		{"SET default_transaction_read_only = off", "is not supported"},
		{"SET search_path = other", "is not supported"},
		{"SET memory_limit = '1GB'", "SET memory_limit is not allowed"},
	} {
		_, err := c.Exec(ctx, q.sql)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "42501" || !strings.Contains(pe.Message, q.msg) {
			t.Errorf("%s: %v, want 42501 %q", q.sql, err, q.msg)
		}
	}
	var n int32
	if err := c.QueryRow(ctx, "SELECT 1").Scan(&n); err != nil || n != 1 {
		t.Errorf("after the refusals: %d %v", n, err)
	}
}

// With a token the password is the token; a wrong one is refused with
// 28P01, and Off refuses every session with its reason.
func TestPGPassword(t *testing.T) {
	p := startPG(t, Config{Token: "s3cret"}, sqlpolicy.Config{})
	ctx := context.Background()
	for _, pw := range []string{"", "wrong", "s3cre", "s3cret2"} {
		c, err := pgx.Connect(ctx, p.url(pw, ""))
		var pe *pgconn.PgError
		if err == nil {
			c.Close(ctx)
		}
		if !errors.As(err, &pe) || pe.Code != "28P01" || !strings.Contains(pe.Hint, "token") {
			t.Errorf("password %q: %v", pw, err)
		}
	}
	c := p.connect("s3cret", "")
	var n int32
	if err := c.QueryRow(ctx, "SELECT 41 + 1").Scan(&n); err != nil || n != 42 {
		t.Errorf("%d %v", n, err)
	}

	off := startPG(t, Config{Off: "queries are off: set a token"}, sqlpolicy.Config{})
	_, err := pgx.Connect(ctx, off.url("", ""))
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "28000" || !strings.Contains(pe.Message, "set a token") {
		t.Errorf("off: %v", err)
	}
}

// A CancelRequest interrupts the running DuckDB query (57014), and the
// session goes on; the query timeout does the same with its own message.
func TestPGCancel(t *testing.T) {
	p := startPG(t, Config{}, sqlpolicy.Config{Timeout: time.Minute})
	c := p.connect("", "")
	ctx := context.Background()
	slow := "SELECT count(*) FROM range(1000000000000) a(i) WHERE i % 7 = 3"
	start := time.Now()
	go func() {
		for deadline := time.Now().Add(20 * time.Second); !p.srv.queryRunning() && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond)
		if err := c.PgConn().CancelRequest(ctx); err != nil {
			t.Errorf("cancel request: %v", err)
		}
	}()
	_, err := c.Exec(ctx, slow)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "57014" || !strings.Contains(pe.Message, "user request") {
		t.Fatalf("%v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("cancelled after %v", d)
	}
	var n int32
	if err := c.QueryRow(ctx, "SELECT 1").Scan(&n); err != nil {
		t.Errorf("after cancel: %v", err)
	}
	// A wrong key cancels nothing.
	p.srv.cancel(c.PgConn().PID(), []byte{1, 2, 3, 4})

	q := startPG(t, Config{}, sqlpolicy.Config{Timeout: 300 * time.Millisecond})
	c = q.connect("", "")
	_, err = c.Exec(ctx, slow)
	if !errors.As(err, &pe) || pe.Code != "57014" || !strings.Contains(pe.Message, "statement timeout") || !strings.Contains(pe.Detail, "timed out after 300ms") {
		t.Errorf("timeout: %v", err)
	}
}

// The row and byte limits hold for PostgreSQL results: a cut result comes
// with a WARNING notice; a first row over the byte limit is 54000.
func TestPGLimits(t *testing.T) {
	p := startPG(t, Config{}, sqlpolicy.Config{MaxRows: 3, MaxBytes: 4096})
	ctx := context.Background()
	var notices []string
	var mu sync.Mutex
	cfg, err := pgx.ParseConfig(p.url("", ""))
	if err != nil {
		t.Fatal(err)
	}
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		notices = append(notices, n.Message)
		mu.Unlock()
	}
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheStatement} {
		rows, _ := c.Query(ctx, "SELECT i FROM range(100) t(i)", mode)
		got, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil || !reflect.DeepEqual(got, []int64{0, 1, 2}) {
			t.Errorf("%v: %v %v", mode, got, err)
		}
		rows, _ = c.Query(ctx, "SELECT repeat('x', 1000) FROM range(100)", mode)
		strs, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil || len(strs) != 3 {
			t.Errorf("%v: %d rows %v", mode, len(strs), err)
		}
		_, err = c.Exec(ctx, "SELECT repeat('x', 5000)", mode)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "54000" {
			t.Errorf("%v: first row over the limit: %v", mode, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(notices) != 4 || !strings.Contains(notices[0], "cut after 3 rows") {
		t.Errorf("notices %q", notices)
	}
}

// Sessions beyond MaxConns are refused with 53300; closing one makes room.
func TestPGConnectionLimit(t *testing.T) {
	p := startPG(t, Config{MaxConns: 2}, sqlpolicy.Config{})
	ctx := context.Background()
	a := p.connect("", "")
	p.connect("", "")
	_, err := pgx.Connect(ctx, p.url("", ""))
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "53300" {
		t.Fatalf("third session: %v", err)
	}
	a.Close(ctx)
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := pgx.Connect(ctx, p.url("", ""))
		if err == nil {
			c.Close(ctx)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a session closed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// COPY ... TO STDOUT sends a query's or a table's rows in COPY's text or
// CSV format, under the query limits; COPY to a file stays refused.
func TestPGCopyToStdout(t *testing.T) {
	p := startPG(t, Config{}, sqlpolicy.Config{MaxRows: 5},
		`CREATE TABLE c AS SELECT * FROM (VALUES (1, 'a,b', NULL), (2, E'tab\there', 'x"y'), (3, '', 'new
line')) v(i, s, n)`)
	c := p.connect("", "")
	ctx := context.Background()
	for _, tc := range []struct{ sql, want string }{
		{"COPY c TO STDOUT", "1\ta,b\t\\N\n2\ttab\\there\tx\"y\n3\t\tnew\\nline\n"},
		{"COPY (SELECT i, s FROM c ORDER BY i DESC) TO STDOUT WITH (FORMAT csv, HEADER)", "i,s\n3,\"\"\n2,tab\there\n1,\"a,b\"\n"},
		{"COPY c (i, n) TO STDOUT WITH CSV HEADER NULL 'NULL'", "i,n\n1,NULL\n2,\"x\"\"y\"\n3,\"new\nline\"\n"},
		{"copy (select 1 as x where false) to stdout csv header", "x\n"},
		{"COPY (SELECT i FROM range(100) t(i)) TO STDOUT DELIMITER ';'", "0\n1\n2\n3\n4\n"},
	} {
		var b strings.Builder
		tag, err := c.PgConn().CopyTo(ctx, &b, tc.sql)
		if err != nil || b.String() != tc.want {
			t.Errorf("%s: %q %v, want %q", tc.sql, b.String(), err, tc.want)
		}
		if err == nil && !strings.HasPrefix(tag.String(), "COPY ") {
			t.Errorf("%s: tag %q", tc.sql, tag)
		}
	}
	for _, sql := range []string{"COPY c TO '/tmp/shredduck-pg-copy.csv'", "COPY (DELETE FROM c) TO STDOUT", "COPY c FROM STDIN", "COPY c TO STDOUT (FORMAT binary)"} {
		var b strings.Builder
		if _, err := c.PgConn().CopyTo(ctx, &b, sql); err == nil {
			t.Errorf("%s: no error", sql)
		}
		var n int32
		if err := c.QueryRow(ctx, "SELECT count(*) FROM c").Scan(&n); err != nil || n != 3 {
			t.Fatalf("after %s: %d %v", sql, n, err)
		}
	}
}

// Sessions that send nothing for --pg-idle-timeout are closed, and a
// session beyond --pg-max-conns takes the place of one idle long enough;
// when none is, it is refused with 53300 saying why.
func TestPGIdleSessions(t *testing.T) {
	ctx := context.Background()
	p := startPG(t, Config{IdleTimeout: 300 * time.Millisecond}, sqlpolicy.Config{})
	c := p.connect("", "")
	time.Sleep(600 * time.Millisecond)
	var n int32
	if err := c.QueryRow(ctx, "SELECT 1").Scan(&n); err == nil {
		t.Error("a session idle past --pg-idle-timeout still answers")
	}

	p = startPG(t, Config{MaxConns: 2, IdleEvict: 200 * time.Millisecond}, sqlpolicy.Config{})
	a, b := p.connect("", ""), p.connect("", "")
	_, err := pgx.Connect(ctx, p.url("", ""))
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "53300" || !strings.Contains(pe.Message, "idle for less than") {
		t.Errorf("a third session while two are fresh: %v", err)
	}
	if err := b.QueryRow(ctx, "SELECT 1").Scan(&n); err != nil { // b busy last: a is idle longer
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond)
	third, err := pgx.Connect(ctx, p.url("", ""))
	if err != nil {
		t.Fatalf("a third session while two are idle: %v", err)
	}
	defer third.Close(ctx)
	if err := third.QueryRow(ctx, "SELECT 1").Scan(&n); err != nil || n != 1 {
		t.Errorf("the new session: %d %v", n, err)
	}
	if err := a.QueryRow(ctx, "SELECT 1").Scan(&n); err == nil {
		t.Error("the session idle longest still answers after its place was taken")
	}
	if err := b.QueryRow(ctx, "SELECT 1").Scan(&n); err != nil {
		t.Errorf("the other idle session lost its place too: %v", err)
	}
}
