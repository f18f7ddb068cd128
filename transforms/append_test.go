package transforms

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/shredduck/shredduck/shred"
)

// Differential tests of shred.Batch.Append with the real decoders: the
// requests decoded into one batch must give the batch that decoding each
// into a batch of its own and appending those gives (serve's --ack log
// merges the door's batches so), whatever the attribute kinds, widenings,
// sparse keys, rejected records and batch reuse.

// appendGen writes OTLP/JSON requests whose attributes change kind from
// request to request: ints beyond 2^53 beside doubles, bools, bytes,
// arrays, kvlists, NULLs, duplicate keys in one record, and records that
// are rejected (a time after 2262) after their attributes touched the
// batch.
type appendGen struct {
	rng *rand.Rand
	sb  strings.Builder
	// keys the requests share; each request picks its own kinds for them.
	keys []string
	// dups lets a key come twice in one attribute list (the last wins,
	// but the kind the first widened its column to stays).
	dups bool
}

func newAppendGen(seed uint64) *appendGen {
	g := &appendGen{rng: rand.New(rand.NewPCG(seed, 7)), dups: seed%2 == 1}
	for i := range 4 + g.rng.IntN(6) {
		g.keys = append(g.keys, "k"+strconv.Itoa(i))
	}
	return g
}

const lateNS = `"18446744073709551615"` // after 2262: the record is rejected

// value writes an AnyValue of a random kind (kind < 0) or of kind.
func (g *appendGen) value(kind, depth int) {
	if kind < 0 {
		kind = g.rng.IntN(13)
	}
	sb := &g.sb
	switch kind {
	case 0:
		strs := []string{"", "x", "a\"b\\c", "é\u2028", "\u0000nul", "12", "true", "3.5", strings.Repeat("long", 40)}
		q, _ := json.Marshal(strs[g.rng.IntN(len(strs))])
		fmt.Fprintf(sb, `{"stringValue":%s}`, q)
	case 1, 2:
		ints := []int64{0, 1, -7, 1 << 53, 1<<53 + 1, -(1 << 53) - 1, 1 << 62, -1 << 63, 1<<63 - 1, 123456789}
		v := ints[g.rng.IntN(len(ints))]
		if g.rng.IntN(2) == 0 {
			fmt.Fprintf(sb, `{"intValue":"%d"}`, v)
		} else {
			fmt.Fprintf(sb, `{"intValue":%d}`, v)
		}
	case 3, 4:
		dbls := []string{"0.5", "-0.0", "1e20", "1e-7", "3", "2.5", `"NaN"`, `"Infinity"`, `"-Infinity"`, "9007199254740993", "1.7976931348623157e308"}
		fmt.Fprintf(sb, `{"doubleValue":%s}`, dbls[g.rng.IntN(len(dbls))])
	case 5:
		fmt.Fprintf(sb, `{"boolValue":%v}`, g.rng.IntN(2) == 0)
	case 6:
		raw := make([]byte, g.rng.IntN(6))
		for i := range raw {
			raw[i] = byte(g.rng.IntN(256))
		}
		fmt.Fprintf(sb, `{"bytesValue":%q}`, base64.StdEncoding.EncodeToString(raw))
	case 7:
		sb.WriteString(`{"arrayValue":{"values":[`)
		for i := range g.rng.IntN(4) {
			if i > 0 {
				sb.WriteByte(',')
			}
			if depth > 3 {
				g.value(1, depth+1)
			} else {
				g.value(-1, depth+1)
			}
		}
		sb.WriteString(`]}}`)
	case 8:
		sb.WriteString(`{"kvlistValue":{"values":[`)
		for i := range g.rng.IntN(3) {
			if i > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(sb, `{"key":"n%d","value":`, i)
			if depth > 3 {
				g.value(0, depth+1)
			} else {
				g.value(-1, depth+1)
			}
			sb.WriteByte('}')
		}
		sb.WriteString(`]}}`)
	case 9:
		sb.WriteString(`{}`) // no value: NULL
	case 10:
		sb.WriteString(`{"stringValue":null}`)
	default:
		g.value(g.rng.IntN(7), depth)
	}
}

