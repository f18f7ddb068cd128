// Command gen writes deterministic synthetic OpenTelemetry data as NDJSON,
// one OTLP/JSON export request per line, in the shape the OpenTelemetry
// Collector's file exporter writes (lowerCamelCase keys, hex trace/span ids,
// 64-bit integers and nanosecond timestamps as decimal strings, enums as
// integers).
//
// Usage:
//
//	go run ./bench/gen traces|logs|metrics -n N -seed S [-o FILE] [-gzip]
//	    [-keys K [-keys-per-record N] [-key-dist uniform|zipf]]
//
// N is the total number of records (spans, log records or metric data
// points); every request holds a fixed batch of records except possibly the
// last, which holds the remainder. The same seed always produces
// byte-identical output. Only the data goes to stdout (when -o is not given);
// a one-line summary goes to stderr.
//
// The lines are built with append-style byte-slice code rather than
// encoding/json so that a million spans take on the order of a second.
package main

import (
	"bufio"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/shredduck/shredduck/internal/benchtraces"
)

const (
	// baseTimeNanos is 2026-01-01T00:00:00Z in Unix nanoseconds.
	baseTimeNanos int64 = 1767225600000000000
	// recordStepNanos separates consecutive records (1 ms).
	recordStepNanos int64 = 1_000_000

	spansPerRequest   = 80
	logsPerRequest    = 100
	metricsPerRequest = 4
	pointsPerMetric   = 30
	pointsPerRequest  = metricsPerRequest * pointsPerMetric // 120

	// pcgStream is the second PCG word; the first is the user's seed.
	pcgStream uint64 = 0x5348524544445543 // "SHREDDUC"

	scopeName    = "shredduck-gen"
	scopeVersion = "1.0.0"

	bufSize = 1 << 20
)

var (
	services     = benchtraces.Services
	environments = benchtraces.Environments
	regions      = benchtraces.Regions
	routes       = benchtraces.Routes
	methods      = benchtraces.Methods
	statusCodes  = benchtraces.StatusCodes

	severityNumbers = []int64{5, 9, 13, 17}
	severityTexts   = []string{"DEBUG", "INFO", "WARN", "ERROR"}
)

// metricDef describes one of the cumulative monotonic sums in a metrics
// request.
type metricDef struct {
	name, description, unit string
	double                  bool
}

var metricDefs = [metricsPerRequest]metricDef{
	{"http.server.requests", "Number of HTTP requests served", "1", false},
	{"http.server.duration_sum", "Total time spent serving HTTP requests", "ms", true},
	{"http.server.response.size", "Total bytes sent in HTTP responses", "By", false},
	{"queue.messages.processed", "Number of queue messages processed", "1", false},
}

// batchSize returns the number of records per request for kind, or 0 if kind
// is unknown.
func batchSize(kind string) int {
	switch kind {
	case "traces":
		return spansPerRequest
	case "logs":
		return logsPerRequest
	case "metrics":
		return pointsPerRequest
	}
	return 0
}

// generator builds the request lines for one signal. It owns the random
// source, so a fresh generator with the same seed replays the same output.
type generator struct {
	rng  *rand.Rand
	line []byte
	keys *keyGen // extra attributes, or nil
}

func newGenerator(seed uint64) *generator {
	return &generator{
		rng:  rand.New(rand.NewPCG(seed, pcgStream)),
		line: make([]byte, 0, 64<<10),
	}
}

// KeySpec adds extra string attributes to every span and log record:
// PerRecord distinct keys app.header.x-<i>, i drawn from Keys keys,
// uniformly or by a Zipf law (a few keys on most records, a long tail).
// They come from their own random source, so the rest of the output is
// the same with or without them: a dense and a sparse file differ only in
// these keys.
type KeySpec struct {
	Keys, PerRecord int
	Zipf            bool
}

// keyStream is the second PCG word of the extra keys' source.
const keyStream uint64 = 0x4b455953 // "KEYS"

