package jsonscan

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// otlpLine returns one OTLP/JSON ExportTraceServiceRequest line with the
// given number of spans, each with 4 attributes, hex ids and string nanos.
func otlpLine(spans int) []byte {
	var b strings.Builder
	b.WriteString(`{"resourceSpans":[{"resource":{"attributes":[` +
		`{"key":"service.name","value":{"stringValue":"checkout-service"}},` +
		`{"key":"service.version","value":{"stringValue":"1.4.2"}},` +
		`{"key":"host.name","value":{"stringValue":"ip-10-0-12-34.ec2.internal"}}],` +
		`"droppedAttributesCount":0},"scopeSpans":[{"scope":{"name":"io.opentelemetry.contrib.http","version":"0.42.0"},"spans":[`)
	for i := 0; i < spans; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		start := uint64(1700000000000000000) + uint64(i)*1234567
		fmt.Fprintf(&b, `{"traceId":"5b8efff798038103d269b633813fc6%02x","spanId":"eee19b7ec3c1b1%02x",`+
			`"parentSpanId":"eee19b7ec3c1b173","name":"GET /api/v1/checkout/%d","kind":2,`+
			`"startTimeUnixNano":"%d","endTimeUnixNano":"%d","attributes":[`+
			`{"key":"http.method","value":{"stringValue":"GET"}},`+
			`{"key":"http.status_code","value":{"intValue":"200"}},`+
			`{"key":"http.url","value":{"stringValue":"https://shop.example.com/api/v1/checkout/%d?currency=EUR"}},`+
			`{"key":"http.duration_ms","value":{"doubleValue":12.75}}],`+
			`"events":[],"links":[],"status":{"code":1,"message":""}}`,
			i, i, i, start, start+987654, i)
	}
	b.WriteString(`]}],"schemaUrl":"https://opentelemetry.io/schemas/1.21.0"}]}`)
	return []byte(b.String())
}

// sink keeps benchmark results alive.
var sink struct {
	n int
	f float64
	u uint64
}

// visitAll walks every value generically, reading each scalar with the
// matching Read method.
func visitAll(it *Iter) {
	switch it.Next() {
	case String:
		sink.n += len(it.ReadString())
	case Number:
		sink.f += it.ReadFloat64()
	case Bool:
		if it.ReadBool() {
			sink.n++
		}
	case Null:
		it.ReadNull()
	case Object:
		it.ObjectStart()
		for k, ok := it.NextKey(); ok; k, ok = it.NextKey() {
			sink.n += len(k)
			visitAll(it)
		}
	case Array:
		it.ArrayStart()
		for it.NextElem() {
			visitAll(it)
		}
	default:
		it.Skip()
	}
}

// decodeTyped walks the document the way an OTLP decoder does: it
// dispatches on keys and reads typed values (nanos as uint64 from strings,
// intValue as int64 from strings, kind as int), visiting every value.
func decodeTyped(it *Iter) {
	if !it.ObjectStart() {
		return
	}
	for k, ok := it.NextKey(); ok; k, ok = it.NextKey() {
		switch string(k) {
		case "startTimeUnixNano", "endTimeUnixNano", "timeUnixNano":
			sink.u += it.ReadUint64()
		case "intValue", "kind", "code", "droppedAttributesCount":
			sink.u += uint64(it.ReadInt64())
		case "doubleValue":
			sink.f += it.ReadFloat64()
		case "traceId", "spanId", "parentSpanId", "name", "key", "stringValue",
			"message", "schemaUrl", "version":
			sink.n += len(it.ReadString())
		default:
			switch it.Next() {
			case Object:
				decodeTyped(it)
			case Array:
				it.ArrayStart()
				for it.NextElem() {
					if it.Next() == Object {
						decodeTyped(it)
					} else {
						it.Skip()
					}
				}
			default:
				it.Skip()
			}
		}
	}
}

func BenchmarkIterOTLP(b *testing.B) {
	line := otlpLine(20)
	var it Iter
	run := func(name string, fn func()) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(line)))
			b.ReportAllocs()
			for b.Loop() {
				it.Reset(line)
				fn()
				if it.Err() != nil {
					b.Fatal(it.Err())
				}
			}
		})
	}
	run("typed", func() { decodeTyped(&it) })
	run("generic", func() { visitAll(&it) })
	run("skip", func() { it.Skip() })
	b.Run("encoding_json_valid", func(b *testing.B) {
		b.SetBytes(int64(len(line)))
		b.ReportAllocs()
		for b.Loop() {
			if !json.Valid(line) {
				b.Fatal("invalid")
			}
		}
	})
}
