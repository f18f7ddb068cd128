package serve

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"
)

// The memory budget. Every request's share of the process's memory — its
// body as it arrives and as it inflates, its decompressor, its decoded
// batch while it waits for the commit — is charged, as it grows, to one
// budget of Limits.MaxInflightBytes, and given back when the request ends.
// A request that would take the budget past its bound is refused with 503
// and Retry-After (gRPC UNAVAILABLE) at that moment, so that small requests
// pass while a few large ones hold the rest, and no mix of clients can make
// the server hold more than the bound in requests. A request that alone
// needs more than the whole bound (a small body that decodes into a huge
// batch) is refused with 413 instead: retrying it could never succeed.

// Limits bounds the memory requests may take.
type Limits struct {
	// MaxInflightBytes bounds the bytes that the requests in flight hold
	// at once: bodies read and inflated, decoded batches waiting for their
	// commit (default DefaultMaxInflightBytes). It must be at least
	// MaxBody.
	MaxInflightBytes int64
	// MaxRecords bounds the records (spans, log records, data points,
	// NDJSON rows) of one request (default DefaultMaxRecords); more get
	// 413 (gRPC RESOURCE_EXHAUSTED).
	MaxRecords int
	// MaxKeys bounds the distinct attribute keys of one request (default
	// DefaultMaxKeys): each new key is a row of the table's catalog
	// (shredduck_columns) for good, so a request with more is refused with
	// 400 and adds none.
	MaxKeys int
}

// Defaults of Limits.
const (
	DefaultMaxInflightBytes = 256 << 20
	// DefaultMaxRecords is some twelve times the Collector's default batch
	// (8192): no exporter sends more in a request unless told to.
	DefaultMaxRecords = 100_000
	// DefaultMaxKeys is far above what real telemetry carries in a request
	// (the GH Archive events have some 900 paths in all), far below a
	// flood of made-up keys.
	DefaultMaxKeys = 10_000
)

// Reasons of the refusals of budget.go and memory.go.
const (
	reasonMemory         = "memory_budget"    // the budget was spent: 503
	reasonTooManyRecords = "too_many_records" // over Limits.MaxRecords: 413
	reasonTooManyKeys    = "too_many_keys"    // over Limits.MaxKeys: 400
)

// budget is a bound on bytes held, shared by all requests.
type budget struct {
	limit int64
	used  atomic.Int64
}

// take charges n bytes if they fit under the limit.
func (b *budget) take(n int64) bool {
	for {
		u := b.used.Load()
		if u+n > b.limit {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

func (b *budget) give(n int64) { b.used.Add(-n) }

// account is one request's share of a budget, given back whole when the
// request ends. A nil *account charges nothing and never refuses (code
// reached without the server's middleware, such as unit tests of a
// handler).
type account struct {
	b          *budget
	held       atomic.Int64
	retryAfter time.Duration // asked of a refused client
	never      atomic.Bool   // a refused charge would not fit an empty budget
}

// charge takes n more bytes for the request, or reports false when the
// budget has no room for them.
func (a *account) charge(n int64) bool {
	if a == nil || n <= 0 {
		return true
	}
	if !a.b.take(n) {
		if a.held.Load()+n > a.b.limit {
			a.never.Store(true)
		}
		return false
	}
	a.held.Add(n)
	return true
}

// refusal is the answer to a request that the budget has no room for.
func (a *account) refusal() *apiError {
	if a.never.Load() {
		return &apiError{status: http.StatusRequestEntityTooLarge, code: codeResourceExhausted, reason: reasonTooLarge,
			msg: fmt.Sprintf("the request needs more than the %d bytes of memory the server gives all requests in flight (--max-inflight-bytes); send less per request", a.b.limit)}
	}
	return &apiError{status: http.StatusServiceUnavailable, code: codeUnavailable, reason: reasonMemory,
		msg: "the requests in flight hold the server's memory budget (--max-inflight-bytes); retry later", retryAfter: a.retryAfter}
}

// close gives back everything the request was charged.
func (a *account) close() {
	if a != nil {
		a.b.give(a.held.Swap(0))
	}
}

type accountKey struct{}

// accountOf returns the request's account, or nil.
func accountOf(ctx context.Context) *account {
	a, _ := ctx.Value(accountKey{}).(*account)
	return a
}