// attrs writes a KeyValue list: shared keys of this request's kinds, a
// key on some records only, duplicates (the last wins), NULLs.
func (g *appendGen) attrs(kinds map[string]int, n int) {
	sb := &g.sb
	sb.WriteByte('[')
	used := map[string]bool{}
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		var key string
		kind := -1
		switch r := g.rng.IntN(10); {
		case r < 6:
			key = g.keys[g.rng.IntN(len(g.keys))]
			kind = kinds[key]
			if g.rng.IntN(8) == 0 {
				kind = -1 // a kind of its own in one record
			}
		case r < 8:
			key = "rare" + strconv.Itoa(g.rng.IntN(40))
		case r < 9:
			key = "every"
			kind = 0
		default:
			key = "big"
			kind = []int{1, 3}[g.rng.IntN(2)]
		}
		if !g.dups {
			if used[key] {
				key += "_" + strconv.Itoa(i)
			}
			used[key] = true
		}
		fmt.Fprintf(sb, `{"key":%q,"value":`, key)
		g.value(kind, 0)
		sb.WriteByte('}')
		if g.dups && g.rng.IntN(12) == 0 { // the same key again in the record
			fmt.Fprintf(sb, `,{"key":%q,"value":`, key)
			g.value(-1, 0)
			sb.WriteByte('}')
		}
	}
	sb.WriteByte(']')
}

func (g *appendGen) hex(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = "0123456789abcdef"[g.rng.IntN(16)]
	}
	if g.rng.IntN(20) == 0 {
		return strings.Repeat("0", n) // all zero: NULL
	}
	return string(b)
}

// record writes one span, log record or metric of tr; rejected puts a
// time after 2262 after its attributes.
func (g *appendGen) record(tr Transform, kinds map[string]int, i int) {
	sb := &g.sb
	reject := g.rng.IntN(9) == 0
	late := func(field string) {
		if reject {
			fmt.Fprintf(sb, `,%q:%s`, field, lateNS)
		}
	}
	nattrs := g.rng.IntN(7)
	switch tr {
	case Traces:
		fmt.Fprintf(sb, `{"traceId":%q,"spanId":%q,"name":"s%d","kind":%d,"startTimeUnixNano":"%d","attributes":`,
			g.hex(32), g.hex(16), i, g.rng.IntN(6), 1+g.rng.IntN(1e9))
		g.attrs(kinds, nattrs)
		late("endTimeUnixNano")
		if g.rng.IntN(3) == 0 {
			sb.WriteString(`,"events":[`)
			for j := range g.rng.IntN(3) {
				if j > 0 {
					sb.WriteByte(',')
				}
				fmt.Fprintf(sb, `{"name":"e%d","timeUnixNano":"%d","attributes":`, j, 1+g.rng.IntN(100))
				g.attrs(kinds, g.rng.IntN(3))
				sb.WriteByte('}')
			}
			sb.WriteByte(']')
		}
		if g.rng.IntN(4) == 0 {
			fmt.Fprintf(sb, `,"links":[{"traceId":%q,"spanId":%q,"attributes":`, g.hex(32), g.hex(16))
			g.attrs(kinds, g.rng.IntN(3))
			sb.WriteString(`}]`)
		}
		if g.rng.IntN(3) == 0 {
			fmt.Fprintf(sb, `,"status":{"code":%d,"message":"m%d"}`, g.rng.IntN(3), g.rng.IntN(3))
		}
		sb.WriteByte('}')
	case Logs:
		fmt.Fprintf(sb, `{"timeUnixNano":"%d","severityNumber":%d,"severityText":"INFO","body":`, 1+g.rng.IntN(1e9), g.rng.IntN(25))
		g.value(-1, 0)
		sb.WriteString(`,"attributes":`)
		g.attrs(kinds, nattrs)
		late("observedTimeUnixNano")
		fmt.Fprintf(sb, `,"traceId":%q,"spanId":%q}`, g.hex(32), g.hex(16))
	default:
		fmt.Fprintf(sb, `{"name":"m%d",`, g.rng.IntN(5))
		kind := []string{"gauge", "sum", "histogram", "summary"}[g.rng.IntN(4)]
		fmt.Fprintf(sb, `%q:{"dataPoints":[`, kind)
		for j := range 1 + g.rng.IntN(3) {
			if j > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString(`{"attributes":`)
			g.attrs(kinds, g.rng.IntN(5))
			if reject && j == 0 {
				fmt.Fprintf(sb, `,"timeUnixNano":%s`, lateNS)
			} else {
				fmt.Fprintf(sb, `,"timeUnixNano":"%d"`, 1+g.rng.IntN(1e9))
			}
			switch kind {
			case "gauge", "sum":
				fmt.Fprintf(sb, `,"asInt":"%d"`, g.rng.IntN(100))
			case "histogram":
				sb.WriteString(`,"count":"3","sum":1.5,"bucketCounts":["1","2"],"explicitBounds":[1.0]`)
			case "summary":
				sb.WriteString(`,"count":"2","sum":3,"quantileValues":[{"quantile":0.5,"value":1}]`)
			}
			sb.WriteByte('}')
		}
		sb.WriteString(`]}}`)
	}
}

