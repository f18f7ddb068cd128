package logload

import (
	"sync"
	"time"

	"github.com/shredduck/shredduck/ingestlog"
)

// Backlog keeps when records were appended to the log, so that the age
// of the oldest one not yet loaded is known: a mark per interval at most,
// the position of a record appended then and the time.
type Backlog struct {
	mu       sync.Mutex
	marks    []logMark
	interval time.Duration
}

type logMark struct {
	pos ingestlog.Position
	at  time.Time
}

// NewBacklog returns a backlog that knows an age to a thousandth of
// maxLag.
func NewBacklog(maxLag time.Duration) *Backlog {
	// A thousand marks over the lag: the age is known to a thousandth of
	// it, and the marks of a stalled loader stay few.
	return &Backlog{interval: max(time.Millisecond, maxLag/1000)}
}

// Appended notes the record at pos, acknowledged at now.
func (b *Backlog) Appended(pos ingestlog.Position, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n := len(b.marks); n > 0 && now.Sub(b.marks[n-1].at) < b.interval && pos > b.marks[n-1].pos {
		return // the last mark is as old, within the interval
	}
	b.marks = append(b.marks, logMark{pos: pos, at: now})
}

// Age returns how long the oldest record at or after loaded has waited
// (0 when none has).
func (b *Backlog) Age(loaded ingestlog.Position, now time.Time) time.Duration {
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
