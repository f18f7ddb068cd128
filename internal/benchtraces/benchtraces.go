// Package benchtraces generates the OTLP/JSON traces requests that the Go
// benchmarks and some tests load: the shape bench/gen writes (80 spans per
// request; resource attributes service.name, deployment.environment,
// cloud.region, host.name; span attributes http.method, http.route,
// http.status_code, retry; hex ids; 64-bit integers as strings; enums as
// integers), from a fixed seed, without bench/gen's command line.
package benchtraces

import (
	"math/rand/v2"
	"strconv"
)

// SpansPerRequest is the number of spans of every request but the last.
const SpansPerRequest = 80

// BaseTime is the first span's start (Unix nanoseconds, 2026-01-01T00:00:00Z).
const BaseTime = 1767225600000000000

// The values the generated spans pick from (bench/gen uses them too).
var (
	Services     = []string{"checkout", "cart", "payments", "search", "auth", "inventory", "shipping", "frontend"}
	Environments = []string{"production", "staging"}
	Regions      = []string{"us-east-1", "us-west-2", "eu-west-1", "ap-south-1"}
	Routes       = []string{"/api/v1/orders", "/api/v1/cart", "/api/v1/pay", "/api/v1/search", "/login", "/health"}
	Methods      = []string{"GET", "POST", "PUT", "DELETE"}
	StatusCodes  = []int64{200, 200, 200, 201, 400, 404, 500}
)

// Lines returns spans spans as OTLP/JSON export requests of
// SpansPerRequest spans each (the last may have fewer), one per element,
// without a line end. The same seed gives the same bytes.
func Lines(spans int, seed uint64) [][]byte {
	r := rand.New(rand.NewPCG(seed, 0x5348524544445543))
	pick := func(l []string) string { return l[r.IntN(len(l))] }
	hex64 := func(b []byte, v uint64) []byte {
		const digits = "0123456789abcdef"
		for i := 60; i >= 0; i -= 4 {
			b = append(b, digits[(v>>uint(i))&0xf])
		}
		return b
	}
	strAttr := func(b []byte, k, v string) []byte {
		return append(append(append(append(b, `{"key":"`...), k...), `","value":{"stringValue":"`...), v+`"}}`...)
	}
	var lines [][]byte
	for first := 0; first < spans; first += SpansPerRequest {
		b := []byte(`{"resourceSpans":[{"resource":{"attributes":[`)
		b = strAttr(b, "service.name", pick(Services))
		b = append(b, ',')
		b = strAttr(b, "deployment.environment", pick(Environments))
		b = append(b, ',')
		b = strAttr(b, "cloud.region", pick(Regions))
		b = append(b, ',')
		b = strAttr(b, "host.name", "pod-"+strconv.Itoa(r.IntN(400)+1))
		b = append(b, `]},"scopeSpans":[{"scope":{"name":"shredduck-gen","version":"1.0.0"},"spans":[`...)
		for i := first; i < min(first+SpansPerRequest, spans); i++ {
			if i > first {
				b = append(b, ',')
			}
			b = append(b, `{"traceId":"`...)
			b = hex64(hex64(b, r.Uint64()), r.Uint64())
			b = append(b, `","spanId":"`...)
			b = append(hex64(b, r.Uint64()), '"')
			if r.IntN(5) != 0 {
				b = append(b, `,"parentSpanId":"`...)
				b = append(hex64(b, r.Uint64()), '"')
			}
			route := pick(Routes)
			b = append(append(append(b, `,"name":"`...), route...), `","kind":`...)
			b = strconv.AppendInt(b, int64(r.IntN(5)+1), 10)
			start := BaseTime + int64(i)*1_000_000 + r.Int64N(1_000_000)
			b = append(b, `,"startTimeUnixNano":"`...)
			b = strconv.AppendInt(b, start, 10)
			b = append(b, `","endTimeUnixNano":"`...)
			b = strconv.AppendInt(b, start+200_000+r.Int64N(800_000_000), 10)
			b = append(b, `","attributes":[`...)
			b = strAttr(b, "http.method", pick(Methods))
			b = append(b, ',')
			b = strAttr(b, "http.route", route)
			code := StatusCodes[r.IntN(len(StatusCodes))]
			b = append(b, `,{"key":"http.status_code","value":{"intValue":"`...)
			b = strconv.AppendInt(b, code, 10)
			b = append(b, `"}},{"key":"retry","value":{"boolValue":`...)
			b = strconv.AppendBool(b, r.IntN(10) == 0)
			b = append(b, `}}],"status":{"code":`...)
			if code >= 500 {
				b = append(b, '2')
			} else {
				b = append(b, '1')
			}
			b = append(b, `}}`...)
		}
		lines = append(lines, append(b, `]}]}]}`...))
	}
	return lines
}
