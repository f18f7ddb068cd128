package sqlpolicy

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shredduck/shredduck/ingest"
)

// tracesTestdata is the traces test data: otel_traces of a few spans.
const tracesTestdata = "../../testdata/otlp/otlp2parquet/traces.jsonl"

// tracesPolicy is a policy on a locked-down database holding the traces
// test data, as a server's.
func tracesPolicy(t *testing.T, cfg Config) *Policy {
	t.Helper()
	db, err := ingest.Open(filepath.Join(t.TempDir(), "q.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.ColumnDensity = 0 // every key a column, as /v1/query's tests have them
	in, err := ingest.StatInputs([]string{tracesTestdata})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Load(context.Background(), in, ingest.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := LockDown(db); err != nil {
		t.Fatal(err)
	}
	return New(db, cfg)
}

// runSQL runs one query under p, as /v1/query does, and drops its rows.
func runSQL(p *Policy, sql string) error {
	var sink rowsSink
	_, err := p.Run(context.Background(), Query{SQL: sql}, &sink)
	return err
}

// The size rules refuse, before anything is prepared, what would build
// values beyond DuckDB's memory limit or take long uninterruptibly, and
// pass what analyses need.
func TestQuerySizeRules(t *testing.T) {
	p := tracesPolicy(t, Config{Timeout: 20 * time.Second})
	refused := []struct{ sql, why string }{
		{"SELECT length(repeat('x', 1500000000))", "from its constants"},
		{"SELECT levenshtein(repeat('a', 20000), repeat('b', 20000))", "levenshtein(): argument 1"},
		{"SELECT damerau_levenshtein('x', repeat('b', 5000))", "damerau_levenshtein(): argument 2"},
		{"SELECT length(repeat(i::VARCHAR, 1000000)) FROM range(3000) t(i)", "copies of a stored value"},
		{"SELECT repeat(name, 100) FROM otel_traces", "copies of a stored value"},
		{"SELECT repeat('*', i) FROM range(10) t(i)", "repeat(): argument 2 must be a number literal"},
		{"SELECT repeat('*', 10 * 10)", "repeat(): argument 2 must be a number literal"},
		{"SELECT lpad('x', 2000000000, 'y')", "from its constants"},
		{"SELECT rpad(name, n, 'y') FROM otel_traces, range(3) t(n)", "rpad(): argument 2"},
		{"SELECT range(1000000000)", "from its constants"},
		{"SELECT unnest(generate_series(1, 1000000000))", "from its constants"},
		{"SELECT range(i) FROM range(3) t(i)", "range() as a value needs number literals"},
		{"SELECT list_resize([1], 100000000)", "from its constants"},
		{"SELECT array_to_string(range(60000), repeat('x', 60000))", "from its constants"},
		{"SELECT list_transform(range(60000), lambda x: repeat('x', 60000))", "from its constants"},
		{"SELECT [repeat('x', 60000) FOR x IN range(60000)]", "from its constants"},
		{"SELECT printf('%1000000000d', 1)", "printf(): a width or precision of 1000000000"},
		{"SELECT printf('%.*f', 1000000000, 1.5)", "given by an argument"},
		{"SELECT printf(name, 1) FROM otel_traces", "the format must be a string literal"},
		{"SELECT format('{:>1000000000}', 'x')", "format(): a width or precision"},
		{"SELECT format('{:>{}}', 'x', 1000000000)", "given by an argument"},
		{"SELECT bar(1, 0, 10, 1000000000)", "from its constants"},
		{"SELECT bitstring('1', 1500000000000)", "from its constants"},
		{"SELECT to_base(1, 2, 1500000000)", "from its constants"},
		{"SELECT replace(repeat('a', 100000), 'a', repeat('b', 1000))", "from its constants"},
		{"SELECT replace(name, 'a', repeat('b', 1000)) FROM otel_traces", "copies of a stored value"},
		{"SELECT concat_ws(repeat('x', 60000), " + strings.Repeat("name, ", 40) + "name) FROM otel_traces", "from its constants"},
		{"SELECT list_reduce(list_transform(range(40), lambda x: 'ab'), lambda acc, x: acc || acc)", "accumulator acc 2 times"},
		{"SELECT * REPLACE (repeat('x', 1500000000) AS a) FROM (SELECT 1 AS a)", "from its constants"},
		{"SELECT * FROM query('SELECT length(repeat(''x'', 1500000000))')", "from its constants"},
		{"SELECT * FROM query('SELECT * FROM query(''SELECT repeat(''''x'''', 1500000000)'')')", "from its constants"},
		{"SELECT * FROM query(repeat('SELECT 1', 1))", "query() takes a string literal"},
		{"SELECT * FROM range(length(repeat('x', 1500000000)))", "from its constants"},
		{"SELECT 1 LIMIT length(repeat('x', 1500000000))", "from its constants"},
		{"SELECT count(*) FILTER (WHERE repeat('x', 1500000000) = '') FROM range(3)", "from its constants"},
		{"SELECT string_agg(name ORDER BY repeat(name, 1000)) FROM otel_traces", "copies of a stored value"},
		{"SELECT sum(x) OVER (PARTITION BY repeat('x', 1500000000)) FROM range(3) t(x)", "from its constants"},
		{"SELECT sleep_ms(100000)", "sleep_ms() is not allowed"},
		{"SELECT REPEAT('x', 1500000000)", "from its constants"},
		{"SELECT system.main.repeat('x', 1500000000)", "from its constants"},
		{"SELECT (SELECT repeat('x', 1500000000))", "from its constants"},
		{"WITH t AS (SELECT repeat('x', 1500000000) AS s) SELECT length(s) FROM t", "from its constants"},
		{"DESCRIBE SELECT repeat('x', 1500000000)", "from its constants"},
		{"SUMMARIZE SELECT repeat('x', 1500000000)", "from its constants"},
		{"INSERT INTO otel_traces (name) VALUES (repeat('x', 1500000000))", "only SELECT statements are allowed (got INSERT)"},
		{"PIVOT (SELECT repeat('x', 1500000000) AS a) ON a", "only SELECT statements are allowed (got PIVOT)"},
	}
	for _, c := range refused {
		start := time.Now()
		err := runSQL(p, c.sql)
		if !isKind(err, KindRefused) && !isKind(err, KindInvalid) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%.80s: %v, want a refusal saying %q", c.sql, err, c.why)
		}
		// Seconds, not milliseconds: the bound is against constant folding
		// that runs for minutes, on a machine that may be busy.
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%.80s: refused after %v", c.sql, d)
		}
	}
	allowed := []string{
		"SELECT repeat('-', 80), repeat([1, 2], 3), lpad('7', 3, '0'), rpad('a', 5, '.'), bar(5, 0, 10), bar(5, 0, 10, 20)",
		"SELECT printf('%5.2f|%-10s|%%|%d', 3.14159, 'x', 2024), format('{:>10}|{}|{{}}|{:.3f}', 'x', 2024, 1.5)",
		"SELECT range(10), generate_series(1, 10, 2), list_resize([1], 3), equi_width_bins(0, 100, 10, true)",
		"SELECT levenshtein('kitten', 'sitting'), jaro_winkler_similarity(name, 'op') FROM otel_traces",
		"SELECT list_transform([1, 2, 3], lambda x: x + 1), list_reduce([1, 2, 3], lambda a, x: a + x), [x * 2 FOR x IN range(5)]",
		"SELECT list_transform(string_split(name, '.'), lambda s: upper(s) || '!') FROM otel_traces",
		"SELECT replace(name, '.', '_'), regexp_replace(name, '[aeiou]', '', 'g'), array_to_string(['a', 'b'], ', ') FROM otel_traces",
		"SELECT concat_ws(', ', name, kind, trace_id) FROM otel_traces",
		"SELECT count(*) FROM range(1000000)",
		"SELECT * FROM generate_series(1, 1000000000) LIMIT 3",
		"SELECT upper(name), to_json(name), hex(name) FROM otel_traces",
		"SELECT * FROM query('SELECT 1 AS x')",
		"SELECT * REPLACE (upper(name) AS name) FROM otel_traces",
		"SELECT quantile_cont(duration_ns, 0.99) FROM otel_traces",
		"DESCRIBE otel_traces",
		"SHOW TABLES",
		"SUMMARIZE SELECT 1 AS a",
		"FROM (SELECT 'a' AS k, 1 AS v) PIVOT (sum(v) FOR k IN ('a', 'b'))",
		"WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t WHERE n < 10) SELECT sum(n) FROM t",
	}
	for _, q := range allowed {
		start := time.Now()
		if err := runSQL(p, q); err != nil {
			t.Errorf("%.80s: %v", q, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%.60s: %v", q, d)
		}
	}
}

// A query that outlives its timeout keeps its slot until DuckDB has
// stopped, and it stops: the next query gets the slot at once. Constants
// that would keep DuckDB folding long after the 504 are refused up front.
func TestQueryTimeoutFreesSlot(t *testing.T) {
	p := tracesPolicy(t, Config{Timeout: 400 * time.Millisecond, MaxConcurrent: 1})
	for _, q := range []string{
		"SELECT count(*) FROM range(1000000000000)",
		"SELECT levenshtein(repeat('a', 60000), repeat('b', 60000))",
		"SELECT max(levenshtein(repeat('a', 4000), i::VARCHAR)) FROM range(1000000000) t(i)",
	} {
		start := time.Now()
		if err := runSQL(p, q); err == nil || time.Since(start) > 2*time.Second {
			t.Errorf("%.60s: %v after %v", q, err, time.Since(start))
		}
		start = time.Now()
		for err := runSQL(p, "SELECT 42"); err != nil; err = runSQL(p, "SELECT 42") {
			if time.Since(start) > 3*time.Second {
				t.Fatalf("%.60s: the slot is still taken after %v: %v", q, time.Since(start), err)
			}
		}
		// Once the slot is back DuckDB has stopped: nothing burns CPU. (Not
		// measured from the answer on: the loop above spins while it waits,
		// and a query runs niced, so it waits longer on a busy machine.)
		cpu, idle := cpuTime(), time.Now()
		time.Sleep(500 * time.Millisecond)
		if used := cpuTime() - cpu; used > time.Duration(float64(time.Since(idle))*0.5) {
			t.Errorf("%.60s: %v of CPU in the %v after the slot came back", q, used, time.Since(idle))
		}
	}
}

// cpuTime is the process's CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
