package ingestlog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Position is a record's place in the log (doc.go): the byte offset of
// its frame as if the segments' records were concatenated.
type Position uint64

const (
	headerSize  = 16
	frameHeader = 8
	version     = 1
	suffix      = ".seg"
	tmpSuffix   = ".tmp"
	// MaxRecord is the largest payload a record holds.
	MaxRecord = 1 << 30
)

var magic = [6]byte{'S', 'D', 'L', 'O', 'G', 0}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// writeAt is the segments' write; tests replace it to fill the disk.
var writeAt = (*os.File).WriteAt

var (
	// ErrFull is Append's answer when the record would take the log past
	// Options.MaxBytes: transient, the loader frees segments as it goes.
	ErrFull = errors.New("the ingest log is full")
	// ErrClosed is the answer of a log that was closed.
	ErrClosed = errors.New("the ingest log is closed")
)

// CorruptError is a record that fails its checksum, or a gap, in a part
// of the log that was synced: the disk lost or changed acknowledged data.
type CorruptError struct {
	Segment string
	Pos     Position
	Reason  string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("ingest log %s: record at position %d: %s", e.Segment, e.Pos, e.Reason)
}

// Options configure a Log.
type Options struct {
	Dir string
	// SegmentBytes: a segment takes no new group of records past this
	// size (default 64 MiB); loaded segments are removed whole.
	SegmentBytes int64
	// MaxBytes bounds the segment files on disk (default 1 GiB).
	MaxBytes int64
	// Start is the position an empty log begins at: where the loader
	// has got to, so that positions never repeat.
	Start Position
}

// Recovery is what Open found.
type Recovery struct {
	// Cut is the bytes of a torn tail (a crash mid-append, or a record
	// that fails its checksum in the last segment and everything after
	// it) removed from the last segment. Records there were never
	// acknowledged unless the disk lost synced data.
	Cut int64
	// CutAt is the position of the first record cut.
	CutAt Position
}

type segment struct {
	base Position
	size int64 // file bytes, header included
	path string
}

func (s segment) end() Position { return s.base + Position(s.size-headerSize) }

// Log is an open ingest log. Append and the readers may be used by many
// goroutines at once.
type Log struct {
	opt Options

	mu       sync.Mutex
	synced   *sync.Cond // broadcast when durable grows or the log closes
	segs     []segment  // by base; the last one takes appends
	f        *os.File   // the last segment
	durable  Position   // records before it are synced
	size     int64      // all segments' bytes
	reserved int64      // bytes of appends queued but not written
	queue    []*appendReq
	writing  bool
	wbuf     []byte // the writer's buffer, kept between its runs (write)
	broken   error  // a failed write could not be undone: no more appends
	closed   bool
}

type appendReq struct {
	payload []byte
	synced  func(pos, next Position) // AppendThen's hook, or nil
	pos     Position
	err     error
	done    chan struct{}
}

// Open opens the log in opt.Dir, creating it if missing, and cuts a torn
// tail off its last segment.
func Open(opt Options) (*Log, Recovery, error) {
	if opt.SegmentBytes <= 0 {
		opt.SegmentBytes = 64 << 20
	}
	if opt.MaxBytes <= 0 {
		opt.MaxBytes = 1 << 30
	}
	var rec Recovery
	if err := os.MkdirAll(opt.Dir, 0o755); err != nil {
		return nil, rec, fmt.Errorf("cannot create the ingest log directory: %w", err)
	}
	segs, err := listSegments(opt.Dir)
	if err != nil {
		return nil, rec, err
	}
	l := &Log{opt: opt, segs: segs}
	l.synced = sync.NewCond(&l.mu)
	if len(segs) == 0 {
		if err := l.newSegment(opt.Start); err != nil {
			return nil, rec, err
		}
		l.durable = opt.Start
		return l, rec, nil
	}
	last := &l.segs[len(l.segs)-1]
	f, err := os.OpenFile(last.path, os.O_RDWR, 0)
	if err != nil {
		return nil, rec, fmt.Errorf("cannot open the ingest log: %w", err)
	}
	good, err := scanTail(f, *last)
	if err != nil {
		f.Close()
		return nil, rec, err
	}
	if good < last.size {
		rec.Cut, rec.CutAt = last.size-good, last.base+Position(good-headerSize)
		if err := f.Truncate(good); err != nil {
			f.Close()
			return nil, rec, fmt.Errorf("cannot cut the torn tail of %s: %w", last.path, err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, rec, fmt.Errorf("cannot sync %s: %w", last.path, err)
		}
		last.size = good
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		f.Close()
		return nil, rec, err
	}
	l.f = f
	l.durable = last.end()
	for _, s := range l.segs {
		l.size += s.size
	}
	if l.durable < opt.Start {
		f.Close()
		return nil, rec, fmt.Errorf("the ingest log in %s ends at position %d, but the database has loaded up to %d: it is not this database's log (move the directory away to start a new log)", opt.Dir, l.durable, opt.Start)
	}
	return l, rec, nil
}

// listSegments reads the segment files' headers, ordered by base.
func listSegments(dir string) ([]segment, error) {
	es, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("cannot read the ingest log directory: %w", err)
	}
	var segs []segment
	for _, e := range es {
		name := e.Name()
		if strings.HasSuffix(name, suffix+tmpSuffix) {
			// A segment a crash left half made: it never held a record.
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return nil, fmt.Errorf("cannot remove a half-made ingest log segment: %w", err)
			}
			continue
		}
		if !strings.HasSuffix(name, suffix) || e.IsDir() {
			continue
		}
		base, err := strconv.ParseUint(strings.TrimSuffix(name, suffix), 10, 64)
		if err != nil {
			continue
		}
		path := filepath.Join(dir, name)
		s, err := readHeader(path)
		if err != nil {
			return nil, err
		}
		if s.base != Position(base) {
			return nil, fmt.Errorf("ingest log segment %s: its header says it starts at position %d", path, s.base)
		}
		segs = append(segs, s)
	}
	slices.SortFunc(segs, func(a, b segment) int {
		switch {
		case a.base < b.base:
			return -1
		case a.base > b.base:
			return 1
		}
		return 0
	})
	return segs, nil
}

