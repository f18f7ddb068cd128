package serve

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/shredduck/shredduck/serve/internal/httpbody"
)

// readBody reads a request body into a pooled buffer, undoing its
// Content-Encoding (gzip, deflate, zstd or identity). The decoded body may
// be at most max bytes; the limit applies to the decompressed stream, so a
// gzip bomb stops after max+1 bytes. The buffer and the decompressor are
// charged to the request's account as they grow (budget.go): beyond the
// budget the request is refused with 503. On success the caller owns buf
// and gives it back with httpbody.Put.
func readBody(w http.ResponseWriter, r *http.Request, max int64) (buf *httpbody.Buffer, aerr *apiError) {
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
	raw := &httpbody.ErrReader{}
	var src io.Reader
	var closeSrc func()
	declared := int64(-1)
	switch enc {
	case "", "identity":
		if r.ContentLength > max {
			return nil, tooLarge()
		}
		raw.R = http.MaxBytesReader(rw, r.Body, max)
		src, declared = raw, r.ContentLength
	case "gzip", "x-gzip", "deflate", "zstd":
		if !a.charge(httpbody.StateCost(enc)) {
			return nil, refused()
		}
		raw.R = http.MaxBytesReader(rw, r.Body, httpbody.RawLimit(max))
		var err error
		src, closeSrc, err = httpbody.Decompressor(enc, raw)
		if err == io.EOF && raw.Err == nil {
			src, closeSrc = bytes.NewReader(nil), nil // an empty body is an empty request
			err = nil
		}
		if err != nil {
			if raw.Err != nil {
				return nil, readError(raw.Err, tooLarge)
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
	buf = httpbody.Get()
	err := buf.Fill(src, a.charge, max, declared)
	if err == nil {
		return buf, nil
	}
	httpbody.Put(buf)
	switch {
	case errors.Is(err, httpbody.ErrBudget):
		return nil, refused()
	case errors.Is(err, httpbody.ErrTooLarge):
		return nil, tooLarge()
	case raw.Err != nil:
		return nil, readError(raw.Err, tooLarge)
	case enc == "" || enc == "identity":
		return nil, readError(err, tooLarge)
	}
	return nil, &apiError{status: http.StatusBadRequest, code: codeInvalidArgument, reason: reasonBadEncoding,
		msg: fmt.Sprintf("cannot decompress %s body: %v", enc, err)}
}

// inflate decompresses a message that arrived whole (a gRPC message) as
// readBody does a body: into a pooled buffer charged to a, stopping after
// max+1 bytes.
func inflate(a *account, enc string, data []byte, max int64) (*httpbody.Buffer, *apiError) {
	if !a.charge(httpbody.StateCost(enc)) {
		return nil, a.refusal()
	}
	src, closeSrc, err := httpbody.Decompressor(enc, bytes.NewReader(data))
	if err == nil {
		defer closeSrc()
		buf := httpbody.Get()
		if err = buf.Fill(src, a.charge, max, -1); err == nil {
			return buf, nil
		}
		httpbody.Put(buf)
	}
	switch {
	case errors.Is(err, httpbody.ErrBudget):
		return nil, a.refusal()
	case errors.Is(err, httpbody.ErrTooLarge):
		return nil, tooLargeError(max)
	}
	return nil, &apiError{status: http.StatusBadRequest, code: codeInvalidArgument, reason: reasonBadEncoding,
		msg: fmt.Sprintf("cannot decompress %s message: %v", enc, err)}
}

func tooLargeError(max int64) *apiError {
	return &apiError{status: http.StatusRequestEntityTooLarge, code: codeResourceExhausted, reason: reasonTooLarge,
		msg: fmt.Sprintf("request body exceeds the limit of %d bytes (after decompression)", max)}
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
