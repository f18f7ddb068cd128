package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/serve/internal/httpbody"
	"github.com/shredduck/shredduck/shred"
	"github.com/shredduck/shredduck/source"
	"github.com/shredduck/shredduck/source/logload"
	"github.com/shredduck/shredduck/transforms"
)

// OTLP/HTTP receiver: https://opentelemetry.io/docs/specs/otlp/#otlphttp
//
// POST /v1/traces, /v1/logs and /v1/metrics take one Export*ServiceRequest
// as binary protobuf (application/x-protobuf) or OTLP/JSON
// (application/json), optionally gzip, deflate or zstd compressed. The
// answer, in the request's encoding, is sent only after the request's rows
// are committed: 200 with an empty Export*ServiceResponse, or an error
// status with a google.rpc.Status body.

// signal is one OTLP signal's routing.
type signal struct {
	name      string // traces, logs, metrics
	path      string // OTLP/HTTP path
	procedure string // gRPC method
	tr        transforms.Transform
	table     string
	conflict  *apiError // the answer while table holds another transform's data (tables.go)
}

// requestFormat maps a Content-Type to the body's encoding; ok is false
// for a type the OTLP endpoints do not take.
func requestFormat(contentType string) (f format, ok bool) {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return formatJSON, false
	}
	switch mt {
	case "application/x-protobuf", "application/protobuf":
		return formatProto, true
	case "application/json":
		return formatJSON, true
	}
	return formatJSON, false
}

func (s *Server) handleOTLP(sig *signal) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		f, ok := requestFormat(r.Header.Get("Content-Type"))
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			s.refuse(w, r, sig.path, f, nil, &apiError{status: http.StatusMethodNotAllowed, code: codeUnimplemented,
				reason: reasonMethod, msg: fmt.Sprintf("method %s not allowed: OTLP/HTTP takes POST", r.Method)})
			return
		}
		if !ok {
			s.refuse(w, r, sig.path, f, nil, &apiError{status: http.StatusUnsupportedMediaType, code: codeInvalidArgument,
				reason: reasonMediaType, msg: fmt.Sprintf("unsupported Content-Type %q (want application/x-protobuf or application/json)", r.Header.Get("Content-Type"))})
			return
		}
		if aerr := s.overloaded(); aerr != nil {
			s.refuse(w, r, sig.path, f, nil, aerr)
			return
		}
		buf, aerr := readBody(w, r, s.cfg.MaxBody)
		if aerr != nil {
			s.refuse(w, r, sig.path, f, nil, aerr)
			return
		}
		_, rej, aerr := s.receive(r.Context(), sig, f, buf.Bytes())
		if aerr != nil {
			s.refuse(w, r, sig.path, f, buf.Bytes(), aerr)
			httpbody.Put(buf)
			return
		}
		size := buf.Len()
		httpbody.Put(buf)
		w.Header().Set("Content-Type", f.ContentType())
		if rej != nil {
			body, err := s.partial(sig.path, sig, f, rej, r.RemoteAddr, size)
			if err != nil { // cannot happen: the response is two fields
				writeError(w, f, &apiError{status: http.StatusInternalServerError, code: codeInternal, msg: err.Error()})
				return
			}
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.WriteHeader(http.StatusOK)
			w.Write(body)
			return
		}
		// An empty Export*ServiceResponse: no partial_success.
		if f == formatJSON {
			w.Header().Set("Content-Length", "2")
			w.WriteHeader(http.StatusOK)
			w.Write([]byte("{}"))
			return
		}
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusOK)
	}
}

// receive decodes one export request and commits its rows to the signal's
// table; it returns the number of records committed and, when the decoder
// left some out (partial success), which. data is not retained after it
// returns.
func (s *Server) receive(ctx context.Context, sig *signal, f format, data []byte) (int, *transforms.RejectedError, *apiError) {
	if len(data) == 0 {
		return 0, nil, nil // an empty request, in either encoding
	}
	if sig.conflict != nil {
		return 0, nil, sig.conflict
	}
	d, err := source.Decode(s.batches, source.Request{Format: f, Tr: sig.tr, Data: data}, s.limits(ctx))
	if err != nil {
		if aerr := s.limitError(ctx, err); aerr != nil {
			return 0, nil, aerr
		}
		return 0, nil, badData(fmt.Sprintf("cannot decode %d-byte %s %s request: %v", len(data), f, sig.name, err))
	}
	if d.Batch == nil {
		return 0, d.Rejected, nil // an empty request, or every record rejected: nothing to commit
	}
	if aerr := s.submit(ctx, sig.table, sig.tr, d.Batch, queueBytes(d.Batch, len(data)), logload.Body{Kind: logload.KindOTLP, Format: f, Fixed: sig.tr.Name(), Data: data}); aerr != nil {
		aerr.records = d.Records
		return 0, nil, aerr
	}
	return d.Records, d.Rejected, nil
}