type keyGen struct {
	spec KeySpec
	rng  *rand.Rand
	zipf *rand.Zipf
	seen []int // keys of the current record, to keep them distinct
}

func newKeyGen(spec KeySpec, seed uint64) *keyGen {
	k := &keyGen{spec: spec, rng: rand.New(rand.NewPCG(seed, keyStream))}
	k.spec.PerRecord = min(spec.PerRecord, spec.Keys)
	if spec.Zipf {
		k.zipf = rand.NewZipf(k.rng, 1.1, 1, uint64(spec.Keys-1))
	}
	return k
}

// appendKeys writes the extra attributes, each preceded by a comma.
func (k *keyGen) appendKeys(b []byte) []byte {
	k.seen = k.seen[:0]
	for len(k.seen) < k.spec.PerRecord {
		var i int
		if k.zipf != nil {
			i = int(k.zipf.Uint64())
		} else {
			i = k.rng.IntN(k.spec.Keys)
		}
		if slices.Contains(k.seen, i) {
			continue
		}
		k.seen = append(k.seen, i)
		b = append(b, `,{"key":"app.header.x-`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `","value":{"stringValue":"v`...)
		b = strconv.AppendInt(b, int64(k.rng.IntN(100)), 10)
		b = append(b, `"}}`...)
	}
	return b
}

// stats summarizes a generate call.
type stats struct {
	records  int
	requests int
	bytes    int64 // uncompressed NDJSON bytes
}

// generate writes n records of kind to w, one request per line.
func generate(w io.Writer, kind string, n int, seed uint64) (stats, error) {
	return generateKeys(w, kind, n, seed, KeySpec{})
}

// generateKeys is generate with extra attribute keys (none when
// keys.Keys is 0; only traces and logs have them).
func generateKeys(w io.Writer, kind string, n int, seed uint64, keys KeySpec) (stats, error) {
	var st stats
	if kind == "gharchive" {
		return generateGHArchive(w, n, seed)
	}
	batch := batchSize(kind)
	if batch == 0 {
		return st, fmt.Errorf("unknown signal %q (want traces, logs or metrics)", kind)
	}
	if n < 0 {
		return st, errors.New("-n must be >= 0")
	}
	g := newGenerator(seed)
	if keys.Keys > 0 && keys.PerRecord > 0 {
		g.keys = newKeyGen(keys, seed)
	}
	for first := 0; first < n; first += batch {
		count := min(batch, n-first)
		b := g.line[:0]
		switch kind {
		case "traces":
			b = g.appendTraces(b, first, count)
		case "logs":
			b = g.appendLogs(b, first, count)
		case "metrics":
			b = g.appendMetrics(b, st.requests, first, count)
		}
		b = append(b, '\n')
		g.line = b
		if _, err := w.Write(b); err != nil {
			return st, err
		}
		st.records += count
		st.requests++
		st.bytes += int64(len(b))
	}
	return st, nil
}

func (g *generator) pick(list []string) string { return list[g.rng.IntN(len(list))] }

// appendResource writes `"resource":{...}` with randomly chosen attributes.
func (g *generator) appendResource(b []byte) []byte {
	b = append(b, `"resource":{"attributes":[`...)
	b = appendStrAttr(b, "service.name", g.pick(services))
	b = append(b, ',')
	b = appendStrAttr(b, "deployment.environment", g.pick(environments))
	b = append(b, ',')
	b = appendStrAttr(b, "cloud.region", g.pick(regions))
	b = append(b, ',')
	b = append(b, `{"key":"host.name","value":{"stringValue":"pod-`...)
	b = strconv.AppendInt(b, int64(g.rng.IntN(400)+1), 10)
	b = append(b, `"}}]}`...)
	return b
}

func appendScope(b []byte) []byte {
	return append(b, `"scope":{"name":"`+scopeName+`","version":"`+scopeVersion+`"}`...)
}

