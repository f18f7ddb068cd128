package jaegerapi_test

import (
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/serve"
)

// TestOverflowedKeysReadAlike: a table whose every key went to the
// overflow maps (no young columns, a density no key reaches) answers every
// trace and tag search as one whose keys all have stored columns: the
// spans are rebuilt from the maps through the policy's key views, and a
// tag is found in them.
func TestOverflowedKeysReadAlike(t *testing.T) {
	// Every key stored: past the young budget (shred.DefaultYoung) the
	// density rule would overflow the rarer keys of these traces.
	dense := startServer(t, serve.AckCommit, "", func(db *ingest.DB) { db.ColumnDensity = 0 })
	sparse := startServer(t, serve.AckCommit, "", func(db *ingest.DB) { db.YoungColumns, db.ColumnDensity = 0, 1 })
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	var ids []string
	for _, td := range append(genTraces(base, 6), readOTLP(t, "otel-proto-examples-trace.json"), readOTLP(t, "otlp2parquet/trace.pb")) {
		postTraces(t, dense.url, "", td)
		postTraces(t, sparse.url, "", td)
		ids = append(ids, td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceID().String())
	}
	paths := []string{
		"/api/traces?service=frontend&tag=cache.hit:true", "/api/traces?service=frontend&tag=sample.ratio:0.5",
		"/api/traces?service=frontend&tag=host.name:frontend-host&tag=http.method:GET", "/api/traces?service=frontend&tag=app.code:300",
		"/api/traces?service=frontend&tag=scope.team:shop", `/api/traces?service=frontend&tag=user.roles:["admin","r4"]`,
		"/api/traces?service=backend&tag=retry.count:2", "/api/traces?service=frontend-proxy&start=0&tag=http.status_code:200",
	}
	for _, id := range ids {
		paths = append(paths, "/api/traces/"+id, "/api/v3/traces/"+id)
	}
	if _, body := get(t, sparse.url, "", "/api/traces/"+ids[0]); !reflect.DeepEqual(normalize(t, "", body), normalize(t, "", body)) {
		t.Fatal("normalize is not deterministic")
	}
	var found int
	for _, p := range paths {
		dc, db := get(t, dense.url, "", p)
		sc, sb := get(t, sparse.url, "", p)
		want, got := normalize(t, p, db), normalize(t, p, sb)
		if dc != http.StatusOK || sc != dc || !reflect.DeepEqual(want, got) {
			t.Errorf("%s:\nstored columns %d %s\noverflow %d %s", p, dc, indent(want), sc, indent(got))
		}
		if m, ok := got.(map[string]any); ok && (len(asList(m["data"])) > 0 || len(asList(m["result"])) > 0) {
			found++
		}
	}
	if found != len(paths) {
		t.Errorf("%d of %d answers have traces", found, len(paths))
	}
	// Both tables hold what they should: the keys of one all stored, of
	// the other all overflowed.
	for _, c := range []struct {
		url      string
		overflow bool
		want     string
	}{{dense.url, true, "[[0]]"}, {sparse.url, false, "[[0]]"}, {sparse.url, true, "[[39]]"}} {
		q := fmt.Sprintf("SELECT count(*) FROM shredduck_columns WHERE table_name = 'otel_traces' AND overflow = %v", c.overflow)
		resp, err := http.Post(c.url+"/v1/query", "text/plain", strings.NewReader(q))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), c.want) {
			t.Errorf("%s: %s, want %s", q, body, c.want)
		}
	}
}
