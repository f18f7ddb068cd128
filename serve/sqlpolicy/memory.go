package sqlpolicy

import (
	"context"
	"errors"
	"fmt"
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
// transactions ingest holds) while queries run, and cancels the running
// queries when it passes their share (QueryConfig.MaxMemory), leaving the
// rest to ingest. The cancelled queries get 503 + Retry-After.

// errQueryMemory is the cause of a query cancelled by the memory guard.
var errQueryMemory = errors.New("queries need more of DuckDB's memory than is left to them")

// guardInterval is how often the guard reads DuckDB's memory while queries
// run and hold less than half their share: every 10 ms cost ingest a third
// of its throughput while a query ran (1,033 against 1,569 requests in 3
// s), every 50 ms 3% (1,514-1,532). Above half the share it reads every
// guardFastInterval: a hash aggregate on one thread grows by some 150 MB/s.
const (
	guardInterval     = 50 * time.Millisecond
	guardFastInterval = 5 * time.Millisecond
)

// guardPause is how long new queries are refused after the guard stopped
// some: clients that retry at once would otherwise take the memory back
// before the commits waiting for it got it.
const guardPause = time.Second

// queryMemorySQL sums the memory of DuckDB's query operators.
const queryMemorySQL = `SELECT CAST(coalesce(sum(memory_usage_bytes), 0) AS BIGINT) FROM duckdb_memory()
WHERE tag IN ('HASH_TABLE', 'ORDER_BY', 'COLUMN_DATA', 'WINDOW', 'ALLOCATOR')`

type memoryGuard struct {
	db    *ingest.DB
	share int64 // 0: half of memory_limit, read when the first query runs

	mu      sync.Mutex
	running map[*context.CancelCauseFunc]struct{}
	polling bool
	paused  time.Time // queries are refused until then
	peak    int64     // highest reading, for tests
}

// admit refuses a new query while the guard pauses queries.
func (g *memoryGuard) admit() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if wait := time.Until(g.paused); wait > 0 {
		return fmt.Errorf("%w: queries were stopped %v ago, new ones wait %v", errQueryMemory, (guardPause - wait).Round(time.Millisecond), wait.Round(time.Millisecond))
	}
	return nil
}

// enter registers a running query; cancel is called with errQueryMemory
// when the queries' memory passes the share. leave unregisters it.
func (g *memoryGuard) enter(cancel context.CancelCauseFunc) (leave func()) {
	key := &cancel
	g.mu.Lock()
	if g.running == nil {
		g.running = make(map[*context.CancelCauseFunc]struct{})
	}
	g.running[key] = struct{}{}
	if !g.polling {
		g.polling = true
		go g.poll()
	}
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		delete(g.running, key)
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
			for c := range g.running {
				(*c)(fmt.Errorf("%w (%d MiB of the %d MiB they may hold)", errQueryMemory, used>>20, share>>20))
			}
			g.paused = time.Now().Add(guardPause)
		}
		g.mu.Unlock()
	}
}
