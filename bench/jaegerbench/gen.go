package main

// The data: deterministic traces of 5-50 spans over several services, as
// a Collector's batch processor forwards them (requests of about
// spansPerRequest spans, each holding the spans of consecutive traces
// grouped by resource: service and host).

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

const (
	// baseTime is the first trace's start: 2026-01-01T00:00:00Z.
	baseTime int64 = 1767225600_000_000_000
	// dataWindow is the time the traces' starts spread over, whatever
	// their number: a time-range search covers the same share of them.
	dataWindow int64 = 3600_000_000_000
	// meanSpans is the mean spans per trace (5-50, uniform).
	meanSpans       = 27.5
	minSpans        = 5
	maxSpans        = 50
	spansPerRequest = 1000
	customers       = 5000
	pcgStream       = 0x4a41454745524243 // "JAEGERBC"
)

// service is one service: its name and the span names of its spans.
type service struct {
	name string
	ops  []string
}

// services: the first is the root of every trace (an HTTP edge).
var services = []service{
	{"frontend", []string{"GET /", "GET /product/{id}", "POST /cart", "POST /checkout", "GET /search"}},
	{"cart", []string{"GetCart", "AddItem", "EmptyCart"}},
	{"checkout", []string{"PlaceOrder", "PrepareOrder"}},
	{"payments", []string{"Charge", "Refund", "fraud.Check"}},
	{"search", []string{"Query", "Suggest"}},
	{"auth", []string{"VerifyToken", "Login"}},
	{"inventory", []string{"Reserve", "GetStock"}},
	{"shipping", []string{"GetQuote", "ShipOrder"}},
	{"recommendation", []string{"ListRecommendations"}},
	{"currency", []string{"Convert", "GetSupportedCurrencies"}},
}

var dbTables = []string{"orders", "carts", "users", "products", "payments"}

// traceInfo is a generated trace: its id (32 hex digits) and spans.
type traceInfo struct {
	id       string
	spans    int
	customer string
}

// generator makes the traces one by one from its seed.
type generator struct {
	rng    *rand.Rand
	step   int64 // between traces' starts
	next   int   // index of the next trace
	traces []traceInfo
}

func newGenerator(spans int, seed uint64) *generator {
	n := max(1, int(float64(spans)/meanSpans))
	return &generator{rng: rand.New(rand.NewPCG(seed, pcgStream)), step: dataWindow / int64(n)}
}

// genSpan is a span being made, before it goes into a request.
type genSpan struct {
	svc, parent int
	id          pcommon.SpanID
	name        string
	kind        ptrace.SpanKind
	start, dur  int64
	status      int64
	db          bool
	host        int
}

// trace makes the next trace's spans (at most limit).
func (g *generator) trace(limit int) (pcommon.TraceID, []genSpan, traceInfo) {
	r := g.rng
	var tid pcommon.TraceID
	binary.BigEndian.PutUint64(tid[:8], r.Uint64())
	binary.BigEndian.PutUint64(tid[8:], r.Uint64())
	n := min(limit, minSpans+r.IntN(maxSpans-minSpans+1))
	info := traceInfo{id: tid.String(), spans: n, customer: "c-" + strconv.Itoa(r.IntN(customers))}
	start := baseTime + int64(g.next)*g.step + r.Int64N(g.step)
	g.next++
	// Root: 10 ms to 2 s, log-uniform.
	dur := int64(10e6 * math.Pow(200, r.Float64()))
	out := make([]genSpan, 0, n)
	out = append(out, genSpan{svc: 0, parent: -1, name: pick(r, services[0].ops), kind: ptrace.SpanKindServer, start: start, dur: dur})
	for len(out) < n {
		p := r.IntN(len(out))
		par := out[p]
		s := genSpan{parent: p, start: par.start + int64(r.Float64()*0.5*float64(par.dur))}
		s.dur = max(1000, int64((0.1+0.4*r.Float64())*float64(par.dur)))
		switch {
		case r.IntN(5) == 0: // a database call of the parent's service
			s.svc, s.db, s.kind = par.svc, true, ptrace.SpanKindClient
			s.name = "SELECT " + pick(r, dbTables)
		default:
			s.svc = 1 + r.IntN(len(services)-1)
			s.name = pick(r, services[s.svc].ops)
			s.kind = ptrace.SpanKindServer
			if s.svc == par.svc {
				s.kind = ptrace.SpanKindInternal
			}
		}
		out = append(out, s)
	}
	for i := range out {
		s := &out[i]
		binary.BigEndian.PutUint64(s.id[:], r.Uint64())
		s.host = r.IntN(4)
		if s.kind == ptrace.SpanKindServer {
			s.status = 200
			switch x := r.IntN(100); {
			case x < 2:
				s.status = 500
			case x < 3:
				s.status = 404
			}
		}
	}
	g.traces = append(g.traces, info)
	return tid, out, info
}

func pick(r *rand.Rand, l []string) string { return l[r.IntN(len(l))] }

// request collects the spans of consecutive traces by resource.
type request struct {
	td    ptrace.Traces
	res   map[int]ptrace.SpanSlice // service*4+host
	spans int
}

func newRequest() *request {
	return &request{td: ptrace.NewTraces(), res: map[int]ptrace.SpanSlice{}}
}

func (q *request) slice(svc, host int) ptrace.SpanSlice {
	k := svc*4 + host
	if s, ok := q.res[k]; ok {
		return s
	}
	rs := q.td.ResourceSpans().AppendEmpty()
	a := rs.Resource().Attributes()
	a.PutStr("service.name", services[svc].name)
	a.PutStr("service.version", "1.4.2")
	a.PutStr("host.name", services[svc].name+"-"+strconv.Itoa(host))
	a.PutStr("deployment.environment", "production")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("shredduck-jaegerbench")
	ss.Scope().SetVersion("1.0.0")
	q.res[k] = ss.Spans()
	return ss.Spans()
}

