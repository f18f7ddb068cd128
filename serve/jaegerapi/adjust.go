package jaegerapi

import (
	"encoding/binary"
	"fmt"
	"net"
	"time"

	"github.com/jaegertracing/jaeger-idl/model/v1"
)

// adjust does to t what Jaeger's query service does to every trace it
// answers (its standard adjusters, with clock-skew adjustment off, its
// default), so that the UI shows the same spans: tags and log fields
// sorted, identical spans once, the warnings of the clock-skew pass,
// integer IPs as text, the SDK's tags on the process, empty references
// dropped and the parent reference first. Jaeger's fix for Zipkin's shared
// client/server span ids is not done: OTLP spans have ids of their own.
func adjust(t *model.Trace) {
	for _, sp := range t.Spans {
		sortFields(sp)
	}
	dedupeSpans(t)
	clockSkewWarnings(t)
	for _, sp := range t.Spans {
		ipTags(sp.Tags)
		ipTags(sp.Process.Tags)
		model.KeyValues(sp.Process.Tags).Sort()
		libraryTags(sp)
		dropEmptyReferences(sp)
		parentFirst(sp)
	}
}

func sortFields(sp *model.Span) {
	model.KeyValues(sp.Tags).Sort()
	model.KeyValues(sp.Process.Tags).Sort()
	for _, l := range sp.Logs {
		first := 0
		for i, f := range l.Fields {
			if f.Key == "event" && f.VType == model.StringType {
				l.Fields[0], l.Fields[i] = l.Fields[i], l.Fields[0]
				first = 1
				break
			}
		}
		if len(l.Fields) > 1 {
			model.KeyValues(l.Fields[first:]).Sort()
		}
	}
}

// dedupeSpans drops the spans equal to an earlier one (model.HashCode),
// as Jaeger's deduplication adjuster does.
func dedupeSpans(t *model.Trace) {
	// Equal spans have equal ids: only spans whose id repeats are hashed
	// (HashCode marshals the span, and was a tenth of a search's time).
	ids := make(map[model.SpanID]int, len(t.Spans))
	for _, sp := range t.Spans {
		ids[sp.SpanID]++
	}
	seen := map[uint64]bool{}
	kept := t.Spans[:0]
	for _, sp := range t.Spans {
		if ids[sp.SpanID] > 1 {
			h, _ := model.HashCode(sp)
			if seen[h] {
				continue
			}
			seen[h] = true
		}
		kept = append(kept, sp)
	}
	t.Spans = kept
}

type skewNode struct {
	span     *model.Span
	children []*skewNode
	host     string
}

// clockSkewWarnings adds the warnings of Jaeger's clock-skew adjuster
// with a maximum adjustment of 0: duplicate span ids, parents not in the
// trace, and the shift a child on another host would have needed to fit
// in its parent.
func clockSkewWarnings(t *model.Trace) {
	nodes := map[model.SpanID]*skewNode{}
	for _, sp := range t.Spans {
		if _, dup := nodes[sp.SpanID]; dup {
			sp.Warnings = append(sp.Warnings, "duplicate span IDs; skipping clock skew adjustment")
			continue
		}
		nodes[sp.SpanID] = &skewNode{span: sp, host: hostKey(sp)}
	}
	var roots []*skewNode
	for _, sp := range t.Spans {
		n := nodes[sp.SpanID]
		if n.span != sp {
			continue
		}
		pid := sp.ParentSpanID()
		if pid == 0 {
			roots = append(roots, n)
			continue
		}
		if p, ok := nodes[pid]; ok {
			p.children = append(p.children, n)
			continue
		}
		sp.Warnings = append(sp.Warnings, fmt.Sprintf("invalid parent span IDs=%s; skipping clock skew adjustment", pid))
		roots = append(roots, n)
	}
	var walk func(n, parent *skewNode, host string, delta time.Duration, depth int)
	walk = func(n, parent *skewNode, host string, delta time.Duration, depth int) {
		if depth > len(t.Spans) {
			return // a cycle of parents
		}
		if parent != nil && (n.host != host || n.host == "") {
			host, delta = n.host, skew(n.span, parent.span)
		}
		if delta != 0 {
			n.span.Warnings = append(n.span.Warnings, fmt.Sprintf("clock skew adjustment disabled; not applying calculated delta of %v", delta))
		}
		for _, c := range n.children {
			walk(c, n, host, delta, depth+1)
		}
	}
	for _, r := range roots {
		walk(r, nil, r.host, 0, 0)
	}
}

