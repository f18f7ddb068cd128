package jaegerapi_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/shredduck/shredduck/serve"
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
