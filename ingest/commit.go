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
	// CheckpointBytes, when > 0, makes the committer checkpoint the
	// database (DB.Checkpoint, on every core) after a group's COMMIT once
	// the WAL holds that many bytes. DuckDB's own checkpoint_threshold
	// should then be higher: its checkpoint runs inside a COMMIT, on
	// DuckDB's threads only.
	CheckpointBytes int64
	// OnCommit, when set, is called after each group commit (or failed
	// attempt) from the committer's goroutine.
	OnCommit func(CommitInfo)
	// OnCheckpoint, when set, is called after each checkpoint the
	// committer runs (CheckpointBytes), from the goroutine of the commit
	// it follows, so possibly while OnCommit runs for a later group.
	OnCheckpoint func(time.Duration, error)
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
	turns  chan turn // Exclusive's work, run between groups
	bytes  atomic.Int64
	known  map[string]*table // owned by the loop goroutine
	mu     sync.RWMutex      // guards closed against sends on queue
	closed bool
	done   chan struct{}

	// checkpointRun is the checkpoint (db.Checkpoint; tests replace it).
	checkpointRun func(context.Context) error
	// failing is the error of the last commit when it failed, unless
	// for its data only (ErrRejected); nil after a commit succeeds
	// (health.go).
	failing atomic.Pointer[error]
	probe   prober
	// retryWAL is the WAL size before which a failed checkpoint is not
	// tried again (0: none failed).
	retryWAL int64
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
	c := &Committer{db: d, opt: opt, queue: make(chan *submission, opt.QueueRequests), turns: make(chan turn),
		known: make(map[string]*table), done: make(chan struct{}), checkpointRun: d.Checkpoint}
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
// A failed commit's error wraps ErrUnavailable (retry later) or
// ErrRejected (the batch's own data), or neither when its cause is not
// known; an error never comes from another submission's data.
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

// turn is work that needs the database's writer to itself.
type turn struct {
	fn   func() error
	done chan error
}

// Exclusive runs fn on the committer's goroutine between two groups, once
// the earlier group's COMMIT (and checkpoint) is done; no group is written
// while fn runs, so fn's transactions never overlap a group's (a DELETE
// beside a pipelined append or an ALTER would conflict). Submissions wait
// in the queue meanwhile: keep fn short. It returns fn's error, ErrClosed
// after Close, or ctx.Err() when ctx ends before fn starts.
func (c *Committer) Exclusive(ctx context.Context, fn func() error) error {
	return runTurn(ctx, c.turns, c.done, fn)
}

