package jaegerapi

import (
	"fmt"
	"sort"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// warningsAttribute is where Jaeger's v2 query service puts a span's
// warnings (a list of strings).
const warningsAttribute = "@jaeger@warnings"

func addWarning(sp ptrace.Span, w string) {
	v, ok := sp.Attributes().Get(warningsAttribute)
	if ok && v.Type() == pcommon.ValueTypeSlice {
		v.Slice().AppendEmpty().SetStr(w)
		return
	}
	sp.Attributes().PutEmptySlice(warningsAttribute).AppendEmpty().SetStr(w)
}

// adjustOTLP does to td what Jaeger's v2 query service does to a trace it
// answers on /api/v3 (its standard adjusters, clock-skew adjustment off):
// attributes sorted by key and events by name, the clock-skew pass's
// warnings, the SDK's attributes moved to the resource, links without a
// trace id removed with a warning. Identical spans are not merged.
func adjustOTLP(td ptrace.Traces) {
	type located struct {
		span ptrace.Span
		res  pcommon.Resource
	}
	var spans []located
	for _, rs := range td.ResourceSpans().All() {
		sortMap(rs.Resource().Attributes())
		for _, ss := range rs.ScopeSpans().All() {
			sortMap(ss.Scope().Attributes())
			for _, sp := range ss.Spans().All() {
				sortMap(sp.Attributes())
				sp.Events().Sort(func(a, b ptrace.SpanEvent) bool { return a.Name() < b.Name() })
				for _, e := range sp.Events().All() {
					sortMap(e.Attributes())
				}
				for _, l := range sp.Links().All() {
					sortMap(l.Attributes())
				}
				spans = append(spans, located{sp, rs.Resource()})
			}
		}
	}
	nodes := map[pcommon.SpanID]*otlpNode{}
	var order []*otlpNode
	for _, s := range spans {
		if _, dup := nodes[s.span.SpanID()]; dup {
			addWarning(s.span, "duplicate span IDs; skipping clock skew adjustment")
			continue
		}
		n := &otlpNode{span: s.span, host: otlpHostKey(s.res)}
		nodes[s.span.SpanID()] = n
		order = append(order, n)
	}
	otlpSkewWarnings(nodes, order)
	for _, s := range spans {
		moveLibraryAttributes(s.span, s.res)
		links := s.span.Links()
		links.RemoveIf(func(l ptrace.SpanLink) bool {
			if l.TraceID().IsEmpty() {
				addWarning(s.span, "Invalid span link removed")
				return true
			}
			return false
		})
	}
}

type otlpNode struct {
	span     ptrace.Span
	children []*otlpNode
	host     string
}

func otlpSkewWarnings(nodes map[pcommon.SpanID]*otlpNode, order []*otlpNode) {
	var roots []*otlpNode
	for _, n := range order {
		pid := n.span.ParentSpanID()
		if pid.IsEmpty() {
			roots = append(roots, n)
			continue
		}
		if p, ok := nodes[pid]; ok {
			p.children = append(p.children, n)
			continue
		}
		addWarning(n.span, fmt.Sprintf("parent span ID=%s is not in the trace; skipping clock skew adjustment", pid))
		roots = append(roots, n)
	}
	var walk func(n, parent *otlpNode, host string, delta time.Duration, depth int)
	walk = func(n, parent *otlpNode, host string, delta time.Duration, depth int) {
		if depth > len(order) {
			return
		}
		if parent != nil && (n.host != host || n.host == "") {
			host, delta = n.host, otlpSkew(n.span, parent.span)
		}
		if delta != 0 {
			addWarning(n.span, fmt.Sprintf("clock skew adjustment disabled; not applying calculated delta of %v", delta))
		}
		for _, c := range n.children {
			walk(c, n, host, delta, depth+1)
		}
	}
	for _, r := range roots {
		walk(r, nil, r.host, 0, 0)
	}
}

func otlpSkew(child, parent ptrace.Span) time.Duration {
	ps, cs := parent.StartTimestamp().AsTime(), child.StartTimestamp().AsTime()
	pe, ce := parent.EndTimestamp().AsTime(), child.EndTimestamp().AsTime()
	pd, cd := pe.Sub(ps), ce.Sub(cs)
	if cd > pd {
		if cs.Before(ps) {
			return ps.Sub(cs)
		}
		return 0
	}
	if !cs.Before(ps) && !ce.After(pe) {
		return 0
	}
	return ps.Add((pd - cd) / 2).Sub(cs)
}

func otlpHostKey(res pcommon.Resource) string {
	a := res.Attributes()
	if v, ok := a.Get("host.id"); ok {
		return v.Str()
	}
	if v, ok := a.Get("host.ip"); ok {
		switch v.Type() {
		case pcommon.ValueTypeStr:
			return v.Str()
		case pcommon.ValueTypeSlice:
			if v.Slice().Len() > 0 {
				return v.Slice().At(0).AsString()
			}
		}
	}
	if v, ok := a.Get("host.name"); ok {
		return v.Str()
	}
	return ""
}

func moveLibraryAttributes(sp ptrace.Span, res pcommon.Resource) {
	for k := range libraryKeys {
		v, ok := sp.Attributes().Get(k)
		if !ok {
			continue
		}
		if old, ok := res.Attributes().Get(k); ok && !old.Equal(v) {
			addWarning(sp, "conflicting values between Span and Resource for attribute "+k)
			continue
		}
		v.CopyTo(res.Attributes().PutEmpty(k))
		sp.Attributes().Remove(k)
	}
}

func sortMap(m pcommon.Map) {
	type entry struct {
		k string
		v pcommon.Value
	}
	var es []entry
	for k, v := range m.All() {
		es = append(es, entry{k, v})
	}
	if sort.SliceIsSorted(es, func(i, j int) bool { return es[i].k < es[j].k }) {
		return
	}
	sort.Slice(es, func(i, j int) bool { return es[i].k < es[j].k })
	sorted := pcommon.NewMap()
	for _, e := range es {
		e.v.CopyTo(sorted.PutEmpty(e.k))
	}
	sorted.MoveTo(m)
}
