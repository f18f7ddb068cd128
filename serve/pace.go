package serve

import (
	"context"
	"fmt"
	"net/http"
	"sync"
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

// backlog keeps when records were appended to the log, so that the age
// of the oldest one not yet loaded is known: a mark per interval at most,
// the position of a record appended then and the time.
type backlog struct {
	mu       sync.Mutex
	marks    []logMark
	interval time.Duration
}

type logMark struct {
	pos ingestlog.Position
	at  time.Time
}

func newBacklog(maxLag time.Duration) *backlog {
	// A thousand marks over the lag: the age is known to a thousandth of
	// it, and the marks of a stalled loader stay few.
	return &backlog{interval: max(time.Millisecond, maxLag/1000)}
}

// appended notes the record at pos, acknowledged at now.
func (b *backlog) appended(pos ingestlog.Position, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n := len(b.marks); n > 0 && now.Sub(b.marks[n-1].at) < b.interval && pos > b.marks[n-1].pos {
		return // the last mark is as old, within the interval
	}
	b.marks = append(b.marks, logMark{pos: pos, at: now})
}

// age returns how long the oldest record at or after loaded has waited
// (0 when none has).
func (b *backlog) age(loaded ingestlog.Position, now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	i := 0
	for i < len(b.marks) && b.marks[i].pos < loaded {
		i++
	}
	if i > 0 {
		b.marks = append(b.marks[:0], b.marks[i:]...)
	}
	if len(b.marks) == 0 {
		return 0
	}
	return now.Sub(b.marks[0].at)
}

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
	return d.backlog.age(ingestlog.Position(d.loaded.Load()), time.Now())
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
