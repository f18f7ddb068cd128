// Package jsonsplit splits input into JSON values: NDJSON detection and
// concatenated or pretty-printed documents.
package jsonsplit

import (
	"bytes"

	"github.com/shredduck/shredduck/transforms/internal/jsonscan"
)

// FirstLineComplete reports whether the first non-empty line of data is
// one complete JSON value: then the input is read as NDJSON, otherwise as
// concatenated (possibly pretty-printed) JSON documents.
func FirstLineComplete(data []byte) bool {
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		line := data
		if i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var it jsonscan.Iter
		it.Reset(line)
		it.Skip()
		return it.Err() == nil && !it.More()
	}
	return false
}

// Splitter yields the top-level JSON values of a buffer in order.
type Splitter struct {
	it      jsonscan.Iter
	data    []byte
	pos     int // offset of the next value
	line    int // 0-based line of pos
	counted int // offset up to which line counts
	err     error
}

// Reset starts splitting data.
func (s *Splitter) Reset(data []byte) {
	*s = Splitter{data: data}
	s.it.Reset(data)
}

// Next returns the next value and the 0-based line it starts on.
func (s *Splitter) Next() (doc []byte, line int, ok bool) {
	if s.err != nil || !s.it.More() {
		return nil, 0, false
	}
	start := s.it.Offset()
	s.line += bytes.Count(s.data[s.counted:start], []byte{'\n'})
	s.counted = start
	s.pos = start
	raw := s.it.Raw()
	if err := s.it.Err(); err != nil {
		s.err = err
		return nil, 0, false
	}
	return raw, s.line, true
}

// Err returns the syntax error that stopped splitting, if any.
func (s *Splitter) Err() error { return s.err }

// Line is the 0-based line of the value that failed.
func (s *Splitter) Line() int { return s.line }

// Rest is the input from the value that failed.
func (s *Splitter) Rest() []byte { return s.data[s.pos:] }
