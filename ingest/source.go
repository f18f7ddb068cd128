package ingest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/shredduck/shredduck/shred"
	"github.com/shredduck/shredduck/transforms"
)

// A Source gives a Loader its records in order: the durable ingest log
// (serve), later a Kafka partition. A position is the source's own
// number for "everything before here"; the Loader stores it in
// shredduck_sources in the transaction that stores the rows, so that a
// restart resumes exactly after what was committed: nothing lost, nothing
// twice. Positions, batching and that bookkeeping are the Loader's; the
// Source only reads.
type Source interface {
	// Name is the source's key in shredduck_sources.
	Name() string
	// Seek makes Next continue at pos: the stored position at start, or
	// the last committed one after a failed transaction.
	Seek(pos uint64) error
	// Next returns the next item, waiting at most wait for one (ok is
	// false when none came). A record the source cannot decode is its
	// to report; it returns an item without a batch for it, so that the
	// position moves past it.
	Next(ctx context.Context, wait time.Duration) (item SourceItem, ok bool, err error)
	// Stored says that every item before pos is committed: the source may
	// free them.
	Stored(pos uint64)
}

// SourceItem is one record of a Source, decoded.
type SourceItem struct {
	Table string
	Tr    transforms.Transform
	// Batch holds the rows, nil for a record that has none. The Loader
	// owns it until it calls Release.
	Batch   *shred.Batch
	Bytes   int64     // what the batch came from
	Next    uint64    // the position after this item
	Arrived time.Time // when the record became durable in the source (visibility lag)
	Release func()    // called once, when the batch is no longer needed; may be nil
	// Key, when set, names the part of a KeyedSource the item is from (a
	// Kafka topic's partition): Next is then that key's position, stored
	// as source Name()+"/"+Key.
	Key string
	// Split, for an item a source made of several records, returns them
	// as items of their own: when the item's data cannot be stored, only
	// the record at fault is dropped. It may be nil.
	Split func() []SourceItem

	// The Loader's: the position the item starts at (a source without
	// keys), and the rows [from, to) of Batch still to store (to 0: to
	// the end) when a transaction ends inside the item.
	start    uint64
	from, to int
}

// end is the row after the item's last one to store.
func (it SourceItem) end() int {
	if it.to > 0 {
		return it.to
	}
	if it.Batch == nil {
		return 0
	}
	return it.Batch.Rows
}

// rows is how many of the item's rows are still to store.
func (it SourceItem) rows() int { return max(0, it.end()-it.from) }

// partial reports whether rows of the item after end are left for a
// later transaction.
func (it SourceItem) partial() bool { return it.Batch != nil && it.end() < it.Batch.Rows }

// A KeyedSource has a position per key (SourceItem.Key) instead of one:
// its parts are read independently, and it seeks each one itself when
// it starts to read it (DB.StoredPosition of Name()+"/"+key). The Loader
// still calls Seek after a failed transaction: every key goes back to
// its last stored position.
type KeyedSource interface {
	Source
	// StoredKeys says, after a commit, where each key loaded in it got to.
	StoredKeys(pos map[string]uint64)
}

func (it SourceItem) release() {
	if it.Release != nil {
		it.Release()
	}
}

// LoaderOptions configure a Loader.
type LoaderOptions struct {
	MaxColumns int // dynamic columns per table (default 2000)
	// MaxRows ends a transaction once one table has that many rows
	// (default RowGroupRows: DuckDB writes a whole row group straight to
	// the file; more per transaction cost no less per row, and make the
	// records wait longer). The rows of all tables stay below 4×MaxRows.
	MaxRows int
	// MaxLag bounds how long a record waits in the source before its
	// transaction commits (default 1 s): a transaction takes records for
	// at most half of it after its first.
	MaxLag time.Duration
	// CheckpointBytes, when > 0: checkpoint after a commit once the WAL
	// holds that many bytes (as CommitOptions).
	CheckpointBytes int64
	// RetryAfter is the pause before a failed transaction is tried again
	// (default 1 s).
	RetryAfter   time.Duration
	OnLoad       func(LoadInfo)
	OnCheckpoint func(time.Duration, error)
	// OnDrop reports a record whose own data cannot be stored
	// (ErrRejected): it was acknowledged, so the Loader skips it rather
	// than stall every record behind it.
	OnDrop func(item SourceItem, err error)
	// Serial: one transaction at a time. Otherwise a transaction's COMMIT
	// runs in a goroutine of its own while the next one is written, as
	// the Committer's groups do.
	Serial bool
}

