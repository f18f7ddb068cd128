package pgwire

import (
	"encoding/binary"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/shredduck/shredduck/serve/sqlpolicy"
)

// rowSink encodes a result as DataRow messages into one buffer of at
// most max bytes: the result is sent once the query is done (sqlpolicy
// may still call a sink after a timeout), and the byte limit holds for it
// as for /v1/query's body.
type rowSink struct {
	types   []pgType
	formats []int16
	m       *pgtype.Map
	max     int

	cols []sqlpolicy.Column
	buf  []byte
	ends []int // the end of each row's message in buf
	res  sqlpolicy.Result

	// copy, when set, makes the rows COPY's CopyData messages.
	copy       *copyFormat
	copyHeader []byte
	copyVals   [][]byte
}

func (s *rowSink) Columns(cols []sqlpolicy.Column) error {
	s.cols = cols
	if s.types == nil {
		// A simple query is described by its run: text, types of the
		// columns.
		s.types = columnTypes(cols)
		s.formats = make([]int16, len(cols))
	}
	if s.copy != nil && s.copy.header {
		s.copyHeader = s.copy.headerRow(cols)
	}
	return nil
}

// copyRow encodes a row as one CopyData message.
func (s *rowSink) copyRow(vals []any) (bool, error) {
	mark := len(s.buf)
	s.buf = append(s.buf, 'd', 0, 0, 0, 0)
	s.copyVals = s.copyVals[:0]
	var text []byte
	for i, v := range vals {
		if v == nil {
			s.copyVals = append(s.copyVals, nil)
			continue
		}
		start := len(text)
		text = appendText(text, s.types[i], v)
		s.copyVals = append(s.copyVals, text[start:len(text):len(text)])
	}
	s.buf = s.copy.appendRow(s.buf, s.copyVals)
	binary.BigEndian.PutUint32(s.buf[mark+1:], uint32(len(s.buf)-mark-1))
	if len(s.buf) > s.max {
		s.buf = s.buf[:mark]
		return false, nil
	}
	s.ends = append(s.ends, len(s.buf))
	return true, nil
}

func (s *rowSink) Row(vals []any) (bool, error) {
	if s.copy != nil {
		return s.copyRow(vals)
	}
	mark := len(s.buf)
	s.buf = append(s.buf, 'D', 0, 0, 0, 0)
	s.buf = binary.BigEndian.AppendUint16(s.buf, uint16(len(vals)))
	for i, v := range vals {
		if v == nil {
			s.buf = binary.BigEndian.AppendUint32(s.buf, 0xffffffff)
			continue
		}
		at := len(s.buf)
		s.buf = append(s.buf, 0, 0, 0, 0)
		if s.formats[i] == pgtype.BinaryFormatCode {
			var err error
			if s.buf, err = appendBinary(s.m, s.buf, s.types[i], v); err != nil {
				s.buf = s.buf[:mark]
				return false, err
			}
		} else {
			s.buf = appendText(s.buf, s.types[i], v)
		}
		binary.BigEndian.PutUint32(s.buf[at:], uint32(len(s.buf)-at-4))
	}
	binary.BigEndian.PutUint32(s.buf[mark+1:], uint32(len(s.buf)-mark-1))
	if len(s.buf) > s.max {
		s.buf = s.buf[:mark]
		return false, nil
	}
	s.ends = append(s.ends, len(s.buf))
	return true, nil
}
