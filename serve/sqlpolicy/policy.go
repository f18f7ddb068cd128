package sqlpolicy

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/internal/keyview"
)

// Config bounds the queries of a Policy. The zero value of a field means
// its default.
type Config struct {
	// Timeout bounds a query from its arrival to its last row (default
	// 30s).
	Timeout time.Duration
	// MaxRows is the most rows a result holds; a longer result is cut
	// and marked truncated (default 10000).
	MaxRows int
	// MaxMemory is the memory of DuckDB's operators (hash tables, sorts,
	// windows, buffers) that the running queries may hold together; past
	// it one query is stopped at a time, so that commits keep their
	// memory and the other queries run on (default: half of DuckDB's
	// memory_limit; see memory.go).
	MaxMemory int64
	// MaxBytes bounds a result's rendered size: the result is cut before
	// the row that would exceed it and marked truncated; a first row
	// larger than it is an error of KindTooLarge (default 16 MiB).
	MaxBytes int64
	// MaxConcurrent is the number of queries DuckDB works on at once
	// (default 4); further queries wait for a slot until their timeout.
	// A query that outlives its timeout inside DuckDB keeps its slot
	// until DuckDB returns.
	MaxConcurrent int
}

// Defaults of Config.
const (
	DefaultTimeout       = 30 * time.Second
	DefaultMaxRows       = 10000
	DefaultMaxBytes      = 16 << 20
	DefaultMaxConcurrent = 4
)

// Kind classifies a failed query by what the client should do about it.
type Kind int

const (
	KindInvalid     Kind = iota // the query is wrong: fix it
	KindRefused                 // the policy does not allow it
	KindTooLarge                // not even the first row fits MaxBytes
	KindBusy                    // no slot within the timeout: retry later
	KindMemory                  // DuckDB's memory is taken: retry later
	KindTimeout                 // Timeout passed
	KindUnavailable             // the database cannot begin a transaction now
	KindInternal                // a fault of the server
)