// flowGap is how long a Loader that is behind waits for the next record
// before it takes what it has: records that stop coming mean it caught up.
const flowGap = 20 * time.Millisecond

// A transaction with a quarter of MaxRows in a table commits once records
// stop coming for burstGap, rather than at its deadline: the end of a
// burst is visible some 50 ms after its last record instead of up to half
// of MaxLag. Below that, records keep waiting for the deadline: a trickle
// loaded as it came would be a transaction per request.
const burstGap = 50 * time.Millisecond

// LoadInfo describes one transaction of a Loader.
type LoadInfo struct {
	Items    int
	Rows     int64
	Position uint64
	Lag      time.Duration // from the oldest item's arrival to the commit
	Tables   []*TableStats
	Duration time.Duration
	Err      error
}

// StoredPosition returns the position of source stored in the database
// (0 and false when there is none).
func (d *DB) StoredPosition(ctx context.Context, source string) (uint64, bool, error) {
	pos, _, has, err := d.storedAt(ctx, source)
	return pos, has, err
}

// storedAt returns the position of source stored in the database and how
// many rows of the records from there on are stored too.
func (d *DB) storedAt(ctx context.Context, source string) (pos, rows uint64, has bool, err error) {
	err = d.SQL.QueryRowContext(ctx, "SELECT position, coalesce(rows, 0) AS r FROM shredduck_sources WHERE source = ? ORDER BY position DESC, r DESC LIMIT 1", source).Scan(&pos, &rows)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, false, nil
	}
	if err != nil {
		return 0, 0, false, fmt.Errorf("cannot read the position of %s: %w", source, err)
	}
	return pos, rows, true, nil
}

// Loader moves a Source's records into the database in large
// transactions, each storing the position after its last record.
type Loader struct {
	db    *DB
	src   Source
	opt   LoaderOptions
	known map[string]*table
	pos   uint64
	// rows of the records from pos on are stored (a transaction ended
	// inside a record); skip is how many of them the source gives again
	// that are still to pass over, and at where its next item starts.
	rows, skip int
	at         uint64
	n          int          // transactions committed since shredduck_sources was pruned
	carry      []SourceItem // taken from the source for the next transaction (collect)
	turns      chan turn    // Exclusive's work, run between transactions
	done       chan struct{}
	prev       *committing // the transaction whose COMMIT runs now (not Serial)
	// serialTo: after a pipelined COMMIT failed, transactions are serial
	// until the positions it would have stored are passed (its records
	// are loaded again serially, split and dropped if need be): the
	// source's at "", a KeyedSource's keys' at theirs. serialLeft bounds
	// how many (a key may have moved to another node meanwhile).
	serialTo   map[string]uint64
	serialLeft int
	hold       bool // the next transaction collects (stream.go)
}

// drainRetries bounds the tries of a drain after a failure (Run).
const drainRetries = 3

// serialTxs bounds the serial transactions after a pipelined COMMIT failed.
const serialTxs = 64

// pipelinedCommitFault, when set (tests), runs before each pipelined
// COMMIT; an error fails it instead.
var pipelinedCommitFault atomic.Pointer[func() error]

// committing is a transaction whose COMMIT runs in its own goroutine.
type committing struct {
	tx        *Tx
	info      LoadInfo
	arrived   time.Time
	next      uint64
	nextRows  int
	keys      map[string]uint64 // a KeyedSource's positions it stores
	changed   bool              // it changed a schema (or created a table)
	done      chan struct{}
	err       error
	committed time.Time
}