func readHeader(path string) (segment, error) {
	f, err := os.Open(path)
	if err != nil {
		return segment{}, fmt.Errorf("cannot open the ingest log: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return segment{}, err
	}
	var h [headerSize]byte
	if _, err := io.ReadFull(f, h[:]); err != nil {
		return segment{}, fmt.Errorf("ingest log segment %s: no header (%d bytes)", path, st.Size())
	}
	if [6]byte(h[:6]) != magic {
		return segment{}, fmt.Errorf("ingest log segment %s is not a shredduck ingest log segment", path)
	}
	if v := binary.LittleEndian.Uint16(h[6:]); v != version {
		return segment{}, fmt.Errorf("ingest log segment %s has format version %d; this shredduck reads version %d (written by a newer release?)", path, v, version)
	}
	return segment{base: Position(binary.LittleEndian.Uint64(h[8:])), size: st.Size(), path: path}, nil
}

// scanTail returns the size of the last segment's prefix of whole records
// that pass their checksums.
func scanTail(f *os.File, s segment) (int64, error) {
	r := io.NewSectionReader(f, 0, s.size)
	off := int64(headerSize)
	var fh [frameHeader]byte
	var buf []byte
	for {
		if _, err := r.ReadAt(fh[:], off); err != nil {
			return off, nil
		}
		n := binary.LittleEndian.Uint32(fh[:4])
		if n > MaxRecord || off+frameHeader+int64(n) > s.size {
			return off, nil
		}
		buf = slices.Grow(buf[:0], int(n))[:n]
		if _, err := r.ReadAt(buf, off+frameHeader); err != nil {
			return off, nil
		}
		if checksum(fh[:4], buf) != binary.LittleEndian.Uint32(fh[4:]) {
			return off, nil
		}
		off += frameHeader + int64(n)
	}
}

func checksum(length, payload []byte) uint32 {
	return crc32.Update(crc32.Checksum(length, castagnoli), castagnoli, payload)
}

// newSegment starts a segment at base and makes it the one appended to.
func (l *Log) newSegment(base Position) error {
	// Written whole under a temporary name and renamed, so that a crash
	// never leaves a segment without its header.
	path := filepath.Join(l.opt.Dir, fmt.Sprintf("%020d%s", uint64(base), suffix))
	tmp := path + tmpSuffix
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("cannot create an ingest log segment: %w", err)
	}
	var h [headerSize]byte
	copy(h[:], magic[:])
	binary.LittleEndian.PutUint16(h[6:], version)
	binary.LittleEndian.PutUint64(h[8:], uint64(base))
	if _, err = f.Write(h[:]); err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(l.opt.Dir)
	}
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("cannot create an ingest log segment: %w", err)
	}
	if l.f != nil {
		l.f.Close()
	}
	l.f = f
	l.segs = append(l.segs, segment{base: base, size: headerSize, path: path})
	l.size += headerSize
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Append adds payload as one record and returns its position once the
// record is on disk (synced). Appends that arrive while a sync runs share
// the next one. ErrFull: the log holds MaxBytes; retry once the loader
// has freed segments. Append does not retain payload after it returns.
func (l *Log) Append(ctx context.Context, payload []byte) (Position, error) {
	return l.AppendThen(ctx, payload, nil)
}

