package serve

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/shredduck/shredduck/ingestlog"
)

// With --ack log the door is faster than the loader: left alone it
// acknowledges until the log is full, and the rows of the last requests
// become visible minutes later. Pacing holds a decoded request, before it
// is logged, while the oldest acknowledged record not yet loaded is older
// than --max-visibility-lag. (Held before decoding, the door left a core
// idle while the loader, on one thread, could not use it: the sustained
// rate fell; docs/SERVE.md.) A request held longer than the lag and
// Retry-After together (5 s at least) gets 503 with Retry-After: the
// loader is failing. Held requests wake at each load.

// minPaceWait is the least time a request is held before its 503, so that
// one slow transaction (a checkpoint) does not refuse requests.
const minPaceWait = 5 * time.Second

// pace holds a decoded request while the loader is behind (--ack log);
// it returns the answer for a request held too long or whose client left.
func (s *Server) pace(ctx context.Context) *apiError {
	d := s.durable
	if d == nil {
		return nil
	}
	lag := s.cfg.MaxVisibilityLag
	age := d.backlogAge()
	if age <= lag {
		return nil
	}
	s.metrics.logPaced.Inc()
	start := time.Now()
	giveUp := time.NewTimer(max(lag+s.cfg.RetryAfter, minPaceWait))
	defer giveUp.Stop()
	for {
		select {
		case <-d.loadedSignal():
			if age = d.backlogAge(); age <= lag {
				s.metrics.logPaceSeconds.Observe(time.Since(start).Seconds())
				return nil
			}
			if s.closing.Load() {
				return s.closedError()
			}
		case <-giveUp.C:
			s.metrics.logPaceSeconds.Observe(time.Since(start).Seconds())
			msg := fmt.Sprintf("the loader is %.1fs behind the ingest log (--max-visibility-lag %s); retry later", age.Seconds(), lag)
			if f := d.failing.Load(); f != nil {
				msg = fmt.Sprintf("the loader cannot store the ingest log (%s); retry later", *f)
			}
			return &apiError{status: http.StatusServiceUnavailable, code: codeUnavailable, reason: reasonOverloaded,
				msg: msg, retryAfter: s.cfg.RetryAfter}
		case <-ctx.Done():
			// Not logged: a client that gave up sends the request again.
			return &apiError{status: http.StatusServiceUnavailable, code: codeUnavailable, reason: reasonOverloaded,
				msg: "the request ended while the loader was behind; retry later", retryAfter: s.cfg.RetryAfter}
		}
	}
}

// backlogAge is how long the oldest acknowledged record not yet loaded
// has waited.
func (d *durable) backlogAge() time.Duration {
	return d.backlog.Age(ingestlog.Position(d.loaded.Load()), time.Now())
}

// loadedSignal returns a channel closed at the loader's next transaction:
// held requests wake once per load, not on a timer each.
func (d *durable) loadedSignal() <-chan struct{} {
	return *d.loadedCh.Load()
}

// signalLoaded wakes the requests waiting for a load.
func (d *durable) signalLoaded() {
	ch := make(chan struct{})
	close(*d.loadedCh.Swap(&ch))
}
