package retention

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/source"
	"github.com/shredduck/shredduck/transforms"
)

// Config is how long the OTLP tables keep rows, judged by each
// record's own time (docs/RETENTION.md); 0 keeps them for ever.
type Config struct {
	Traces, Logs, Metrics time.Duration
	// Interval is the time between two expiry runs (default 1 minute, or
	// a tenth of the shortest retention if that is less, at least 1s).
	Interval time.Duration
	// StepRows bounds the rows one DELETE transaction removes (default
	// 100,000): ingestion waits for each step, not for the whole run.
	StepRows int
}

// Default retention step: some 6 ms of DELETE here (docs/RETENTION.md).
const DefaultStepRows = 100_000

// expiry is one table's retention.
type expiry struct {
	table     string
	transform string
	timeExpr  string
	keep      time.Duration
}

// expirer deletes expired rows in the background, in steps that each take
// the writer's turn.
type expirer struct {
	d      *Deps
	ex     *exporter // nil without an export
	tables []expiry
	cfg    Config
	cancel context.CancelFunc
	done   chan struct{}
	now    func() time.Time // the clock
	// pending counts the rows deleted since the expirer's last checkpoint.
	pending int64

	expired     *prometheus.CounterVec
	lastRun     prometheus.Gauge
	runDuration prometheus.Gauge
	errors      prometheus.Counter
}

func startExpirer(r Config, d *Deps, ex *exporter) *expirer {
	var tables []expiry
	shortest := time.Duration(0)
	for _, e := range []expiry{
		{d.Tables[0], transforms.OTLPTraces, ingest.TimeExpr(transforms.OTLPTraces), r.Traces},
		{d.Tables[1], transforms.OTLPLogs, ingest.TimeExpr(transforms.OTLPLogs), r.Logs},
		{d.Tables[2], transforms.OTLPMetrics, ingest.TimeExpr(transforms.OTLPMetrics), r.Metrics},
	} {
		if e.keep > 0 {
			tables = append(tables, e)
			if shortest == 0 || e.keep < shortest {
				shortest = e.keep
			}
		}
	}
	if len(tables) == 0 {
		return nil
	}
	if r.Interval <= 0 {
		r.Interval = max(time.Second, min(time.Minute, shortest/10))
	}
	if r.StepRows <= 0 {
		r.StepRows = DefaultStepRows
	}
	ctx, cancel := context.WithCancel(context.Background())
	x := &expirer{d: d, ex: ex, tables: tables, cfg: r, cancel: cancel, done: make(chan struct{}), now: d.Now,
		expired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shredduck_retention_rows_expired_total",
			Help: "Rows deleted by retention (--retention), by table.",
		}, []string{"table"}),
		lastRun: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shredduck_retention_last_run_timestamp_seconds",
			Help: "When the last retention run ended (Unix time).",
		}),
		runDuration: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shredduck_retention_last_run_duration_seconds",
			Help: "How long the last retention run took (its DELETE steps, and the waits for the writer's turn).",
		}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shredduck_retention_errors_total",
			Help: "Retention runs that failed (tried again at the next interval).",
		}),
	}
	d.Metrics.MustRegister(x.expired, x.lastRun, x.runDuration, x.errors)
	go x.loop(ctx)
	return x
}

func (x *expirer) loop(ctx context.Context) {
	defer close(x.done)
	every(ctx, x.cfg.Interval, func() error { return x.run(ctx) }, func(err error) {
		x.errors.Inc()
		x.d.Limited.Log(slog.LevelError, "retention", "expiring rows failed; tried again at the next interval", slog.String("error", source.Truncate(err.Error(), 1000)))
	})
}

