package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var signals = []string{"traces", "logs", "metrics"}

func gen(t *testing.T, kind string, n int, seed uint64) []byte {
	t.Helper()
	var buf bytes.Buffer
	st, err := generate(&buf, kind, n, seed)
	if err != nil {
		t.Fatalf("generate(%s, %d, %d): %v", kind, n, seed, err)
	}
	if st.records != n {
		t.Fatalf("generate(%s, %d): stats.records = %d", kind, n, st.records)
	}
	if st.bytes != int64(buf.Len()) {
		t.Fatalf("generate(%s, %d): stats.bytes = %d, wrote %d", kind, n, st.bytes, buf.Len())
	}
	return buf.Bytes()
}

func lines(b []byte) [][]byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	if len(b) == 0 {
		return nil
	}
	return bytes.Split(b, []byte("\n"))
}

func TestDeterministic(t *testing.T) {
	for _, kind := range signals {
		a := gen(t, kind, 1000, 42)
		b := gen(t, kind, 1000, 42)
		if !bytes.Equal(a, b) {
			t.Errorf("%s: same seed gave different output", kind)
		}
		c := gen(t, kind, 1000, 43)
		if bytes.Equal(a, c) {
			t.Errorf("%s: different seeds gave identical output", kind)
		}
	}
}

// Generic OTLP/JSON shapes, decoded with encoding/json.
type anyValue struct {
	StringValue *string  `json:"stringValue"`
	IntValue    *string  `json:"intValue"`
	BoolValue   *bool    `json:"boolValue"`
	DoubleValue *float64 `json:"doubleValue"`
}

type keyValue struct {
	Key   string   `json:"key"`
	Value anyValue `json:"value"`
}

type resource struct {
	Attributes []keyValue `json:"attributes"`
}

type scope struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

type span struct {
	TraceID           string     `json:"traceId"`
	SpanID            string     `json:"spanId"`
	ParentSpanID      *string    `json:"parentSpanId"`
	Name              string     `json:"name"`
	Kind              int        `json:"kind"`
	StartTimeUnixNano string     `json:"startTimeUnixNano"`
	EndTimeUnixNano   string     `json:"endTimeUnixNano"`
	Attributes        []keyValue `json:"attributes"`
	Status            struct {
		Code *int `json:"code"`
	} `json:"status"`
}

type tracesRequest struct {
	ResourceSpans []struct {
		Resource   resource `json:"resource"`
		ScopeSpans []struct {
			Scope scope  `json:"scope"`
			Spans []span `json:"spans"`
		} `json:"scopeSpans"`
	} `json:"resourceSpans"`
}

type logRecord struct {
	TimeUnixNano         string     `json:"timeUnixNano"`
	ObservedTimeUnixNano string     `json:"observedTimeUnixNano"`
	SeverityNumber       int        `json:"severityNumber"`
	SeverityText         string     `json:"severityText"`
	Body                 anyValue   `json:"body"`
	Attributes           []keyValue `json:"attributes"`
	TraceID              string     `json:"traceId"`
	SpanID               string     `json:"spanId"`
}

type logsRequest struct {
	ResourceLogs []struct {
		Resource  resource `json:"resource"`
		ScopeLogs []struct {
			Scope      scope       `json:"scope"`
			LogRecords []logRecord `json:"logRecords"`
		} `json:"scopeLogs"`
	} `json:"resourceLogs"`
}

type dataPoint struct {
	Attributes        []keyValue `json:"attributes"`
	StartTimeUnixNano string     `json:"startTimeUnixNano"`
	TimeUnixNano      string     `json:"timeUnixNano"`
	AsInt             *string    `json:"asInt"`
	AsDouble          *float64   `json:"asDouble"`
}

type metric struct {
	Name string `json:"name"`
	Unit string `json:"unit"`
	Sum  *struct {
		DataPoints             []dataPoint `json:"dataPoints"`
		AggregationTemporality int         `json:"aggregationTemporality"`
		IsMonotonic            bool        `json:"isMonotonic"`
	} `json:"sum"`
}

type metricsRequest struct {
	ResourceMetrics []struct {
		Resource     resource `json:"resource"`
		ScopeMetrics []struct {
			Scope   scope    `json:"scope"`
			Metrics []metric `json:"metrics"`
		} `json:"scopeMetrics"`
	} `json:"resourceMetrics"`
}

