package ingest

import (
	"context"
	"database/sql"
	"sync"
	"time"
)

// A server is not ready while its commits fail (a full disk, an
// unwritable directory, DuckDB out of memory). Readiness cannot wait for
// the next commit to show the failure has passed: a server reported not
// ready gets no requests. So while commits fail, Health writes a small
// transaction of its own to the WAL, as a commit does.

// probeInterval is the least time between two probe writes.
const probeInterval = time.Second

// prober runs probe writes one at a time and remembers the last.
type prober struct {
	mu   sync.Mutex
	at   time.Time
	last error
}

// Health returns nil when the last commit succeeded, or failed only for
// its submission's data (ErrRejected). Otherwise it returns that failure,
// unless a probe write commits (one a second at most; in between the last
// probe's outcome holds): then the failure has passed and it returns nil.
func (c *Committer) Health(ctx context.Context) error {
	f := c.failing.Load()
	if f == nil {
		return nil
	}
	p := &c.probe
	p.mu.Lock()
	defer p.mu.Unlock()
	if f = c.failing.Load(); f == nil {
		return nil
	}
	if time.Since(p.at) >= probeInterval {
		p.at = time.Now()
		p.last = c.db.probeWrite(ctx)
		c.db.noteFailure(p.last)
		if p.last == nil {
			c.failing.CompareAndSwap(f, nil)
			return nil
		}
	}
	if p.last != nil {
		return classify(p.last)
	}
	return *f
}

// probeWrite commits a transaction that writes to the WAL and leaves the
// database as it was: it creates and drops a table (some 200 bytes of
// WAL; an UPDATE that changes no value writes none).
func (d *DB) probeWrite(ctx context.Context) error {
	return d.inTx(ctx, func(conn *sql.Conn) error {
		for _, stmt := range []string{"CREATE TABLE shredduck_probe (x INTEGER)", "DROP TABLE shredduck_probe"} {
			if _, err := conn.ExecContext(ctx, stmt); err != nil {
				return err
			}
		}
		return nil
	})
}
