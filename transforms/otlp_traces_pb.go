package transforms

import (
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/shredduck/shredduck/shred"
)

// OTLP/protobuf traces, decoded by otlp_pb.go's wire reader.

var tracesPB = pbSignal{block: &tracesBlock, core: tracesCore, noun: "span", record: (*pbDecoder).span}

func (tracesTransform) AppendProto(b *shred.Batch, data []byte) (int, error) {
	return appendPB(b, data, &tracesPB)
}

// Span, opentelemetry/proto/trace/v1/trace.proto.
const (
	spanTraceID           = 1  // Span: bytes trace_id = 1;
	spanSpanID            = 2  // Span: bytes span_id = 2;
	spanTraceState        = 3  // Span: string trace_state = 3;
	spanParentSpanID      = 4  // Span: bytes parent_span_id = 4;
	spanName              = 5  // Span: string name = 5;
	spanKind              = 6  // Span: SpanKind kind = 6;
	spanStartTime         = 7  // Span: fixed64 start_time_unix_nano = 7;
	spanEndTime           = 8  // Span: fixed64 end_time_unix_nano = 8;
	spanAttributes        = 9  // Span: repeated opentelemetry.proto.common.v1.KeyValue attributes = 9;
	spanDroppedAttributes = 10 // Span: uint32 dropped_attributes_count = 10;
	spanEvents            = 11 // Span: repeated Event events = 11;
	spanDroppedEvents     = 12 // Span: uint32 dropped_events_count = 12;
	spanLinks             = 13 // Span: repeated Link links = 13;
	spanDroppedLinks      = 14 // Span: uint32 dropped_links_count = 14;
	spanStatus            = 15 // Span: Status status = 15;
	spanFlags             = 16 // Span: fixed32 flags = 16;
)

// Status, opentelemetry/proto/trace/v1/trace.proto.
const (
	statusMessage = 2 // Status: string message = 2;
	statusCode    = 3 // Status: StatusCode code = 3;
)