func attrMap(t *testing.T, kvs []keyValue) map[string]anyValue {
	t.Helper()
	m := make(map[string]anyValue, len(kvs))
	for _, kv := range kvs {
		if _, dup := m[kv.Key]; dup {
			t.Fatalf("duplicate attribute %q", kv.Key)
		}
		m[kv.Key] = kv.Value
	}
	return m
}

func strAttr(t *testing.T, m map[string]anyValue, key string) string {
	t.Helper()
	v, ok := m[key]
	if !ok || v.StringValue == nil {
		t.Fatalf("attribute %q missing or not a string: %+v", key, v)
	}
	return *v.StringValue
}

func intAttr(t *testing.T, m map[string]anyValue, key string) int64 {
	t.Helper()
	v, ok := m[key]
	if !ok || v.IntValue == nil {
		t.Fatalf("attribute %q missing or not an int: %+v", key, v)
	}
	i, err := strconv.ParseInt(*v.IntValue, 10, 64)
	if err != nil {
		t.Fatalf("attribute %q: %v", key, err)
	}
	return i
}

func nanos(t *testing.T, s string) int64 {
	t.Helper()
	i, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("bad nanosecond time %q: %v", s, err)
	}
	return i
}

func checkHex(t *testing.T, what, s string, nbytes int) {
	t.Helper()
	if len(s) != 2*nbytes || strings.ToLower(s) != s {
		t.Fatalf("%s %q: want %d lowercase hex digits", what, s, 2*nbytes)
	}
	if _, err := hex.DecodeString(s); err != nil {
		t.Fatalf("%s %q: %v", what, s, err)
	}
}

func checkResource(t *testing.T, r resource, services map[string]int) {
	t.Helper()
	m := attrMap(t, r.Attributes)
	if len(m) != 4 {
		t.Fatalf("resource has %d attributes, want 4", len(m))
	}
	services[strAttr(t, m, "service.name")]++
	if env := strAttr(t, m, "deployment.environment"); env != "production" && env != "staging" {
		t.Fatalf("deployment.environment = %q", env)
	}
	strAttr(t, m, "cloud.region")
	host := strAttr(t, m, "host.name")
	n, err := strconv.Atoi(strings.TrimPrefix(host, "pod-"))
	if !strings.HasPrefix(host, "pod-") || err != nil || n < 1 || n > 400 {
		t.Fatalf("host.name = %q", host)
	}
}

func checkScope(t *testing.T, s scope) {
	t.Helper()
	if s.Name != "shredduck-gen" || s.Version != "1.0.0" {
		t.Fatalf("scope = %+v", s)
	}
}

// TestValidJSON checks that every line is a standalone JSON object with only
// the signal's top-level key.
func TestValidJSON(t *testing.T) {
	keys := map[string]string{"traces": "resourceSpans", "logs": "resourceLogs", "metrics": "resourceMetrics"}
	for _, kind := range signals {
		out := gen(t, kind, 2500, 7)
		if !bytes.HasSuffix(out, []byte("\n")) {
			t.Errorf("%s: output does not end with a newline", kind)
		}
		for i, line := range lines(out) {
			if !json.Valid(line) {
				t.Fatalf("%s line %d: invalid JSON", kind, i)
			}
			var top map[string]json.RawMessage
			if err := json.Unmarshal(line, &top); err != nil {
				t.Fatalf("%s line %d: %v", kind, i, err)
			}
			if len(top) != 1 || top[keys[kind]] == nil {
				t.Fatalf("%s line %d: top-level keys %v, want only %q", kind, i, mapKeys(top), keys[kind])
			}
		}
	}
}

func mapKeys(m map[string]json.RawMessage) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// countRecords decodes out and returns records per request.
func countRecords(t *testing.T, kind string, out []byte) []int {
	t.Helper()
	var counts []int
	for i, line := range lines(out) {
		n := 0
		switch kind {
		case "traces":
			var req tracesRequest
			if err := json.Unmarshal(line, &req); err != nil {
				t.Fatalf("line %d: %v", i, err)
			}
			for _, rs := range req.ResourceSpans {
				for _, ss := range rs.ScopeSpans {
					n += len(ss.Spans)
				}
			}
		case "logs":
			var req logsRequest
			if err := json.Unmarshal(line, &req); err != nil {
				t.Fatalf("line %d: %v", i, err)
			}
			for _, rl := range req.ResourceLogs {
				for _, sl := range rl.ScopeLogs {
					n += len(sl.LogRecords)
				}
			}
		case "metrics":
			var req metricsRequest
			if err := json.Unmarshal(line, &req); err != nil {
				t.Fatalf("line %d: %v", i, err)
			}
			for _, rm := range req.ResourceMetrics {
				for _, sm := range rm.ScopeMetrics {
					for _, m := range sm.Metrics {
						n += len(m.Sum.DataPoints)
					}
				}
			}
		}
		counts = append(counts, n)
	}
	return counts
}