// request writes one export request of tr: empty ones, blocks without
// records, and blocks of up to 150 records (past a sparse column's
// 64-value threshold, so that columns are padded within a request).
func (g *appendGen) request(tr Transform) []byte {
	g.sb.Reset()
	sb := &g.sb
	top, scopes, records := "resourceSpans", "scopeSpans", "spans"
	switch tr {
	case Logs:
		top, scopes, records = "resourceLogs", "scopeLogs", "logRecords"
	case Metrics:
		top, scopes, records = "resourceMetrics", "scopeMetrics", "metrics"
	}
	switch g.rng.IntN(12) {
	case 0:
		return []byte(`{}`)
	case 1:
		return []byte(`{"` + top + `":[]}`)
	case 2:
		return []byte(`{"` + top + `":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"none"}}]},"` + scopes + `":[{"` + records + `":[]}]}]}`)
	}
	kinds := map[string]int{}
	for _, k := range g.keys {
		kinds[k] = g.rng.IntN(11)
	}
	fmt.Fprintf(sb, `{%q:[`, top)
	n := 0
	for ri := range 1 + g.rng.IntN(3) {
		if ri > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`{"resource":{"attributes":`)
		g.attrs(kinds, g.rng.IntN(4))
		fmt.Fprintf(sb, `},%q:[`, scopes)
		for si := range 1 + g.rng.IntN(2) {
			if si > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString(`{"scope":{"name":"sc","attributes":`)
			g.attrs(kinds, g.rng.IntN(3))
			fmt.Fprintf(sb, `},%q:[`, records)
			count := []int{0, 1, 2, 5, 9, 70, 150}[g.rng.IntN(7)]
			for j := range count {
				if j > 0 {
					sb.WriteByte(',')
				}
				g.record(tr, kinds, n)
				n++
			}
			sb.WriteString(`]}`)
		}
		sb.WriteString(`]}`)
	}
	sb.WriteString(`]}`)
	return []byte(sb.String())
}

// appendReq is one request of a differential run.
type appendReq struct {
	data  []byte
	proto bool
}

func decodeReq(tr Transform, b *shred.Batch, r appendReq) (int, error) {
	if r.proto {
		return tr.AppendProto(b, r.data)
	}
	return tr.AppendJSON(b, r.data)
}

