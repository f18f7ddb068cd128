package main

// The queries: what Grafana's Jaeger data source and the Jaeger UI ask
// (a trace by id; searches with limit=20), their expected answers, and
// the checks of both targets' answers.

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
)

// searchLimit is the limit of every search, Grafana's default.
const searchLimit = 20

// Query kinds, in the order the report shows them.
const (
	kindByID      = "trace by id"
	kindService   = "search: service, 1 h"
	kindTimeRange = "search: service, 5 min"
	kindTagRare   = "search: service + tag customer.id, 1 h"
	kindTag500    = "search: service + tag http.status_code=500, 1 h"
)

var searchKinds = []string{kindService, kindTimeRange, kindTagRare, kindTag500}

// searchSpec is one search's parameters: a span of service svc that
// started in [startMin, startMax] (µs, as the API takes them) and carries
// the tag, if any.
type searchSpec struct {
	kind               string
	svc                int
	startMin, startMax int64 // µs since the epoch
	tagKey, tagVal     string
}

// specs makes the searches, from their own random source (the data do not
// depend on them).
func specs(seed uint64, perKind int) []searchSpec {
	r := rand.New(rand.NewPCG(seed, pcgStream+1))
	whole := func(k string, svc int) searchSpec {
		// The data's hour and a minute after: Grafana's "last hour".
		return searchSpec{kind: k, svc: svc, startMin: baseTime / 1000, startMax: (baseTime + dataWindow + 60e9) / 1000}
	}
	var out []searchSpec
	for i := range perKind {
		out = append(out, whole(kindService, i%len(services)))
	}
	const five = 300e9
	for range perKind {
		s := whole(kindTimeRange, r.IntN(len(services)))
		s.startMin = (baseTime + r.Int64N(dataWindow-five)) / 1000
		s.startMax = s.startMin + five/1000
		out = append(out, s)
	}
	for range perKind {
		s := whole(kindTagRare, r.IntN(len(services)))
		s.tagKey, s.tagVal = "customer.id", "c-"+strconv.Itoa(r.IntN(customers))
		out = append(out, s)
	}
	for i := range perKind {
		s := whole(kindTag500, i%len(services))
		s.tagKey, s.tagVal = "http.status_code", "500"
		out = append(out, s)
	}
	return out
}

// match says whether span s of a trace meets every condition of q.
func (q *searchSpec) match(s genSpan, t traceInfo) bool {
	if s.svc != q.svc || s.start < q.startMin*1000 || s.start > q.startMax*1000 {
		return false
	}
	switch q.tagKey {
	case "customer.id":
		return t.customer == q.tagVal
	case "http.status_code":
		return strconv.FormatInt(s.status, 10) == q.tagVal
	}
	return true
}

// path is the search's request.
func (q *searchSpec) path() string {
	v := url.Values{}
	v.Set("service", services[q.svc].name)
	v.Set("start", strconv.FormatInt(q.startMin, 10))
	v.Set("end", strconv.FormatInt(q.startMax, 10))
	v.Set("limit", strconv.Itoa(searchLimit))
	if q.tagKey != "" {
		tags, _ := json.Marshal(map[string]string{q.tagKey: q.tagVal})
		v.Set("tags", string(tags))
	}
	return "/api/traces?" + v.Encode()
}

// query is one request and what its answer must be.
type query struct {
	kind string
	path string
	// byID: the trace asked for.
	id string
	// search: the matching traces (with their latest matching span) and
	// shredduck's answer, in order.
	match *matchSet
	want  []string
}

// uiAnswer is the part of an /api/traces answer that is checked.
type uiAnswer struct {
	Data []struct {
		TraceID string            `json:"traceID"`
		Spans   []json.RawMessage `json:"spans"`
	} `json:"data"`
}

// check checks an answer of target (shredduck or jaeger): the traces it
// holds are whole (their span counts as generated); a trace by id is the
// one asked for; a search's are shredduck's expected traces in order, or
// for Jaeger (which takes the traces it stored last) as many of the
// matching ones.
func (q *query) check(target string, body []byte, spans map[string]int) error {
	var a uiAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return fmt.Errorf("%s %s: cannot decode the answer: %v", target, q.path, err)
	}
	var ids []string
	for _, t := range a.Data {
		id := fmt.Sprintf("%032s", t.TraceID)
		ids = append(ids, id)
		if want, ok := spans[id]; !ok || len(t.Spans) != want {
			return fmt.Errorf("%s %s: trace %s has %d spans, want %d", target, q.path, id, len(t.Spans), want)
		}
	}
	switch {
	case q.kind == kindByID:
		if len(ids) != 1 || ids[0] != q.id {
			return fmt.Errorf("%s %s: traces %v, want %s", target, q.path, ids, q.id)
		}
	case target == targetShredduck:
		if !slices.Equal(ids, q.want) {
			return fmt.Errorf("%s %s: traces %v, want %v", target, q.path, ids, q.want)
		}
	default:
		if len(ids) != len(q.want) {
			return fmt.Errorf("%s %s: %d traces, want %d", target, q.path, len(ids), len(q.want))
		}
		for _, id := range ids {
			if _, ok := q.match.latest[id]; !ok {
				return fmt.Errorf("%s %s: trace %s does not match", target, q.path, id)
			}
		}
	}
	return nil
}

// plan lists the requests: ids traces by id (a random sample of the
// traces, each asked for once), and searches requests of each search
// kind, cycling through its specs.
func plan(seed uint64, w *written, sp []searchSpec, ids, searches int) map[string][]query {
	r := rand.New(rand.NewPCG(seed, pcgStream+2))
	out := map[string][]query{}
	for _, i := range r.Perm(len(w.traces))[:min(ids, len(w.traces))] {
		id := w.traces[i].id
		out[kindByID] = append(out[kindByID], query{kind: kindByID, path: "/api/traces/" + id, id: id})
	}
	for _, k := range searchKinds {
		var mine []int
		for i := range sp {
			if sp[i].kind == k {
				mine = append(mine, i)
			}
		}
		for n := range searches {
			i := mine[n%len(mine)]
			out[k] = append(out[k], query{kind: k, path: sp[i].path(), match: w.matches[i], want: w.matches[i].top(searchLimit)})
		}
	}
	return out
}