func TestRecordCount(t *testing.T) {
	for _, kind := range signals {
		batch := batchSize(kind)
		for _, n := range []int{0, 1, batch - 1, batch, batch + 1, 10*batch + 37, 9999} {
			counts := countRecords(t, kind, gen(t, kind, n, 3))
			wantReqs := (n + batch - 1) / batch
			if len(counts) != wantReqs {
				t.Fatalf("%s n=%d: %d requests, want %d", kind, n, len(counts), wantReqs)
			}
			total := 0
			for i, c := range counts {
				total += c
				if i < len(counts)-1 && c != batch {
					t.Fatalf("%s n=%d: request %d has %d records, want %d", kind, n, i, c, batch)
				}
			}
			if total != n {
				t.Fatalf("%s n=%d: %d records", kind, n, total)
			}
		}
	}
}

func TestTracesDistribution(t *testing.T) {
	const n = 20000
	out := gen(t, "traces", n, 1)
	services := map[string]int{}
	routeCounts := map[string]int{}
	kinds := map[int]int{}
	roots, retries, errs, idx := 0, 0, 0, 0
	for _, line := range lines(out) {
		var req tracesRequest
		if err := json.Unmarshal(line, &req); err != nil {
			t.Fatal(err)
		}
		if len(req.ResourceSpans) != 1 || len(req.ResourceSpans[0].ScopeSpans) != 1 {
			t.Fatalf("want one resourceSpans with one scopeSpans")
		}
		rs := req.ResourceSpans[0]
		checkResource(t, rs.Resource, services)
		checkScope(t, rs.ScopeSpans[0].Scope)
		for _, s := range rs.ScopeSpans[0].Spans {
			checkHex(t, "traceId", s.TraceID, 16)
			checkHex(t, "spanId", s.SpanID, 8)
			if s.ParentSpanID == nil {
				roots++
			} else {
				checkHex(t, "parentSpanId", *s.ParentSpanID, 8)
			}
			routeCounts[s.Name]++
			if s.Kind < 1 || s.Kind > 5 {
				t.Fatalf("kind = %d", s.Kind)
			}
			kinds[s.Kind]++
			start, end := nanos(t, s.StartTimeUnixNano), nanos(t, s.EndTimeUnixNano)
			slot := baseTimeNanos + int64(idx)*recordStepNanos
			if start < slot || start >= slot+recordStepNanos {
				t.Fatalf("span %d: start %d outside [%d, %d)", idx, start, slot, slot+recordStepNanos)
			}
			if d := end - start; d < 200_000 || d > 800_000_000 {
				t.Fatalf("span %d: duration %d ns", idx, d)
			}
			a := attrMap(t, s.Attributes)
			switch m := strAttr(t, a, "http.method"); m {
			case "GET", "POST", "PUT", "DELETE":
			default:
				t.Fatalf("http.method = %q", m)
			}
			if r := strAttr(t, a, "http.route"); r != s.Name {
				t.Fatalf("http.route %q != name %q", r, s.Name)
			}
			code := intAttr(t, a, "http.status_code")
			switch code {
			case 200, 201, 400, 404, 500:
			default:
				t.Fatalf("http.status_code = %d", code)
			}
			retry, ok := a["retry"]
			if !ok || retry.BoolValue == nil {
				t.Fatalf("retry attribute missing or not bool")
			}
			if *retry.BoolValue {
				retries++
			}
			if s.Status.Code == nil {
				t.Fatalf("status.code missing")
			}
			wantCode := 1
			if code >= 500 {
				wantCode = 2
				errs++
			}
			if *s.Status.Code != wantCode {
				t.Fatalf("http.status_code %d with status.code %d", code, *s.Status.Code)
			}
			idx++
		}
	}
	if idx != n {
		t.Fatalf("%d spans, want %d", idx, n)
	}
	if len(routeCounts) != 6 {
		t.Errorf("routes = %v, want 6", routeCounts)
	}
	for _, r := range routes {
		if routeCounts[r] < n/6/2 {
			t.Errorf("route %q: %d spans", r, routeCounts[r])
		}
	}
	if len(services) != 8 {
		t.Errorf("services = %v, want 8", services)
	}
	if len(kinds) != 5 {
		t.Errorf("kinds = %v, want 1..5", kinds)
	}
	within := func(what string, got int, frac float64) {
		want := frac * n
		if float64(got) < 0.8*want || float64(got) > 1.2*want {
			t.Errorf("%s: %d of %d, want about %.0f", what, got, n, want)
		}
	}
	within("root spans", roots, 0.2)
	within("retries", retries, 0.1)
	within("error spans", errs, 1.0/7)
}

