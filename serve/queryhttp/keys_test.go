package queryhttp

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/shred"
)

// keysSpan is one span of keysTraces: its name and attributes, as OTLP
// JSON values.
type keysSpan struct {
	name  string
	attrs map[string]string
}

// keysRequest renders one OTLP JSON traces request, a resource per group.
func keysRequest(groups []struct {
	resource map[string]string
	spans    []keysSpan
}) string {
	kv := func(m map[string]string) string {
		var parts []string
		for k, v := range m {
			kb, _ := json.Marshal(k)
			parts = append(parts, `{"key":`+string(kb)+`,"value":`+v+`}`)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	var rs []string
	n := 0
	for _, g := range groups {
		var spans []string
		for _, s := range g.spans {
			n++
			spans = append(spans, fmt.Sprintf(`{"traceId":"%032x","spanId":"%016x","name":%q,"startTimeUnixNano":"1700000000000000000","endTimeUnixNano":"1700000001000000000","attributes":%s}`,
				n, n, s.name, kv(s.attrs)))
		}
		rs = append(rs, `{"resource":{"attributes":`+kv(g.resource)+`},"scopeSpans":[{"scope":{"name":"t"},"spans":[`+strings.Join(spans, ",")+`]}]}`)
	}
	return `{"resourceSpans":[` + strings.Join(rs, ",") + `]}` + "\n"
}

// keysDB loads spans whose keys end up stored, overflowed and promoted
// under the real density rule: load 1 has 23 spans, "dense.k" on 20 of
// them (stored), the "s.*" keys, "we""ird.$k", "promo.k" and the resource
// key "r.sparse" on 3 (overflowed, fewer than 10); load 2 has 20 more
// spans with "promo.k" (promoted). It returns the database's path.
func keysDB(t *testing.T) (*ingest.DB, string) {
	t.Helper()
	type group = struct {
		resource map[string]string
		spans    []keysSpan
	}
	var a, b, c group
	a.resource = map[string]string{"service.name": `{"stringValue":"svc-a"}`, "r.sparse": `{"stringValue":"ra"}`}
	for i := range 3 {
		a.spans = append(a.spans, keysSpan{fmt.Sprintf("a%02d", i), map[string]string{
			"s.str":      fmt.Sprintf(`{"stringValue":"v%d"}`, i),
			"s.int":      fmt.Sprintf(`{"intValue":"%d"}`, i),
			"s.dbl":      fmt.Sprintf(`{"doubleValue":%d.5}`, i),
			"s.bool":     fmt.Sprintf(`{"boolValue":%v}`, i%2 == 0),
			"s.list":     fmt.Sprintf(`{"arrayValue":{"values":[{"stringValue":"x%d"},{"stringValue":"y"}]}}`, i),
			`we"ird.$k`:  `{"stringValue":"w"}`,
			"promo.k":    fmt.Sprintf(`{"stringValue":"p%d"}`, i),
			"dense.k":    fmt.Sprintf(`{"intValue":"%d"}`, i),
			"l.sparse.k": `{"stringValue":"only-a"}`,
		}})
	}
	b.resource = map[string]string{"service.name": `{"stringValue":"svc-b"}`}
	for i := range 17 {
		b.spans = append(b.spans, keysSpan{fmt.Sprintf("b%02d", i), map[string]string{"dense.k": fmt.Sprintf(`{"intValue":"%d"}`, 100+i)}})
	}
	b.spans = append(b.spans, keysSpan{"b17", nil}, keysSpan{"b18", nil}, keysSpan{"b19", nil})
	c.resource = map[string]string{"service.name": `{"stringValue":"svc-c"}`}
	for i := range 20 {
		c.spans = append(c.spans, keysSpan{fmt.Sprintf("c%02d", i), map[string]string{"promo.k": fmt.Sprintf(`{"stringValue":"q%d"}`, i)}})
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "keys.duckdb")
	db, err := ingest.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.ColumnDensity = shred.DefaultDensity
	db.YoungColumns = 0 // the keys' columns by density alone: overflowed and promoted keys
	for i, req := range []string{keysRequest([]group{a, b}), keysRequest([]group{c})} {
		file := filepath.Join(dir, fmt.Sprintf("load%d.json", i))
		if err := os.WriteFile(file, []byte(req), 0o644); err != nil {
			t.Fatal(err)
		}
		in, err := ingest.StatInputs([]string{file})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Load(context.Background(), in, ingest.Options{}); err != nil {
			t.Fatal(err)
		}
	}
	// The test is about keys without a stored column: check that the
	// density rule put them where this test needs them.
	var catalog []string
	rows, err := db.SQL.Query(`SELECT column_name || ':' || type || ':' || CASE WHEN overflow THEN 'overflow' WHEN promoted IS NOT NULL THEN 'promoted' ELSE 'stored' END
		FROM shredduck_columns WHERE table_name = 'otel_traces' AND column_name NOT LIKE 'resource.service.name' ORDER BY column_name`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		rows.Scan(&s)
		catalog = append(catalog, s)
	}
	rows.Close()
	want := `dense.k:BIGINT:stored l.sparse.k:VARCHAR:overflow promo.k:VARCHAR:promoted resource.r.sparse:VARCHAR:overflow ` +
		`s.bool:BOOLEAN:overflow s.dbl:DOUBLE:overflow s.int:BIGINT:overflow s.list:JSON:overflow s.str:VARCHAR:overflow we"ird.$k:VARCHAR:overflow`
	if got := strings.Join(catalog, " "); got != want {
		t.Fatalf("catalog:\n%s\nwant\n%s", got, want)
	}
	return db, path
}

// keysQueries are queries on keys without a stored column and their
// answers (JSON rows) and types.
var keysQueries = []struct{ sql, types, rows string }{
	{`SELECT name, "s.str", "s.int", "s.dbl", "s.bool", "s.list", "we""ird.$k", "resource.r.sparse", "dense.k" FROM otel_traces WHERE name < 'b01' ORDER BY name`,
		`["VARCHAR","VARCHAR","BIGINT","DOUBLE","BOOLEAN","JSON","VARCHAR","VARCHAR","BIGINT"]`,
		`[["a00","v0",0,0.5,true,["x0","y"],"w","ra",0],["a01","v1",1,1.5,false,["x1","y"],"w","ra",1],["a02","v2",2,2.5,true,["x2","y"],"w","ra",2],["b00",null,null,null,null,null,null,null,100]]`},
	// Case-folded and qualified names, a table alias.
	{`SELECT t."S.STR", "Resource.R.Sparse" FROM main.OTEL_TRACES t WHERE t."s.int" = 1`, `["VARCHAR","VARCHAR"]`, `[["v1","ra"]]`},
	// WHERE, GROUP BY, ORDER BY and aggregates over overflowed keys.
	{`SELECT "s.bool", count(*), sum("s.int"), max("s.dbl") FROM otel_traces WHERE "s.str" IS NOT NULL GROUP BY "s.bool" ORDER BY "s.bool" DESC`,
		`["BOOLEAN","BIGINT","HUGEINT","DOUBLE"]`, `[[true,2,2,2.5],[false,1,1,1.5]]`},
	// A promoted key: rows from before its promotion (overflow) and after.
	{`SELECT count("promo.k"), count(*) FILTER (WHERE "promo.k" LIKE 'p%'), min("promo.k"), max("promo.k") FROM otel_traces`,
		`["BIGINT","BIGINT","VARCHAR","VARCHAR"]`, `[[23,3,"p0","q9"]]`},
	{`SELECT name, "promo.k" FROM otel_traces WHERE "promo.k" IN ('p1', 'q5') ORDER BY 1`, `["VARCHAR","VARCHAR"]`, `[["a01","p1"],["c05","q5"]]`},
	// An alias with a key's name, a CTE and a subquery.
	{`WITH x AS (SELECT upper("s.str") AS "s.str" FROM otel_traces WHERE "s.str" IS NOT NULL) SELECT "s.str" FROM x ORDER BY 1 LIMIT 1`,
		`["VARCHAR"]`, `[["V0"]]`},
	{`SELECT (SELECT count(*) FROM otel_traces WHERE "l.sparse.k" = 'only-a') AS n`, `["BIGINT"]`, `[[3]]`},
}

// tempViews counts the temporary views on every pooled connection of db.
func tempViews(t *testing.T, db *ingest.DB) int {
	t.Helper()
	ctx := context.Background()
	n := 0
	for range db.SQL.Stats().OpenConnections {
		c, err := db.SQL.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var k int
		if err := c.QueryRowContext(ctx, `SELECT count(*) FROM duckdb_views() WHERE temporary AND database_name = 'temp'`).Scan(&k); err != nil {
			t.Fatal(err)
		}
		n += k
	}
	return n
}

func checkKeysAnswer(t *testing.T, sql string, body []byte, types, rows string) {
	t.Helper()
	var res struct {
		Types json.RawMessage `json:"types"`
		Rows  json.RawMessage `json:"rows"`
	}
	if err := json.Unmarshal(body, &res); err != nil {
		t.Fatalf("%s: %v: %s", sql, err, body)
	}
	if string(res.Types) != types || string(res.Rows) != rows {
		t.Errorf("%s:\ntypes %s\nwant  %s\nrows %s\nwant %s", sql, res.Types, types, res.Rows, rows)
	}
}

func TestQueryKeysLocal(t *testing.T) {
	db, path := keysDB(t)
	ctx := context.Background()
	for _, q := range keysQueries {
		body, err := Local(ctx, db, q.sql)
		if err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
		checkKeysAnswer(t, q.sql, body, q.types, q.rows)
	}
	// A query that fails after its views were made leaves none either.
	if _, err := Local(ctx, db, `SELECT "s.str", no_such_column FROM otel_traces`); err == nil {
		t.Fatal("a query on an unknown column worked")
	}
	if n := tempViews(t, db); n != 0 {
		t.Fatalf("%d temporary views left", n)
	}

	// shredduck query --db opens the file read-only.
	db.Close()
	ro, err := ingest.OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	for _, q := range keysQueries {
		body, err := Local(ctx, ro, q.sql)
		if err != nil {
			t.Fatalf("read-only: %s: %v", q.sql, err)
		}
		checkKeysAnswer(t, q.sql, body, q.types, q.rows)
	}
	if n := tempViews(t, ro); n != 0 {
		t.Fatalf("read-only: %d temporary views left", n)
	}
}

func TestQueryKeysEndpoint(t *testing.T) {
	db, _ := keysDB(t)
	if err := LockDown(db); err != nil {
		t.Fatal(err)
	}
	h := NewHandler(db, Config{})
	for _, q := range keysQueries {
		r := postQuery(t, h, "/v1/query", "text/plain", q.sql)
		if r.status != 200 {
			t.Fatalf("%s: %d %s", q.sql, r.status, r.body)
		}
		checkKeysAnswer(t, q.sql, []byte(r.body), q.types, q.rows)
	}
	// The view exists while the query runs, and only then.
	r := postQuery(t, h, "/v1/query", "text/plain",
		`SELECT (SELECT count(*) FROM duckdb_views() WHERE database_name = 'temp' AND view_name = 'otel_traces'), count("s.str") FROM otel_traces`)
	checkKeysAnswer(t, "views", []byte(r.body), `["BIGINT","BIGINT"]`, `[[1,3]]`)
	for _, bad := range []string{`SELECT "s.str", no_such_column FROM otel_traces`, `SELECT "s.str" FROM otel_traces; SELECT 1`} {
		if r := postQuery(t, h, "/v1/query", "text/plain", bad); r.status != 400 {
			t.Errorf("%s: %d %s", bad, r.status, r.body)
		}
	}
	if n := tempViews(t, db); n != 0 {
		t.Fatalf("%d temporary views left", n)
	}
}

// NDJSON tables (--transform none) read their overflowed paths as
// columns too, from _overflow_str and the like.
func TestQueryKeysNDJSON(t *testing.T) {
	dir := t.TempDir()
	db, err := ingest.Open(filepath.Join(dir, "n.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.ColumnDensity = shred.DefaultDensity
	db.YoungColumns = 0 // the keys' columns by density alone: overflowed and promoted keys
	var lines []string
	for i := range 30 {
		line := fmt.Sprintf(`{"id":%d`, i)
		if i < 3 {
			line += fmt.Sprintf(`,"user":{"name":"u%d","n":%d},"flag":%v`, i, i*10, i == 1)
		}
		lines = append(lines, line+"}")
	}
	file := filepath.Join(dir, "events.jsonl")
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	in, err := ingest.StatInputs([]string{file})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Load(context.Background(), in, ingest.Options{Transform: "none", Table: "events"}); err != nil {
		t.Fatal(err)
	}
	var overflowed string
	if err := db.SQL.QueryRow(`SELECT string_agg(column_name || ':' || type, ' ' ORDER BY column_name) FROM shredduck_columns WHERE table_name = 'events' AND overflow`).Scan(&overflowed); err != nil {
		t.Fatal(err)
	}
	if overflowed != "flag:BOOLEAN user.n:BIGINT user.name:VARCHAR" {
		t.Fatalf("overflowed keys: %s", overflowed)
	}
	body, err := Local(context.Background(), db, `SELECT id, "user.name", "user.n", flag FROM events WHERE "user.n" IS NOT NULL ORDER BY "user.name" DESC`)
	if err != nil {
		t.Fatal(err)
	}
	checkKeysAnswer(t, "ndjson", body, `["BIGINT","VARCHAR","BIGINT","BOOLEAN"]`, `[[2,"u2",20,false],[1,"u1",10,true],[0,"u0",0,false]]`)
	if n := tempViews(t, db); n != 0 {
		t.Fatalf("%d temporary views left", n)
	}
}

// A key with a stored column and strays (docs/SCHEMA.md 5.6) reads, in
// shredduck query and on /v1/query, as its typed column under its name, a
// comparison with a number working, and as "<key>~stray" for the values
// in the overflow under it.
func TestQueryKeysStrays(t *testing.T) {
	type group = struct {
		resource map[string]string
		spans    []keysSpan
	}
	var ints, stray group
	ints.resource = map[string]string{"service.name": `{"stringValue":"svc"}`}
	stray.resource = ints.resource
	for i, v := range []string{"200", "503", "404"} {
		ints.spans = append(ints.spans, keysSpan{fmt.Sprint("s", i), map[string]string{"http.status_code": `{"intValue":"` + v + `"}`}})
	}
	stray.spans = []keysSpan{{"s3", map[string]string{"http.status_code": `{"stringValue":"notanint"}`}}}
	dir := t.TempDir()
	db, err := ingest.Open(filepath.Join(dir, "strays.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i, req := range []string{keysRequest([]group{ints}), keysRequest([]group{stray})} {
		file := filepath.Join(dir, fmt.Sprintf("load%d.json", i))
		if err := os.WriteFile(file, []byte(req), 0o644); err != nil {
			t.Fatal(err)
		}
		in, err := ingest.StatInputs([]string{file})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Load(context.Background(), in, ingest.Options{}); err != nil {
			t.Fatal(err)
		}
	}
	queries := []struct{ sql, types, rows string }{
		{`SELECT name, "http.status_code", "http.status_code~stray" FROM otel_traces ORDER BY name`,
			`["VARCHAR","BIGINT","VARCHAR"]`, `[["s0",200,null],["s1",503,null],["s2",404,null],["s3",null,"notanint"]]`},
		{`SELECT count(*) FROM otel_traces WHERE "http.status_code" >= 500`, `["BIGINT"]`, `[[1]]`},
		{`SELECT count("http.status_code"), count("http.status_code~stray") FROM otel_traces`, `["BIGINT","BIGINT"]`, `[[3,1]]`},
	}
	for _, q := range queries {
		body, err := Local(context.Background(), db, q.sql)
		if err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
		checkKeysAnswer(t, q.sql, body, q.types, q.rows)
	}
	if err := LockDown(db); err != nil {
		t.Fatal(err)
	}
	h := NewHandler(db, Config{})
	for _, q := range queries {
		r := postQuery(t, h, "/v1/query", "text/plain", q.sql)
		if r.status != 200 {
			t.Fatalf("%s: %d %s", q.sql, r.status, r.body)
		}
		checkKeysAnswer(t, q.sql, []byte(r.body), q.types, q.rows)
	}
}
