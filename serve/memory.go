package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shredduck/shredduck/shred"
)

// initMemory applies the defaults of s.cfg.Limits, checks them and makes
// the budget (see budget.go).
func (s *Server) initMemory() error {
	l := &s.cfg.Limits
	if l.MaxInflightBytes <= 0 {
		l.MaxInflightBytes = max(DefaultMaxInflightBytes, s.cfg.MaxBody)
	}
	if l.MaxRecords <= 0 {
		l.MaxRecords = DefaultMaxRecords
	}
	if l.MaxKeys <= 0 {
		l.MaxKeys = DefaultMaxKeys
	}
	// A body the budget cannot hold would be refused for ever with a
	// retryable 503.
	if l.MaxInflightBytes < s.cfg.MaxBody {
		return fmt.Errorf("the in-flight memory bound (%d bytes) is below the body limit (%d bytes)", l.MaxInflightBytes, s.cfg.MaxBody)
	}
	s.mem = &budget{limit: l.MaxInflightBytes}
	s.metrics.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "shredduck_inflight_bytes",
			Help: "Bytes the requests in flight hold: bodies read and inflated, decoded batches waiting for their commit.",
		}, func() float64 { return float64(s.mem.used.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "shredduck_inflight_max_bytes",
			Help: "Bound of the bytes the requests in flight may hold (--max-inflight-bytes).",
		}, func() float64 { return float64(s.mem.limit) }),
	)
	return nil
}

// withAccount gives each request an account on the server's budget for
// the time its handler runs. The HTTP handlers charge what they read
// (readBody); the body of a gRPC call, which connect reads, is wrapped.
func (s *Server) withAccount(h http.Handler, grpc bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := &account{b: s.mem, retryAfter: s.cfg.RetryAfter}
		defer a.close()
		r = r.WithContext(context.WithValue(r.Context(), accountKey{}, a))
		if grpc && r.Body != nil && r.Body != http.NoBody {
			r.Body = &grpcBody{ReadCloser: r.Body, a: a, s: s}
		}
		h.ServeHTTP(w, r)
	})
}

// grpcCopies is how many copies of a gRPC message's wire bytes the server
// holds at once: connect's envelope buffer, the buffer it "decompresses"
// into (grpcGzip passes the compressed bytes through) and the codec's copy.
const grpcCopies = 3

// grpcBody charges the bytes of a gRPC request body as connect reads them.
type grpcBody struct {
	io.ReadCloser
	a *account
	s *Server
}

func (b *grpcBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if !b.a.charge(grpcCopies * int64(n)) {
		// A *connect.Error reaches the client as it is.
		return n, b.s.grpcError(b.a.refusal())
	}
	return n, err
}

// limits are a request's limits: at most MaxRecords rows and MaxKeys
// keys, its batch's growth charged to the request's account.
func (s *Server) limits(ctx context.Context) shred.Limits {
	l := shred.Limits{MaxRows: s.cfg.MaxRecords, MaxKeys: s.cfg.MaxKeys}
	if a := accountOf(ctx); a != nil {
		l.Charge = a.charge
	}
	return l
}

// limitError maps a batch limit that ended decoding to its answer, or
// returns nil for other errors: more records than MaxRecords is 413, a
// batch the budget has no room for 503.
func (s *Server) limitError(ctx context.Context, err error) *apiError {
	switch {
	case errors.Is(err, shred.ErrTooManyRows):
		return &apiError{status: http.StatusRequestEntityTooLarge, code: codeResourceExhausted, reason: reasonTooManyRecords,
			msg: fmt.Sprintf("the request holds more than %d records, the server's limit (--max-records); send fewer per request", s.cfg.MaxRecords)}
	case errors.Is(err, shred.ErrTooManyKeys):
		return &apiError{status: http.StatusBadRequest, code: codeInvalidArgument, reason: reasonTooManyKeys,
			msg: fmt.Sprintf("the request carries more than %d distinct attribute keys, the server's limit (--max-keys): each becomes a column or a catalog entry of its table for good; nothing of the request was stored", s.cfg.MaxKeys)}
	case errors.Is(err, shred.ErrMemory):
		if a := accountOf(ctx); a != nil {
			return a.refusal()
		}
		return (&account{retryAfter: s.cfg.RetryAfter}).refusal()
	}
	return nil
}

// queueBytes is what a submission counts against the commit queue's
// bound: its batch's memory, when that is more than its input. A request
// whose client went away leaves its batch in the queue, with no account
// holding its memory (budget.go), so the queue bounds it.
func queueBytes(b *shred.Batch, input int) int64 {
	return int64(max(input, b.Bytes()))
}