// skew is the shift that would put child inside parent (half the
// difference of their durations after the parent's start), 0 if it fits.
func skew(child, parent *model.Span) time.Duration {
	if child.Duration > parent.Duration {
		if child.StartTime.Before(parent.StartTime) {
			return parent.StartTime.Sub(child.StartTime)
		}
		return 0
	}
	pend, cend := parent.StartTime.Add(parent.Duration), child.StartTime.Add(child.Duration)
	if !child.StartTime.Before(parent.StartTime) && !cend.After(pend) {
		return 0
	}
	return parent.StartTime.Add((parent.Duration - child.Duration) / 2).Sub(child.StartTime)
}

func hostKey(sp *model.Span) string {
	tag, ok := model.KeyValues(sp.Process.Tags).FindByKey("ip")
	if !ok {
		return ""
	}
	switch tag.VType {
	case model.StringType:
		return tag.VStr
	case model.Int64Type:
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(tag.Int64()))
		return net.IP(b[:]).String()
	case model.BinaryType:
		if l := len(tag.Binary()); l == 4 || l == 16 {
			return net.IP(tag.Binary()).String()
		}
	}
	return ""
}

// ipTags writes the numeric values of ip and peer.ipv4 as dotted quads.
func ipTags(tags []model.KeyValue) {
	for i, tag := range tags {
		if tag.Key != "ip" && tag.Key != "peer.ipv4" {
			continue
		}
		var v uint32
		switch tag.VType {
		case model.Int64Type:
			v = uint32(tag.Int64())
		case model.Float64Type:
			v = uint32(tag.Float64())
		default:
			continue
		}
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], v)
		tags[i] = model.String(tag.Key, fmt.Sprintf("%d.%d.%d.%d", b[0], b[1], b[2], b[3]))
	}
}

// libraryKeys are the SDK's attributes, which belong to the process.
var libraryKeys = map[string]bool{
	"telemetry.sdk.language": true, "telemetry.sdk.name": true, "telemetry.sdk.version": true,
	"telemetry.distro.name": true, "telemetry.distro.version": true,
}

func libraryTags(sp *model.Span) {
	kept := sp.Tags[:0]
	for _, tag := range sp.Tags {
		if libraryKeys[tag.Key] {
			sp.Process.Tags = append(sp.Process.Tags, tag)
			continue
		}
		kept = append(kept, tag)
	}
	sp.Tags = kept
	model.KeyValues(sp.Process.Tags).Sort()
}

func dropEmptyReferences(sp *model.Span) {
	var kept []model.SpanRef
	bad := false
	for _, ref := range sp.References {
		if ref.TraceID.High == 0 && ref.TraceID.Low == 0 {
			sp.Warnings = append(sp.Warnings, fmt.Sprintf("Invalid span reference removed %+v", ref))
			bad = true
			continue
		}
		kept = append(kept, ref)
	}
	if bad {
		sp.References = append(make([]model.SpanRef, 0, len(kept)), kept...)
	}
}

// parentFirst moves the first CHILD_OF reference in the span's trace (else
// its first reference in the trace) to the front.
func parentFirst(sp *model.Span) {
	child, other := -1, -1
	for i, ref := range sp.References {
		if ref.TraceID != sp.TraceID {
			continue
		}
		if ref.RefType == model.ChildOf {
			child = i
			break
		}
		if other == -1 {
			other = i
		}
	}
	i := child
	if i == -1 {
		i = other
	}
	if i > 0 {
		sp.References[0], sp.References[i] = sp.References[i], sp.References[0]
	}
}
