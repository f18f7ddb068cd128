//go:build e2e

package serve

import (
	"bytes"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/shred"
)

// schemaSpan is the OTLP/HTTP protobuf body of one span whose attribute
// crash.id is id, changed by edit.
func schemaSpan(id string, edit func(ptrace.Span)) []byte {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "schemacrash")
	s := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	s.SetName("op")
	var tid pcommon.TraceID
	var sid pcommon.SpanID
	copy(tid[:], fmt.Sprintf("%016s", id))
	copy(sid[:], fmt.Sprintf("%08s", id))
	s.SetTraceID(tid)
	s.SetSpanID(sid)
	s.SetStartTimestamp(pcommon.Timestamp(1_700_000_000_000_000_000))
	s.SetEndTimestamp(pcommon.Timestamp(1_700_000_000_000_000_500))
	s.Attributes().PutStr("crash.id", id)
	if edit != nil {
		edit(s)
	}
	b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		panic(err)
	}
	return b
}

// schemaPost sends one request and reports whether it was acknowledged;
// refused, the answer's status and body.
func schemaPost(client *http.Client, url, path, contentType string, body []byte) (bool, string, error) {
	resp, err := client.Post(url+path, contentType, bytes.NewReader(body))
	if err != nil {
		return false, "", err
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1000))
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK, resp.Status + " " + string(b), nil
}

// schemaLoad sends bodies from workers goroutines until every body is
// sent or the child dies; kill, when set, runs once after that many
// acknowledgements. It returns the ids acknowledged.
func schemaLoad(t *testing.T, child *e2eChild, path, contentType string, workers int, ids []string, body func(string) []byte, killAfter int) []string {
	t.Helper()
	client := &http.Client{Timeout: 60 * time.Second}
	var (
		mu     sync.Mutex
		acked  []string
		next   atomic.Int64
		once   sync.Once
		killed atomic.Bool
		wg     sync.WaitGroup
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(ids) {
					return
				}
				ok, answer, err := schemaPost(client, child.url, path, contentType, body(ids[i]))
				if killed.Load() {
					return // answered or not, the server is gone
				}
				if err != nil {
					t.Errorf("%s: %v", ids[i], err)
					return
				}
				if !ok {
					t.Errorf("%s refused: %s", ids[i], answer)
					continue
				}
				mu.Lock()
				acked = append(acked, ids[i])
				n := len(acked)
				mu.Unlock()
				if killAfter > 0 && n == killAfter {
					once.Do(func() {
						killed.Store(true)
						child.kill()
					})
				}
			}
		}()
	}
	wg.Wait()
	return acked
}

// schemaIDs returns n ids with prefix.
func schemaIDs(prefix string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s%05d", prefix, i)
	}
	return ids
}

