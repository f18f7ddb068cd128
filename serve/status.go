package serve

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/shredduck/shredduck/source"
)

// google.rpc.Code values used in Status bodies and gRPC errors.
const (
	codeInvalidArgument    = 3
	codeNotFound           = 5
	codeFailedPrecondition = 9
	codeDeadlineExceeded   = 4
	codeResourceExhausted  = 8
	codeUnimplemented      = 12
	codeInternal           = 13
	codeUnavailable        = 14
	codeUnauthenticated    = 16
)

// Reasons label rejected requests in metrics and key the rate-limited log.
const (
	reasonBadData        = "bad_data"
	reasonInvalidRecord  = "invalid_record" // records left out of a stored request
	reasonBadEncoding    = "bad_encoding"
	reasonTooLarge       = "too_large"
	reasonMediaType      = "unsupported_media_type"
	reasonMethod         = "method_not_allowed"
	reasonNotFound       = "not_found"
	reasonBadTable       = "bad_table"
	reasonTableConflict  = "table_conflict"
	reasonUnauthenticate = "unauthenticated"
	reasonOverloaded     = "overloaded"
	reasonClosed         = "shutting_down"
	reasonInternal       = "internal"
	reasonRejected       = "rejected"      // decoded, but the data cannot be stored (ingest.ErrRejected)
	reasonUnavailable    = "unavailable"   // the database cannot commit now (ingest.ErrUnavailable)
	reasonCommitFailed   = "commit_failed" // a commit failure of no known cause
	reasonNoAnswer       = "no_answer"     // a handler wrote nothing: aborted (mustAnswer)
	reasonCanceled       = "canceled"
	reasonReadTimeout    = "read_timeout"
)

// apiError is a refused request: the HTTP status, the google.rpc.Code of
// its Status body (and of the gRPC error), and what went wrong.
type apiError struct {
	status  int    // HTTP status
	code    int32  // google.rpc.Code
	reason  string // metric label and log key
	msg     string // Status.message, shown to the client
	records int    // records decoded before the refusal (overload, commit failure)
	// retryAfter, when positive, is sent as Retry-After (whole seconds).
	retryAfter time.Duration
}

func (e *apiError) Error() string { return e.msg }

func badData(msg string) *apiError {
	return &apiError{status: http.StatusBadRequest, code: codeInvalidArgument, reason: reasonBadData, msg: msg}
}

// Retryable HTTP statuses per the OTLP specification
// (https://opentelemetry.io/docs/specs/otlp/#failures-1): 429, 502, 503 and
// 504. Every other error status tells the client to drop the data.

// statusBody encodes a google.rpc.Status in the response format: protobuf
// (field 1 code, field 2 message) or its JSON mapping, {"code":3,"message":"..."}
// (protojson would do, but inserts random spaces on purpose).
func statusBody(f format, code int32, msg string) []byte {
	msg = strings.ToValidUTF8(msg, "\uFFFD") // a proto3 string must be UTF-8
	if f == formatProto {
		b, err := proto.Marshal(&statuspb.Status{Code: code, Message: msg})
		if err != nil { // cannot happen for a Status without details
			return nil
		}
		return b
	}
	b, _ := json.Marshal(struct {
		Code    int32  `json:"code"`
		Message string `json:"message,omitempty"`
	}{code, msg})
	return b
}

// writeError answers a refused request with a Status body in format f.
func writeError(w http.ResponseWriter, f format, e *apiError) {
	h := w.Header()
	h.Set("Content-Type", f.ContentType())
	h.Set("X-Content-Type-Options", "nosniff")
	if e.retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int((e.retryAfter+time.Second-1)/time.Second)))
	}
	if e.status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="shredduck"`)
	}
	body := statusBody(f, e.code, e.msg)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(e.status)
	w.Write(body)
}

// format is the encoding of a request and so of its response.
type format = source.Format

const (
	formatJSON  = source.FormatJSON
	formatProto = source.FormatProto
)