// errPrevFailed wraps the error of a pipelined COMMIT that failed, given
// to the transaction after it, which is rolled back: the source is read
// again from the last stored position.
type errPrevFailed struct{ err error }

func (e *errPrevFailed) Error() string { return e.err.Error() }
func (e *errPrevFailed) Unwrap() error { return e.err }

// NewLoader returns a loader of src into d.
func (d *DB) NewLoader(src Source, opt LoaderOptions) *Loader {
	if opt.MaxRows <= 0 {
		opt.MaxRows = RowGroupRows
	}
	if opt.MaxLag <= 0 {
		opt.MaxLag = time.Second
	}
	if opt.RetryAfter <= 0 {
		opt.RetryAfter = time.Second
	}
	return &Loader{db: d, src: src, opt: opt, known: map[string]*table{}, turns: make(chan turn), done: make(chan struct{})}
}

// Exclusive runs fn on the loader's goroutine between two of its
// transactions (as Committer.Exclusive). It returns ErrClosed once Run
// has returned.
func (l *Loader) Exclusive(ctx context.Context, fn func() error) error {
	return runTurn(ctx, l.turns, l.done, fn)
}

// takeTurns runs the Exclusive work waiting now; the error is that of
// the pipelined COMMIT it waited for.
func (l *Loader) takeTurns() error {
	for {
		select {
		case t := <-l.turns:
			err := l.finish() // the turn comes between two transactions
			t.done <- t.fn()
			if err != nil {
				return err
			}
		default:
			return nil
		}
	}
}

// Run loads until ctx ends, then loads what the source still holds (it
// must take no more by then) and returns. It returns early only when the
// stored position cannot be read or the source cannot seek to it; a
// drain tries again after a failure, and returns the error of its
// fourth (the source keeps the records for the next start).
func (l *Loader) Run(ctx context.Context) error {
	defer close(l.done)
	pos, rows, _, err := l.db.storedAt(context.WithoutCancel(ctx), l.src.Name())
	if err != nil {
		return err
	}
	if err := l.src.Seek(pos); err != nil {
		return err
	}
	l.pos, l.rows = pos, int(rows)
	l.skip, l.at = l.rows, pos
	l.src.Stored(pos)
	drainTries := 0
	for {
		err := l.takeTurns()
		if err == nil {
			err = l.prunePositions()
		}
		draining := ctx.Err() != nil
		var items []SourceItem
		took := false
		if err == nil && l.streams() {
			took, err = l.stream(ctx, draining)
		} else if err == nil {
			items, err = l.collect(ctx, draining)
			took = len(items) > 0
		}
		if err == nil && !took {
			if l.prev != nil && (draining || l.prev.finished()) {
				err = l.finish()
			}
			if err == nil {
				if draining {
					return nil
				}
				continue
			}
		}
		if err == nil && len(items) > 0 {
			err = l.load(items)
		} else {
			for _, it := range items {
				it.release()
			}
		}
		if err == nil {
			continue
		}
		// The COMMIT still running ends first: the position to read
		// again from is the last one stored.
		if ferr := l.finish(); ferr != nil {
			err = errors.Join(err, ferr)
		}
		l.db.noteFailure(err)
		// The source gives again what follows the stored position.
		for _, it := range l.carry {
			it.release()
		}
		l.carry = nil
		if serr := l.src.Seek(l.pos); serr != nil {
			return errors.Join(err, serr)
		}
		l.skip, l.at = l.rows, l.pos
		if draining || ctx.Err() != nil {
			// A drain retries a few times: a failure may pass (a write
			// conflict), and what it leaves waits for the next start.
			if drainTries++; drainTries > drainRetries {
				return err
			}
			time.Sleep(min(l.opt.RetryAfter, time.Second))
			continue
		}
		select {
		case <-time.After(l.opt.RetryAfter):
		case <-ctx.Done():
		}
	}
}