// run expires every table once, then, if it deleted a row group's worth
// of rows, checkpoints in the writer's turn: only a checkpoint that no
// other transaction overlaps frees the row groups whose rows are all
// deleted, and the committer's checkpoints overlap the next group's
// transaction (docs/RETENTION.md).
func (x *expirer) run(ctx context.Context) error {
	start := time.Now()
	defer func() {
		x.lastRun.Set(float64(time.Now().UnixNano()) / 1e9)
		x.runDuration.Set(time.Since(start).Seconds())
	}()
	var errs []error
	var total int64
	for _, e := range x.tables {
		n, err := x.expire(ctx, e)
		total += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	x.pending += total
	if x.pending >= ingest.DefaultBatchRows && ctx.Err() == nil {
		err := x.d.Exclusive(ctx, func() error {
			cstart := time.Now()
			err := x.d.DB.Checkpoint(context.Background())
			x.d.OnCheckpoint(time.Since(cstart), err)
			return err
		})
		if err == nil {
			x.pending = 0
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// expire deletes e's expired rows and returns how many.
func (x *expirer) expire(ctx context.Context, e expiry) (int64, error) {
	if ok, err := x.d.DB.TableExists(ctx, e.table); err != nil || !ok {
		return 0, err
	}
	cut := x.now().Add(-e.keep)
	if through, ok := x.ex.guard(e.table); ok {
		if through.IsZero() {
			return 0, nil // nothing exported yet
		}
		return x.expireExported(ctx, e, minTime(cut, through).Truncate(time.Hour))
	}
	var total int64
	for ctx.Err() == nil {
		var n int64
		err := x.d.Exclusive(ctx, func() error {
			var err error
			n, err = x.d.DB.ExpireStep(context.Background(), e.table, e.timeExpr, cut, x.cfg.StepRows)
			return err
		})
		total += n
		if n > 0 {
			x.expired.WithLabelValues(e.table).Add(float64(n))
			x.d.Log.Debug("expired rows", slog.String("table", e.table), slog.Int64("rows", n), slog.Time("before", cut))
		}
		if err != nil || n < int64(x.cfg.StepRows) {
			return total, err
		}
	}
	return total, nil
}

// expireExported expires e's table an hour at a time (ingest.DB.
// ExpireExported): each hour's rows are written to its Parquet file (or
// found there already, written when the hour ended) and deleted in one
// transaction, whose DELETE and COMMIT take the writer's turn; records
// that come for an hour after it expired go to a late-*.parquet of their
// own, since rewriting the hour's file would lose the rows expired
// before. An hour is one DELETE, however many rows it has.
func (x *expirer) expireExported(ctx context.Context, e expiry, cut time.Time) (int64, error) {
	db, ex := x.d.DB, x.ex
	if err := x.sweepLate(ctx, e.table); err != nil {
		return 0, err
	}
	counts, err := db.HourCounts(ctx, e.table, e.timeExpr, cut)
	if err != nil {
		return 0, err
	}
	hours := make([]int64, 0, len(counts))
	for h := range counts {
		hours = append(hours, h)
	}
	slices.Sort(hours)
	ex.mu.Lock()
	expiredThrough := ex.expired[e.table]
	ex.mu.Unlock()
	turn := func(fn func() error) error { return x.d.Exclusive(ctx, fn) }
	var total int64
	for _, h := range hours {
		hour := time.Unix(0, h).UTC()
		end := hour.Add(time.Hour)
		file := ingest.HourFile(ex.cfg.Dir, e.table, hour)
		key, value := expiredKey(e.table), strconv.FormatInt(end.UnixNano(), 10)
		late := hour.Before(expiredThrough)
		if late {
			file = filepath.Join(filepath.Dir(file), fmt.Sprintf("late-%d.parquet", time.Now().UnixNano()))
			key, value = lateKey(ex.cfg.Dir, file), "1"
		}
		n, err := db.ExpireExported(ctx, e.table, e.transform, h, file, turn, key, value)
		if err != nil {
			return total, err
		}
		total += n
		x.expired.WithLabelValues(e.table).Add(float64(n))
		if late && n > 0 {
			x.d.Log.Info("expired records that came after their hour had expired, into a file of their own", slog.String("table", e.table), slog.String("file", file), slog.Int64("rows", n))
		}
		if !late {
			ex.mu.Lock()
			ex.expired[e.table] = end
			ex.mu.Unlock()
			expiredThrough = end
		}
	}
	return total, nil
}

// lateKey is the shredduck_meta key that the transaction expiring a late
// file's rows stores: a late file without it was renamed into place by a
// transaction that did not commit (a crash), and its rows are still in
// the table.
func lateKey(dir, file string) string {
	rel, err := filepath.Rel(dir, file)
	if err != nil {
		rel = file
	}
	return "export_late:" + filepath.ToSlash(rel)
}

// sweepLate removes table's late files whose expiry did not commit, so
// that their rows, still in the table, are not exported twice.
func (x *expirer) sweepLate(ctx context.Context, table string) error {
	dir := x.ex.cfg.Dir
	files, err := filepath.Glob(filepath.Join(dir, table, "date=*", "hour=*", "late-*.parquet"))
	if err != nil {
		return err
	}
	for _, f := range files {
		_, ok, err := x.d.DB.Meta(ctx, lateKey(dir, f))
		if err != nil {
			return err
		}
		if ok {
			continue
		}
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("cannot remove %s, a late file whose expiry did not commit: %w", f, err)
		}
		x.d.Log.Warn("removed a late export file whose expiry did not commit (its rows are still in the table, and are exported again)", slog.String("file", f))
	}
	return nil
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// stop ends the expirer after its current step.
func (x *expirer) stop() {
	if x == nil {
		return
	}
	x.cancel()
	<-x.done
}