// add puts the spans of one trace into the request.
func (q *request) add(tid pcommon.TraceID, spans []genSpan, info traceInfo) {
	for _, s := range spans {
		sp := q.slice(s.svc, s.host).AppendEmpty()
		sp.SetTraceID(tid)
		sp.SetSpanID(s.id)
		if s.parent >= 0 {
			sp.SetParentSpanID(spans[s.parent].id)
		}
		sp.SetName(s.name)
		sp.SetKind(s.kind)
		sp.SetStartTimestamp(pcommon.Timestamp(s.start))
		sp.SetEndTimestamp(pcommon.Timestamp(s.start + s.dur))
		a := sp.Attributes()
		a.PutStr("customer.id", info.customer)
		switch {
		case s.db:
			a.PutStr("db.system", "postgresql")
			a.PutStr("db.name", "shop")
		case s.svc == 0:
			method, route, _ := strings.Cut(s.name, " ")
			a.PutStr("http.method", method)
			a.PutStr("http.route", route)
		default:
			a.PutStr("rpc.system", "grpc")
			a.PutStr("rpc.service", services[s.svc].name)
		}
		if s.status != 0 {
			a.PutInt("http.status_code", s.status)
		}
		if s.status == 500 {
			sp.Status().SetCode(ptrace.StatusCodeError)
			ev := sp.Events().AppendEmpty()
			ev.SetName("exception")
			ev.SetTimestamp(pcommon.Timestamp(s.start + s.dur/2))
			ev.Attributes().PutStr("exception.type", "TimeoutError")
			ev.Attributes().PutStr("exception.message", "upstream timed out")
		}
		q.spans++
	}
}

// written is what generate wrote.
type written struct {
	spans, requests int
	ndjsonBytes     int64
	protoBytes      int64
	traces          []traceInfo
	matches         []*matchSet // per search spec, in spec order
}

// generate writes spans spans as NDJSON of OTLP/JSON requests (for
// shredduck ingest) to ndjson and as length-prefixed OTLP/protobuf
// requests (for Jaeger's OTLP/HTTP receiver) to proto, and matches every
// span against specs.
func generate(spans int, seed uint64, ndjson, proto string, specs []searchSpec) (*written, error) {
	jf, err := os.Create(ndjson)
	if err != nil {
		return nil, err
	}
	defer jf.Close()
	pf, err := os.Create(proto)
	if err != nil {
		return nil, err
	}
	defer pf.Close()
	jw, pw := bufio.NewWriterSize(jf, 1<<20), bufio.NewWriterSize(pf, 1<<20)
	g := newGenerator(spans, seed)
	w := &written{}
	bySvc := make([][]int, len(services))
	for i, s := range specs {
		w.matches = append(w.matches, newMatchSet())
		bySvc[s.svc] = append(bySvc[s.svc], i)
	}
	jm, pm := ptrace.JSONMarshaler{}, ptrace.ProtoMarshaler{}
	req := newRequest()
	flush := func() error {
		if req.spans == 0 {
			return nil
		}
		b, err := jm.MarshalTraces(req.td)
		if err != nil {
			return err
		}
		jw.Write(append(b, '\n'))
		w.ndjsonBytes += int64(len(b) + 1)
		p, err := pm.MarshalTraces(req.td)
		if err != nil {
			return err
		}
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(p)))
		pw.Write(n[:])
		_, err = pw.Write(p)
		w.protoBytes += int64(len(p) + 4)
		w.requests++
		req = newRequest()
		return err
	}
	for w.spans < spans {
		tid, ss, info := g.trace(spans - w.spans)
		w.spans += len(ss)
		for _, s := range ss {
			for _, i := range bySvc[s.svc] {
				if specs[i].match(s, info) {
					w.matches[i].add(info.id, s.start)
				}
			}
		}
		req.add(tid, ss, info)
		if req.spans >= spansPerRequest {
			if err := flush(); err != nil {
				return nil, err
			}
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	w.traces = g.traces
	if err := jw.Flush(); err != nil {
		return nil, err
	}
	return w, pw.Flush()
}

// readProto calls f with each request of a file generate wrote.
func readProto(path string, f func([]byte) error) error {
	fh, err := os.Open(path)
	if err != nil {
		return err
	}
	defer fh.Close()
	r := bufio.NewReaderSize(fh, 1<<20)
	for {
		var n [4]byte
		if _, err := io.ReadFull(r, n[:]); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		b := make([]byte, binary.BigEndian.Uint32(n[:]))
		if _, err := io.ReadFull(r, b); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := f(b); err != nil {
			return err
		}
	}
}

// matchSet is the traces that have a span meeting a search's every
// condition, each with the latest start of those spans.
type matchSet struct {
	latest map[string]int64
}

func newMatchSet() *matchSet { return &matchSet{latest: map[string]int64{}} }

func (m *matchSet) add(id string, start int64) {
	if t, ok := m.latest[id]; !ok || start > t {
		m.latest[id] = start
	}
}

// top is shredduck's answer to the search: the limit traces with the
// latest matching spans, ties by id.
func (m *matchSet) top(limit int) []string {
	ids := make([]string, 0, len(m.latest))
	for id := range m.latest {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int {
		if m.latest[a] != m.latest[b] {
			if m.latest[a] > m.latest[b] {
				return -1
			}
			return 1
		}
		if a < b {
			return -1
		}
		return 1
	})
	return ids[:min(limit, len(ids))]
}