// collect takes the items of one transaction: waits for the first, then
// takes more for up to half of MaxLag after it arrived, until a table has
// MaxRows (gather).
func (l *Loader) collect(ctx context.Context, draining bool) (items []SourceItem, err error) {
	items = l.carry
	l.carry = nil
	g := newGather(l.opt.MaxRows)
	for _, it := range items {
		g.add(it, l.opt.MaxLag)
	}
	defer func() {
		if err == nil {
			items, l.carry = cutAtRowGroup(items)
		}
	}()
	for !g.full() {
		it, ok, err := l.next(ctx, g, draining)
		if err != nil || !ok {
			// With nothing taken yet, back to Run, for Exclusive's turns.
			return items, err
		}
		items = append(items, it)
		g.add(it, l.opt.MaxLag)
	}
	return items, nil
}

// next waits for the next item of a transaction (gather.wait); ok is
// false when none came in time, or ctx ended and it is not draining.
func (l *Loader) next(ctx context.Context, g *gather, draining bool) (it SourceItem, ok bool, err error) {
	// A COMMIT that ended is noted now, not after the next transaction
	// is written: a Kafka partition waits for it to be released.
	if l.prev != nil && l.prev.finished() {
		if err := l.finish(); err != nil {
			return it, false, err
		}
	}
	wctx := ctx
	if draining {
		wctx = context.WithoutCancel(ctx)
	} else if ctx.Err() != nil {
		return it, false, nil
	}
	it, ok, err = l.src.Next(wctx, g.wait(draining))
	if ok && err == nil {
		l.arrived(&it)
	}
	return it, ok, err
}

// gather is how long a transaction waits for more items, and when it has
// enough. It takes items for up to half of MaxLag after its first arrived.
// When the first arrived before that already (the loader is behind), it
// takes more while they keep coming, for up to MaxLag after the first.
// Draining, it waits for nothing.
type gather struct {
	items          int
	deadline, last time.Time
	behind         bool
	perTable       map[string]int
	top, rows      int // the rows of the table with the most, of all
	maxRows        int
}

func newGather(maxRows int) *gather { return &gather{perTable: map[string]int{}, maxRows: maxRows} }

// add counts an item taken.
func (g *gather) add(it SourceItem, maxLag time.Duration) {
	if g.items++; g.items == 1 {
		g.deadline = it.Arrived.Add(maxLag / 2)
		// Behind (the first record waited past its deadline already):
		// wait for a full transaction while records keep coming and
		// the first is younger than MaxLag. DuckDB writes a transaction
		// of a row group or more straight to the file; a smaller one it
		// copies into the table and compresses at the checkpoint, at up
		// to twice the cost per row (BenchmarkLoader), so a loader that
		// took what was there fell further behind.
		g.behind = time.Now().After(g.deadline)
		g.last = it.Arrived.Add(maxLag)
	}
	if it.Batch != nil {
		g.rows += it.rows()
		g.perTable[it.Table] += it.rows()
		g.top = max(g.top, g.perTable[it.Table])
	}
}

// full reports whether a table has maxRows, or all 4 times that.
func (g *gather) full() bool { return g.top >= g.maxRows || g.rows >= 4*g.maxRows }

// wait is how long to wait for the next item.
func (g *gather) wait(draining bool) time.Duration {
	switch {
	case draining:
		return 0
	case g.behind:
		return max(0, min(flowGap, time.Until(g.last)))
	case g.items > 0 && g.top >= g.maxRows/4:
		return max(0, min(burstGap, time.Until(g.deadline)))
	case g.items > 0:
		return max(0, time.Until(g.deadline))
	}
	return 100 * time.Millisecond
}

// arrived notes where an item from the source starts, and passes over
// the rows of it a transaction before a restart or a retry stored.
func (l *Loader) arrived(it *SourceItem) {
	if it.Key != "" {
		return
	}
	it.start, l.at = l.at, it.Next
	if l.skip > 0 && it.Batch != nil {
		it.from = min(l.skip, it.Batch.Rows)
		l.skip -= it.from
	}
}