// appendTraces writes one ExportTraceServiceRequest holding count spans whose
// global record indexes start at first.
func (g *generator) appendTraces(b []byte, first, count int) []byte {
	b = append(b, `{"resourceSpans":[{`...)
	b = g.appendResource(b)
	b = append(b, `,"scopeSpans":[{`...)
	b = appendScope(b)
	b = append(b, `,"spans":[`...)
	r := g.rng
	for i := 0; i < count; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		idx := int64(first + i)
		b = append(b, `{"traceId":"`...)
		b = appendHex64(b, r.Uint64())
		b = appendHex64(b, r.Uint64())
		b = append(b, `","spanId":"`...)
		b = appendHex64(b, r.Uint64())
		b = append(b, '"')
		if r.IntN(5) != 0 { // ~1 in 5 spans is a root and has no parent
			b = append(b, `,"parentSpanId":"`...)
			b = appendHex64(b, r.Uint64())
			b = append(b, '"')
		}
		route := routes[r.IntN(len(routes))]
		b = append(b, `,"name":"`...)
		b = append(b, route...)
		b = append(b, `","kind":`...)
		b = strconv.AppendInt(b, int64(r.IntN(5)+1), 10)
		start := baseTimeNanos + idx*recordStepNanos + r.Int64N(recordStepNanos)
		dur := 200_000 + r.Int64N(800_000_000-200_000+1) // 0.2 ms .. 800 ms
		b = append(b, `,"startTimeUnixNano":"`...)
		b = strconv.AppendInt(b, start, 10)
		b = append(b, `","endTimeUnixNano":"`...)
		b = strconv.AppendInt(b, start+dur, 10)
		b = append(b, `","attributes":[`...)
		b = appendStrAttr(b, "http.method", methods[r.IntN(len(methods))])
		b = append(b, ',')
		b = appendStrAttr(b, "http.route", route)
		b = append(b, ',')
		code := statusCodes[r.IntN(len(statusCodes))]
		b = appendIntAttr(b, "http.status_code", code)
		b = append(b, `,{"key":"retry","value":{"boolValue":`...)
		b = strconv.AppendBool(b, r.IntN(10) == 0)
		b = append(b, `}}`...)
		if g.keys != nil {
			b = g.keys.appendKeys(b)
		}
		b = append(b, `],"status":{"code":`...)
		if code >= 500 {
			b = append(b, '2') // STATUS_CODE_ERROR
		} else {
			b = append(b, '1') // STATUS_CODE_OK
		}
		b = append(b, `}}`...)
	}
	b = append(b, `]}]}]}`...)
	return b
}

// appendLogs writes one ExportLogsServiceRequest holding count log records
// whose global record indexes start at first.
func (g *generator) appendLogs(b []byte, first, count int) []byte {
	b = append(b, `{"resourceLogs":[{`...)
	b = g.appendResource(b)
	b = append(b, `,"scopeLogs":[{`...)
	b = appendScope(b)
	b = append(b, `,"logRecords":[`...)
	r := g.rng
	for i := 0; i < count; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		ts := baseTimeNanos + int64(first+i)*recordStepNanos
		sev := r.IntN(len(severityNumbers))
		method := methods[r.IntN(len(methods))]
		route := routes[r.IntN(len(routes))]
		code := statusCodes[r.IntN(len(statusCodes))]
		ms := int64(r.IntN(800) + 1)
		b = append(b, `{"timeUnixNano":"`...)
		b = strconv.AppendInt(b, ts, 10)
		b = append(b, `","observedTimeUnixNano":"`...)
		b = strconv.AppendInt(b, ts, 10)
		b = append(b, `","severityNumber":`...)
		b = strconv.AppendInt(b, severityNumbers[sev], 10)
		b = append(b, `,"severityText":"`...)
		b = append(b, severityTexts[sev]...)
		b = append(b, `","body":{"stringValue":"`...)
		b = append(b, method...)
		b = append(b, ' ')
		b = append(b, route...)
		b = append(b, " returned "...)
		b = strconv.AppendInt(b, code, 10)
		b = append(b, " in "...)
		b = strconv.AppendInt(b, ms, 10)
		b = append(b, ` ms"},"attributes":[`...)
		b = appendStrAttr(b, "http.method", method)
		b = append(b, ',')
		b = appendStrAttr(b, "http.route", route)
		b = append(b, ',')
		b = appendIntAttr(b, "http.status_code", code)
		b = append(b, `,{"key":"user.id","value":{"stringValue":"user-`...)
		b = strconv.AppendInt(b, int64(r.IntN(10000)+1), 10)
		b = append(b, `"}}`...)
		if g.keys != nil {
			b = g.keys.appendKeys(b)
		}
		b = append(b, `],"traceId":"`...)
		b = appendHex64(b, r.Uint64())
		b = appendHex64(b, r.Uint64())
		b = append(b, `","spanId":"`...)
		b = appendHex64(b, r.Uint64())
		b = append(b, `"}`...)
	}
	b = append(b, `]}]}]}`...)
	return b
}

