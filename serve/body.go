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

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// getBuffer returns an empty buffer; give it back with putBuffer once
// nothing refers to its bytes.
func getBuffer() *bytes.Buffer { return bufPool.Get().(*bytes.Buffer) }

func putBuffer(b *bytes.Buffer) {
	if b == nil || b.Cap() > maxPooledBuffer {
		return
	}
	b.Reset()
	bufPool.Put(b)
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
// gzip bomb stops after max+1 bytes. On success the caller owns buf and
// gives it back with putBuffer.
func readBody(w http.ResponseWriter, r *http.Request, max int64) (buf *bytes.Buffer, aerr *apiError) {
	tooLarge := func() *apiError {
		// The rest of the body is not read: the connection cannot be reused.
		w.Header().Set("Connection", "close")
		return &apiError{status: http.StatusRequestEntityTooLarge, code: codeResourceExhausted, reason: reasonTooLarge,
			msg: fmt.Sprintf("request body exceeds the limit of %d bytes (after decompression)", max)}
	}
	enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding")))
	rw := unwrapWriter(w)
	raw := &errReader{}
	var src io.Reader
	var closeSrc func()
	switch enc {
	case "", "identity":
		if r.ContentLength > max {
			return nil, tooLarge()
		}
		raw.r = http.MaxBytesReader(rw, r.Body, max)
		src = raw
	case "gzip", "x-gzip", "deflate", "zstd":
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
	buf = getBuffer()
	if enc == "" || enc == "identity" {
		if n := r.ContentLength; n > 0 && int64(buf.Cap()) < n {
			buf.Grow(int(n))
		}
		_, err := buf.ReadFrom(src)
		if err != nil {
			putBuffer(buf)
			return nil, readError(err, tooLarge)
		}
		return buf, nil
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(rw, io.NopCloser(src), max))
	if err != nil {
		putBuffer(buf)
		if raw.err != nil {
			return nil, readError(raw.err, tooLarge)
		}
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge()
		}
		return nil, &apiError{status: http.StatusBadRequest, code: codeInvalidArgument, reason: reasonBadEncoding,
			msg: fmt.Sprintf("cannot decompress %s body: %v", enc, err)}
	}
	return buf, nil
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
			zstd.WithDecoderMaxWindow(32<<20))
		if err != nil {
			return nil, nil, err
		}
		return zr, zr.Close, nil
	}
	return nil, nil, fmt.Errorf("unsupported encoding %q", enc)
}
