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

// logRecord reads one LogRecord: its fields first (in any order), then
// appends its row.
func (d *pbDecoder) logRecord(b *shred.Batch, msg []byte) error {
	var r logRecord
	d.attrs, d.bodies = d.attrs[:0], d.bodies[:0]
	err := pbEach(msg, func(f pbField) error {
		var err error
		switch f.num {
		case 1, 11:
			if err = f.want(protowire.Fixed64Type, "LogRecord", "time"); err != nil {
				return err
			}
			if f.num == 1 {
				r.time = f.u
			} else {
				r.observed = f.u
			}
		case 2, 7:
			if err = f.want(protowire.VarintType, "LogRecord", "varint"); err != nil {
				return err
			}
			if f.num == 2 {
				r.severity = int32(f.u)
			} else {
				r.droppedAttrs = uint32(f.u)
			}
		case 8:
			if err = f.want(protowire.Fixed32Type, "LogRecord", "flags"); err != nil {
				return err
			}
			r.flags = uint32(f.u)
		case 3, 5, 6, 9, 10, 12:
			if err = f.want(protowire.BytesType, "LogRecord", "bytes"); err != nil {
				return err
			}
			switch f.num {
			case 3:
				r.severityText = f.b
			case 5:
				d.bodies = append(d.bodies, f.b) // a body given twice merges
			case 6:
				d.attrs = append(d.attrs, f.b)
			case 9:
				r.traceID, err = pbID(f.b, 16, "TraceID")
			case 10:
				r.spanID, err = pbID(f.b, 8, "SpanID")
			case 12:
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