// appendMetrics writes one ExportMetricsServiceRequest holding count sum data
// points (up to metricsPerRequest metrics of pointsPerMetric points each)
// whose global record indexes start at first. req is the request number; it
// makes the cumulative values grow from one request to the next.
func (g *generator) appendMetrics(b []byte, req, first, count int) []byte {
	b = append(b, `{"resourceMetrics":[{`...)
	b = g.appendResource(b)
	b = append(b, `,"scopeMetrics":[{`...)
	b = appendScope(b)
	b = append(b, `,"metrics":[`...)
	r := g.rng
	growth := int64(req + 1)
	idx := first
	for m := 0; m < metricsPerRequest && idx < first+count; m++ {
		def := &metricDefs[m]
		if m > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":"`...)
		b = append(b, def.name...)
		b = append(b, `","description":"`...)
		b = append(b, def.description...)
		b = append(b, `","unit":"`...)
		b = append(b, def.unit...)
		b = append(b, `","sum":{"dataPoints":[`...)
		points := min(pointsPerMetric, first+count-idx)
		for p := 0; p < points; p++ {
			if p > 0 {
				b = append(b, ',')
			}
			route := routes[r.IntN(len(routes))]
			code := statusCodes[r.IntN(len(statusCodes))]
			b = append(b, `{"attributes":[`...)
			b = appendStrAttr(b, "http.route", route)
			b = append(b, ',')
			b = appendIntAttr(b, "http.status_code", code)
			b = append(b, `],"startTimeUnixNano":"`...)
			b = strconv.AppendInt(b, baseTimeNanos, 10)
			b = append(b, `","timeUnixNano":"`...)
			b = strconv.AppendInt(b, baseTimeNanos+int64(idx)*recordStepNanos, 10)
			if def.double {
				// Milliseconds with three decimals: an integer number of
				// microseconds, so the text is exact and short.
				us := growth*1_000_000 + r.Int64N(1_000_000_000)
				b = append(b, `","asDouble":`...)
				b = strconv.AppendFloat(b, float64(us)/1000, 'f', -1, 64)
			} else {
				var v int64
				switch m {
				case 2: // bytes
					v = growth*100_000 + r.Int64N(50_000_000)
				default:
					v = growth*100 + r.Int64N(100_000)
				}
				b = append(b, `","asInt":"`...)
				b = strconv.AppendInt(b, v, 10)
				b = append(b, '"')
			}
			b = append(b, '}')
			idx++
		}
		b = append(b, `],"aggregationTemporality":2,"isMonotonic":true}}`...)
	}
	b = append(b, `]}]}]}`...)
	return b
}

// appendStrAttr writes a KeyValue with a string value. key and val must not
// need JSON escaping (all generator vocabularies are plain ASCII).
func appendStrAttr(b []byte, key, val string) []byte {
	b = append(b, `{"key":"`...)
	b = append(b, key...)
	b = append(b, `","value":{"stringValue":"`...)
	b = append(b, val...)
	return append(b, `"}}`...)
}

