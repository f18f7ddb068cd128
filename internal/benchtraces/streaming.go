package benchtraces

import (
	"fmt"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// The streaming benchmark's span shapes (bench/streaming): a server span
// and a client (database) child per pair, with the attributes an
// instrumented HTTP service sets. Its SDK senders make them with the
// OpenTelemetry SDK, its light sender with StreamingRequest.
var (
	StreamRoutes  = []string{"/api/items/{id}", "/api/users/{id}", "/api/orders", "/healthz", "/api/search", "/api/cart/{id}/checkout"}
	StreamMethods = []string{"GET", "GET", "POST", "GET", "GET", "PUT"}
	StreamTables  = []string{"items", "users", "orders", "sessions"}
)

// StreamingRequest returns spans start .. start+n-1 as the request worker
// w of the streaming benchmark's light sender sends: ids from the span's
// number, times from t0 (Unix nanoseconds).
func StreamingRequest(start int64, n, w int, t0 int64) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	ra := rs.Resource().Attributes()
	ra.PutStr("service.name", fmt.Sprintf("bench-svc-%d", w%4))
	ra.PutStr("service.instance.id", fmt.Sprintf("worker-%d", w))
	ra.PutStr("host.name", "bench-host")
	ra.PutStr("deployment.environment", "bench")
	ra.PutStr("telemetry.sdk.language", "go")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("shredduck/bench/streaming")
	ss.Scope().SetVersion("1.0.0")
	id := func(i int64) pcommon.SpanID {
		return pcommon.SpanID{byte(i >> 56), byte(i >> 48), byte(i >> 40), byte(i >> 32), byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)}
	}
	for j := range n {
		i := start + int64(j)
		k := int(i/2) % len(StreamRoutes)
		s := ss.Spans().AppendEmpty()
		s.SetTraceID(pcommon.TraceID{byte(i >> 56), byte(i >> 48), byte(i >> 40), byte(i >> 32), byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i), 0xbe, 0xec, 1})
		s.SetSpanID(id(i))
		s.SetStartTimestamp(pcommon.Timestamp(t0 + i*1000))
		s.SetEndTimestamp(pcommon.Timestamp(t0 + i*1000 + 250_000))
		a := s.Attributes()
		if i%2 == 0 {
			status := 200
			if i%97 == 0 {
				status = 500
			}
			s.SetName(StreamMethods[k] + " " + StreamRoutes[k])
			s.SetKind(ptrace.SpanKindServer)
			a.PutStr("http.request.method", StreamMethods[k])
			a.PutStr("http.route", StreamRoutes[k])
			a.PutStr("url.scheme", "http")
			a.PutInt("http.response.status_code", int64(status))
			a.PutStr("server.address", "api.example.com")
			a.PutInt("server.port", 8080)
			a.PutStr("client.address", "10.0.0."+strconv.Itoa(w))
			a.PutInt("user.id", i%10007)
			a.PutDouble("app.cart.total", float64(i%1000)/7)
			a.PutBool("app.cache.hit", i%3 == 0)
		} else {
			tbl := StreamTables[k%len(StreamTables)]
			s.SetName("SELECT " + tbl)
			s.SetKind(ptrace.SpanKindClient)
			s.SetParentSpanID(id(i - 1))
			a.PutStr("db.system.name", "postgresql")
			a.PutStr("db.collection.name", tbl)
			a.PutStr("db.query.text", "SELECT * FROM "+tbl+" WHERE id = $1")
			a.PutStr("db.namespace", "shop")
			a.PutInt("db.response.returned_rows", i%50)
		}
	}
	return td
}