// batchLines renders a batch after Finish and Pad: its rows, Truncated,
// every core column's type and cells, and every dynamic column that holds
// a value, by level and key, with its type and cells (sorted), then the
// order of those keys.
func batchLines(t *testing.T, tr Transform, b *shred.Batch) []string {
	t.Helper()
	if err := finishPadded(b); err != nil {
		t.Fatal(err)
	}
	checkBatch(t, b)
	out := []string{fmt.Sprintf("rows %d, truncated %d", b.Rows, b.Truncated)}
	for i, c := range b.Core {
		var sb strings.Builder
		fmt.Fprintf(&sb, "core %s %s:", tr.Core()[i].Name, c.Type.SQL())
		for r := range c.Len {
			sb.WriteString(" " + cell(c, r))
		}
		out = append(out, sb.String())
	}
	var dyn, order []string
	for _, d := range b.Dyn {
		if d.Stray() {
			continue // with its key's column
		}
		var fam []*shred.DynColumn // those with values: an emptied one is no part of what is stored
		for _, m := range d.Family() {
			if m.Col.Nulls < m.Col.Len {
				fam = append(fam, m)
			}
		}
		if len(fam) > 1 {
			dyn = append(dyn, familyLine(d, fam))
			order = append(order, d.Level.String()+"/"+d.Key)
			continue
		}
		if len(fam) == 0 {
			continue
		}
		d = fam[0]
		var sb strings.Builder
		fmt.Fprintf(&sb, "%s %q %s:", d.Level, d.Key, d.Col.Type.SQL())
		for r := range d.Col.Len {
			sb.WriteString(" " + cell(d.Col, r))
		}
		dyn = append(dyn, sb.String())
		order = append(order, d.Level.String()+"/"+d.Key)
	}
	slices.Sort(dyn)
	out = append(out, dyn...)
	if appendCheckOrder {
		out = append(out, "order "+strings.Join(order, ","))
	}
	return out
}

// familyLine renders the batch columns of a key with strays (its column
// and columns of other kinds, shred's DynColumn.Family) as one: each row's
// value, of whichever column holds it, with its kind; BIGINT and DOUBLE as
// "number": a batch's column of exact integers and doubles is DOUBLE where
// the key's column took both, and the doubles' own one where a merged
// batch's column of the key holds integers beyond ±2^53 (the value and its
// text are the same).
func familyLine(d *shred.DynColumn, fam []*shred.DynColumn) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s %q with strays:", d.Level, d.Key)
	for r := range fam[0].Col.Len {
		c := "NULL"
		for _, m := range fam {
			if m.Col.IsValid(r) {
				kind, text := m.Col.Type.SQL(), cell(m.Col, r)
				if kind == "BIGINT" || kind == "DOUBLE" {
					kind = "number"
				}
				if f := m.Col.F64; m.Col.Type.Kind == shred.Double && f[r] == math.Trunc(f[r]) && math.Abs(f[r]) <= shred.MaxExactInt {
					text = strconv.FormatInt(int64(f[r]), 10)
				}
				c = kind + ":" + text
			}
		}
		sb.WriteString(" " + c)
	}
	return sb.String()
}

// appendCheckOrder also compares the order of the dynamic columns that
// hold values (the order ingest plans them in). Off: a merged batch has
// no column for a key whose first values were all NULL, or were in a
// rejected record, where a decoded one has it from then on, so the order
// differs (only an all-NULL column is missing: the cells are the same).
var appendCheckOrder = false

// firstDiff reports the first line where two renderings differ.
func firstDiff(got, want []string) string {
	for i := range max(len(got), len(want)) {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			at := 0 // show from a little before the first difference
			for at < min(len(g), len(w)) && g[at] == w[at] {
				at++
			}
			from := max(0, at-150)
			return fmt.Sprintf("line %d, from byte %d\n got %.600s\nwant %.600s", i, from, g[min(from, len(g)):], w[min(from, len(w)):])
		}
	}
	return ""
}

// Ways to build the merged batch.
const (
	intoFresh    = iota // a new batch takes every request's batch
	intoFirst           // the first request's batch takes the others'
	intoReused          // a batch of an earlier use (Reset) takes them
	mixedDecoded        // some requests are decoded into the merged batch itself (serve's replay)
	numAppendWays
)

