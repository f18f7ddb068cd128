//go:build duckdb_arrow

package ingest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shredduck/shredduck/shred"
	"github.com/shredduck/shredduck/transforms"
)

// ErrOverloaded is returned by Submit when the commit queue is full: the
// caller should ask its client to retry later (HTTP 503/429, gRPC
// UNAVAILABLE).
var ErrOverloaded = errors.New("ingest queue is full")

// ErrClosed is returned by Submit after Close.
var ErrClosed = errors.New("committer is closed")

// CommitOptions configure a Committer.
type CommitOptions struct {
	MaxColumns    int   // dynamic columns per table (default 2000)
	MaxGroupRows  int   // rows in one group commit at most (default 122880)
	QueueRequests int   // submissions waiting at most (default 1024)
	QueueBytes    int64 // input bytes waiting at most (default 256 MiB)
	// OnCommit, when set, is called after each group commit (or failed
	// attempt) from the committer's goroutine.
	OnCommit func(CommitInfo)
}

// CommitInfo describes one group commit.
type CommitInfo struct {
	Requests int
	Rows     int64
	Tables   []*TableStats
	Duration time.Duration
	Err      error
}

// Committer writes batches from many concurrent requests with group
// commit: submissions that arrive while a commit is running are written
// together in the next transaction, and each Submit returns only after its
// rows are committed (or failed). The queue is bounded in requests and
// bytes; beyond it Submit fails at once with ErrOverloaded.
type Committer struct {
	db     *DB
	opt    CommitOptions
	queue  chan *submission
	bytes  atomic.Int64
	known  map[string]*table // owned by the loop goroutine
	mu     sync.RWMutex      // guards closed against sends on queue
	closed bool
	done   chan struct{}
}

type submission struct {
	table string
	tr    transforms.Transform
	b     *shred.Batch
	bytes int64
	err   chan error
}

// NewCommitter starts a committer on db.
func (d *DB) NewCommitter(opt CommitOptions) *Committer {
	if opt.MaxGroupRows <= 0 {
		opt.MaxGroupRows = DefaultBatchRows
	}
	if opt.QueueRequests <= 0 {
		opt.QueueRequests = 1024
	}
	if opt.QueueBytes <= 0 {
		opt.QueueBytes = 256 << 20
	}
	c := &Committer{db: d, opt: opt, queue: make(chan *submission, opt.QueueRequests),
		known: make(map[string]*table), done: make(chan struct{})}
	go c.loop()
	return c
}

// QueueDepth returns the submissions and input bytes waiting.
func (c *Committer) QueueDepth() (requests int, bytes int64) {
	return len(c.queue), c.bytes.Load()
}

// Full reports whether the queue is at either bound.
func (c *Committer) Full() bool {
	return len(c.queue) >= cap(c.queue) || c.bytes.Load() >= c.opt.QueueBytes
}

// Submit queues a finished batch for table and waits until it is committed.
// inputBytes is what the batch came from, counted against the queue bound.
// The caller must not touch b until Submit returns. When ctx ends first,
// Submit returns ctx.Err() and the batch may still be committed later.
func (c *Committer) Submit(ctx context.Context, table string, tr transforms.Transform, b *shred.Batch, inputBytes int64) error {
	s := &submission{table: table, tr: tr, b: b, bytes: inputBytes, err: make(chan error, 1)}
	c.mu.RLock()
	if c.closed {
		c.mu.RUnlock()
		return ErrClosed
	}
	// One submission larger than the bound still goes through an empty queue.
	if n := c.bytes.Add(inputBytes); n > c.opt.QueueBytes && n != inputBytes {
		c.bytes.Add(-inputBytes)
		c.mu.RUnlock()
		return ErrOverloaded
	}
	select {
	case c.queue <- s:
	default:
		c.bytes.Add(-inputBytes)
		c.mu.RUnlock()
		return ErrOverloaded
	}
	c.mu.RUnlock()
	select {
	case err := <-s.err:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops accepting submissions, commits what was accepted and
// returns when the last group is done.
func (c *Committer) Close() {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.queue)
	}
	c.mu.Unlock()
	<-c.done
}

func (c *Committer) loop() {
	defer close(c.done)
	for s := range c.queue {
		group := []*submission{s}
		rows := s.b.Rows
	drain:
		for rows < c.opt.MaxGroupRows {
			select {
			case s, ok := <-c.queue:
				if !ok {
					break drain
				}
				group = append(group, s)
				rows += s.b.Rows
			default:
				break drain
			}
		}
		c.commit(group)
	}
}

// commit writes a group in one transaction. If the group fails and holds
// more than one submission, each is retried alone, so that one bad
// submission fails only itself.
func (c *Committer) commit(group []*submission) {
	err := c.try(group)
	if err != nil && len(group) > 1 {
		for _, s := range group {
			c.finish([]*submission{s}, c.try([]*submission{s}))
		}
		return
	}
	c.finish(group, err)
}

func (c *Committer) finish(group []*submission, err error) {
	for _, s := range group {
		c.bytes.Add(-s.bytes)
		s.err <- err
	}
}

func (c *Committer) try(group []*submission) (err error) {
	start := time.Now()
	var rows int64
	tx, err := c.db.Begin(context.Background(), c.opt.MaxColumns)
	if err != nil {
		return err
	}
	tx.known = c.known
	defer func() {
		if err != nil {
			tx.Rollback()
			for name := range tx.tables {
				delete(c.known, name) // its schema state may hold rolled-back changes
			}
		} else {
			for name, t := range tx.tables {
				c.known[name] = t
			}
		}
		if c.opt.OnCommit != nil {
			c.opt.OnCommit(CommitInfo{Requests: len(group), Rows: rows, Tables: tx.Stats(), Duration: time.Since(start), Err: err})
		}
	}()
	for _, s := range group {
		if err := s.b.Finish(); err != nil {
			return err
		}
		if err := tx.Write(s.table, s.tr, s.b, s.bytes, nil); err != nil {
			return fmt.Errorf("table %s: %w", s.table, err)
		}
		rows += int64(s.b.Rows)
	}
	return tx.Commit()
}