// partial counts and logs (rate-limited) the records of a stored request
// that were rejected, and returns the answer: partialSuccess.
func (s *Server) partial(endpoint string, sig *signal, f format, rej *transforms.RejectedError, remote string, bytes int) ([]byte, error) {
	s.metrics.rejectedRecords.WithLabelValues(endpoint, reasonInvalidRecord).Add(float64(rej.Records))
	attrs := []slog.Attr{
		slog.String("endpoint", endpoint), slog.String("reason", reasonInvalidRecord),
		slog.Int("rejected", rej.Records), slog.String("error", source.Truncate(rej.Error(), 1000)),
		slog.String("remote", remote), slog.Int("bytes", bytes),
	}
	s.limited.Log(slog.LevelWarn, endpoint+" "+reasonInvalidRecord, "records rejected (partial success)", attrs...)
	return partialSuccess(sig, f, rej)
}

// submit commits a decoded batch and maps the outcome to an answer; it
// owns b and gives it back to the pool.
//
// It waits for the batch's outcome even when ctx ends first: a client
// that half-closes its connection (shutdown(SHUT_WR)) ends the request's
// context but still reads the answer, and an answer sent before the
// commit (a 2xx net/http sent for a handler that wrote nothing) was lost
// with the queued batch in a crash.
//
// With --ack log it logs body instead (appendLog) and returns once that is
// durable.
func (s *Server) submit(ctx context.Context, table string, tr transforms.Transform, b *shred.Batch, inputBytes int64, body logload.Body) *apiError {
	if hook := s.beforeSubmit.Load(); hook != nil {
		(*hook)(ctx)
	}
	if s.durable != nil {
		if aerr := s.pace(ctx); aerr != nil {
			s.batches.Put(tr, b)
			return aerr
		}
		return s.appendLog(table, tr, b, inputBytes, body)
	}
	err := s.committer.Submit(context.WithoutCancel(ctx), table, tr, b, inputBytes)
	s.batches.Put(tr, b)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ingest.ErrOverloaded):
		return s.overloadError()
	case errors.Is(err, ingest.ErrClosed):
		return s.closedError()
	}
	return commitError(table, err, s.cfg.RetryAfter)
}

// commitError maps a failed commit to an answer. OTLP clients drop the
// data of every answer but 429, 502, 503 and 504, so only a request
// whose own data cannot be stored gets 400; every other failure, known to
// pass (out of memory, a full disk, a conflict) or of no known cause, is
// 503 with Retry-After: the request decoded, and its rows may well
// commit when sent again.
func commitError(table string, err error, retryAfter time.Duration) *apiError {
	if errors.Is(err, ingest.ErrRejected) {
		return &apiError{status: http.StatusBadRequest, code: codeInvalidArgument, reason: reasonRejected,
			msg: fmt.Sprintf("cannot store the request in table %s: %v", table, err)}
	}
	reason := reasonUnavailable
	if !errors.Is(err, ingest.ErrUnavailable) {
		reason = reasonCommitFailed
	}
	return &apiError{status: http.StatusServiceUnavailable, code: codeUnavailable, reason: reason,
		msg: fmt.Sprintf("cannot commit to table %s now; retry later: %v", table, err), retryAfter: retryAfter}
}

// overloaded refuses a request at once, before its body is read, when the
// commit queue is full.
func (s *Server) overloaded() *apiError {
	if s.closing.Load() {
		return s.closedError()
	}
	if s.committer.Full() {
		return s.overloadError()
	}
	if s.durable != nil && s.durable.log.Size() >= s.cfg.LogMaxBytes {
		return s.logFullError()
	}
	return nil
}

func (s *Server) closedError() *apiError {
	return &apiError{status: http.StatusServiceUnavailable, code: codeUnavailable, reason: reasonClosed,
		msg: "server is shutting down; retry", retryAfter: s.cfg.RetryAfter}
}

func (s *Server) overloadError() *apiError {
	return &apiError{status: http.StatusServiceUnavailable, code: codeUnavailable, reason: reasonOverloaded,
		msg: "ingest queue is full; retry later", retryAfter: s.cfg.RetryAfter}
}

// refuse answers a refused request, counts it and logs it (rate-limited,
// with a snippet of the body when there is one). It answers also when the
// request's context has ended: a half-closed client still reads, and a
// handler that wrote nothing got an implicit 200.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, endpoint string, f format, body []byte, e *apiError) {
	s.reject(endpoint, e, r.RemoteAddr, body)
	writeError(w, f, e)
}

// reject counts and logs a refused request.
func (s *Server) reject(endpoint string, e *apiError, remote string, body []byte) {
	s.metrics.rejectedRequests.WithLabelValues(endpoint, e.reason).Inc()
	if e.records > 0 {
		s.metrics.rejectedRecords.WithLabelValues(endpoint, e.reason).Add(float64(e.records))
	}
	level := slog.LevelWarn
	switch e.reason {
	case reasonInternal, reasonCommitFailed, reasonUnavailable:
		level = slog.LevelError
	case reasonOverloaded, reasonClosed, reasonCanceled:
		level = slog.LevelInfo
	}
	attrs := []slog.Attr{
		slog.String("endpoint", endpoint), slog.String("reason", e.reason),
		slog.Int("status", e.status), slog.String("error", source.Truncate(e.msg, 1000)),
		slog.String("remote", remote),
	}
	if len(body) > 0 {
		attrs = append(attrs, slog.Int("bytes", len(body)), slog.String("body", source.Snippet(body)))
	}
	s.limited.Log(level, endpoint+" "+e.reason, "request refused", attrs...)
}