// cutAtRowGroup splits the items of a transaction where the rows of its
// largest table reach a whole number of row groups (RowGroupRows), when
// they fill one: DuckDB writes whole row groups of a transaction straight
// to the file, and the rows of a last partial one would stay a small row
// group of their own (items of 2,000 rows took 50% more space). The item
// that crosses the boundary is split in two, unless it has a key (a
// KeyedSource's positions are whole records). The rest is the start of
// the next transaction.
func cutAtRowGroup(items []SourceItem) (now, next []SourceItem) {
	perTable := map[string]int{}
	top := ""
	for _, it := range items {
		if it.Batch != nil {
			perTable[it.Table] += it.rows()
			if perTable[it.Table] > perTable[top] {
				top = it.Table
			}
		}
	}
	whole := perTable[top] / RowGroupRows * RowGroupRows
	if whole == 0 {
		return items, nil
	}
	rows := 0
	for i, it := range items {
		if it.Batch == nil || it.Table != top {
			continue
		}
		rows += it.rows()
		if rows < whole {
			continue
		}
		if over := rows - whole; over > 0 && it.Key == "" {
			first, rest := it, it
			first.to = it.end() - over
			first.Release = nil // the rest's transaction releases the batch
			rest.from = first.to
			now = append(items[:i:i], first)
			return now, append([]SourceItem{rest}, items[i+1:]...)
		}
		return items[:i+1], items[i+1:]
	}
	return items, nil
}

// load commits items in one transaction; if that fails for one item's
// data, or because one item alters a table that an earlier one's widening
// rewrote (errAltersUpdated), each item alone, skipping (OnDrop) those
// whose data cannot be stored. It releases every item.
func (l *Loader) load(items []SourceItem) error {
	defer func() {
		for _, it := range items {
			it.release()
		}
	}()
	err := l.commit(items)
	split := errors.Is(err, errAltersUpdated) && len(items) > 1
	var prevFailed *errPrevFailed
	if err == nil || errors.As(err, &prevFailed) || !split && !errors.Is(classify(err), ErrRejected) {
		return err
	}
	if last := &items[len(items)-1]; last.partial() && len(l.carry) > 0 && l.carry[0].Batch == last.Batch {
		// The item split at the row group is tried whole, alone.
		last.to, last.Release = l.carry[0].to, l.carry[0].Release
		l.carry = l.carry[1:]
	}
	for i := range items {
		if len(items) > 1 { // alone, it failed just now: split or dropped
			if err = l.commit(items[i : i+1]); err == nil {
				continue
			}
		}
		if errors.As(err, &prevFailed) || !errors.Is(classify(err), ErrRejected) {
			return err // a failed pipelined COMMIT: not this item's fault
		}
		// Split gives whole records: not for an item whose first rows
		// are stored (its record is dropped from there on).
		if items[i].Split != nil && items[i].from == 0 {
			parts := items[i].Split()
			if len(parts) > 0 && parts[len(parts)-1].Next == items[i].Next {
				if err := l.load(parts); err != nil {
					return err
				}
				continue
			}
			for _, p := range parts {
				p.release()
			}
		}
		if err := l.drop(items[i], err); err != nil {
			return err
		}
	}
	return nil
}

// drop stores the position past an item that cannot be stored.
func (l *Loader) drop(it SourceItem, cause error) error {
	skip := it
	skip.Batch = nil
	if err := l.commit([]SourceItem{skip}); err != nil {
		return err
	}
	if l.opt.OnDrop != nil {
		l.opt.OnDrop(it, cause)
	}
	return nil
}

// commit writes items and the position after them in one transaction,
// beside other writers' until it changes a schema; then alone (gate.go).
func (l *Loader) commit(items []SourceItem) error {
	err := l.commitTx(items, false)
	if errors.Is(err, errExclusive) {
		err = l.commitTx(items, true)
	}
	return err
}