func TestLogsShape(t *testing.T) {
	const n = 5000
	out := gen(t, "logs", n, 9)
	services := map[string]int{}
	sev := map[int]string{5: "DEBUG", 9: "INFO", 13: "WARN", 17: "ERROR"}
	seen := map[int]int{}
	idx := 0
	for _, line := range lines(out) {
		var req logsRequest
		if err := json.Unmarshal(line, &req); err != nil {
			t.Fatal(err)
		}
		rl := req.ResourceLogs[0]
		checkResource(t, rl.Resource, services)
		checkScope(t, rl.ScopeLogs[0].Scope)
		for _, r := range rl.ScopeLogs[0].LogRecords {
			ts := baseTimeNanos + int64(idx)*recordStepNanos
			if nanos(t, r.TimeUnixNano) != ts || nanos(t, r.ObservedTimeUnixNano) != ts {
				t.Fatalf("record %d: times %s/%s, want %d", idx, r.TimeUnixNano, r.ObservedTimeUnixNano, ts)
			}
			if sev[r.SeverityNumber] != r.SeverityText {
				t.Fatalf("severity %d/%q", r.SeverityNumber, r.SeverityText)
			}
			seen[r.SeverityNumber]++
			checkHex(t, "traceId", r.TraceID, 16)
			checkHex(t, "spanId", r.SpanID, 8)
			a := attrMap(t, r.Attributes)
			method, route := strAttr(t, a, "http.method"), strAttr(t, a, "http.route")
			code := intAttr(t, a, "http.status_code")
			if !strings.HasPrefix(strAttr(t, a, "user.id"), "user-") {
				t.Fatalf("user.id = %q", strAttr(t, a, "user.id"))
			}
			if r.Body.StringValue == nil {
				t.Fatalf("body is not a string")
			}
			prefix := method + " " + route + " returned " + strconv.FormatInt(code, 10) + " in "
			if body := *r.Body.StringValue; !strings.HasPrefix(body, prefix) || !strings.HasSuffix(body, " ms") {
				t.Fatalf("body %q, want %q...", body, prefix)
			}
			idx++
		}
	}
	if idx != n || len(seen) != 4 {
		t.Fatalf("records %d, severities %v", idx, seen)
	}
}

func TestMetricsShape(t *testing.T) {
	const n = 1000
	out := gen(t, "metrics", n, 5)
	services := map[string]int{}
	idx := 0
	for _, line := range lines(out) {
		var req metricsRequest
		if err := json.Unmarshal(line, &req); err != nil {
			t.Fatal(err)
		}
		rm := req.ResourceMetrics[0]
		checkResource(t, rm.Resource, services)
		checkScope(t, rm.ScopeMetrics[0].Scope)
		for mi, m := range rm.ScopeMetrics[0].Metrics {
			def := metricDefs[mi]
			if m.Name != def.name || m.Unit != def.unit || m.Sum == nil {
				t.Fatalf("metric %d = %q %q", mi, m.Name, m.Unit)
			}
			if m.Sum.AggregationTemporality != 2 || !m.Sum.IsMonotonic {
				t.Fatalf("metric %q: temporality %d monotonic %v", m.Name, m.Sum.AggregationTemporality, m.Sum.IsMonotonic)
			}
			for _, p := range m.Sum.DataPoints {
				if nanos(t, p.StartTimeUnixNano) != baseTimeNanos ||
					nanos(t, p.TimeUnixNano) != baseTimeNanos+int64(idx)*recordStepNanos {
					t.Fatalf("point %d: times %s/%s", idx, p.StartTimeUnixNano, p.TimeUnixNano)
				}
				if def.double != (p.AsDouble != nil) || (p.AsInt != nil) == (p.AsDouble != nil) {
					t.Fatalf("metric %q: asInt %v asDouble %v", m.Name, p.AsInt, p.AsDouble)
				}
				if p.AsInt != nil {
					if _, err := strconv.ParseInt(*p.AsInt, 10, 64); err != nil {
						t.Fatal(err)
					}
				}
				a := attrMap(t, p.Attributes)
				strAttr(t, a, "http.route")
				intAttr(t, a, "http.status_code")
				idx++
			}
		}
	}
	if idx != n {
		t.Fatalf("%d points, want %d", idx, n)
	}
}

