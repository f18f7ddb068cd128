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
type writerGate struct {
	mu      sync.Mutex
	cond    *sync.Cond
	shared  int  // shared transactions open
	excl    bool // an exclusive one is open
	waiting int  // exclusive ones waiting: new shared ones wait behind them
}

func (g *writerGate) init() {
	if g.cond == nil {
		g.cond = sync.NewCond(&g.mu)
	}
}

// enter waits until a transaction of the kind may open.
func (g *writerGate) enter(exclusive bool) {
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
		return
	}
	for g.excl || g.waiting > 0 {
		g.cond.Wait()
	}
	g.shared++
}

// upgrade makes the calling shared transaction exclusive if no other is
// open; false leaves it shared.
func (g *writerGate) upgrade() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shared != 1 || g.excl {
		return false
	}
	g.shared, g.excl = 0, true
	return true
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
	g.cond.Broadcast()
}
