package serve

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// maxPooledBuffer caps the capacity of a body buffer kept for reuse: a few
// huge requests must not pin their memory for the life of the process.
const maxPooledBuffer = 4 << 20

// body is a request body read into memory.
type body struct{ b []byte }

func (x *body) Bytes() []byte { return x.b }
func (x *body) Len() int      { return len(x.b) }

var bodyPool = sync.Pool{New: func() any { return new(body) }}

// putBuffer gives a body back for reuse once nothing refers to its bytes.
func putBuffer(x *body) {
	if x == nil || cap(x.b) > maxPooledBuffer {
		return
	}
	x.b = x.b[:0]
	bodyPool.Put(x)
}

// Body buffers grow by doubling from minBodyBuf, and are charged to the
// request's account (budget.go) a readChunk ahead of the bytes read into
// them, or whole when they are allocated.
const (
	minBodyBuf = 32 << 10
	readChunk  = 64 << 10
)

// What a decompressor's state costs, charged before it is made: gzip and
// zlib hold a 32 KiB window and their tables; zstd's window is capped at
// 8 MiB, the most RFC 9659 lets an HTTP sender use.
const (
	inflateState = 64 << 10
	zstdWindow   = 8 << 20
	zstdState    = zstdWindow + 256<<10
)

var (
	errBudget   = errors.New("the memory budget has no room for the body")
	errTooLarge = errors.New("the body is over the limit")
)

