package ingest

import "sync"

// writerGate keeps a transaction that changes a schema apart from every
// other writer's. DuckDB lets transactions append to one table at once,
// but rows another transaction commits while an ALTER TABLE of the table
// is open are lost when that one commits: counted in a column, not in its
// row group ("misaligned count"; the next checkpoint invalidates the
// database). TestKafkaWithHTTP found it with the Kafka loader and the
// OTLP/HTTP Committer adding columns to otel_traces at once.
//
// The Committer's and the Loaders' transactions enter shared; one that
// comes to a schema change goes on only while it is the only writer
// (upgrade), else it is rolled back and done again exclusive. Every other
// transaction (Begin: a bulk load, the tables a server creates) is
// exclusive from the start.
//
// A widening also needs every committed row in its snapshot: its UPDATE
// (and the exactness check before BIGINT → DOUBLE) sees only the
// snapshot's rows, while its ALTER casts all, so rows another writer
// committed after this transaction began kept DuckDB's cast ("6.0" for 6)
// or lost the value (a column widened beside, load.go): such a widening
// is done again exclusive (TestWidenSeesRowsCommittedSinceBegin;
// TestKafkaCrashWithHTTP found it).
type writerGate struct {
	mu      sync.Mutex
	cond    *sync.Cond
	shared  int    // shared transactions open
	excl    bool   // an exclusive one is open
	waiting int    // exclusive ones waiting: new shared ones wait behind them
	ended   uint64 // transactions that have left
}

func (g *writerGate) init() {
	if g.cond == nil {
		g.cond = sync.NewCond(&g.mu)
	}
}

// enter waits until a transaction of the kind may open; it returns the
// count of transactions ended so far, for upgrade.
func (g *writerGate) enter(exclusive bool) uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.init()
	if exclusive {
		g.waiting++
		for g.excl || g.shared > 0 {
			g.cond.Wait()
		}
		g.waiting--
		g.excl = true
		return g.ended
	}
	for g.excl || g.waiting > 0 {
		g.cond.Wait()
	}
	g.shared++
	return g.ended
}

// upgrade makes the calling shared transaction exclusive if no other is
// open; false leaves it shared. fresh: no transaction ended since the
// caller entered (entered: what enter returned it), so its snapshot holds
// every committed row.
func (g *writerGate) upgrade(entered uint64) (ok, fresh bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shared != 1 || g.excl {
		return false, false
	}
	g.shared, g.excl = 0, true
	return true, g.ended == entered
}

// leave ends a transaction that entered (exclusive: as it is now).
func (g *writerGate) leave(exclusive bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.init()
	if exclusive {
		g.excl = false
	} else {
		g.shared--
	}
	g.ended++
	g.cond.Broadcast()
}