// reusedBatch returns a batch that held other keys before its Reset, as
// serve's pools hand them out.
func reusedBatch(t *testing.T, tr Transform, seed uint64) *shred.Batch {
	b := shred.NewBatch(tr.Core())
	g := newAppendGen(seed + 1000)
	for i := range 3 {
		g.keys = append(g.keys, "old"+strconv.Itoa(i))
		if _, err := tr.AppendJSON(b, g.request(tr)); err != nil {
			var rej *RejectedError
			if !errors.As(err, &rej) {
				t.Fatal(err)
			}
		}
	}
	b.Finish()
	b.Reset()
	return b
}

// checkAppendAsDecoded decodes reqs into one batch, and each into its own
// then appends them (way), and compares the two.
func checkAppendAsDecoded(t *testing.T, tr Transform, reqs []appendReq, way int, finish []bool, seed uint64) {
	t.Helper()
	ref := shred.NewBatch(tr.Core())
	type outcome struct {
		n   int
		err string
	}
	var refOut []outcome
	for _, r := range reqs {
		n, err := decodeReq(tr, ref, r)
		o := outcome{n: n}
		if err != nil {
			o.err = err.Error()
		}
		refOut = append(refOut, o)
	}
	var dst *shred.Batch
	switch way {
	case intoFresh, intoFirst, mixedDecoded:
		dst = shred.NewBatch(tr.Core())
	case intoReused:
		dst = reusedBatch(t, tr, seed)
	}
	for i, r := range reqs {
		if way == mixedDecoded && i%3 == 1 {
			// Decoded into the merged batch itself, as serve decodes a
			// logged request that has no batch of its own.
			n, err := decodeReq(tr, dst, r)
			o := outcome{n: n}
			if err != nil {
				o.err = err.Error()
			}
			if o != refOut[i] {
				t.Fatalf("request %d: decoded into the merged batch %+v, into the reference %+v", i, o, refOut[i])
			}
			continue
		}
		src := shred.NewBatch(tr.Core())
		n, err := decodeReq(tr, src, r)
		o := outcome{n: n}
		if err != nil {
			o.err = err.Error()
		}
		if o != refOut[i] {
			t.Fatalf("request %d: decoded alone %+v, into the reference %+v", i, o, refOut[i])
		}
		if finish[i] {
			if err := src.Finish(); err != nil {
				t.Fatal(err)
			}
		}
		if i == 0 && way == intoFirst {
			dst = src
			continue
		}
		before := srcText(src)
		if err := dst.Append(src); err != nil {
			t.Fatalf("request %d: Append: %v", i, err)
		}
		if after := srcText(src); after != before {
			t.Fatalf("request %d: Append changed its source", i)
		}
	}
	want := batchLines(t, tr, ref)
	if t.Failed() {
		t.Fatalf("%s, seed %d, way %d: the batch decoded from %d requests is inconsistent", tr.Name(), seed, way, len(reqs))
	}
	got := batchLines(t, tr, dst)
	if t.Failed() {
		t.Fatalf("%s, seed %d, way %d: the batch merged from %d requests is inconsistent", tr.Name(), seed, way, len(reqs))
	}
	if d := firstDiff(got, want); d != "" {
		if testing.Verbose() {
			for i, r := range reqs {
				t.Logf("request %d (proto %v, finished %v): %q", i, r.proto, finish[i], r.data)
			}
		}
		t.Fatalf("%s, seed %d, way %d, %d requests: merged batch differs from the decoded one at %s", tr.Name(), seed, way, len(reqs), d)
	}
}

// srcText renders a batch without finishing it (Append must leave its
// source as it is, finished or not).
func srcText(b *shred.Batch) string {
	var sb strings.Builder
	fmt.Fprint(&sb, b.Rows, b.Truncated)
	for _, c := range b.Core {
		for r := range c.Len {
			sb.WriteString(" " + cell(c, r))
		}
	}
	for _, d := range b.Dyn {
		fmt.Fprintf(&sb, "|%s %s %s %v:", d.Level, d.Key, d.Col.Type.SQL(), d.At)
		for r := range d.Col.Len {
			sb.WriteString(" " + cell(d.Col, r))
		}
	}
	return sb.String()
}