// appendIntAttr writes a KeyValue with an int value (a decimal string, as
// proto3 JSON encodes int64).
func appendIntAttr(b []byte, key string, val int64) []byte {
	b = append(b, `{"key":"`...)
	b = append(b, key...)
	b = append(b, `","value":{"intValue":"`...)
	b = strconv.AppendInt(b, val, 10)
	return append(b, `"}}`...)
}

const hexDigits = "0123456789abcdef"

// appendHex64 writes v as 16 lowercase hex digits (big-endian byte order).
func appendHex64(b []byte, v uint64) []byte {
	var buf [16]byte
	for i := 15; i >= 0; i-- {
		buf[i] = hexDigits[v&0xf]
		v >>= 4
	}
	return append(b, buf[:]...)
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

const usage = `usage: gen traces|logs|metrics|gharchive [-n N] [-seed S] [-o FILE] [-gzip]`

// run is main without the process exit, for tests.
func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, usage)
		fs.PrintDefaults()
	}
	n := fs.Int("n", 100000, "total number of records (spans, log records or data points)")
	seed := fs.Uint64("seed", 1, "random seed; the same seed gives byte-identical output")
	out := fs.String("o", "", "output file (default stdout)")
	gz := fs.Bool("gzip", false, "gzip the output")
	var keys KeySpec
	fs.IntVar(&keys.Keys, "keys", 0, "extra string attributes app.header.x-<i> on every span and log record, i from this many keys (0: none)")
	fs.IntVar(&keys.PerRecord, "keys-per-record", 10, "distinct extra keys per record (with -keys)")
	dist := fs.String("key-dist", "uniform", "how the extra keys are drawn: uniform or zipf (s = 1.1)")

	// Accept the signal before or after the flags.
	var kind string
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		kind, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	rest := fs.Args()
	if kind == "" && len(rest) > 0 {
		kind = rest[0]
		if err := fs.Parse(rest[1:]); err != nil {
			return err
		}
		rest = fs.Args()
	}
	if kind == "" {
		fs.Usage()
		return errors.New("missing signal")
	}
	if len(rest) > 0 {
		return fmt.Errorf("unexpected arguments: %q", rest)
	}
	if batchSize(kind) == 0 && kind != "gharchive" {
		return fmt.Errorf("unknown signal %q (want traces, logs, metrics or gharchive)", kind)
	}
	if *n < 0 {
		return errors.New("-n must be >= 0")
	}
	switch *dist {
	case "uniform":
	case "zipf":
		keys.Zipf = true
	default:
		return fmt.Errorf("-key-dist %q: want uniform or zipf", *dist)
	}
	if keys.Keys < 0 || keys.PerRecord < 0 {
		return errors.New("-keys and -keys-per-record must be >= 0")
	}

	startTime := time.Now()
	sink := stdout
	var file *os.File
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			return err
		}
		file = f
		defer file.Close()
		sink = f
	}
	counter := &countingWriter{w: sink}

	var gzw *gzip.Writer
	var gzBuf *bufio.Writer
	var lines io.Writer = counter
	if *gz {
		gzBuf = bufio.NewWriterSize(counter, bufSize)
		gzw = gzip.NewWriter(gzBuf)
		lines = gzw
	}
	bw := bufio.NewWriterSize(lines, bufSize)

	st, err := generateKeys(bw, kind, *n, *seed, keys)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil && gzw != nil {
		err = gzw.Close()
		if err == nil {
			err = gzBuf.Flush()
		}
	}
	if err == nil && file != nil {
		err = file.Close()
	}
	if err != nil {
		return err
	}
	secs := time.Since(startTime).Seconds()
	if *gz {
		fmt.Fprintf(stderr, "gen %s: records=%d requests=%d bytes=%d (uncompressed %d) seconds=%.3f\n",
			kind, st.records, st.requests, counter.n, st.bytes, secs)
	} else {
		fmt.Fprintf(stderr, "gen %s: records=%d requests=%d bytes=%d seconds=%.3f\n",
			kind, st.records, st.requests, counter.n, secs)
	}
	return nil
}

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "gen:", err)
		}
		os.Exit(2)
	}
}