// span reads one Span: its scalars first (fields come in any order), then
// appends its row.
func (d *pbDecoder) span(b *shred.Batch, msg []byte) error {
	var s span
	d.attrs, d.events, d.links, d.statuses = d.attrs[:0], d.events[:0], d.links[:0], d.statuses[:0]
	err := pbEach(msg, func(f pbField) error {
		var err error
		switch f.num {
		case spanTraceID, spanSpanID, spanParentSpanID:
			if err = f.want(protowire.BytesType, "Span", "id"); err != nil {
				return err
			}
			switch f.num {
			case spanTraceID:
				s.traceID, err = pbID(f.b, 16, "TraceID")
			case spanSpanID:
				s.spanID, err = pbID(f.b, 8, "SpanID")
			case spanParentSpanID:
				s.parentSpanID, err = pbID(f.b, 8, "SpanID")
			}
		case spanTraceState, spanName:
			if err = f.want(protowire.BytesType, "Span", "string"); err != nil {
				return err
			}
			if f.num == spanTraceState {
				s.traceState = f.b
			} else {
				s.name = f.b
			}
		case spanKind, spanDroppedAttributes, spanDroppedEvents, spanDroppedLinks:
			if err = f.want(protowire.VarintType, "Span", "varint"); err != nil {
				return err
			}
			switch f.num {
			case spanKind:
				s.kind = int64(int32(f.u))
			case spanDroppedAttributes:
				s.droppedAttrs = uint32(f.u)
			case spanDroppedEvents:
				s.droppedEvents = uint32(f.u)
			case spanDroppedLinks:
				s.droppedLinks = uint32(f.u)
			}
		case spanStartTime, spanEndTime:
			if err = f.want(protowire.Fixed64Type, "Span", "time"); err != nil {
				return err
			}
			if f.num == spanStartTime {
				s.start = f.u
			} else {
				s.end = f.u
			}
		case spanFlags:
			if err = f.want(protowire.Fixed32Type, "Span", "flags"); err != nil {
				return err
			}
			s.flags = uint32(f.u)
		case spanAttributes, spanEvents, spanLinks, spanStatus:
			if err = f.want(protowire.BytesType, "Span", "message"); err != nil {
				return err
			}
			switch f.num {
			case spanAttributes:
				d.attrs = append(d.attrs, f.b)
			case spanEvents:
				d.events = append(d.events, f.b)
			case spanLinks:
				d.links = append(d.links, f.b)
			case spanStatus:
				d.statuses = append(d.statuses, f.b)
			}
		}
		return err
	})
	if err != nil {
		return err
	}
	for _, st := range d.statuses { // a message field given twice merges
		err := pbEach(st, func(f pbField) error {
			switch f.num {
			case statusMessage:
				if err := f.want(protowire.BytesType, "Status", "message"); err != nil {
					return err
				}
				s.statusMsg = f.b
			case statusCode:
				if err := f.want(protowire.VarintType, "Status", "code"); err != nil {
					return err
				}
				s.statusCode = int64(int32(f.u))
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	// An error below leaves a partial row; AppendProto rolls the whole
	// request back.
	row := b.Rows
	d.times.reset()
	appendSpanCore(b, &s)
	if err := d.appendEvents(b.Core[tEvents]); err != nil {
		return err
	}
	if err := d.appendLinks(b.Core[tLinks]); err != nil {
		return err
	}
	if err := d.endRecord(b, row); err != nil {
		return err
	}
	if err := s.check(&d.times); err != nil {
		// Decoded whole first, as pdata decodes it: malformed data in a
		// rejected span still fails the request (found by
		// FuzzTracesProtoDirect, testdata/fuzz/FuzzTracesProtoDirect/e0037cceae490bb3).
		b.Truncate(row)
		d.rej.reject(err)
	}
	return nil
}

// Span.Event, opentelemetry/proto/trace/v1/trace.proto.
const (
	spanEventTime              = 1 // Span.Event: fixed64 time_unix_nano = 1;
	spanEventName              = 2 // Span.Event: string name = 2;
	spanEventAttributes        = 3 // Span.Event: repeated opentelemetry.proto.common.v1.KeyValue attributes = 3;
	spanEventDroppedAttributes = 4 // Span.Event: uint32 dropped_attributes_count = 4;
)

func (d *pbDecoder) appendEvents(c *shred.Column) error {
	if len(d.events) == 0 {
		c.AppendNull()
		return nil
	}
	fl := c.Child.Fields
	for _, ev := range d.events {
		var t uint64
		var name []byte
		var dropped uint32
		d.subAttrs = d.subAttrs[:0]
		err := pbEach(ev, func(f pbField) error {
			switch f.num {
			case spanEventTime:
				if err := f.want(protowire.Fixed64Type, "Span.Event", "time_unix_nano"); err != nil {
					return err
				}
				t = f.u
			case spanEventName:
				if err := f.want(protowire.BytesType, "Span.Event", "name"); err != nil {
					return err
				}
				name = f.b
			case spanEventAttributes:
				if err := f.want(protowire.BytesType, "Span.Event", "attributes"); err != nil {
					return err
				}
				d.subAttrs = append(d.subAttrs, f.b)
			case spanEventDroppedAttributes:
				if err := f.want(protowire.VarintType, "Span.Event", "dropped_attributes_count"); err != nil {
					return err
				}
				dropped = uint32(f.u)
			}
			return nil
		})
		if err != nil {
			return err
		}
		d.times.check(t, "events.timeUnixNano")
		fl[0].AppendTime(t)
		fl[1].AppendBytes(name)
		if err := d.appendKVsJSON(fl[2], d.subAttrs); err != nil {
			return err
		}
		fl[3].AppendInt(int64(dropped))
		c.Child.EndStruct()
	}
	c.EndList()
	return nil
}

// Span.Link, opentelemetry/proto/trace/v1/trace.proto.
const (
	spanLinkTraceID           = 1 // Span.Link: bytes trace_id = 1;
	spanLinkSpanID            = 2 // Span.Link: bytes span_id = 2;
	spanLinkTraceState        = 3 // Span.Link: string trace_state = 3;
	spanLinkAttributes        = 4 // Span.Link: repeated opentelemetry.proto.common.v1.KeyValue attributes = 4;
	spanLinkDroppedAttributes = 5 // Span.Link: uint32 dropped_attributes_count = 5;
	spanLinkFlags             = 6 // Span.Link: fixed32 flags = 6;
)

func (d *pbDecoder) appendLinks(c *shred.Column) error {
	if len(d.links) == 0 {
		c.AppendNull()
		return nil
	}
	fl := c.Child.Fields
	for _, l := range d.links {
		var tid, sid, state []byte
		var flags, dropped uint32
		d.subAttrs = d.subAttrs[:0]
		err := pbEach(l, func(f pbField) error {
			var err error
			switch f.num {
			case spanLinkTraceID, spanLinkSpanID, spanLinkTraceState, spanLinkAttributes:
				if err = f.want(protowire.BytesType, "Span.Link", "bytes"); err != nil {
					return err
				}
				switch f.num {
				case spanLinkTraceID:
					tid, err = pbID(f.b, 16, "TraceID")
				case spanLinkSpanID:
					sid, err = pbID(f.b, 8, "SpanID")
				case spanLinkTraceState:
					state = f.b
				case spanLinkAttributes:
					d.subAttrs = append(d.subAttrs, f.b)
				}
			case spanLinkDroppedAttributes:
				if err = f.want(protowire.VarintType, "Span.Link", "dropped_attributes_count"); err != nil {
					return err
				}
				dropped = uint32(f.u)
			case spanLinkFlags:
				if err = f.want(protowire.Fixed32Type, "Span.Link", "flags"); err != nil {
					return err
				}
				flags = uint32(f.u)
			}
			return err
		})
		if err != nil {
			return err
		}
		appendID(fl[0], tid)
		appendID(fl[1], sid)
		appendBytesOrNull(fl[2], state)
		fl[3].AppendInt(int64(flags))
		if err := d.appendKVsJSON(fl[4], d.subAttrs); err != nil {
			return err
		}
		fl[5].AppendInt(int64(dropped))
		c.Child.EndStruct()
	}
	c.EndList()
	return nil
}