func (l *Loader) commitTx(items []SourceItem, exclusive bool) (err error) {
	// A transaction that only moves the position past a dropped record is
	// serial: OnDrop follows its COMMIT.
	pipe := !l.opt.Serial && !exclusive && slices.ContainsFunc(items, func(it SourceItem) bool { return it.rows() > 0 }) && !l.serial()
	if !pipe || l.prev != nil && l.prev.changed {
		// Not beside a COMMIT: a schema change must see its rows.
		if err := l.finish(); err != nil {
			return err
		}
	}
	start := time.Now()
	var rows int64
	tx, err := l.beginTx(exclusive)
	if err != nil {
		return err
	}
	pos := l.positions()
	for _, it := range items {
		pos.add(it)
	}
	pos.items = len(items)
	var pending bool
	defer func() {
		if err != nil {
			l.rollback(tx)
		}
		// The earlier COMMIT's outcome goes first: reported before this
		// failure, and if it failed, the source is read again from before
		// it rather than this transaction's items split or dropped.
		var prevFailed *errPrevFailed
		if err != nil && l.prev != nil && !errors.As(err, &prevFailed) {
			if ferr := l.finish(); ferr != nil {
				err = ferr
			}
		}
		// Done again at once (exclusive, or item by item), reported when
		// its COMMIT ends, or not this transaction's failure.
		if l.opt.OnLoad == nil || errors.Is(err, errExclusive) || errors.Is(err, errAltersUpdated) || errors.As(err, &prevFailed) || pending && err == nil {
			return
		}
		info := LoadInfo{Items: len(items), Rows: rows, Position: pos.last, Duration: time.Since(start), Err: err}
		if err == nil {
			info.Lag = time.Since(items[0].Arrived)
			info.Tables = tx.Stats()
		}
		l.opt.OnLoad(info)
	}()
	for _, it := range items {
		n, err := l.writeItem(tx, it)
		if err != nil {
			return err
		}
		rows += n
	}
	pos.rows = rows
	pos.arrived = items[0].Arrived
	pending = pipe
	return l.end(tx, pos, pipe, time.Since(start))
}

// beginTx begins a transaction of the loader's, beside the pipelined
// COMMIT if one runs.
func (l *Loader) beginTx(exclusive bool) (*Tx, error) {
	tx, err := l.db.begin(context.Background(), l.opt.MaxColumns, exclusive)
	if err != nil {
		return nil, err
	}
	tx.known = l.known
	tx.tune.memOnly = true
	tx.chunks = true
	if l.prev != nil {
		// Even once the earlier COMMIT is done, this snapshot predates it.
		tx.beforeDDL = func() error { return errExclusive }
	}
	return tx, nil
}

// rollback ends a transaction that failed, forgetting the state of the
// tables it touched.
func (l *Loader) rollback(tx *Tx) {
	tx.Rollback()
	for name := range tx.tables {
		delete(l.known, name)
	}
}

// writeItem writes the rows of it still to store into tx.
func (l *Loader) writeItem(tx *Tx, it SourceItem) (int64, error) {
	if it.rows() == 0 {
		return 0, nil
	}
	if err := it.Batch.Finish(); err != nil {
		return 0, rejected(err)
	}
	bytes := it.Bytes
	if it.from > 0 {
		bytes = 0 // counted with the item's first rows
	}
	if err := tx.writeRows(it.Table, it.Tr, it.Batch, it.from, it.end(), bytes, nil); err != nil {
		return 0, fmt.Errorf("table %s: %w", it.Table, err)
	}
	return int64(it.rows()), nil
}