// Error is a query's failure: what the client is told.
type Error struct {
	Kind Kind
	// Code is the SQLSTATE when DuckDB's error says more than Kind
	// (a syntax error, an unknown table); "" otherwise.
	Code string
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

func errorf(k Kind, format string, a ...any) *Error {
	return &Error{Kind: k, Msg: fmt.Sprintf(format, a...)}
}

// Policy runs queries on one database under one Config: every endpoint
// that shares a Policy shares its slots and its memory share.
type Policy struct {
	db     *ingest.DB
	cfg    Config
	slots  chan struct{}
	guard  *memoryGuard
	locked atomic.Bool // LockDown seen (a locked configuration stays locked)
	// keys is the key catalog every query's key views read, kept while
	// the schema stays the same (keyview.Cache).
	keys *keyview.Cache
}

// New makes a Policy on db. Queries fail until LockDown has been called
// on db.
func New(db *ingest.DB, cfg Config) *Policy {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxRows <= 0 {
		cfg.MaxRows = DefaultMaxRows
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = DefaultMaxConcurrent
	}
	return &Policy{db: db, cfg: cfg, slots: make(chan struct{}, cfg.MaxConcurrent),
		guard: &memoryGuard{db: db, share: cfg.MaxMemory}, keys: keyview.NewCache(db)}
}

// Config returns the policy's configuration with its defaults filled in.
func (p *Policy) Config() Config { return p.cfg }

// PeakMemory is the most memory the guard saw the queries hold.
func (p *Policy) PeakMemory() int64 {
	p.guard.mu.Lock()
	defer p.guard.mu.Unlock()
	return p.guard.peak
}

// MemoryStops is how many queries the memory guard has stopped.
func (p *Policy) MemoryStops() int64 {
	p.guard.mu.Lock()
	defer p.guard.mu.Unlock()
	return p.guard.stops
}

// LockDown closes the database to the host: no file, network or extension
// access (enable_external_access = false) and no more configuration
// changes (lock_configuration = true). Both are database-wide, so the
// server calls it once at startup after its own SETs (memory_limit and the
// like) and before it serves queries. Ingestion keeps working: it writes
// only the database file and scans Arrow streams from memory; but a load
// with ingest.Options.MemoryLimit fails afterwards, since that runs a SET.
// LockDown is idempotent.
func LockDown(db *ingest.DB) error {
	locked, external, err := lockState(context.Background(), db)
	if err != nil {
		return fmt.Errorf("lock down: %w", err)
	}
	if locked && external {
		return errors.New("lock down: the configuration is locked with external access enabled")
	}
	if locked {
		return nil
	}
	for _, q := range []string{"SET enable_external_access = false", "SET lock_configuration = true"} {
		if _, err := db.SQL.Exec(q); err != nil {
			return fmt.Errorf("lock down: %s: %w", q, err)
		}
	}
	if locked, external, err = lockState(context.Background(), db); err != nil || !locked || external {
		return fmt.Errorf("lock down: settings did not take (locked %v, external access %v, %v)", locked, external, err)
	}
	return nil
}

func lockState(ctx context.Context, db *ingest.DB) (locked, external bool, err error) {
	err = db.SQL.QueryRowContext(ctx, `SELECT current_setting('lock_configuration'), current_setting('enable_external_access')`).Scan(&locked, &external)
	return locked, external, err
}

// Sink receives a result from the goroutine that runs the query. It may
// still be called after Run returned with a timeout; it must not write to
// the client itself.
type Sink interface {
	// Columns is called once, before the first row.
	Columns(cols []Column) error
	// Row receives one row as the driver scanned it; vals is reused for
	// the next row. It returns false, having kept nothing of the row, when
	// the row does not fit the byte limit: the result is cut there and
	// marked truncated.
	Row(vals []any) (bool, error)
}

// Result says how much of a result the sink got.
type Result struct {
	Rows      int
	Truncated bool // cut at MaxRows or MaxBytes
}

// Query is one statement with the values of its parameters ($1, $2, ...)
// and how to run it.
type Query struct {
	SQL  string
	Args []any
	// Temps are made as temporary objects for the query alone: a
	// client's dialect (the PostgreSQL endpoint's version()).
	Temps []Temp
	// NestedJSON selects STRUCT, MAP, UNION and lists of anything but
	// numbers, booleans and text as JSON text (CastNestedJSON).
	NestedJSON bool
	// Stored, for RunBuilt alone, says that the statement names only
	// columns its tables store (no key that reads through the key views)
	// and none of the clocks keyview shadows: it then runs on its own,
	// without the transaction and the views, whose statements cost more
	// than a trace lookup.
	Stored bool
}

// Temp is a temporary object: CREATE TEMP <Kind> "Name"<Def>, Kind being
// MACRO (Def "(params) AS expr") or VIEW (Def " AS SELECT ...").
type Temp struct{ Kind, Name, Def string }

// Description is what a statement returns and takes, known without
// running it.
type Description struct {
	Columns []Column
	Params  []ParamType
}

// Run checks q and runs it on a connection of its own, in a READ ONLY
// transaction with the attribute keys it names as columns (keyview), and
// hands its result to sink. When ctx ends first, Run returns ctx's error
// at once; a failure of the query is an *Error. The query itself runs
// apart (DuckDB checks for interrupts only between chunks and optimizer
// passes, and preparing folds constants uninterrupted, which the size
// rules bound), so that Run does not wait past the timeout; its slot is
// held until DuckDB is really done.
func (p *Policy) Run(ctx context.Context, q Query, sink Sink) (Result, error) {
	return admit(ctx, p, q.SQL, func(qctx context.Context) (Result, error) {
		return runOnConn(qctx, p.db, p.keys, q, p.limits(), sink)
	})
}

// Describe checks q as Run would and returns its columns and parameters
// without running it (q.Args are not used).
func (p *Policy) Describe(ctx context.Context, q Query) (Description, error) {
	return admit(ctx, p, q.SQL, func(qctx context.Context) (Description, error) {
		return describeOnConn(qctx, p.db, p.keys, q)
	})
}

func (p *Policy) limits() limits { return limits{rows: p.cfg.MaxRows, bytes: p.cfg.MaxBytes} }

// CheckLocked returns an *Error of KindInternal until LockDown has been
// called on the database: without it a query could read and write the
// host's files.
func (p *Policy) CheckLocked(ctx context.Context) error {
	if p.locked.Load() {
		return nil
	}
	if locked, external, err := lockState(ctx, p.db); err != nil || !locked || external {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return errorf(KindInternal, "queries are off: the server did not lock the database down (serve.LockDown)")
	}
	p.locked.Store(true)
	return nil
}

// admit runs job once the database is locked down and a slot is free,
// under the timeout and the memory guard. job's result comes
// back through a channel: after a timeout job may still be running.
func admit[T any](ctx context.Context, p *Policy, sql string, job func(context.Context) (T, error)) (T, error) {
	var zero T
	if err := p.CheckLocked(ctx); err != nil {
		return zero, err
	}
	tctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	select {
	case p.slots <- struct{}{}:
	case <-tctx.Done():
		if ctx.Err() != nil {
			return zero, ctx.Err()
		}
		return zero, errorf(KindBusy, "too many queries are running; retry later")
	}
	qctx, qcancel := context.WithCancelCause(tctx)
	defer qcancel(nil)
	type outcome struct {
		v   T
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		lowerPriority() // ingest comes first (ends with this goroutine)
		leave := p.guard.enter(sql, qcancel)
		defer func() { leave(); <-p.slots }()
		defer func() {
			if r := recover(); r != nil {
				done <- outcome{err: fmt.Errorf("query failed: %v", r)}
			}
		}()
		v, err := job(qctx)
		done <- outcome{v, err}
	}()
	var o outcome
	select {
	case o = <-done:
	case <-qctx.Done():
		o.err = qctx.Err()
	}
	if o.err == nil {
		return o.v, nil
	}
	if ctx.Err() != nil {
		return zero, ctx.Err()
	}
	if tctx.Err() == context.DeadlineExceeded {
		return zero, errorf(KindTimeout, "query timed out after %v", p.cfg.Timeout)
	}
	if cause := context.Cause(qctx); errors.Is(cause, errQueryMemory) {
		return zero, errorf(KindMemory, "query stopped: %s. The rest of DuckDB's memory is kept for ingest: retry later, make the query need less (a filter, fewer groups or distinct values), or raise --query-max-memory (and --memory-limit, which it is half of by default)", cause.Error())
	}
	var pe *Error
	if !errors.As(o.err, &pe) {
		pe = failure(KindInternal, "", o.err, o.err.Error())
	}
	return zero, pe
}

// SQLSTATEs the policy sets (Error.Code).
const (
	CodeRefused = "42501" // insufficient_privilege: a statement the policy refuses
	CodeLimits  = "54000" // program_limit_exceeded: the size rules, a row over MaxBytes
	CodeSyntax  = "42601" // syntax_error
	CodeMemory  = "53200" // out_of_memory: DuckDB's memory, or the queries' share of it
)
