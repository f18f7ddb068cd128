package source

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// snippetBytes is how much of a bad request's body a log line quotes.
const snippetBytes = 200

// Snippet is the start of a body for a log line, as valid UTF-8 (the
// JSON log handler quotes and escapes it).
func Snippet(b []byte) string {
	if len(b) > snippetBytes {
		return strings.ToValidUTF8(string(b[:snippetBytes]), "\uFFFD") + "…"
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// LimitedLog writes at most one line per key (endpoint and reason) per
// interval, so that a client that keeps sending bad data cannot flood the
// log; a line reports how many were suppressed since the last.
type LimitedLog struct {
	log      *slog.Logger
	interval time.Duration
	now      func() time.Time

	mu   sync.Mutex
	keys map[string]*limitState
}

type limitState struct {
	last       time.Time
	suppressed int
}

// NewLimitedLog returns a log that writes a line per key at most every
// interval.
func NewLimitedLog(log *slog.Logger, interval time.Duration) *LimitedLog {
	return &LimitedLog{log: log, interval: interval, now: time.Now, keys: make(map[string]*limitState)}
}

// Log writes msg unless a line with the same key was written within the
// interval. Keys must come from a small fixed set (endpoint x reason), not
// from client input.
func (l *LimitedLog) Log(level slog.Level, key, msg string, attrs ...slog.Attr) {
	now := l.now()
	l.mu.Lock()
	st := l.keys[key]
	if st == nil {
		st = &limitState{}
		l.keys[key] = st
	}
	if !st.last.IsZero() && now.Sub(st.last) < l.interval {
		st.suppressed++
		l.mu.Unlock()
		return
	}
	suppressed := st.suppressed
	st.last, st.suppressed = now, 0
	l.mu.Unlock()
	if suppressed > 0 {
		attrs = append(attrs, slog.Int("suppressed", suppressed))
	}
	l.log.LogAttrs(context.Background(), level, msg, attrs...)
}

// Truncate cuts s to at most n bytes for a log line or an error message,
// marking the cut.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
