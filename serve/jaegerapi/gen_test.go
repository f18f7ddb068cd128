package jaegerapi_test

import (
	"encoding/binary"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// genTraces makes n traces, one request each, the i-th starting i minutes
// after base: a frontend SERVER span calling a backend (CLIENT, then
// SERVER), which calls a database and sends to a queue (PRODUCER, then a
// worker's CONSUMER), and INTERNAL and UNSPECIFIED spans; every status,
// events, links to the trace before, and attributes of every kind on
// spans, scopes and resources.
func genTraces(base time.Time, n int) []ptrace.Traces {
	out := make([]ptrace.Traces, n)
	for i := range n {
		td := ptrace.NewTraces()
		start := base.Add(time.Duration(i) * time.Minute)
		tid := traceID(i)
		root := spanAt(addScope(addResource(td, "frontend", i), "frontend-lib"), tid, 1, 0, "GET /checkout", ptrace.SpanKindServer, start, 900*time.Millisecond+time.Duration(i)*100*time.Millisecond)
		root.Attributes().PutStr("http.method", "GET")
		root.Attributes().PutInt("app.code", int64(200+100*(i%4)))
		root.Attributes().PutBool("cache.hit", i%2 == 0)
		root.Attributes().PutDouble("sample.ratio", 0.25*float64(i%3))
		root.Attributes().PutEmptySlice("user.roles").FromRaw([]any{"admin", fmt.Sprint("r", i)})
		if i%4 == 3 {
			root.Status().SetCode(ptrace.StatusCodeError)
			root.Status().SetMessage("upstream failed")
		} else if i%4 == 1 {
			root.Status().SetCode(ptrace.StatusCodeOk)
		}
		ev := root.Events().AppendEmpty()
		ev.SetName("checkout.started")
		ev.SetTimestamp(pcommon.NewTimestampFromTime(start.Add(time.Millisecond)))
		ev.Attributes().PutStr("cart.id", fmt.Sprint("cart-", i))
		ev.Attributes().PutInt("cart.items", int64(i))
		if i > 0 {
			l := root.Links().AppendEmpty()
			l.SetTraceID(traceID(i - 1))
			l.SetSpanID(spanID(i-1, 1))
			l.Attributes().PutStr("link.reason", "retry of")
		}
		call := spanAt(root.parentScope, tid, 2, 1, "POST /reserve", ptrace.SpanKindClient, start.Add(10*time.Millisecond), 500*time.Millisecond)
		call.Attributes().PutStr("peer.service", "backend")

		be := addScope(addResource(td, "backend", i), "backend-lib")
		srv := spanAt(be, tid, 3, 2, "POST /reserve", ptrace.SpanKindServer, start.Add(20*time.Millisecond), 450*time.Millisecond)
		srv.Attributes().PutStr("http.method", "POST")
		srv.Attributes().PutInt("retry.count", int64(i%3))
		db := spanAt(be, tid, 4, 3, "SELECT stock", ptrace.SpanKindClient, start.Add(30*time.Millisecond), time.Duration(5+i*20)*time.Millisecond)
		db.Attributes().PutStr("db.system", "duckdb")
		if i%3 == 0 {
			db.Status().SetCode(ptrace.StatusCodeError)
			dbe := db.Events().AppendEmpty()
			dbe.SetName("exception")
			dbe.SetTimestamp(pcommon.NewTimestampFromTime(start.Add(31 * time.Millisecond)))
			dbe.Attributes().PutStr("exception.message", "lock timeout")
		}
		spanAt(be, tid, 5, 3, "publish reservation", ptrace.SpanKindProducer, start.Add(40*time.Millisecond), 3*time.Millisecond)
		spanAt(be, tid, 6, 3, "validate", ptrace.SpanKindInternal, start.Add(45*time.Millisecond), 2*time.Millisecond)

		wk := addScope(addResource(td, "worker", i), "worker-lib")
		// The consumer runs after the producer's trace ended: another
		// clock, so Jaeger's clock-skew pass has something to say.
		spanAt(wk, tid, 7, 5, "consume reservation", ptrace.SpanKindConsumer, start.Add(2*time.Second), 30*time.Millisecond)
		spanAt(wk, tid, 8, 7, "housekeeping", ptrace.SpanKindUnspecified, start.Add(2010*time.Millisecond), time.Millisecond)
		out[i] = td
	}
	return out
}

func traceID(i int) pcommon.TraceID {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], 0x5eed000000000000|uint64(i+1))
	binary.BigEndian.PutUint64(b[8:], 0xfeedface00000000|uint64(i+1))
	return b
}

func spanID(i, n int) pcommon.SpanID {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(i+1)<<16|uint64(n))
	return b
}

func addResource(td ptrace.Traces, service string, i int) ptrace.ResourceSpans {
	rs := td.ResourceSpans().AppendEmpty()
	a := rs.Resource().Attributes()
	a.PutStr("service.name", service)
	a.PutStr("deployment.environment", "test")
	a.PutInt("process.pid", int64(1000+len(service)))
	a.PutStr("telemetry.sdk.language", "go")
	if service != "worker" {
		a.PutStr("host.name", service+"-host")
		a.PutDouble("host.cpu.ratio", 0.5)
		a.PutBool("host.container", true)
	}
	return rs
}

// scope is a scope's spans, with the span the next child hangs on.
type scope struct {
	ss ptrace.ScopeSpans
}

func addScope(rs ptrace.ResourceSpans, name string) scope {
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName(name)
	ss.Scope().SetVersion("1.2.3")
	ss.Scope().Attributes().PutStr("scope.team", "shop")
	return scope{ss}
}

// span is a span with the scope it is in.
type span struct {
	ptrace.Span
	parentScope scope
}

func spanAt(sc scope, tid pcommon.TraceID, n, parent int, name string, kind ptrace.SpanKind, start time.Time, d time.Duration) span {
	sp := sc.ss.Spans().AppendEmpty()
	i := int(tid[15]) - 1
	sp.SetTraceID(tid)
	sp.SetSpanID(spanID(i, n))
	if parent > 0 {
		sp.SetParentSpanID(spanID(i, parent))
	}
	sp.SetName(name)
	sp.SetKind(kind)
	sp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
	sp.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(d)))
	return span{sp, sc}
}
