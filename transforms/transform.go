package transforms

import (
	"errors"
	"fmt"
	"strings"

	"github.com/shredduck/shredduck/shred"
)

// Transform appends the rows of one export request to a batch.
//
// AppendJSON and AppendProto append every record of the request (one row
// per span, log record or data point) and return how many they appended.
// On error they append nothing: rows already appended for the request are
// removed again. They must not retain data; the caller reuses it.
type Transform interface {
	Name() string
	// Table is the default table name.
	Table() string
	// Core lists the fixed columns, filled for every row.
	Core() []shred.CoreColumn
	// Overflow names, per attribute level, the core JSON column that holds
	// keys beyond the table's column limit.
	Overflow() [shred.NumLevels]string
	AppendJSON(b *shred.Batch, data []byte) (int, error)
	AppendProto(b *shred.Batch, data []byte) (int, error)
}

// Transform names.
const (
	Auto        = "auto"
	OTLPTraces  = "otlp-traces"
	OTLPLogs    = "otlp-logs"
	OTLPMetrics = "otlp-metrics"
)

// ErrWrongSignal reports data of another signal than the transform's.
var ErrWrongSignal = errors.New("request is not of the transform's signal")

// ErrNotOTLP reports a JSON object that has none of the OTLP request keys.
var ErrNotOTLP = errors.New("not an OTLP export request: no resourceSpans, resourceLogs or resourceMetrics")

// Lookup returns the named transform; "none" is NewNDJSON with the default
// depth limit.
func Lookup(name string) (Transform, error) {
	switch name {
	case OTLPTraces:
		return Traces, nil
	case OTLPLogs:
		return Logs, nil
	case OTLPMetrics:
		return Metrics, nil
	case None:
		return NewNDJSON(DefaultMaxDepth), nil
	}
	return nil, fmt.Errorf("unknown transform %q (want %s, %s, %s, %s or %s)", name, Auto, OTLPTraces, OTLPLogs, OTLPMetrics, None)
}

// All lists the OTLP transforms (not none, which is made with a depth
// limit: NewNDJSON).
func All() []Transform { return []Transform{Traces, Logs, Metrics} }

// DetectJSON picks the transform of an OTLP/JSON export request from its
// top-level key (resourceSpans, resourceLogs or resourceMetrics, or their
// proto names). It returns nil, nil for a request without any of them
// for an empty request ({}), ErrNotOTLP for an object with only other
// keys, and an error for data that is not a JSON object.
func DetectJSON(data []byte) (Transform, error) {
	var it jsonIter
	it.Reset(data)
	if !it.ObjectStart() {
		return nil, fmt.Errorf("not a JSON object: %w", it.Err())
	}
	members := 0
	for {
		key, ok := it.NextKey()
		if !ok {
			break
		}
		members++
		switch string(key) {
		case "resourceSpans", "resource_spans":
			return Traces, nil
		case "resourceLogs", "resource_logs":
			return Logs, nil
		case "resourceMetrics", "resource_metrics":
			return Metrics, nil
		}
		it.Skip()
	}
	if it.Err() == nil && it.More() {
		it.ReportError(it.Offset(), "unexpected data after the request object")
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	if members > 0 {
		return nil, ErrNotOTLP
	}
	return nil, nil
}

// DetectProto picks the transform of a binary OTLP export request: by the
// file name when it names a signal, otherwise by which request type the
// bytes decode as (spans first, then logs, then metrics).
func DetectProto(name string, data []byte) (Transform, error) {
	lower := strings.ToLower(name)
	switch {
	case strings.Contains(lower, "trace") || strings.Contains(lower, "span"):
		return Traces, nil
	case strings.Contains(lower, "log"):
		return Logs, nil
	case strings.Contains(lower, "metric"):
		return Metrics, nil
	}
	if len(data) == 0 {
		return nil, nil
	}
	for _, t := range All() {
		if t.(protoProber).probeProto(data) {
			return t, nil
		}
	}
	return nil, errors.New("cannot tell the signal of this protobuf request; name it with --transform")
}

type protoProber interface {
	probeProto(data []byte) bool
}
