package ingest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	duckdb "github.com/duckdb/duckdb-go/v2"
)

// After an internal error (an assertion of its own failing: under memory
// pressure DuckDB 1.5.6 meets "Could not find node in column segment
// tree") or a fatal one, DuckDB invalidates the database: every later
// statement fails until the process opens the file again, which replays
// the WAL. Nothing commits meanwhile, so a server that stayed up would
// answer 503 for ever. The writers report such failures here (noteFailure);
// once a query confirms the database is invalidated, Invalidated is closed
// and the server stops, to be restarted by its supervisor.

// ErrInvalidated is wrapped by the error Invalidated gives.
var ErrInvalidated = errors.New("DuckDB invalidated the database; only opening it again (a restart) makes it usable")

// invalidState is a DB's: whether DuckDB invalidated it, and why.
type invalidState struct {
	mu   sync.Mutex
	ch   chan struct{} // closed once invalidated
	err  error
	test func() error // replaces the confirming query in tests
}

func (s *invalidState) init() {
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
}

// Invalidated returns a channel closed once DuckDB has invalidated the
// database.
func (d *DB) Invalidated() <-chan struct{} {
	s := &d.invalid
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	return s.ch
}

// InvalidatedErr returns why the database is invalidated (wrapping
// ErrInvalidated), or nil.
func (d *DB) InvalidatedErr() error {
	s := &d.invalid
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// mayInvalidate reports a failure of the kind after which DuckDB
// invalidates a database.
func mayInvalidate(err error) bool {
	var de *duckdb.Error
	if errors.As(err, &de) && (de.Type == duckdb.ErrorTypeFatal || de.Type == duckdb.ErrorTypeInternal) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "INTERNAL Error") || strings.Contains(msg, "FATAL Error") || strings.Contains(msg, "invalidated")
}

// noteFailure checks, after a writer's failure of that kind, whether
// DuckDB has invalidated the database: a new statement then fails at once
// saying so.
func (d *DB) noteFailure(err error) {
	if err == nil || !mayInvalidate(err) || d.InvalidatedErr() != nil {
		return
	}
	s := &d.invalid
	probe := s.test
	if probe == nil {
		probe = func() error {
			var one int
			return d.SQL.QueryRowContext(context.Background(), "SELECT 1").Scan(&one)
		}
	}
	if perr := probe(); perr != nil && strings.Contains(perr.Error(), "invalidated") {
		d.MarkInvalidated(err)
	}
}

// MarkInvalidated records err as DuckDB's invalidation of d, as a writer's
// confirmed failure does: for tests of what a server does then.
func (d *DB) MarkInvalidated(err error) {
	s := &d.invalid
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	if s.err == nil {
		s.err = fmt.Errorf("%w: %v", ErrInvalidated, err)
		close(s.ch)
	}
}