func runTurn(ctx context.Context, turns chan<- turn, closed <-chan struct{}, fn func() error) error {
	t := turn{fn: fn, done: make(chan error, 1)}
	select {
	case turns <- t:
	case <-closed:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	return <-t.done
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

// The loop pipelines group commits: while one transaction COMMITs (the
// WAL write and DuckDB's merge into the table, one thread), the next group
// is already written into a second transaction on another connection,
// and keeps taking new submissions until that COMMIT ends. DuckDB lets
// transactions append to one table concurrently; schema changes are kept
// out of the overlap: a transaction that would create, alter or widen a
// table while an earlier one is still committing is rolled back and done
// again after it (errExclusive), and the group after a schema change
// starts only once that change is committed. Exclusive's work (retention's
// DELETEs) runs between two groups, once the earlier one is committed.
// BenchmarkCommitterStream
// (16 senders, 480-span requests): 118k spans/s against 102k serial.

// beforeGroupCommit, when set (tests), runs before each group's COMMIT:
// a slow COMMIT widens the overlap with the next group.
var beforeGroupCommit atomic.Pointer[func()]

// commitFault, when set (tests), fails group commits with its error
// instead of committing them.
var commitFault atomic.Pointer[func() error]

// errExclusive stops a transaction that needs a schema change while an
// earlier one is still committing (its snapshot may miss rows that the
// change must see: the exactness check before BIGINT → DOUBLE), while
// another writer's is open, or a widening whose snapshot predates another
// writer's COMMIT (gate.go).
var errExclusive = errors.New("schema change needs the earlier commit to finish")

// inflight is a group whose COMMIT runs in its own goroutine.
type inflight struct {
	group   []*submission
	tx      *Tx
	rows    int64
	stats   []*TableStats
	start   time.Time
	changed bool // the group changed a schema (or created a table)
	done    chan struct{}
	err     error
}

func (c *Committer) loop() {
	defer close(c.done)
	var prev *inflight
	for {
		var s *submission
		var ok bool
		var prevDone chan struct{}
		if prev != nil {
			prevDone = prev.done
		}
		select {
		case s, ok = <-c.queue:
		case <-prevDone:
			c.wait(prev) // answer its requests now, not when the next arrives
			prev = nil
			continue
		case t := <-c.turns:
			c.wait(prev)
			prev = nil
			t.done <- t.fn()
			continue
		}
		if !ok {
			c.wait(prev)
			return
		}
		prev = c.run(s, prev)
	}
}

// run writes the group that starts with first (and whatever else is queued)
// and starts its COMMIT; it returns the group now committing (nil if it
// finished synchronously).
func (c *Committer) run(first *submission, prev *inflight) *inflight {
	if prev != nil && (prev.changed || prev.finished()) {
		c.wait(prev)
		prev = nil
	}
	group := []*submission{first}
	cur, err := c.prepare(&group, prev, true, false)
	if errors.Is(err, errExclusive) {
		c.wait(prev)
		prev = nil
		cur, err = c.prepare(&group, nil, true, true)
	}
	if prev != nil && err == nil {
		if <-prev.done; prev.err != nil {
			// prev's submissions are retried one by one, and those may
			// change a schema, which no open transaction may see (gate.go):
			// this group is written again after them.
			cur.tx.Rollback()
			c.forget(cur.tx)
			c.wait(prev)
			prev = nil
			cur, err = c.prepare(&group, nil, true, true)
		}
	}
	c.wait(prev)
	if err != nil {
		if !errors.Is(err, errAltersUpdated) { // not a failure: the group is written one by one
			c.report(&inflight{group: group, start: time.Now(), err: err})
		}
		c.retry(group, err)
		return nil
	}
	go func() {
		if hook := beforeGroupCommit.Load(); hook != nil {
			(*hook)()
		}
		if fault := commitFault.Load(); fault != nil {
			cur.tx.Rollback()
			cur.err = (*fault)()
		} else {
			cur.err = cur.tx.Commit()
		}
		// The group is answered after the checkpoint, as after a COMMIT
		// that checkpoints: the next commit would wait for it anyway.
		if cur.err == nil {
			if wal, due := c.checkpointDue(); due {
				c.checkpoint(wal)
			}
		}
		close(cur.done)
	}()
	return cur
}

// prepare begins a transaction and writes *group into it; with more, it
// takes queued submissions too, also while prev commits (up to
// MaxGroupRows rows). When prev is not nil the transaction must not change
// a schema (errExclusive). An exclusive one has no other writer's
// transaction beside it (gate.go); a shared one that comes to a schema
// change while another is open stops with errExclusive.
func (c *Committer) prepare(group *[]*submission, prev *inflight, more, exclusive bool) (cur *inflight, err error) {
	start := time.Now()
	tx, err := c.db.begin(context.Background(), c.opt.MaxColumns, exclusive)
	if err != nil {
		return nil, err
	}
	tx.known = c.known
	// Wide tables need DuckDB's memory limit raised as in a Load (wide.go);
	// the thread count is left alone: other transactions run beside this one.
	tx.tune.memOnly = true
	// A group is a few thousand rows: appended on this goroutine through
	// the C appender rather than by a parallel INSERT (chunks.go).
	tx.chunks = true
	if prev != nil {
		// Even if prev has finished by then, this transaction's snapshot
		// predates its commit.
		tx.beforeDDL = func() error { return errExclusive }
	}
	defer func() {
		if err != nil {
			tx.Rollback()
			c.forget(tx)
		}
	}()
	var rows int64
	write := func(s *submission) error {
		if err := s.b.Finish(); err != nil {
			return err
		}
		if err := tx.Write(s.table, s.tr, s.b, s.bytes, nil); err != nil {
			return fmt.Errorf("table %s: %w", s.table, err)
		}
		rows += int64(s.b.Rows)
		return nil
	}
	for _, s := range *group {
		if err := write(s); err != nil {
			return nil, err
		}
	}
	// Drain what is queued now; then, while prev commits, keep taking
	// submissions as they arrive.
	var prevDone <-chan struct{}
	if prev != nil {
		prevDone = prev.done
	}
	for more && rows < int64(c.opt.MaxGroupRows) {
		var s *submission // nil when the queue is closed
		select {
		case s = <-c.queue:
		default:
			if prevDone == nil {
				break
			}
			select {
			case s = <-c.queue:
			case <-prevDone:
				prevDone = nil
				continue
			}
		}
		if s == nil {
			break // queue empty and prev done, or queue closed
		}
		*group = append(*group, s)
		if err := write(s); err != nil {
			return nil, err
		}
	}
	if err := tx.endRun(); err != nil {
		return nil, err
	}
	for name, t := range tx.tables {
		c.known[name] = t
	}
	cur = &inflight{group: *group, tx: tx, rows: rows, start: start, done: make(chan struct{})}
	for _, st := range tx.Stats() {
		cp := *st
		cur.stats = append(cur.stats, &cp)
		cur.changed = cur.changed || cp.SchemaChanged()
	}
	return cur, nil
}

// wait waits for a committing group, then answers its submissions (or
// retries them one by one if the group failed).
func (c *Committer) wait(p *inflight) {
	if p == nil {
		return
	}
	<-p.done
	if p.err != nil {
		c.forget(p.tx)
	}
	c.report(p)
	if p.err != nil {
		c.retry(p.group, p.err)
		return
	}
	c.finish(p.group, nil)
}

// checkpointDue returns the WAL's size and whether it has reached
// CheckpointBytes (and, after a failed checkpoint, grown by an eighth of
// it since).
func (c *Committer) checkpointDue() (wal int64, due bool) {
	if c.opt.CheckpointBytes <= 0 {
		return 0, false
	}
	n, err := c.db.WALSize()
	return n, err == nil && n >= max(c.opt.CheckpointBytes, c.retryWAL)
}

// checkpoint runs on a group's commit goroutine once its COMMIT has
// succeeded, in place of the checkpoint DuckDB's COMMIT would run: the
// next group keeps being appended into its transaction meanwhile (DuckDB
// lets appends into transaction-local storage through during a
// checkpoint; the COMMIT waits for it). Commit goroutines run one at a
// time, so retryWAL needs no lock. A failed checkpoint loses nothing (the
// WAL keeps the commits); it is tried again once the WAL has grown by an
// eighth of CheckpointBytes, so that a lasting failure (a full disk) does
// not stall every group. wal is the WAL's size when the checkpoint was
// found due.
func (c *Committer) checkpoint(wal int64) {
	start := time.Now()
	err := c.checkpointRun(context.Background())
	c.retryWAL = 0
	if err != nil {
		c.retryWAL = wal + max(1, c.opt.CheckpointBytes/8)
	}
	if c.opt.OnCheckpoint != nil {
		c.opt.OnCheckpoint(time.Since(start), err)
	}
}

func (p *inflight) finished() bool { return closed(p.done) }

// closed reports whether done is closed, without waiting.
func closed(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// retry answers a failed group: a single submission gets the error; a
// larger group is written again one submission per transaction, so that
// one bad submission fails only itself. A retry takes nothing from the
// queue: a bad submission queued meanwhile would fail it again, with
// innocent ones (65 of 68 innocent requests failed while 4 clients sent
// too-wide ones).
func (c *Committer) retry(group []*submission, err error) {
	if len(group) == 1 {
		c.finish(group, err)
		return
	}
	for _, s := range group {
		one := []*submission{s}
		cur, err := c.prepare(&one, nil, false, true)
		if err == nil {
			cur.err = cur.tx.Commit()
			close(cur.done)
			if cur.err != nil {
				c.forget(cur.tx)
			}
			c.report(cur)
			err = cur.err
		} else {
			c.report(&inflight{group: one, start: time.Now(), err: err})
		}
		c.finish(one, err)
	}
}

// forget drops the schema state of the tables a failed transaction
// touched: it may hold rolled-back changes; the next transaction reads
// them again from the catalog.
func (c *Committer) forget(tx *Tx) {
	if tx == nil {
		return
	}
	for name := range tx.tables {
		delete(c.known, name)
	}
}

func (c *Committer) report(p *inflight) {
	switch {
	case p.err == nil:
		c.failing.Store(nil)
	case !errors.Is(p.err, ErrRejected):
		err := classify(p.err)
		c.failing.Store(&err)
		c.db.noteFailure(p.err)
	}
	if c.opt.OnCommit != nil {
		c.opt.OnCommit(CommitInfo{Requests: len(p.group), Rows: p.rows, Tables: p.stats, Duration: time.Since(p.start), Err: p.err})
	}
}

func (c *Committer) finish(group []*submission, err error) {
	err = classify(err)
	for _, s := range group {
		c.bytes.Add(-s.bytes)
		s.err <- err
	}
}