// AppendThen is Append that calls synced with the record's position (and
// the one after it) once it is on disk and before any reader can see it
// (nor Durable count it), so that what the caller hands its reader is
// there first. synced runs on the log's writer, in the records' order: it
// must be quick and must not call l.
func (l *Log) AppendThen(ctx context.Context, payload []byte, synced func(pos, next Position)) (Position, error) {
	if len(payload) > MaxRecord {
		return 0, fmt.Errorf("a %d-byte record is larger than the ingest log takes (%d)", len(payload), MaxRecord)
	}
	need := int64(frameHeader + len(payload))
	l.mu.Lock()
	switch {
	case l.closed:
		l.mu.Unlock()
		return 0, ErrClosed
	case l.broken != nil:
		l.mu.Unlock()
		return 0, l.broken
	case l.size+l.reserved+need+headerSize > l.opt.MaxBytes:
		l.mu.Unlock()
		return 0, ErrFull
	}
	r := &appendReq{payload: payload, synced: synced, done: make(chan struct{})}
	l.reserved += need
	l.queue = append(l.queue, r)
	if !l.writing {
		l.writing = true
		go l.write()
	}
	l.mu.Unlock()
	// The record is written whether or not ctx ends: a caller that stops
	// waiting has not been acknowledged, and the loader loads it anyway.
	<-r.done
	return r.pos, r.err
}

// write writes and syncs the queued appends, a group at a time, until the
// queue is empty.
func (l *Log) write() {
	l.mu.Lock()
	buf := l.wbuf
	for len(l.queue) > 0 && !l.closed {
		group := l.queue
		l.queue = nil
		err := l.broken
		var start int64
		last := &l.segs[len(l.segs)-1]
		if err == nil && last.size >= l.opt.SegmentBytes {
			err = l.roll()
			last = &l.segs[len(l.segs)-1]
		}
		start = last.size
		pos := last.end()
		buf = buf[:0]
		for _, r := range group {
			r.pos = pos
			var fh [frameHeader]byte
			binary.LittleEndian.PutUint32(fh[:4], uint32(len(r.payload)))
			binary.LittleEndian.PutUint32(fh[4:], checksum(fh[:4], r.payload))
			buf = append(append(buf, fh[:]...), r.payload...)
			pos += Position(frameHeader + len(r.payload))
		}
		f := l.f
		l.mu.Unlock()
		if err == nil {
			if _, err = writeAt(f, buf, start); err == nil {
				err = f.Sync()
			}
			if err != nil {
				// Undo the partial write, so that no later record follows
				// bytes that fail their checksum; if that fails too, the
				// log takes no more appends until it is opened again.
				if terr := f.Truncate(start); terr != nil {
					l.mu.Lock()
					l.broken = fmt.Errorf("the ingest log cannot be written (%v) and its last write could not be undone (%v); restart to recover", err, terr)
					l.mu.Unlock()
				}
				err = fmt.Errorf("cannot write the ingest log: %w", err)
			}
		}
		if err == nil {
			for _, r := range group {
				if r.synced != nil {
					r.synced(r.pos, r.pos+Position(frameHeader+len(r.payload)))
				}
			}
		}
		l.mu.Lock()
		l.reserved -= int64(len(buf))
		if err == nil {
			last = &l.segs[len(l.segs)-1]
			last.size += int64(len(buf))
			l.size += int64(len(buf))
			l.durable = pos
			l.synced.Broadcast()
		}
		for _, r := range group {
			r.err = err
			r.payload = nil
			close(r.done)
		}
	}
	for _, r := range l.queue {
		r.err = ErrClosed
		close(r.done)
	}
	l.queue = nil
	l.writing = false
	if cap(buf) <= maxKeptBuffer {
		l.wbuf = buf[:0]
	}
	l.synced.Broadcast()
	l.mu.Unlock()
}

// maxKeptBuffer bounds the write buffer kept for the writer's next run: a
// writer started for every group grew a new one each time.
const maxKeptBuffer = 8 << 20

// roll seals the last segment and starts the next; l.mu is held (the
// appends wait for it anyway).
func (l *Log) roll() error {
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("cannot sync the ingest log: %w", err)
	}
	return l.newSegment(l.segs[len(l.segs)-1].end())
}

// Durable returns the position after the last synced record.
func (l *Log) Durable() Position {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.durable
}

// First returns the position of the oldest record the log still holds.
func (l *Log) First() Position {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.segs[0].base
}

// Size returns the bytes of the segment files.
func (l *Log) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.size
}

// Wait returns once the log holds a synced record at or after pos (it
// returns nil), or when ctx ends or the log closes.
func (l *Log) Wait(ctx context.Context, pos Position) error {
	stop := context.AfterFunc(ctx, func() {
		l.mu.Lock()
		l.synced.Broadcast()
		l.mu.Unlock()
	})
	defer stop()
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.durable <= pos {
		if l.closed {
			return ErrClosed
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		l.synced.Wait()
	}
	return nil
}

// Release removes the segments whose records all lie before pos (they are
// loaded). The segment taking appends stays.
func (l *Log) Release(pos Position) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	for len(l.segs) > 1 && l.segs[1].base <= pos {
		s := l.segs[0]
		if err := os.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("cannot remove a loaded ingest log segment: %w", err))
			break
		}
		l.size -= s.size
		l.segs = l.segs[1:]
	}
	return errors.Join(errs...)
}

// Close waits for the appends being written and closes the log; appends
// queued behind them fail with ErrClosed.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.synced.Broadcast()
	for l.writing {
		l.synced.Wait()
	}
	f := l.f
	l.mu.Unlock()
	return f.Close()
}
