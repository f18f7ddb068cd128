package retention

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/source"
)

// Deps is what retention and the export use of the server that starts
// them.
type Deps struct {
	DB *ingest.DB
	// Tables are the OTLP tables: traces, logs, metrics.
	Tables [3]string
	// Exclusive runs fn with the database's writers to itself (between
	// their transactions): each DELETE step, each export's bookkeeping
	// and retention's checkpoints take that turn.
	Exclusive func(ctx context.Context, fn func() error) error
	// OnCheckpoint gets the outcome of retention's checkpoints.
	OnCheckpoint func(time.Duration, error)
	// Now is the clock by which records' times are judged (nil:
	// time.Now); tests run an hour in seconds.
	Now     func() time.Time
	Log     *slog.Logger
	Limited *source.LimitedLog
	Metrics prometheus.Registerer
}

// Jobs are the background expiry and export of a database.
type Jobs struct {
	expirer  *expirer // nil: no retention
	exporter *exporter
}

// Start starts the export (when exp.Dir is set) and then the expiry
// (when cfg keeps a table for a limited time), after every writer that
// Deps.Exclusive waits for exists.
func Start(cfg Config, exp Export, d Deps) (*Jobs, error) {
	if d.Now == nil {
		d.Now = time.Now
	}
	ex, err := startExporter(exp, &d)
	if err != nil {
		return nil, err
	}
	return &Jobs{exporter: ex, expirer: startExpirer(cfg, &d, ex)}, nil
}

// Degraded says why exports fail, for /readyz ("": they do not). The
// server stays ready: ingest and queries work, but retention waits for the
// export, so the disk grows until it is fixed.
func (j *Jobs) Degraded() string {
	if j == nil {
		return ""
	}
	return j.exporter.degraded()
}

// Stop ends the expiry after its current step, then the export.
func (j *Jobs) Stop() {
	if j == nil {
		return
	}
	j.expirer.stop()
	j.exporter.stop()
}
