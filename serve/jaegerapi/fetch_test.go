package jaegerapi_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/serve"
	"github.com/shredduck/shredduck/serve/jaegerapi"
	"github.com/shredduck/shredduck/serve/sqlpolicy"
)

// TestSchemaReadAgain: lookups and searches run on the catalog's keys as
// an earlier request read them (fetch.go), and notice when they changed
// since: a key that got its column after that is read and searched.
func TestSchemaReadAgain(t *testing.T) {
	s := startServer(t, serve.AckCommit, "secret")
	span := func(id int, key string) ptrace.Traces {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "svc")
		sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		sp.SetTraceID(traceID(id))
		sp.SetSpanID(spanID(id, 0))
		sp.SetName("op")
		sp.SetStartTimestamp(pcommon.Timestamp(1_700_000_000_000_000_000 + id))
		sp.SetEndTimestamp(pcommon.Timestamp(1_700_000_000_000_000_500 + id))
		sp.Attributes().PutStr(key, "v"+key)
		return td
	}
	// With --ack commit a span is in the table when its POST is answered.
	postTraces(t, s.url, s.token, span(1, "first.key"))
	if n := spanCount(t, s.url, s.token, "service=svc&start=0"); n != 1 {
		t.Fatalf("%d spans, want 1", n)
	}
	postTraces(t, s.url, s.token, span(2, "second.key"))
	// The lookup comes first after the second key: on the schema read
	// before it.
	if code, body := get(t, s.url, s.token, "/api/traces/"+traceID(2).String()); code != http.StatusOK || !strings.Contains(string(body), `"vsecond.key"`) {
		t.Errorf("the second trace: %d %s", code, body)
	}
	postTraces(t, s.url, s.token, span(3, "third.key"))
	if n := spanCount(t, s.url, s.token, "service=svc&start=0&tags="+url.QueryEscape(`{"third.key":"vthird.key"}`)); n != 1 {
		t.Errorf("a search for the third key found %d spans, want 1", n)
	}
}

// recorder is a Runner that keeps the queries it runs.
type recorder struct {
	jaegerapi.Runner
	mu      sync.Mutex
	queries []sqlpolicy.Query
}

func (r *recorder) RunBuilt(ctx context.Context, q sqlpolicy.Query, sink sqlpolicy.Sink) (sqlpolicy.Result, error) {
	r.mu.Lock()
	r.queries = append(r.queries, q)
	r.mu.Unlock()
	return r.Runner.RunBuilt(ctx, q, sink)
}

// take returns the queries run since the last take.
func (r *recorder) take() []sqlpolicy.Query {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.queries
	r.queries = nil
	return q
}

// TestLookupOnCurrentSchema: while the catalog stays as it was when the
// schema was read, a trace by id is one query and a search two, neither
// with the catalog's fingerprint; a table whose keys all have stored
// columns runs them without the key views (Query.Stored), one with
// overflowed keys with them. A key added since is read by the checked
// query, after which the lookups are plain again.
func TestLookupOnCurrentSchema(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stored bool
		opt    func(*ingest.DB)
	}{
		{"stored", true, func(db *ingest.DB) { db.ColumnDensity = 0 }},
		{"overflowed", false, func(db *ingest.DB) { db.YoungColumns, db.ColumnDensity = 0, 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			s := startServerRunner(t, serve.AckCommit, "", sqlpolicy.Config{}, func(r jaegerapi.Runner) jaegerapi.Runner {
				rec.Runner = r
				return rec
			}, tc.opt)
			base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
			tds := genTraces(base, 4)
			for _, td := range tds {
				postTraces(t, s.url, "", td)
			}
			id := tds[1].ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceID().String()
			lookup := "/api/traces/" + id
			if code, body := get(t, s.url, "", lookup); code != http.StatusOK {
				t.Fatalf("%d %s", code, body)
			}
			rec.take() // the schema read, and the checked query
			check := func(what string, want int, checked bool) {
				t.Helper()
				qs := rec.take()
				if len(qs) != want {
					t.Errorf("%s: %d queries, want %d", what, len(qs), want)
				}
				for _, q := range qs {
					if hasFP := strings.Contains(q.SQL, "hash("); hasFP != checked {
						t.Errorf("%s: fingerprint %v, want %v: %s", what, hasFP, checked, q.SQL)
					}
					if !checked && q.Stored != tc.stored {
						t.Errorf("%s: Stored %v, want %v", what, q.Stored, tc.stored)
					}
				}
			}
			if code, body := get(t, s.url, "", lookup); code != http.StatusOK || !strings.Contains(string(body), id) {
				t.Fatalf("%d %s", code, body)
			}
			check("a trace by id", 1, false)
			if code, body := get(t, s.url, "", "/api/traces?service=frontend&lookback=2h&limit=3"); code != http.StatusOK || strings.Count(string(body), `"traceID"`) < 3 {
				t.Fatalf("%d %s", code, body)
			}
			check("a search", 2, false)

			td := ptrace.NewTraces()
			rs := td.ResourceSpans().AppendEmpty()
			rs.Resource().Attributes().PutStr("service.name", "frontend")
			sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
			sp.SetTraceID(traceID(900))
			sp.SetSpanID(spanID(900, 0))
			sp.SetName("late")
			sp.SetStartTimestamp(pcommon.NewTimestampFromTime(base))
			sp.SetEndTimestamp(pcommon.NewTimestampFromTime(base.Add(time.Millisecond)))
			sp.Attributes().PutStr("late.key", "late-value")
			postTraces(t, s.url, "", td)
			late := traceID(900).String()
			if code, body := get(t, s.url, "", "/api/traces/"+late); code != http.StatusOK || !strings.Contains(string(body), "late-value") {
				t.Fatalf("the late key's trace: %d %s", code, body)
			}
			qs := rec.take()
			if len(qs) < 2 || !strings.Contains(qs[len(qs)-1].SQL, "hash(") {
				t.Errorf("after a new key: %d queries, the last not checked", len(qs))
			}
			if code, body := get(t, s.url, "", "/api/traces/"+late); code != http.StatusOK || !strings.Contains(string(body), "late-value") {
				t.Fatalf("the late key's trace again: %d %s", code, body)
			}
			check("a trace by id on the schema read again", 1, false)
		})
	}
}

// TestRowidKey: the spans of several traces are read by DuckDB's rowid
// (tracesByID), unless a key stored as a column "rowid" hides it: a
// search then still answers every span of the traces it finds.
func TestRowidKey(t *testing.T) {
	s := startServer(t, serve.AckCommit, "")
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "svc")
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	for i := range 3 {
		for j := range 2 {
			sp := spans.AppendEmpty()
			sp.SetTraceID(traceID(i))
			sp.SetSpanID(spanID(i, j))
			sp.SetName("op")
			sp.SetStartTimestamp(pcommon.Timestamp(1_700_000_000_000_000_000 + 1000*i + j))
			sp.SetEndTimestamp(pcommon.Timestamp(1_700_000_000_000_001_000 + 1000*i + j))
			if j == 0 {
				sp.Attributes().PutInt("rowid", int64(100+i))
			}
		}
	}
	postTraces(t, s.url, "", td)
	if n := spanCount(t, s.url, "", "service=svc&start=0&limit=20"); n != 6 {
		t.Errorf("a search found %d spans, want 6", n)
	}
}
