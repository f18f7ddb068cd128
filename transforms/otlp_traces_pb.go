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

// span reads one Span: its scalars first (fields come in any order), then
// appends its row.
func (d *pbDecoder) span(b *shred.Batch, msg []byte) error {
	var s span
	d.attrs, d.events, d.links, d.statuses = d.attrs[:0], d.events[:0], d.links[:0], d.statuses[:0]
	err := pbEach(msg, func(f pbField) error {
		var err error
		switch f.num {
		case 1, 2, 4:
			if err = f.want(protowire.BytesType, "Span", "id"); err != nil {
				return err
			}
			switch f.num {
			case 1:
				s.traceID, err = pbID(f.b, 16, "TraceID")
			case 2:
				s.spanID, err = pbID(f.b, 8, "SpanID")
			case 4:
				s.parentSpanID, err = pbID(f.b, 8, "SpanID")
			}
		case 3, 5:
			if err = f.want(protowire.BytesType, "Span", "string"); err != nil {
				return err
			}
			if f.num == 3 {
				s.traceState = f.b
			} else {
				s.name = f.b
			}
		case 6, 10, 12, 14:
			if err = f.want(protowire.VarintType, "Span", "varint"); err != nil {
				return err
			}
			switch f.num {
			case 6:
				s.kind = int64(int32(f.u))
			case 10:
				s.droppedAttrs = uint32(f.u)
			case 12:
				s.droppedEvents = uint32(f.u)
			case 14:
				s.droppedLinks = uint32(f.u)
			}
		case 7, 8:
			if err = f.want(protowire.Fixed64Type, "Span", "time"); err != nil {
				return err
			}
			if f.num == 7 {
				s.start = f.u
			} else {
				s.end = f.u
			}
		case 16:
			if err = f.want(protowire.Fixed32Type, "Span", "flags"); err != nil {
				return err
			}
			s.flags = uint32(f.u)
		case 9, 11, 13, 15:
			if err = f.want(protowire.BytesType, "Span", "message"); err != nil {
				return err
			}
			switch f.num {
			case 9:
				d.attrs = append(d.attrs, f.b)
			case 11:
				d.events = append(d.events, f.b)
			case 13:
				d.links = append(d.links, f.b)
			case 15:
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
			case 2:
				if err := f.want(protowire.BytesType, "Status", "message"); err != nil {
					return err
				}
				s.statusMsg = f.b
			case 3:
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
			case 1:
				if err := f.want(protowire.Fixed64Type, "Span.Event", "time_unix_nano"); err != nil {
					return err
				}
				t = f.u
			case 2:
				if err := f.want(protowire.BytesType, "Span.Event", "name"); err != nil {
					return err
				}
				name = f.b
			case 3:
				if err := f.want(protowire.BytesType, "Span.Event", "attributes"); err != nil {
					return err
				}
				d.subAttrs = append(d.subAttrs, f.b)
			case 4:
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
			case 1, 2, 3, 4:
				if err = f.want(protowire.BytesType, "Span.Link", "bytes"); err != nil {
					return err
				}
				switch f.num {
				case 1:
					tid, err = pbID(f.b, 16, "TraceID")
				case 2:
					sid, err = pbID(f.b, 8, "SpanID")
				case 3:
					state = f.b
				case 4:
					d.subAttrs = append(d.subAttrs, f.b)
				}
			case 5:
				if err = f.want(protowire.VarintType, "Span.Link", "dropped_attributes_count"); err != nil {
					return err
				}
				dropped = uint32(f.u)
			case 6:
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
