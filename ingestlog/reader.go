package ingestlog

import (
	"encoding/binary"
	"fmt"
	"os"
	"slices"
)

// Reader reads a log's synced records in order, from a position on. It
// is for one goroutine.
type Reader struct {
	l   *Log
	pos Position
	seg segment
	f   *os.File
	buf []byte
}

// NewReader returns a reader whose first record is the one at pos (a
// position a record starts at: one Append returned, or one Reader.Pos
// gave).
func (l *Log) NewReader(pos Position) *Reader {
	return &Reader{l: l, pos: pos}
}

// Pos returns the position of the record Next returns next.
func (r *Reader) Pos() Position { return r.pos }

// Skip moves the reader to pos without reading the records before it;
// pos must be where a record starts (or the end), as a reader or an
// append gave it.
func (r *Reader) Skip(pos Position) { r.pos = pos }

// Next returns the next synced record; ok is false when the reader is at
// the synced end (Log.Wait waits for more). The payload is valid until
// the next call. A record that fails its checksum, or a gap between
// segments, is a *CorruptError; the reader stays at that record.
func (r *Reader) Next() (pos Position, payload []byte, ok bool, err error) {
	end, err := r.locate()
	if err != nil || r.pos >= end {
		return r.pos, nil, false, err
	}
	off := headerSize + int64(r.pos-r.seg.base)
	avail := int64(end - r.pos)
	var fh [frameHeader]byte
	if avail < frameHeader {
		return r.pos, nil, false, r.corrupt("cut inside its header")
	}
	if _, err := r.f.ReadAt(fh[:], off); err != nil {
		return r.pos, nil, false, r.corrupt("cannot read its header: " + err.Error())
	}
	n := int64(binary.LittleEndian.Uint32(fh[:4]))
	if n > MaxRecord || frameHeader+n > avail {
		return r.pos, nil, false, r.corrupt(fmt.Sprintf("its length %d runs past the segment's end", n))
	}
	r.buf = slices.Grow(r.buf[:0], int(n))[:n]
	if _, err := r.f.ReadAt(r.buf, off+frameHeader); err != nil {
		return r.pos, nil, false, r.corrupt("cannot read it: " + err.Error())
	}
	if checksum(fh[:4], r.buf) != binary.LittleEndian.Uint32(fh[4:]) {
		return r.pos, nil, false, r.corrupt("checksum mismatch")
	}
	pos = r.pos
	r.pos += Position(frameHeader + n)
	return pos, r.buf, true, nil
}

// locate opens the segment holding r.pos and returns where its synced
// records end.
func (r *Reader) locate() (Position, error) {
	l := r.l
	l.mu.Lock()
	durable := l.durable
	i, found := slices.BinarySearchFunc(l.segs, r.pos, func(s segment, p Position) int {
		switch {
		case s.base < p:
			return -1
		case s.base > p:
			return 1
		}
		return 0
	})
	if !found {
		i-- // the segment before the first that starts after pos
	}
	if i < 0 {
		first := l.segs[0].base
		l.mu.Unlock()
		return 0, fmt.Errorf("position %d is no longer in the ingest log (its oldest record is at %d)", r.pos, first)
	}
	s := l.segs[i]
	lastSeg := i == len(l.segs)-1
	var next Position
	if !lastSeg {
		next = l.segs[i+1].base
	}
	l.mu.Unlock()
	end := s.end()
	if lastSeg {
		end = durable
	} else if r.pos >= end {
		return 0, &CorruptError{Segment: s.path, Pos: r.pos, Reason: fmt.Sprintf("the segment ends at %d and the next starts at %d: records are missing", end, next)}
	}
	if r.f == nil || r.seg.path != s.path {
		if r.f != nil {
			r.f.Close()
		}
		f, err := os.Open(s.path)
		if err != nil {
			r.f = nil
			return 0, fmt.Errorf("cannot open the ingest log: %w", err)
		}
		r.f, r.seg = f, s
	}
	return end, nil
}

func (r *Reader) corrupt(reason string) error {
	return &CorruptError{Segment: r.seg.path, Pos: r.pos, Reason: reason}
}

// Close closes the reader's file.
func (r *Reader) Close() error {
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}

// SkipSegment moves the reader past the rest of the sealed segment it is
// in, to the next segment's first record, after a CorruptError there: the
// records between are lost (lost bytes). The segment taking appends
// cannot be skipped: its corrupt part may be followed by nothing yet.
func (r *Reader) SkipSegment() (next Position, lost int64, err error) {
	l := r.l
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, s := range l.segs {
		if i+1 < len(l.segs) && s.base <= r.pos && r.pos < l.segs[i+1].base {
			next = l.segs[i+1].base
			lost = int64(next - r.pos)
			r.pos = next
			return next, lost, nil
		}
	}
	return r.pos, 0, fmt.Errorf("position %d is not in a sealed segment of the ingest log", r.pos)
}
