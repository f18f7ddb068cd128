package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shredduck/shredduck/shred"
	"github.com/shredduck/shredduck/transforms"
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

// batch takes a pooled batch for tr under the request's limits: at most
// MaxRecords rows, its growth charged to the request's account.
func (s *Server) batch(ctx context.Context, tr transforms.Transform) *shred.Batch {
	b := s.batches.get(tr)
	l := shred.Limits{MaxRows: s.cfg.MaxRecords, MaxKeys: s.cfg.MaxKeys}
	if a := accountOf(ctx); a != nil {
		l.Charge = a.charge
	}
	b.SetLimits(l)
	return b
}

// batchFor is batch as the getter decodeNDJSON takes.
func (s *Server) batchFor(ctx context.Context) func(transforms.Transform) *shred.Batch {
	return func(tr transforms.Transform) *shred.Batch { return s.batch(ctx, tr) }
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

// isLimit reports whether decoding ended at a batch limit.
func isLimit(err error) bool {
	return errors.Is(err, shred.ErrTooManyRows) || errors.Is(err, shred.ErrTooManyKeys) || errors.Is(err, shred.ErrMemory)
}

// detectMaxBytes bounds what detectProto's trial decodes may allocate.
const detectMaxBytes = 8 << 20

// detectProto names the signal of a protobuf request that the endpoint's
// decoder refused, for the error message: the first transform that
// decodes a record of it. transforms.DetectProto asks pdata, which decodes
// the whole request into objects of its own (hundreds of bytes per
// two-byte empty span); here each trial stops after its first records and
// a few MiB.
func detectProto(data []byte) transforms.Transform {
	for _, tr := range transforms.All() {
		var used int64
		b := shred.NewBatch(tr.Core())
		b.SetLimits(shred.Limits{MaxRows: 1, Charge: func(n int64) bool {
			used += n
			return used <= detectMaxBytes
		}})
		n, err := tr.AppendProto(b, data)
		var rej *transforms.RejectedError
		if (err == nil || errors.As(err, &rej)) && n > 0 || errors.Is(err, shred.ErrTooManyRows) {
			return tr
		}
	}
	return nil
}