// end stores pos in tx and commits it: in a goroutine of its own when
// pipe (finish notes it), else now. busy is the time the transaction has
// taken so far, for LoadInfo.Duration.
func (l *Loader) end(tx *Tx, pos positions, pipe bool, busy time.Duration) error {
	if err := tx.endRun(); err != nil {
		return err
	}
	if err := l.storePositions(tx, pos); err != nil {
		return err
	}
	// The earlier COMMIT ends before this one starts: positions are
	// stored in order, and this transaction goes if that one failed.
	if err := l.finish(); err != nil {
		return err
	}
	if !pipe {
		if err := tx.Commit(); err != nil {
			return err
		}
		for name, t := range tx.tables {
			l.known[name] = t
		}
		l.stored(pos.next, pos.nextRows, pos.keys)
		l.checkpointDue()
		return nil
	}
	start := time.Now().Add(-busy)
	pending := &committing{tx: tx, arrived: pos.arrived, next: pos.next, nextRows: pos.nextRows, keys: pos.keys, done: make(chan struct{}),
		info: LoadInfo{Items: pos.items, Rows: pos.rows, Position: pos.last}}
	for _, st := range tx.Stats() {
		cp := *st
		pending.info.Tables = append(pending.info.Tables, &cp)
		pending.changed = pending.changed || cp.SchemaChanged()
	}
	for name, t := range tx.tables {
		l.known[name] = t // for the next transaction, written meanwhile
	}
	l.prev = pending
	go func() {
		defer close(pending.done)
		if fault := pipelinedCommitFault.Load(); fault != nil {
			if pending.err = (*fault)(); pending.err != nil {
				tx.Rollback()
				return
			}
		}
		if pending.err = tx.Commit(); pending.err == nil {
			pending.committed = time.Now()
			l.checkpointDue()
		}
		pending.info.Duration = time.Since(start)
	}()
	return nil
}

// positions are what a transaction stores of its source's positions:
// the source's after its items (and each key's, for a keyed source).
type positions struct {
	next     uint64
	nextRows int
	keys     map[string]uint64
	last     uint64 // the position after the last item (LoadInfo.Position)
	// For LoadInfo and the visibility lag: the items and rows written,
	// and when the first arrived.
	items   int
	rows    int64
	arrived time.Time
}

// positions starts the positions of a transaction at the stored ones.
func (l *Loader) positions() positions {
	return positions{next: l.pos, nextRows: l.rows}
}

// add moves the positions past it.
func (p *positions) add(it SourceItem) {
	p.last = it.Next
	if it.partial() {
		p.last = it.start // its record is not all stored
	}
	if it.Key == "" {
		p.next, p.nextRows = it.Next, 0
		if it.partial() {
			p.next, p.nextRows = it.start, it.end()
		}
		return
	}
	if p.keys == nil {
		p.keys = map[string]uint64{}
	}
	p.keys[it.Key] = it.Next
}

// storePositions stores, in tx, the positions a transaction moved.
func (l *Loader) storePositions(tx *Tx, p positions) error {
	if p.keys == nil || p.next != l.pos || p.nextRows != l.rows {
		if err := l.storePosition(tx, l.src.Name(), p.next, p.nextRows); err != nil {
			return err
		}
	}
	for key, pos := range p.keys {
		if err := l.storePosition(tx, l.src.Name()+"/"+key, pos, 0); err != nil {
			return err
		}
	}
	return nil
}

// prunePositionsEvery is how many transactions keep their position rows
// before the older ones are deleted. Each checkpoint writes the rows added
// since the last in a row group of their own, which holds a block until
// all its rows are deleted: pruning every 1,000 transactions (some 9
// minutes at 10,000 spans/s) grew the file by a block a second.
const prunePositionsEvery = 16

// storePosition stores one source's position in tx: a row per
// transaction rather than an UPDATE, so that a later pipelined transaction
// does not conflict with this one on the row; prunePositions deletes the
// older rows.
func (l *Loader) storePosition(tx *Tx, source string, pos uint64, rows int) error {
	if _, err := tx.conn.ExecContext(tx.ctx, "INSERT INTO shredduck_sources (source, position, rows) VALUES (?, ?, ?)", source, pos, rows); err != nil {
		return fmt.Errorf("cannot store the position of %s: %w", source, err)
	}
	return nil
}

