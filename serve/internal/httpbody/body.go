// Package httpbody reads a request body into a pooled buffer, growing it
// with what arrives and charging each growth first, and makes the
// decompressors of HTTP's content codings.
package httpbody

import (
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// maxPooledBuffer caps the capacity of a body buffer kept for reuse: a few
// huge requests must not pin their memory for the life of the process.
const maxPooledBuffer = 4 << 20

// Buffer is a request body read into memory.
type Buffer struct{ b []byte }

func (x *Buffer) Bytes() []byte { return x.b }
func (x *Buffer) Len() int      { return len(x.b) }

var bodyPool = sync.Pool{New: func() any { return new(Buffer) }}

// Get returns an empty buffer; Put gives it back.
func Get() *Buffer { return bodyPool.Get().(*Buffer) }

// Put gives a buffer back for reuse once nothing refers to its bytes.
// Buffers under MinBuf (small declared bodies) are dropped: a reading
// handler then holds at least MinBuf of the budget, whatever it was handed.
func Put(x *Buffer) {
	if x == nil || cap(x.b) > maxPooledBuffer || cap(x.b) < MinBuf {
		return
	}
	x.b = x.b[:0]
	bodyPool.Put(x)
}

// Body buffers grow by doubling from MinBuf, and are charged to the
// request's account a ReadChunk ahead of the bytes read into
// them, or whole when they are allocated.
const (
	MinBuf    = 32 << 10
	ReadChunk = 64 << 10
)

// What a decompressor's state costs, charged before it is made: gzip and
// zlib hold a 32 KiB window and their tables; zstd's window is capped at
// 8 MiB, the most RFC 9659 lets an HTTP sender use.
const (
	inflateState = 64 << 10
	zstdWindow   = 8 << 20
	zstdState    = zstdWindow + 256<<10
)

// StateCost is what the decompressor of enc is charged.
func StateCost(enc string) int64 {
	if enc == "zstd" {
		return zstdState
	}
	return inflateState
}

// Fill's errors.
var (
	ErrBudget   = errors.New("the memory budget has no room for the body")
	ErrTooLarge = errors.New("the body is over the limit")
)

// Fill reads src to its end into x. The buffer grows with the bytes that
// arrive, never past declared (the sender's Content-Length; -1 when
// unknown) nor limit+1, and each growth is charged (charge) before it is
// used: a sender that declares 64 MiB and sends one byte holds MinBuf. It
// fails with ErrTooLarge after more than limit bytes, ErrBudget when a
// charge is refused, or src's error.
func (x *Buffer) Fill(src io.Reader, charge func(int64) bool, limit, declared int64) error {
	var charged int64
	for {
		if len(x.b) == cap(x.b) {
			if declared >= 0 && int64(len(x.b)) >= declared {
				// Every declared byte is in: the next read should end the body.
				var probe [1]byte
				n, err := src.Read(probe[:])
				if n == 0 {
					if err == io.EOF {
						return nil
					}
					if err != nil {
						return err
					}
					continue
				}
				declared = -1 // more than declared: grow as for an unknown length
				x.b = append(x.b, probe[0])
				if int64(len(x.b)) > limit {
					return ErrTooLarge
				}
				if err != nil {
					if err == io.EOF {
						return nil
					}
					return err
				}
				continue
			}
			want := int64(max(2*cap(x.b), MinBuf))
			if declared >= 0 {
				want = min(want, declared)
			}
			want = min(want, limit+1)
			if want > charged {
				if !charge(want - charged) {
					return ErrBudget
				}
				charged = want
			}
			nb := make([]byte, len(x.b), want)
			copy(nb, x.b)
			x.b = nb
		}
		n := min(int64(cap(x.b)-len(x.b)), ReadChunk, limit+1-int64(len(x.b)))
		if declared > int64(len(x.b)) {
			// A pooled buffer may be larger than the body: charge only what
			// can arrive, as for a buffer made to measure.
			n = min(n, declared-int64(len(x.b)))
		}
		if need := int64(len(x.b)) + n; need > charged {
			if !charge(need - charged) {
				return ErrBudget
			}
			charged = need
		}
		m, err := src.Read(x.b[len(x.b) : len(x.b)+int(n)])
		x.b = x.b[:len(x.b)+m]
		if int64(len(x.b)) > limit {
			return ErrTooLarge
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

var gzipPool sync.Pool // *gzip.Reader

// ErrReader remembers the first error other than io.EOF of the reader
// under a decompressor, so that a failed read can be told apart from bad
// compressed data.
type ErrReader struct {
	R   io.Reader
	Err error
}

func (e *ErrReader) Read(p []byte) (int, error) {
	n, err := e.R.Read(p)
	if err != nil && err != io.EOF && e.Err == nil {
		e.Err = err
	}
	return n, err
}

// RawLimit bounds the bytes read off the wire for a compressed body whose
// decoded size may be at most max: compressed data is never much larger
// than its content, and the bound stops a stream of empty compressed
// blocks that would otherwise be read forever.
func RawLimit(max int64) int64 { return max + max/16 + 64<<10 }

// Decompressor returns a reader of the decoded stream and a function that
// releases it.
func Decompressor(enc string, r io.Reader) (io.Reader, func(), error) {
	switch enc {
	case "gzip", "x-gzip":
		zr, _ := gzipPool.Get().(*gzip.Reader)
		var err error
		if zr == nil {
			zr, err = gzip.NewReader(r)
		} else {
			err = zr.Reset(r)
		}
		if err != nil {
			return nil, nil, err
		}
		return zr, func() { gzipPool.Put(zr) }, nil
	case "deflate": // HTTP's deflate is the zlib format (RFC 9110 8.4.1.2)
		zr, err := zlib.NewReader(r)
		if err != nil {
			return nil, nil, err
		}
		return zr, func() { zr.Close() }, nil
	case "zstd":
		zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(zstdWindow))
		if err != nil {
			return nil, nil, err
		}
		return zr, zr.Close, nil
	}
	return nil, nil, fmt.Errorf("unsupported encoding %q", enc)
}
