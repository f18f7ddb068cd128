package main

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/shredduck/shredduck/internal/benchtraces"
)

const (
	tracesTopic = "otlp_spans"
	// spanTime is the first span's start (Unix nanoseconds,
	// 2026-01-01T00:00:00Z).
	spanTime = benchtraces.BaseTime
)

// records is a stream of pre-encoded Kafka records: record i holds
// spansPer spans, the streaming benchmark's light sender's shape
// (benchtraces.StreamingRequest: server spans and their database
// children), all of the record's first span's trace and keyed by its
// trace id, as the Collector's kafkaexporter writes them with
// partition_traces_by_id: true (one record per trace of a batch), in
// otlp_proto. Span ids are the span's index in the stream plus one, so
// that distinct span ids count each stored span once.
type records struct {
	spansPer int
	next     int64 // index of the next span, from 1
	bytes    int64 // record values encoded so far
}

func newRecords(spansPer int) *records { return &records{spansPer: spansPer, next: 1} }

// encode returns the next n records.
func (g *records) encode(n int) ([]*kgo.Record, error) {
	out := make([]*kgo.Record, 0, n)
	for range n {
		td := benchtraces.StreamingRequest(g.next, g.spansPer, int(g.next%16), spanTime)
		spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
		trace := spans.At(0).TraceID()
		for j := 1; j < spans.Len(); j++ {
			spans.At(j).SetTraceID(trace)
		}
		g.next += int64(g.spansPer)
		v, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
		if err != nil {
			return nil, fmt.Errorf("cannot encode a trace export request: %w", err)
		}
		g.bytes += int64(len(v))
		out = append(out, &kgo.Record{Topic: tracesTopic, Key: trace[:], Value: v})
	}
	return out, nil
}