// prunePositions deletes, every prunePositionsEvery transactions, the
// position rows of the loader's source (and of its keys) older than each
// one's last. It runs between two transactions, once the pipelined COMMIT
// has ended, in a transaction of its own: inside a loader's transaction
// the DELETE met "Conflict on tuple deletion" now and then, which failed
// the transaction (and a drain at shutdown). Its own failure fails
// nothing: the rows are deleted next time.
func (l *Loader) prunePositions() error {
	if l.n < prunePositionsEvery {
		return nil
	}
	if err := l.finish(); err != nil {
		return err
	}
	l.n = 0
	name := l.src.Name()
	_, err := l.db.SQL.Exec(`DELETE FROM shredduck_sources s WHERE (s.source = ? OR starts_with(s.source, ?))
		AND s.position < (SELECT max(m.position) FROM shredduck_sources m WHERE m.source = s.source)`, name, name+"/")
	l.db.noteFailure(err) // an invalidated database is noticed here too
	return nil
}

// stored notes a committed transaction's position.
func (l *Loader) stored(next uint64, nextRows int, keys map[string]uint64) {
	l.n++
	l.pos, l.rows = next, nextRows
	l.src.Stored(next)
	if ks, ok := l.src.(KeyedSource); ok && keys != nil {
		ks.StoredKeys(keys)
	}
	if to, ok := l.serialTo[""]; ok && next >= to {
		delete(l.serialTo, "")
	}
	for k, pos := range keys {
		if to, ok := l.serialTo[k]; ok && pos >= to {
			delete(l.serialTo, k)
		}
	}
}

// serialAfter makes transactions serial until the positions of p, whose
// COMMIT failed, are stored (serialTo).
func (l *Loader) serialAfter(p *committing) {
	if l.serialTo == nil {
		l.serialTo = map[string]uint64{}
	}
	if p.next > l.pos {
		l.serialTo[""] = max(l.serialTo[""], p.next)
	}
	for k, pos := range p.keys {
		l.serialTo[k] = max(l.serialTo[k], pos)
	}
	l.serialLeft = serialTxs
}

// serial reports whether a transaction must be serial (serialTo),
// counting it.
func (l *Loader) serial() bool {
	if len(l.serialTo) == 0 || l.serialLeft <= 0 {
		l.serialTo = nil
		return false
	}
	l.serialLeft--
	return true
}

// checkpointDue checkpoints once the WAL holds CheckpointBytes.
func (l *Loader) checkpointDue() {
	if l.opt.CheckpointBytes <= 0 {
		return
	}
	if n, werr := l.db.WALSize(); werr == nil && n >= l.opt.CheckpointBytes {
		cstart := time.Now()
		cerr := l.db.Checkpoint(context.Background())
		if l.opt.OnCheckpoint != nil {
			l.opt.OnCheckpoint(time.Since(cstart), cerr)
		}
	}
}

// finish waits for the pipelined COMMIT, if one runs, and notes its
// position; if it failed, it returns its error (errPrevFailed) and loads
// serially up to its end.
func (l *Loader) finish() error {
	p := l.prev
	if p == nil {
		return nil
	}
	l.prev = nil
	<-p.done
	if p.err != nil {
		for name := range p.tx.tables {
			delete(l.known, name)
		}
		l.serialAfter(p)
		p.info.Err, p.info.Tables = p.err, nil
	} else {
		p.info.Lag = p.committed.Sub(p.arrived)
		l.stored(p.next, p.nextRows, p.keys)
	}
	if l.opt.OnLoad != nil {
		l.opt.OnLoad(p.info)
	}
	if p.err != nil {
		return &errPrevFailed{p.err}
	}
	return nil
}

func (p *committing) finished() bool { return closed(p.done) }

// Meta returns the value of key in shredduck_meta.
func (d *DB) Meta(ctx context.Context, key string) (string, bool, error) {
	var v string
	err := d.SQL.QueryRowContext(ctx, "SELECT value FROM shredduck_meta WHERE key = ?", key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("cannot read %s from the catalog: %w", key, err)
	}
	return v, true, nil
}

// SetMeta sets key in shredduck_meta, in a transaction of its own.
func (d *DB) SetMeta(ctx context.Context, key, value string) error {
	if _, err := d.SQL.ExecContext(ctx, "INSERT OR REPLACE INTO shredduck_meta (key, value) VALUES (?, ?)", key, value); err != nil {
		return fmt.Errorf("cannot write %s to the catalog: %w", key, err)
	}
	return nil
}
