package serve

import (
	"context"

	"github.com/shredduck/shredduck/retention"
)

// Retention is how long the OTLP tables keep rows (package retention).
type Retention = retention.Config

// Export rolls each finished hour of the OTLP tables off to Parquet
// (package retention).
type Export = retention.Export

// Default retention step (retention.DefaultStepRows).
const DefaultRetentionStepRows = retention.DefaultStepRows

// startRetention starts the export and the expiry (package retention),
// after every writer exists: they take their turns with all of them
// (s.exclusive).
func (s *Server) startRetention() error {
	jobs, err := retention.Start(s.cfg.Retention, s.cfg.Export, retention.Deps{
		DB:           s.db,
		Tables:       [3]string{s.cfg.TracesTable, s.cfg.LogsTable, s.cfg.MetricsTable},
		Exclusive:    s.exclusive,
		OnCheckpoint: s.onCheckpoint,
		Now:          s.cfg.now,
		Log:          s.log,
		Limited:      s.limited,
		Metrics:      s.metrics.reg,
	})
	s.retention = jobs
	return err
}

// exclusive runs fn with the database's writers to itself: between the
// loader's transactions with --ack log, else between group commits; and
// between the Kafka loader's.
func (s *Server) exclusive(ctx context.Context, fn func() error) error {
	own := func() error {
		if s.durable != nil {
			return s.durable.ld.Exclusive(ctx, fn)
		}
		return s.committer.Exclusive(ctx, fn)
	}
	if s.kafka != nil {
		// The Kafka loader writes too: it waits between two of its
		// transactions meanwhile.
		return s.kafka.Exclusive(ctx, own)
	}
	return own()
}
