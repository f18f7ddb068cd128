package sqlpolicy

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
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
// share (Config.MaxMemory) stops the fewest queries it expects to bring
// them back under it, then lets the stopped ones give their memory back;
// it stops more only while the memory still grows past what those will
// free. DuckDB reports memory per
// database, not per query, so the guard estimates each query's part: the
// growth between two readings is shared among the queries running through
// it, and a text's estimate at the end of its last runs is remembered for
// its next run (a client looping a query too big for the share restarts
// it with nothing accumulated yet). It stops the query with the largest
// estimate, the oldest among equals. The others keep running and new ones
// are let in. Stopping everyone and refusing new queries for a second took
// the query surface from every client whenever anyone ran something big
// (54 of 1,267 dashboard queries answered beside two heavy loops). The
// stopped query gets 503 + Retry-After (PostgreSQL: 53200), with the limit
// and how to raise it.

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

// guardUnwind is how long a stopped query is expected to take to give its
// memory back; after it, what it would free is no longer counted.
const guardUnwind = 2 * time.Second

// guardSettle is how long after a stopped query has left the guard waits
// before it stops another: DuckDB gives the memory back as it unwinds, and
// a reading in between would blame a query that took none of it.
const guardSettle = 150 * time.Millisecond

// guardRemember is how many texts' estimates the guard remembers.
const guardRemember = 1024

// queryMemorySQL sums the memory of DuckDB's query operators.
const queryMemorySQL = `SELECT CAST(coalesce(sum(memory_usage_bytes), 0) AS BIGINT) FROM duckdb_memory()
WHERE tag IN ('HASH_TABLE', 'ORDER_BY', 'COLUMN_DATA', 'WINDOW', 'ALLOCATOR')`

type memoryGuard struct {
	db    *ingest.DB
	share int64 // 0: half of memory_limit, read when the first query runs

	mu      sync.Mutex
	running map[*guarded]struct{}
	polling bool
	left    time.Time // when the last stopped query left
	recent  []release // what the queries stopped in the last guardUnwind free
	peak    int64     // highest reading, for tests
	stops   int64     // queries stopped, for tests and metrics
	last    int64     // the previous reading
	// prior is each text's estimate at the end of its last runs.
	prior map[uint64]int64
}

// guarded is one running query.
type guarded struct {
	cancel  context.CancelCauseFunc
	start   time.Time
	text    uint64    // hash of its SQL
	est     int64     // its share of the growth it ran through
	seen    bool      // it ran through a reading
	stopped time.Time // when the guard stopped it
	frees   int64     // what it is expected to free, at least
}

// release is what a stopped query is expected to free, and since when.
type release struct {
	at    time.Time
	frees int64
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
		g.remember(q.text, q.est)
		if !q.stopped.IsZero() {
			g.left = time.Now()
			g.recent = append(g.recent, release{g.left, max(q.est, q.frees)})
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
		if err == nil {
			g.account(used)
		}
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

// account shares the growth since the last reading among the queries that
// ran through it. g.mu is held.
func (g *memoryGuard) account(used int64) {
	delta := used - g.last
	var through []*guarded
	for q := range g.running {
		if q.seen {
			through = append(through, q)
		}
		q.seen = true
	}
	if len(through) == 0 { // the first reading: the growth is theirs
		for q := range g.running {
			through = append(through, q)
		}
	}
	if delta > 0 && len(through) > 0 {
		for _, q := range through {
			q.est += delta / int64(len(through))
		}
	}
	g.last = used
}

// remember folds a finished run's estimate into its text's, forgetting an
// arbitrary text when full. g.mu is held.
func (g *memoryGuard) remember(text uint64, est int64) {
	if g.prior == nil {
		g.prior = make(map[uint64]int64)
	}
	old, ok := g.prior[text]
	if !ok && len(g.prior) >= guardRemember {
		for k := range g.prior {
			delete(g.prior, k)
			break
		}
	}
	if ok {
		est = (old + est) / 2
	}
	g.prior[text] = est
}

// estimate is a running query's part of the memory: the larger of its
// share of the growth so far and what its text's last runs came to.
func (g *memoryGuard) estimate(q *guarded) int64 { return max(q.est, g.prior[q.text]) }

// before orders the candidates to stop: a is picked before b.
func (g *memoryGuard) before(a, b *guarded) bool {
	if ea, eb := g.estimate(a), g.estimate(b); ea != eb {
		return ea > eb
	}
	return a.start.Before(b.start)
}

// stopOne stops queries in the order the guard ranks them (before) until
// what the stopped ones are expected to free brings the rest under the
// share; a stopped query frees its estimate, or at least the excess when
// it was stopped. g.mu is held.
func (g *memoryGuard) stopOne(used, share int64) {
	if time.Since(g.left) < guardSettle {
		return
	}
	// What the queries stopped lately will free, those still unwinding
	// and those that left (DuckDB gives the memory back after the query
	// returns).
	var freeing int64
	g.recent = slices.DeleteFunc(g.recent, func(r release) bool { return time.Since(r.at) >= guardUnwind })
	for _, r := range g.recent {
		freeing += r.frees
	}
	for q := range g.running {
		if !q.stopped.IsZero() && time.Since(q.stopped) < guardUnwind {
			freeing += max(q.est, q.frees)
		}
	}
	for used-freeing > share {
		var pick *guarded
		for q := range g.running {
			if q.stopped.IsZero() && (pick == nil || g.before(q, pick)) {
				pick = q
			}
		}
		if pick == nil {
			return
		}
		others := len(g.running) - 1
		why := fmt.Sprintf("%d MiB, past --query-max-memory (%d MiB)", used>>20, share>>20)
		if others == 0 {
			why = "this query alone held " + why
		} else {
			why = fmt.Sprintf("the running queries held %s, and this one the most of it (about %d MiB; %d other(s) kept running)", why, g.estimate(pick)>>20, others)
		}
		pick.stopped = time.Now()
		pick.frees = max(g.estimate(pick), used-freeing-share)
		freeing += pick.frees
		pick.cancel(fmt.Errorf("%w: %s", errQueryMemory, why))
		g.stops++
	}
}