// fill reads src to its end into x. The buffer grows with the bytes that
// arrive, never past declared (the sender's Content-Length; -1 when
// unknown) nor limit+1, and each growth is charged to a before it is used:
// a sender that declares 64 MiB and sends one byte holds minBodyBuf. It
// fails with errTooLarge after more than limit bytes, errBudget when a
// charge is refused, or src's error.
func (x *body) fill(src io.Reader, a *account, limit, declared int64) error {
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
					return errTooLarge
				}
				if err != nil {
					if err == io.EOF {
						return nil
					}
					return err
				}
				continue
			}
			want := int64(max(2*cap(x.b), minBodyBuf))
			if declared >= 0 {
				want = min(want, declared)
			}
			want = min(want, limit+1)
			if want > charged {
				if !a.charge(want - charged) {
					return errBudget
				}
				charged = want
			}
			nb := make([]byte, len(x.b), want)
			copy(nb, x.b)
			x.b = nb
		}
		n := min(int64(cap(x.b)-len(x.b)), readChunk, limit+1-int64(len(x.b)))
		if need := int64(len(x.b)) + n; need > charged {
			if !a.charge(need - charged) {
				return errBudget
			}
			charged = need
		}
		m, err := src.Read(x.b[len(x.b) : len(x.b)+int(n)])
		x.b = x.b[:len(x.b)+m]
		if int64(len(x.b)) > limit {
			return errTooLarge
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

// errReader remembers the first error other than io.EOF of the reader
// under a decompressor, so that a failed read can be told apart from bad
// compressed data.
type errReader struct {
	r   io.Reader
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF && e.err == nil {
		e.err = err
	}
	return n, err
}

// rawLimit bounds the bytes read off the wire for a compressed body whose
// decoded size may be at most max: compressed data is never much larger
// than its content, and the bound stops a stream of empty compressed
// blocks that would otherwise be read forever.
func rawLimit(max int64) int64 { return max + max/16 + 64<<10 }

// readBody reads a request body into a pooled buffer, undoing its
// Content-Encoding (gzip, deflate, zstd or identity). The decoded body may
// be at most max bytes; the limit applies to the decompressed stream, so a
// gzip bomb stops after max+1 bytes. The buffer and the decompressor are
// charged to the request's account as they grow (budget.go): beyond the
// budget the request is refused with 503. On success the caller owns buf
// and gives it back with putBuffer.
func readBody(w http.ResponseWriter, r *http.Request, max int64) (buf *body, aerr *apiError) {
	// A refused body is not read to its end: the connection cannot be
	// reused.
	tooLarge := func() *apiError {
		w.Header().Set("Connection", "close")
		return tooLargeError(max)
	}
	a := accountOf(r.Context())
	refused := func() *apiError {
		w.Header().Set("Connection", "close")
		return a.refusal()
	}
	enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding")))
	rw := unwrapWriter(w)
	raw := &errReader{}
	var src io.Reader
	var closeSrc func()
	declared := int64(-1)
	switch enc {
	case "", "identity":
		if r.ContentLength > max {
			return nil, tooLarge()
		}
		raw.r = http.MaxBytesReader(rw, r.Body, max)
		src, declared = raw, r.ContentLength
	case "gzip", "x-gzip", "deflate", "zstd":
		if !a.charge(stateCost(enc)) {
			return nil, refused()
		}
		raw.r = http.MaxBytesReader(rw, r.Body, rawLimit(max))
		var err error
		src, closeSrc, err = decompressor(enc, raw)
		if err == io.EOF && raw.err == nil {
			src, closeSrc = bytes.NewReader(nil), nil // an empty body is an empty request
			err = nil
		}
		if err != nil {
			if raw.err != nil {
				return nil, readError(raw.err, tooLarge)
			}
			return nil, &apiError{status: http.StatusBadRequest, code: codeInvalidArgument, reason: reasonBadEncoding,
				msg: fmt.Sprintf("cannot decompress %s body: %v", enc, err)}
		}
	default:
		return nil, &apiError{status: http.StatusUnsupportedMediaType, code: codeInvalidArgument, reason: reasonMediaType,
			msg: fmt.Sprintf("unsupported Content-Encoding %q (want gzip, deflate, zstd or identity)", enc)}
	}
	if closeSrc != nil {
		defer closeSrc()
	}
	buf = bodyPool.Get().(*body)
	err := buf.fill(src, a, max, declared)
	if err == nil {
		return buf, nil
	}
	putBuffer(buf)
	switch {
	case errors.Is(err, errBudget):
		return nil, refused()
	case errors.Is(err, errTooLarge):
		return nil, tooLarge()
	case raw.err != nil:
		return nil, readError(raw.err, tooLarge)
	case enc == "" || enc == "identity":
		return nil, readError(err, tooLarge)
	}
	return nil, &apiError{status: http.StatusBadRequest, code: codeInvalidArgument, reason: reasonBadEncoding,
		msg: fmt.Sprintf("cannot decompress %s body: %v", enc, err)}
}

// inflate decompresses a message that arrived whole (a gRPC message) as
// readBody does a body: into a pooled buffer charged to a, stopping after
// max+1 bytes.
func inflate(a *account, enc string, data []byte, max int64) (*body, *apiError) {
	if !a.charge(stateCost(enc)) {
		return nil, a.refusal()
	}
	src, closeSrc, err := decompressor(enc, bytes.NewReader(data))
	if err == nil {
		defer closeSrc()
		buf := bodyPool.Get().(*body)
		if err = buf.fill(src, a, max, -1); err == nil {
			return buf, nil
		}
		putBuffer(buf)
	}
	switch {
	case errors.Is(err, errBudget):
		return nil, a.refusal()
	case errors.Is(err, errTooLarge):
		return nil, tooLargeError(max)
	}
	return nil, &apiError{status: http.StatusBadRequest, code: codeInvalidArgument, reason: reasonBadEncoding,
		msg: fmt.Sprintf("cannot decompress %s message: %v", enc, err)}
}

func tooLargeError(max int64) *apiError {
	return &apiError{status: http.StatusRequestEntityTooLarge, code: codeResourceExhausted, reason: reasonTooLarge,
		msg: fmt.Sprintf("request body exceeds the limit of %d bytes (after decompression)", max)}
}

// stateCost is what the decompressor of enc is charged.
func stateCost(enc string) int64 {
	if enc == "zstd" {
		return zstdState
	}
	return inflateState
}

// readError classifies an error reading the body off the wire.
func readError(err error, tooLarge func() *apiError) *apiError {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return tooLarge()
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return &apiError{status: http.StatusRequestTimeout, code: codeDeadlineExceeded, reason: reasonReadTimeout,
			msg: "the request body did not arrive within the read timeout (--read-timeout)"}
	}
	return &apiError{status: http.StatusBadRequest, code: codeInvalidArgument, reason: reasonCanceled,
		msg: fmt.Sprintf("cannot read request body: %v", err)}
}

// decompressor returns a reader of the decoded stream and a function that
// releases it.
func decompressor(enc string, r io.Reader) (io.Reader, func(), error) {
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
