package transforms

import (
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/shredduck/shredduck/shred"
)

// OTLP/protobuf logs, decoded by otlp_pb.go's wire reader.

var logsPB = pbSignal{block: &logsBlock, core: logsCore, noun: "log record", record: (*pbDecoder).logRecord}

func (logsTransform) AppendProto(b *shred.Batch, data []byte) (int, error) {
	return appendPB(b, data, &logsPB)
}

// LogRecord, opentelemetry/proto/logs/v1/logs.proto.
const (
	logRecordTime              = 1  // LogRecord: fixed64 time_unix_nano = 1;
	logRecordSeverityNumber    = 2  // LogRecord: SeverityNumber severity_number = 2;
	logRecordSeverityText      = 3  // LogRecord: string severity_text = 3;
	logRecordBody              = 5  // LogRecord: opentelemetry.proto.common.v1.AnyValue body = 5;
	logRecordAttributes        = 6  // LogRecord: repeated opentelemetry.proto.common.v1.KeyValue attributes = 6;
	logRecordDroppedAttributes = 7  // LogRecord: uint32 dropped_attributes_count = 7;
	logRecordFlags             = 8  // LogRecord: fixed32 flags = 8;
	logRecordTraceID           = 9  // LogRecord: bytes trace_id = 9;
	logRecordSpanID            = 10 // LogRecord: bytes span_id = 10;
	logRecordObservedTime      = 11 // LogRecord: fixed64 observed_time_unix_nano = 11;
	logRecordEventName         = 12 // LogRecord: string event_name = 12;
)

// logRecord reads one LogRecord: its fields first (in any order), then
// appends its row.
func (d *pbDecoder) logRecord(b *shred.Batch, msg []byte) error {
	var r logRecord
	d.attrs, d.bodies = d.attrs[:0], d.bodies[:0]
	err := pbEach(msg, func(f pbField) error {
		var err error
		switch f.num {
		case logRecordTime, logRecordObservedTime:
			if err = f.want(protowire.Fixed64Type, "LogRecord", "time"); err != nil {
				return err
			}
			if f.num == logRecordTime {
				r.time = f.u
			} else {
				r.observed = f.u
			}
		case logRecordSeverityNumber, logRecordDroppedAttributes:
			if err = f.want(protowire.VarintType, "LogRecord", "varint"); err != nil {
				return err
			}
			if f.num == logRecordSeverityNumber {
				r.severity = int32(f.u)
			} else {
				r.droppedAttrs = uint32(f.u)
			}
		case logRecordFlags:
			if err = f.want(protowire.Fixed32Type, "LogRecord", "flags"); err != nil {
				return err
			}
			r.flags = uint32(f.u)
		case logRecordSeverityText, logRecordBody, logRecordAttributes, logRecordTraceID, logRecordSpanID, logRecordEventName:
			if err = f.want(protowire.BytesType, "LogRecord", "bytes"); err != nil {
				return err
			}
			switch f.num {
			case logRecordSeverityText:
				r.severityText = f.b
			case logRecordBody:
				d.bodies = append(d.bodies, f.b) // a body given twice merges
			case logRecordAttributes:
				d.attrs = append(d.attrs, f.b)
			case logRecordTraceID:
				r.traceID, err = pbID(f.b, 16, "TraceID")
			case logRecordSpanID:
				r.spanID, err = pbID(f.b, 8, "SpanID")
			case logRecordEventName:
				r.eventName = f.b
			}
		}
		return err
	})
	if err != nil {
		return err
	}
	r.bodyType = bodyNone
	if len(d.bodies) > 0 {
		if r.body, r.bodyType, err = d.appendBody(d.scratch[:0], d.bodies); err != nil {
			return err
		}
		d.scratch = r.body
	}
	row := b.Rows
	appendLogCore(b, &r)
	if err := d.endRecord(b, row); err != nil {
		return err
	}
	if err := r.checkTimes(); err != nil {
		b.Truncate(row)
		d.rej.reject(err)
	}
	return nil
}

// appendBody renders a log body as appendPdataBody does: a string
// verbatim, any other kind as JSON, with its body type (bodyNone for an
// empty value). The body is an AnyValue at the top (depth 0).
func (d *pbDecoder) appendBody(dst []byte, msgs [][]byte) ([]byte, int, error) {
	kind, v, composite, err := pbAnyValueParts(msgs, 0)
	if err != nil {
		return nil, bodyNone, err
	}
	switch kind {
	case pbEmpty:
		return dst, bodyNone, nil
	case pbArray, pbKVList:
		out, err := appendPBCompositeJSON(dst, kind, composite, 1)
		if kind == pbArray {
			return out, bodyArray, err
		}
		return out, bodyKvlist, err
	}
	switch v.Kind {
	case shred.String:
		return append(dst, v.Bytes...), bodyString, nil
	case shred.Int64:
		return strconv.AppendInt(dst, v.Int, 10), bodyInt, nil
	case shred.Double:
		return shred.AppendJSON(dst, v), bodyDouble, nil
	case shred.Bool:
		return strconv.AppendBool(dst, v.Int != 0), bodyBool, nil
	}
	return shred.AppendJSON(dst, v), bodyBytes, nil // shred.Blob
}