func TestRunGzipFile(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "t.ndjson")
	gz := filepath.Join(dir, "t.ndjson.gz")
	var stdout, stderr bytes.Buffer
	if err := run([]string{"traces", "-n", "500", "-seed", "11", "-o", plain}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	// Flags before the signal are accepted too.
	if err := run([]string{"-n", "500", "-seed", "11", "-gzip", "-o", gz, "traces"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if stdout.Len() != 0 {
		t.Fatalf("stdout not empty with -o: %q", stdout.String())
	}
	if got := strings.Count(stderr.String(), "\n"); got != 2 || !strings.Contains(stderr.String(), "records=500 requests=7") {
		t.Fatalf("stderr = %q", stderr.String())
	}
	want, err := os.ReadFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(gz)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(bufio.NewReader(f))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) || !bytes.Equal(want, gen(t, "traces", 500, 11)) {
		t.Fatalf("gzip / file / in-memory outputs differ")
	}
}

func TestRunStdout(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := run([]string{"logs", "-n", "150", "-seed", "2"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(stdout.Bytes(), gen(t, "logs", 150, 2)) {
		t.Fatalf("stdout differs from generate")
	}
	for _, bad := range [][]string{{}, {"spans"}, {"traces", "-n", "-1"}, {"traces", "extra"}} {
		if err := run(bad, io.Discard, io.Discard); err == nil {
			t.Errorf("run(%q) succeeded, want error", bad)
		}
	}
}

// Extra keys: PerRecord distinct app.header.x-<i> attributes on every span
// and log record, i below Keys; taking them out gives exactly the output
// without them; Zipf puts key 0 on the most records.
func TestExtraKeys(t *testing.T) {
	extra := regexp.MustCompile(`,\{"key":"app\.header\.x-[0-9]+","value":\{"stringValue":"v[0-9]+"\}\}`)
	for _, kind := range []string{"traces", "logs"} {
		for _, zipf := range []bool{false, true} {
			var sparse bytes.Buffer
			if _, err := generateKeys(&sparse, kind, 500, 7, KeySpec{Keys: 50, PerRecord: 10, Zipf: zipf}); err != nil {
				t.Fatal(err)
			}
			if got, want := extra.ReplaceAll(sparse.Bytes(), nil), gen(t, kind, 500, 7); !bytes.Equal(got, want) {
				t.Errorf("%s zipf=%v: without the extra keys the output differs from the plain one", kind, zipf)
			}
			counts := make(map[string]int)
			recs := 0
			for _, line := range bytes.Split(bytes.TrimSpace(sparse.Bytes()), []byte("\n")) {
				var req struct {
					ResourceSpans []struct {
						ScopeSpans []struct {
							Spans []struct{ Attributes []keyValue }
						}
					}
					ResourceLogs []struct {
						ScopeLogs []struct {
							LogRecords []struct{ Attributes []keyValue }
						}
					}
				}
				if err := json.Unmarshal(line, &req); err != nil {
					t.Fatal(err)
				}
				var attrs [][]keyValue
				for _, rs := range req.ResourceSpans {
					for _, s := range rs.ScopeSpans[0].Spans {
						attrs = append(attrs, s.Attributes)
					}
				}
				for _, rl := range req.ResourceLogs {
					for _, l := range rl.ScopeLogs[0].LogRecords {
						attrs = append(attrs, l.Attributes)
					}
				}
				for _, as := range attrs {
					recs++
					seen := make(map[string]bool)
					for _, a := range as {
						if strings.HasPrefix(a.Key, "app.header.x-") {
							if seen[a.Key] {
								t.Fatalf("%s: key %s twice in a record", kind, a.Key)
							}
							seen[a.Key] = true
							counts[a.Key]++
						}
					}
					if len(seen) != 10 {
						t.Fatalf("%s: %d extra keys in a record, want 10", kind, len(seen))
					}
				}
			}
			if recs != 500 || len(counts) > 50 || len(counts) < 40 {
				t.Errorf("%s zipf=%v: %d records, %d distinct keys (want 500, at most 50)", kind, zipf, recs, len(counts))
			}
			if zipf && counts["app.header.x-0"] < counts["app.header.x-30"]*2 {
				t.Errorf("%s: zipf gave key 0 %d records, key 30 %d", kind, counts["app.header.x-0"], counts["app.header.x-30"])
			}
		}
	}
}
