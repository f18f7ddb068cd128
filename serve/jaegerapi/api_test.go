package jaegerapi_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/shredduck/shredduck/serve"
	"github.com/shredduck/shredduck/serve/sqlpolicy"
)

// TestSmoke: the official OTLP example, looked up by id and by service,
// behind the token.
func TestSmoke(t *testing.T) {
	s := startServer(t, serve.AckLog, "secret")
	postTraces(t, s.url, s.token, readOTLP(t, "otel-proto-examples-trace.json"))
	waitFor(t, "the example span", func() bool {
		return spanCount(t, s.url, s.token, "service=my.service&start=0") == 1
	})
	for _, p := range []string{"/api/services", "/api/services/my.service/operations", "/api/operations?service=my.service",
		"/api/traces/5b8efff798038103d269b633813fc60c", "/api/dependencies?endTs=1700000000000&lookback=100000000000",
		"/api/v3/services", "/api/v3/operations?service=my.service", "/api/v3/traces/5b8efff798038103d269b633813fc60c",
		"/api/v3/traces?query.start_time_min=2000-01-01T00:00:00Z&query.start_time_max=2100-01-01T00:00:00Z"} {
		code, body := get(t, s.url, s.token, p)
		t.Logf("%s: %d %s", p, code, body)
		if code != http.StatusOK {
			t.Errorf("%s: %d %s", p, code, body)
		}
	}
	if code, body := get(t, s.url, "", "/api/services"); code != http.StatusUnauthorized {
		t.Errorf("without the token: %d %s", code, body)
	}
	if code, body := get(t, s.url, s.token, "/api/traces/xyz"); code != http.StatusBadRequest || !strings.Contains(string(body), "invalid syntax") {
		t.Errorf("bad id: %d %s", code, body)
	}
}

// TestCutTrace: a trace larger than the query policy's row limit is
// answered with the spans that fit and a warning that says so, in both
// APIs, instead of an error or a silent part.
func TestCutTrace(t *testing.T) {
	s := startServerPolicy(t, serve.AckCommit, "", sqlpolicy.Config{MaxRows: 5})
	td := genTraces(time.Now().Add(-time.Hour), 1)[0] // 8 spans
	postTraces(t, s.url, "", td)
	id := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceID().String()
	code, body := get(t, s.url, "", "/api/traces/"+id)
	var r struct {
		Data []struct {
			Spans    []json.RawMessage `json:"spans"`
			Warnings []string          `json:"warnings"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil || code != http.StatusOK || len(r.Data) != 1 {
		t.Fatalf("%d %s", code, body)
	}
	if len(r.Data[0].Spans) != 5 || len(r.Data[0].Warnings) != 1 || !strings.Contains(r.Data[0].Warnings[0], "--query-max-rows") {
		t.Errorf("%d spans, warnings %q", len(r.Data[0].Spans), r.Data[0].Warnings)
	}
	// The catalog's keys (more than 5) are all read: the last keys seen
	// are there too.
	for _, tag := range []string{`"http.method"`, `"retry.count"`, `"db.system"`} {
		if !strings.Contains(string(body), tag) {
			t.Errorf("no tag %s in %s", tag, body)
		}
	}
	if code, body := get(t, s.url, "", "/api/v3/traces/"+id); code != http.StatusOK || !strings.Contains(string(body), "--query-max-rows") {
		t.Errorf("v3: %d %s", code, body)
	}
}

// A key's stray value (docs/SCHEMA.md 5.6: a string under a BIGINT key) is
// a tag of its span, as Jaeger shows it (the translator names the key
// http.response.status_code, docs/SERVE.md), and a tag search finds it.
func TestStrayTags(t *testing.T) {
	s := startServer(t, serve.AckLog, "secret")
	span := func(id int, value string) ptrace.Traces {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "svc")
		sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		sp.SetTraceID(traceID(id))
		sp.SetSpanID(spanID(id, 0))
		sp.SetName("op")
		sp.SetStartTimestamp(pcommon.Timestamp(1_700_000_000_000_000_000))
		sp.SetEndTimestamp(pcommon.Timestamp(1_700_000_000_000_000_500))
		if value == "" {
			sp.Attributes().PutInt("http.status_code", 500)
		} else {
			sp.Attributes().PutStr("http.status_code", value)
		}
		return td
	}
	postTraces(t, s.url, s.token, span(1, ""))
	waitFor(t, "the first span", func() bool { return spanCount(t, s.url, s.token, "service=svc&start=0") == 1 })
	postTraces(t, s.url, s.token, span(2, "notanint"))
	waitFor(t, "the stray's span", func() bool { return spanCount(t, s.url, s.token, "service=svc&start=0") == 2 })
	code, body := get(t, s.url, s.token, "/api/traces/"+traceID(2).String())
	if code != http.StatusOK || !strings.Contains(string(body), `"key":"http.response.status_code","type":"string","value":"notanint"`) {
		t.Errorf("the stray's trace: %d %s", code, body)
	}
	if n := spanCount(t, s.url, s.token, "service=svc&start=0&tags="+url.QueryEscape(`{"http.status_code":"notanint"}`)); n != 1 {
		t.Errorf("a tag search for the stray found %d spans, want 1", n)
	}
	if n := spanCount(t, s.url, s.token, "service=svc&start=0&tags="+url.QueryEscape(`{"http.status_code":"500"}`)); n != 1 {
		t.Errorf("a tag search for the integer found %d spans, want 1", n)
	}
}