// TestCrashSchemaChanges kills `shredduck serve` with SIGKILL right after
// every kind of committed schema change, each after a checkpointed
// restart (the case that left an unreplayable log), and during
// checkpoints and wide NDJSON loads. After each kill DuckDB alone must open
// the file, and after a restart every acknowledged record must be there
// exactly once.
func TestCrashSchemaChanges(t *testing.T) {
	bin := e2eBuildShredduck(t)
	const proto = "application/x-protobuf"
	plain := func(edit func(ptrace.Span)) func(string) []byte {
		return func(id string) []byte { return schemaSpan(id, edit) }
	}
	wide := func(id string) []byte {
		var sb strings.Builder
		fmt.Fprintf(&sb, `{"id": %q`, id)
		for k := range 5 {
			fmt.Fprintf(&sb, `, "%s_k%d": %d`, id, k, k) // 5 new columns a request
		}
		sb.WriteString("}\n")
		return []byte(sb.String())
	}
	type phase struct {
		path, contentType string
		body              func(string) []byte
		n, workers, kill  int // kill: after that many acks; 0: kill after all
	}
	cases := []struct {
		name   string
		table  string
		idCol  string
		flags  []string
		before phase // then a clean stop: checkpointed
		crash  phase // then SIGKILL
	}{
		{"new attribute key", "otel_traces", "crash.id", nil,
			phase{"/v1/traces", proto, plain(nil), 3, 1, 0},
			phase{"/v1/traces", proto, plain(func(s ptrace.Span) { s.Attributes().PutStr("late.key", "v") }), 3, 1, 0}},
		{"widening", "otel_traces", "crash.id", nil,
			phase{"/v1/traces", proto, plain(func(s ptrace.Span) { s.Attributes().PutDouble("w", 1.5) }), 3, 1, 0},
			phase{"/v1/traces", proto, plain(func(s ptrace.Span) { s.Attributes().PutStr("w", "text") }), 3, 1, 0}},
		{"first value of deferred columns", "otel_traces", "crash.id", nil,
			phase{"/v1/traces", proto, plain(nil), 3, 1, 0},
			phase{"/v1/traces", proto, plain(func(s ptrace.Span) {
				s.TraceState().FromRaw("k=v")
				e := s.Events().AppendEmpty()
				e.SetName("ev")
				e.Attributes().PutInt("n", 1)
			}), 3, 1, 0}},
		{"overflow", "otel_traces", "crash.id", []string{"--max-columns", "2"},
			phase{"/v1/traces", proto, plain(nil), 3, 1, 0},
			phase{"/v1/traces", proto, plain(func(s ptrace.Span) {
				for k := range 4 {
					s.Attributes().PutStr(fmt.Sprintf("over.%d", k), "v")
				}
			}), 3, 1, 0}},
		{"during checkpoints", "otel_traces", "crash.id", []string{"--checkpoint-threshold", "256KB"},
			phase{"/v1/traces", proto, plain(nil), 3, 1, 0},
			phase{"/v1/traces", proto, func(id string) []byte {
				return schemaSpan(id, func(s ptrace.Span) {
					s.Attributes().PutStr("key."+id[len(id)-2:], strings.Repeat("x", 2000))
				})
			}, 600, 4, 350}},
		// A key on a few spans is overflowed; on many, promoted (an ALTER
		// and a catalog update in a group commit), then the kill.
		{"promotion of an overflowed key", "otel_traces", "crash.id", []string{"--young-columns", "0"},
			phase{"/v1/traces", proto, plain(func(s ptrace.Span) { s.Attributes().PutInt("prom", 1) }), 3, 1, 0},
			phase{"/v1/traces", proto, plain(func(s ptrace.Span) { s.Attributes().PutInt("prom", 2) }), 400, 4, 300}},
		// A wide table, in the 2GB that all its keys as columns need.
		{"wide NDJSON load", "wide", "id", []string{"--memory-limit", "2GB"},
			phase{"/v1/ndjson/wide", "application/x-ndjson", wide, 2, 1, 0},
			phase{"/v1/ndjson/wide", "application/x-ndjson", wide, 200, 4, 100}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "s.duckdb")
			child := e2eStartChild(t, bin, db, c.flags...)
			want := schemaLoad(t, child, c.before.path, c.before.contentType, c.before.workers, schemaIDs("b", c.before.n), c.before.body, 0)
			if len(want) != c.before.n {
				t.Fatalf("%d of %d requests acknowledged before the crash phase\n%s", len(want), c.before.n, child.log())
			}
			child.stop()

			child = e2eStartChild(t, bin, db, c.flags...)
			acked := schemaLoad(t, child, c.crash.path, c.crash.contentType, c.crash.workers, schemaIDs("c", c.crash.n), c.crash.body, c.crash.kill)
			child.kill()
			if len(acked) == 0 || (c.crash.kill == 0 && len(acked) != c.crash.n) {
				t.Fatalf("%d of %d crash-phase requests acknowledged\n%s", len(acked), c.crash.n, child.log())
			}
			want = append(want, acked...)

			// DuckDB alone opens the file as the kill left it.
			raw, err := sql.Open("duckdb", db)
			if err == nil {
				err = raw.QueryRow("SELECT count(*) FROM " + shred.QuoteIdent(c.table)).Scan(new(int))
				raw.Close()
			}
			if err != nil {
				t.Fatalf("DuckDB cannot open the file after the kill: %v", err)
			}

			child = e2eStartChild(t, bin, db, c.flags...)
			child.stop()
			d, err := ingest.Open(db)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			counts := make(map[string]int)
			keyQuery(t, d, "SELECT "+shred.QuoteIdent(c.idCol)+", count(*) FROM "+shred.QuoteIdent(c.table)+" GROUP BY 1", nil, func(rows *sql.Rows) error {
				var id sql.NullString
				var n int
				err := rows.Scan(&id, &n)
				counts[id.String] = n
				return err
			})
			var bad []string
			for _, id := range want {
				if counts[id] != 1 {
					bad = append(bad, fmt.Sprintf("%s×%d", id, counts[id]))
				}
			}
			if len(bad) > 0 {
				t.Errorf("%d of %d acknowledged records not present exactly once: %v", len(bad), len(want), bad[:min(len(bad), 10)])
			}
			if strings.HasPrefix(c.name, "promotion") {
				var promoted bool
				if err := d.SQL.QueryRow(`SELECT promoted IS NOT NULL FROM shredduck_columns WHERE key = 'prom'`).Scan(&promoted); err != nil || !promoted {
					t.Errorf("prom was not promoted (%v): the case tests nothing", err)
				}
			}
			t.Logf("%d acknowledged records present once (%d stored)", len(want), len(counts))
		})
	}
}

// TestCrashAfterStart kills `shredduck serve` right after it is ready,
// on a new file (it has just created the routing tables) and on a file of
// an earlier release (it has just repaired and upgraded it): DuckDB alone
// opens the file, and a restarted server takes data.
func TestCrashAfterStart(t *testing.T) {
	bin := e2eBuildShredduck(t)
	old := func(t *testing.T, path string) {
		gunzipTo(t, filepath.Join("..", "testdata", "db", "shredduck-34ec44b.duckdb.gz"), path)
	}
	for name, prepare := range map[string]func(*testing.T, string){"new file": func(*testing.T, string) {}, "earlier release": old} {
		t.Run(name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "s.duckdb")
			prepare(t, db)
			child := e2eStartChild(t, bin, db)
			child.kill()
			raw, err := sql.Open("duckdb", db)
			if err == nil {
				err = raw.QueryRow("SELECT count(*) FROM otel_traces").Scan(new(int))
				raw.Close()
			}
			if err != nil {
				t.Fatalf("DuckDB cannot open the file after the kill: %v", err)
			}
			child = e2eStartChild(t, bin, db)
			acked := schemaLoad(t, child, "/v1/traces", "application/x-protobuf", 1, []string{"after00001"}, func(id string) []byte { return schemaSpan(id, nil) }, 0)
			child.stop()
			if len(acked) != 1 {
				t.Fatalf("the restarted server did not take a span\n%s", child.log())
			}
			d, err := ingest.Open(db)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			var n int
			keyQuery(t, d, `SELECT count(*) FROM otel_traces WHERE "crash.id" = 'after00001'`, nil, func(rows *sql.Rows) error { return rows.Scan(&n) })
			if n != 1 {
				t.Errorf("the span is there %d times", n)
			}
		})
	}
}
