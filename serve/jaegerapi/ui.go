package jaegerapi

import (
	"strconv"
	"strings"

	"github.com/jaegertracing/jaeger-idl/model/v1"
	jaegertranslator "github.com/open-telemetry/opentelemetry-collector-contrib/pkg/translator/jaeger"
)

// The Jaeger UI's JSON of a trace (the shapes of Jaeger's uimodel).
type (
	uiTrace struct {
		TraceID   string               `json:"traceID"`
		Spans     []uiSpan             `json:"spans"`
		Processes map[string]uiProcess `json:"processes"`
		Warnings  []string             `json:"warnings"`
	}
	uiSpan struct {
		TraceID       string        `json:"traceID"`
		SpanID        string        `json:"spanID"`
		Flags         uint32        `json:"flags,omitempty"`
		OperationName string        `json:"operationName"`
		References    []uiReference `json:"references"`
		StartTime     uint64        `json:"startTime"` // µs since the epoch
		Duration      uint64        `json:"duration"`  // µs
		Tags          []uiKeyValue  `json:"tags"`
		Logs          []uiLog       `json:"logs"`
		ProcessID     string        `json:"processID,omitempty"`
		Warnings      []string      `json:"warnings"`
	}
	uiReference struct {
		RefType string `json:"refType"`
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	}
	uiProcess struct {
		ServiceName string       `json:"serviceName"`
		Tags        []uiKeyValue `json:"tags"`
	}
	uiLog struct {
		Timestamp uint64       `json:"timestamp"`
		Fields    []uiKeyValue `json:"fields"`
	}
	uiKeyValue struct {
		Key   string `json:"key"`
		Type  string `json:"type,omitempty"`
		Value any    `json:"value"`
	}
)

// uiTraces converts traces as Jaeger's query service does: the
// Collector's translator to Jaeger's model, its adjusters unless raw, and
// the UI's JSON.
func uiTraces(traces []trace, raw bool) []uiTrace {
	out := make([]uiTrace, 0, len(traces))
	for _, t := range traces {
		mt := modelTrace(t)
		if !raw {
			adjust(mt)
		}
		ut := toUI(mt)
		if t.cut {
			ut.Warnings = append(ut.Warnings, cutWarning)
		}
		out = append(out, ut)
	}
	return out
}

// modelTrace translates t, each span with its own copy of its batch's
// process (as Jaeger's v1adapter gives them).
func modelTrace(t trace) *model.Trace {
	var spans []*model.Span
	for _, b := range jaegertranslator.ProtoFromTraces(t.traces) {
		for _, sp := range b.Spans {
			if sp.Process == nil {
				p := *b.Process
				sp.Process = &p
			}
			if sp.Process.Tags == nil {
				sp.Process.Tags = []model.KeyValue{}
			}
			if sp.References == nil {
				sp.References = []model.SpanRef{}
			}
			if sp.Tags == nil {
				sp.Tags = []model.KeyValue{}
			}
			spans = append(spans, sp)
		}
	}
	return &model.Trace{Spans: spans}
}

// JavaScript's safe integers: larger ones go to the UI as strings.
const jsMaxSafeInteger = int64(1)<<53 - 1

func toUI(t *model.Trace) uiTrace {
	out := uiTrace{Spans: make([]uiSpan, len(t.Spans)), Processes: map[string]uiProcess{}, Warnings: t.Warnings}
	var procs []*model.Process // p1, p2, ... in order of first use
	for i, sp := range t.Spans {
		if i == 0 {
			out.TraceID = sp.TraceID.String()
		}
		pid := ""
		for j, p := range procs {
			if p.Equal(sp.Process) {
				pid = "p" + strconv.Itoa(j+1)
				break
			}
		}
		if pid == "" {
			procs = append(procs, sp.Process)
			pid = "p" + strconv.Itoa(len(procs))
			out.Processes[pid] = uiProcess{ServiceName: sp.Process.ServiceName, Tags: uiKeyValues(sp.Process.Tags)}
		}
		us := uiSpan{
			TraceID: sp.TraceID.String(), SpanID: sp.SpanID.String(), Flags: uint32(sp.Flags),
			OperationName: sp.OperationName, References: make([]uiReference, 0, len(sp.References)),
			StartTime: model.TimeAsEpochMicroseconds(sp.StartTime), Duration: model.DurationAsMicroseconds(sp.Duration),
			Tags: uiKeyValues(sp.Tags), Logs: make([]uiLog, len(sp.Logs)), ProcessID: pid, Warnings: sp.Warnings,
		}
		for _, ref := range sp.References {
			rt := "CHILD_OF"
			if ref.RefType == model.FollowsFrom {
				rt = "FOLLOWS_FROM"
			}
			us.References = append(us.References, uiReference{RefType: rt, TraceID: ref.TraceID.String(), SpanID: ref.SpanID.String()})
		}
		for j, l := range sp.Logs {
			us.Logs[j] = uiLog{Timestamp: model.TimeAsEpochMicroseconds(l.Timestamp), Fields: uiKeyValues(l.Fields)}
		}
		out.Spans[i] = us
	}
	return out
}

func uiKeyValues(kvs []model.KeyValue) []uiKeyValue {
	out := make([]uiKeyValue, len(kvs))
	for i, kv := range kvs {
		var v any
		switch kv.VType {
		case model.StringType:
			v = kv.VStr
		case model.BoolType:
			v = kv.Bool()
		case model.Int64Type:
			v = kv.Int64()
			if n := kv.Int64(); n > jsMaxSafeInteger || n < -jsMaxSafeInteger {
				v = strconv.FormatInt(n, 10)
			}
		case model.Float64Type:
			v = kv.Float64()
		case model.BinaryType:
			v = kv.Binary()
		default:
			v = kv.AsString()
		}
		out[i] = uiKeyValue{Key: kv.Key, Type: strings.ToLower(kv.VType.String()), Value: v}
	}
	return out
}
