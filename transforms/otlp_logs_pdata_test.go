package transforms

import (
	"strconv"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/shredduck/shredduck/shred"
)

// appendLogsPdata is the pdata-based decoder that AppendProto replaced,
// kept as the reference FuzzLogsProtoDirect compares it with.
func appendLogsPdata(b *shred.Batch, data []byte) (int, error) {
	ld, err := (&plog.ProtoUnmarshaler{}).UnmarshalLogs(data)
	if err != nil {
		return 0, protoError(len(data), err)
	}
	return refPasses(b, logsCore, "log record", func(r *rejects) {
		var res, scope scopeInfo
		var scratch, body []byte
		for _, rl := range ld.ResourceLogs().All() {
			pdataResource(&res, rl.Resource(), rl.SchemaUrl())
			resStart := b.Rows
			for _, sl := range rl.ScopeLogs().All() {
				pdataScope(&scope, sl.Scope(), sl.SchemaUrl())
				scopeStart := b.Rows
				for _, l := range sl.LogRecords().All() {
					if r.begin() {
						continue
					}
					tid, sid := l.TraceID(), l.SpanID()
					var bt int
					body, bt = appendPdataBody(body[:0], l.Body())
					lr := logRecord{
						time: uint64(l.Timestamp()), observed: uint64(l.ObservedTimestamp()),
						severity: int32(l.SeverityNumber()), severityText: []byte(l.SeverityText()),
						body: body, bodyType: bt,
						traceID: tid[:], spanID: sid[:], flags: uint32(l.Flags()),
						eventName: []byte(l.EventName()), droppedAttrs: l.DroppedAttributesCount(),
					}
					row := b.Rows
					appendLogCore(b, &lr)
					scratch = setPdataAttrs(b, b.Rows, l.Attributes(), scratch)
					b.EndRow()
					if refRejectLate(b, r, row, lr.time, lr.observed) {
						continue
					}
					r.rows(1)
				}
				logsBlock.fillScope(b, &scope, scopeStart)
			}
			logsBlock.fillResource(b, &res, resStart)
		}
	})
}

// appendPdataBody renders a log body: a string verbatim, any other kind as
// JSON. It returns the body type (bodyNone for an empty value).
func appendPdataBody(dst []byte, v pcommon.Value) ([]byte, int) {
	switch v.Type() {
	case pcommon.ValueTypeEmpty:
		return dst, bodyNone
	case pcommon.ValueTypeStr:
		return append(dst, v.Str()...), bodyString
	case pcommon.ValueTypeInt:
		return strconv.AppendInt(dst, v.Int(), 10), bodyInt
	case pcommon.ValueTypeDouble:
		return shred.AppendJSON(dst, shred.Value{Kind: shred.Double, Float: v.Double()}), bodyDouble
	case pcommon.ValueTypeBool:
		return strconv.AppendBool(dst, v.Bool()), bodyBool
	case pcommon.ValueTypeBytes:
		return shred.AppendJSON(dst, shred.Value{Kind: shred.Blob, Bytes: v.Bytes().AsRaw()}), bodyBytes
	case pcommon.ValueTypeSlice:
		return appendPdataJSON(dst, v), bodyArray
	case pcommon.ValueTypeMap:
		return appendPdataJSON(dst, v), bodyKvlist
	}
	return dst, bodyNone
}

// FuzzLogsProtoDirect checks the direct protobuf decoder of logs against
// the pdata-based one it replaced.
func FuzzLogsProtoDirect(f *testing.F) {
	fuzzProtoDirect(f, Logs, appendLogsPdata, nil)
}

// benchLogProtos is the official OTLP logs example as protobuf, 100 times.
func benchLogProtos(b *testing.B) [][]byte {
	pb, err := pdataJSONToProto(Logs, fuzzPrefix(b)[Logs])
	if err != nil {
		b.Fatal(err)
	}
	reqs := make([][]byte, 100)
	for i := range reqs {
		reqs[i] = pb
	}
	return reqs
}

func benchLogsProto(b *testing.B, appendFn func(*shred.Batch, []byte) (int, error)) {
	reqs := benchLogProtos(b)
	batch := shred.NewBatch(Logs.Core())
	b.ReportAllocs()
	for b.Loop() {
		for _, req := range reqs {
			if _, err := appendFn(batch, req); err != nil {
				b.Fatal(err)
			}
		}
		batch.Truncate(0)
	}
}

func BenchmarkLogsProto(b *testing.B)      { benchLogsProto(b, Logs.AppendProto) }
func BenchmarkLogsProtoPdata(b *testing.B) { benchLogsProto(b, appendLogsPdata) }
