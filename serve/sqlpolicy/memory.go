package sqlpolicy

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/shredduck/shredduck/ingest"
)

// Queries and group commits share DuckDB's memory_limit, and DuckDB has no
// limit per connection: a hash aggregate that took the whole limit made
// commits fail with "Out of Memory" (2 of 365 ingest requests while heavy
// queries ran, at the default 256MB). The memory guard therefore watches
// the memory DuckDB's operators hold (duckdb_memory(): hash tables, sorts,
// windows, materialized data, allocator buffers; not the table data and
// transactions ingest holds) while queries run, and when it passes their
// share (Config.MaxMemory) stops one query. DuckDB reports memory per
// database, not per query, so the guard picks the query by what it knows:
// first one whose text it stopped before (a client looping a query too big
// for the share), else the one that has run longest (a query that grows
// past the share runs long, a hash aggregate on one thread grows by some
// 150 MB/s, while dashboards' queries take milliseconds). Then it waits
// for that query to give its memory back before it stops another. The
// others keep running, and new ones are let in: stopping everyone and
// refusing new queries for a second took the query surface from every
// client whenever anyone ran something big (54 of 1,267 dashboard queries
// answered beside two heavy loops). The stopped query gets 503 +
// Retry-After (PostgreSQL: 53200), with the limit and how to raise it.

// errQueryMemory is the cause of a query stopped by the memory guard.
var errQueryMemory = errors.New("the running queries need more of DuckDB's memory than --query-max-memory leaves them")

// guardInterval is how often the guard reads DuckDB's memory while queries
// run and hold less than half their share: every 10 ms cost ingest a third
// of its throughput while a query ran (1,033 against 1,569 requests in 3
// s), every 50 ms 3% (1,514-1,532). Above half the share it reads every
// guardFastInterval: a hash aggregate on one thread grows by some 150 MB/s.
const (
	guardInterval     = 50 * time.Millisecond
	guardFastInterval = 5 * time.Millisecond
)

// guardUnwind is how long a stopped query may take to give its memory
// back before the guard, still over the share, stops the next one.
const guardUnwind = 2 * time.Second

// guardRemember is how many texts of stopped queries the guard remembers,
// and for how long.
const (
	guardRemember    = 256
	guardRememberFor = 10 * time.Minute
)

// queryMemorySQL sums the memory of DuckDB's query operators.
const queryMemorySQL = `SELECT CAST(coalesce(sum(memory_usage_bytes), 0) AS BIGINT) FROM duckdb_memory()
WHERE tag IN ('HASH_TABLE', 'ORDER_BY', 'COLUMN_DATA', 'WINDOW', 'ALLOCATOR')`

type memoryGuard struct {
	db    *ingest.DB
	share int64 // 0: half of memory_limit, read when the first query runs

	mu      sync.Mutex
	running map[*guarded]struct{}
	polling bool
	victim  *guarded             // the query stopped last, while it has not left
	stopped time.Time            // when victim was stopped
	peak    int64                // highest reading, for tests
	stops   int64                // queries stopped, for tests and metrics
	heavy   map[uint64]time.Time // texts of stopped queries, when last stopped
}

// guarded is one running query.
type guarded struct {
	cancel context.CancelCauseFunc
	start  time.Time
	text   uint64 // hash of its SQL
}

// enter registers a running query of text sql; cancel is called with
// errQueryMemory if the guard stops it. leave unregisters it.
func (g *memoryGuard) enter(sql string, cancel context.CancelCauseFunc) (leave func()) {
	h := fnv.New64a()
	h.Write([]byte(sql))
	q := &guarded{cancel: cancel, start: time.Now(), text: h.Sum64()}
	g.mu.Lock()
	if g.running == nil {
		g.running = make(map[*guarded]struct{})
	}
	g.running[q] = struct{}{}
	if !g.polling {
		g.polling = true
		go g.poll()
	}
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		delete(g.running, q)
		if g.victim == q {
			g.victim = nil
		}
		g.mu.Unlock()
	}
}

// poll reads DuckDB's memory until no query runs.
func (g *memoryGuard) poll() {
	ctx := context.Background()
	share := g.share
	if share <= 0 {
		limit, err := g.db.SizeSetting(ctx, "memory_limit")
		if err == nil {
			share = limit / 2
		}
	}
	interval := guardInterval
	for {
		time.Sleep(interval)
		var used int64
		err := g.db.SQL.QueryRowContext(ctx, queryMemorySQL).Scan(&used)
		g.mu.Lock()
		if len(g.running) == 0 {
			g.polling = false
			g.mu.Unlock()
			return
		}
		g.peak = max(g.peak, used)
		interval = guardInterval
		if err == nil && share > 0 && used > share/2 {
			interval = guardFastInterval
		}
		if err == nil && share > 0 && used > share {
			g.stopOne(used, share)
		}
		g.mu.Unlock()
	}
}

// stopOne stops a query, unless the one stopped last is still giving its
// memory back: one whose text was stopped before, else the one that has
// run longest. g.mu is held.
func (g *memoryGuard) stopOne(used, share int64) {
	if g.victim != nil && time.Since(g.stopped) < guardUnwind {
		return
	}
	var pick *guarded
	pickHeavy := false
	for q := range g.running {
		if q == g.victim {
			continue
		}
		last, known := g.heavy[q.text]
		known = known && time.Since(last) < guardRememberFor
		if pick == nil || known && !pickHeavy || known == pickHeavy && q.start.Before(pick.start) {
			pick, pickHeavy = q, known
		}
	}
	if pick == nil {
		return
	}
	others := len(g.running) - 1
	why := fmt.Sprintf("%d MiB, past --query-max-memory (%d MiB)", used>>20, share>>20)
	switch {
	case others == 0:
		why = "this query alone held " + why
	case pickHeavy:
		why = fmt.Sprintf("the running queries held %s, and this query's text was stopped before (%d other(s) kept running)", why, others)
	default:
		why = fmt.Sprintf("the running queries held %s, and this one had run longest (%v; %d other(s) kept running)", why, time.Since(pick.start).Round(time.Millisecond), others)
	}
	pick.cancel(fmt.Errorf("%w: %s", errQueryMemory, why))
	g.victim, g.stopped = pick, time.Now()
	g.stops++
	g.remember(pick.text)
}

// remember notes a stopped query's text, forgetting the longest unseen
// one when full. g.mu is held.
func (g *memoryGuard) remember(text uint64) {
	if g.heavy == nil {
		g.heavy = make(map[uint64]time.Time)
	}
	if _, ok := g.heavy[text]; !ok && len(g.heavy) >= guardRemember {
		var oldest uint64
		var at time.Time
		for k, t := range g.heavy {
			if at.IsZero() || t.Before(at) {
				oldest, at = k, t
			}
		}
		delete(g.heavy, oldest)
	}
	g.heavy[text] = time.Now()
}