// protoOf is the protobuf encoding of an OTLP/JSON request, through
// pdata, or nil where pdata does not read it.
func protoOf(tr Transform, data []byte) []byte {
	pb, err := pdataJSONToProto(tr, data)
	if err != nil {
		return nil
	}
	return pb
}

// withInvalidUTF8 returns a protobuf request whose record i (of a
// traces or logs request) holds text that is not UTF-8 (rejected, after
// its attributes touched the batch), or nil.
func withInvalidUTF8(tr Transform, data []byte, rng *rand.Rand) []byte {
	switch tr {
	case Traces:
		td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(data)
		if err != nil || td.SpanCount() == 0 {
			return nil
		}
		n := 0
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, s := range ss.Spans().All() {
					n++
					switch rng.IntN(6) {
					case 0:
						s.Attributes().PutStr("bad", "a\xffb")
					case 1:
						s.SetName("\xc3")
					}
				}
			}
		}
		pb, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
		if err != nil {
			return nil
		}
		return pb
	case Logs:
		ld, err := (&plog.JSONUnmarshaler{}).UnmarshalLogs(data)
		if err != nil || ld.LogRecordCount() == 0 {
			return nil
		}
		for _, rl := range ld.ResourceLogs().All() {
			for _, sl := range rl.ScopeLogs().All() {
				for _, l := range sl.LogRecords().All() {
					if rng.IntN(5) == 0 {
						l.Attributes().PutStr("k0", "\xfe")
					}
				}
			}
		}
		pb, err := (&plog.ProtoMarshaler{}).MarshalLogs(ld)
		if err != nil {
			return nil
		}
		return pb
	}
	return nil
}

// appendRequests makes a run of requests of tr from seed: generated
// OTLP/JSON, some as protobuf, some protobuf with invalid UTF-8, and the
// fixtures of testdata/otlp among them.
func appendRequests(t testing.TB, tr Transform, seed uint64, fixtures []appendReq) []appendReq {
	g := newAppendGen(seed)
	var reqs []appendReq
	for range 1 + g.rng.IntN(8) {
		switch g.rng.IntN(8) {
		case 0:
			if len(fixtures) > 0 {
				reqs = append(reqs, fixtures[g.rng.IntN(len(fixtures))])
				continue
			}
		case 1:
			js := g.request(tr)
			if pb := withInvalidUTF8(tr, js, g.rng); pb != nil {
				reqs = append(reqs, appendReq{data: pb, proto: true})
				continue
			}
		case 2, 3:
			js := g.request(tr)
			if pb := protoOf(tr, js); pb != nil {
				reqs = append(reqs, appendReq{data: pb, proto: true})
				continue
			}
		}
		reqs = append(reqs, appendReq{data: g.request(tr)})
	}
	return reqs
}

// fixtureRequests returns the requests of testdata/otlp of tr.
func fixtureRequests(t testing.TB, tr Transform) []appendReq {
	var out []appendReq
	for _, proto := range []bool{false, true} {
		for _, data := range fuzzSeeds(t, proto) {
			b := shred.NewBatch(tr.Core())
			var err error
			if proto {
				_, err = tr.AppendProto(b, data)
			} else {
				_, err = tr.AppendJSON(b, data)
			}
			if err == nil && b.Rows > 0 {
				out = append(out, appendReq{data: data, proto: proto})
			}
		}
	}
	return out
}

// TestAppendAsDecodedOTLP: for each signal, runs of requests decoded into
// one batch give the batch that appending their own batches gives, four
// ways, with the batches handed over finished or not.
func TestAppendAsDecodedOTLP(t *testing.T) {
	for _, tr := range All() {
		fixtures := fixtureRequests(t, tr)
		t.Run(tr.Name(), func(t *testing.T) {
			for seed := range uint64(80) {
				reqs := appendRequests(t, tr, seed, fixtures)
				finish := make([]bool, len(reqs))
				for i := range finish {
					finish[i] = (seed>>uint(i%8))&1 == 1
				}
				checkAppendAsDecoded(t, tr, reqs, int(seed%numAppendWays), finish, seed)
			}
		})
	}
}

// FuzzAppendAsDecoded: the fuzzer's bytes choose a seed for the generator
// and the way to merge, and are also decoded as a request of their own
// (JSON or protobuf) among the generated ones.
func FuzzAppendAsDecoded(f *testing.F) {
	for _, req := range fuzzSeeds(f, false) {
		f.Add(uint64(len(req)), uint8(0), req)
	}
	for i, s := range fuzzJSONEdgeCases {
		f.Add(uint64(i), uint8(i), []byte(s))
	}
	for _, req := range fuzzSeeds(f, true) {
		f.Add(uint64(len(req)), uint8(0x80), req)
	}
	f.Fuzz(func(t *testing.T, seed uint64, how uint8, data []byte) {
		tr := All()[int(how)%3]
		reqs := appendRequests(t, tr, seed, nil)
		extra := appendReq{data: data, proto: how&0x80 != 0}
		at := int(seed % uint64(len(reqs)+1))
		reqs = slices.Insert(reqs, at, extra)
		finish := make([]bool, len(reqs))
		var bits [8]byte
		binary.LittleEndian.PutUint64(bits[:], seed)
		for i := range finish {
			finish[i] = bits[i%8]&1 == 1
		}
		checkAppendAsDecoded(t, tr, reqs, int(how>>2)%numAppendWays, finish, seed)
	})
}

// TestAppendDuplicateKeyWidenings: a key that comes twice in one span
// keeps the kind its first value widened the column to (the last value
// wins). A request decoded after others widens their column so too;
// appended, its batch must widen it the same, though the value that
// widened it is gone: a string cut by a NULL, or an integer beyond 2^53
// cut by a small one (found by TestAppendAsDecodedOTLP).
func TestAppendDuplicateKeyWidenings(t *testing.T) {
	span := func(attrs string) []byte {
		return []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"s","attributes":[` + attrs + `]}]}]}]}`)
	}
	f := func(first, dup, want string) {
		t.Helper()
		reqs := [][]byte{span(first), span(dup), span(`{"key":"k","value":{"intValue":3}}`)}
		ref, dst := shred.NewBatch(Traces.Core()), shred.NewBatch(Traces.Core())
		for _, r := range reqs {
			if _, err := Traces.AppendJSON(ref, r); err != nil {
				t.Fatal(err)
			}
			src := shred.NewBatch(Traces.Core())
			if _, err := Traces.AppendJSON(src, r); err != nil {
				t.Fatal(err)
			}
			if err := dst.Append(src); err != nil {
				t.Fatal(err)
			}
		}
		wantLines, got := batchLines(t, Traces, ref), batchLines(t, Traces, dst)
		if !slices.Contains(wantLines, want) {
			t.Fatalf("decoded: %q is not among %q", want, wantLines[len(wantLines)-3:])
		}
		if d := firstDiff(got, wantLines); d != "" {
			t.Errorf("after %s then %s: %s", first, dup, d)
		}
	}
	f(`{"key":"k","value":{"doubleValue":2.5}}`, `{"key":"k","value":{"stringValue":"x"}},{"key":"k","value":{}}`,
		`record "k" DOUBLE: 2.5 NULL 3`) // the string was a stray, which the NULL cut
	f(`{"key":"k","value":{"doubleValue":2.5}}`, `{"key":"k","value":{"intValue":"1152921504606846976"}},{"key":"k","value":{"intValue":7}}`,
		`record "k" with strays: number:2.5 number:7 number:3`) // the integers in the big one's column
	f(`{"key":"q","value":{"doubleValue":2.5}}`, `{"key":"k","value":{"stringValue":"x"}},{"key":"k","value":{}}`,
		`record "k" BIGINT: NULL NULL 3`)
}
