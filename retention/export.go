package retention

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/shred"
	"github.com/shredduck/shredduck/source"
)

// Export rolls each hour of the OTLP tables off to Parquet once it is
// over (ingest.DB.Export's layout in Dir), and holds retention back from
// any hour not written yet.
type Export struct {
	Dir string
	// Delay is how long after an hour ends it is written (default 5
	// minutes): records that arrive later for it are not in its file.
	Delay time.Duration
	// Interval is the time between two looks for finished hours
	// (default 1 minute).
	Interval time.Duration
}

// exportKey is the shredduck_meta key of the end of the last hour of a
// table written to the export directory, in Unix nanoseconds; expiredKey
// that of the end of the last hour retention expired from it (records
// that arrive for an hour before it go to files of their own).
func exportKey(table string) string  { return "export_through:" + table }
func expiredKey(table string) string { return "expired_through:" + table }

// exporter writes finished hours in the background.
type exporter struct {
	d      *Deps
	cfg    Export
	tables []string
	cancel context.CancelFunc
	done   chan struct{}
	now    func() time.Time

	mu      sync.Mutex
	through map[string]time.Time // table -> end of the last hour written
	expired map[string]time.Time // table -> end of the last hour expired (the expirer's)

	files   *prometheus.CounterVec
	rows    *prometheus.CounterVec
	last    *prometheus.GaugeVec
	errors  prometheus.Counter
	seconds prometheus.Gauge
	failing prometheus.Gauge

	// failure is the run of failed exports going on (nil: the last run
	// succeeded), for /readyz.
	failure atomic.Pointer[exportFailure]
}

// exportFailure is a run of failed exports: since the first of them, how
// many, and the last one's error.
type exportFailure struct {
	since time.Time
	runs  int
	err   string
}

func startExporter(cfg Export, d *Deps) (*exporter, error) {
	if cfg.Dir == "" {
		return nil, nil
	}
	if cfg.Delay <= 0 {
		cfg.Delay = 5 * time.Minute
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Minute
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cannot create the export directory: %w", err)
	}
	cfg.Dir = dir
	// The query endpoint turns DuckDB's file access off (LockDown); the
	// export directory stays open to COPY, and so to queries' read_parquet
	// of what was exported. It must be set before the lock.
	if _, err := d.DB.SQL.Exec("SET allowed_directories = [" + shred.QuoteString(dir+string(filepath.Separator)) + "]"); err != nil {
		return nil, fmt.Errorf("cannot allow DuckDB to write to %s: %w", dir, err)
	}
	x := &exporter{d: d, cfg: cfg, done: make(chan struct{}), now: d.Now, through: map[string]time.Time{}, expired: map[string]time.Time{},
		tables: d.Tables[:],
		files: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shredduck_export_files_total",
			Help: "Parquet files written to --export-dir, by table.",
		}, []string{"table"}),
		rows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shredduck_export_rows_total",
			Help: "Rows written to --export-dir, by table.",
		}, []string{"table"}),
		last: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "shredduck_export_through_timestamp_seconds",
			Help: "End of the last hour written to --export-dir (Unix time), by table: retention expires nothing after it.",
		}, []string{"table"}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shredduck_export_errors_total",
			Help: "Export runs that failed (tried again at the next interval; retention waits).",
		}),
		seconds: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shredduck_export_last_run_duration_seconds",
			Help: "How long the last export run took.",
		}),
		failing: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shredduck_export_failing",
			Help: "1 while export runs fail (the last one failed; /readyz says why), else 0.",
		}),
	}
	for _, t := range x.tables {
		for key, m := range map[string]map[string]time.Time{exportKey(t): x.through, expiredKey(t): x.expired} {
			v, ok, err := d.DB.Meta(context.Background(), key)
			if err != nil {
				return nil, err
			}
			if ok {
				ns, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("shredduck_meta %s = %q: %w", key, v, err)
				}
				m[t] = time.Unix(0, ns).UTC()
			}
		}
	}
	d.Metrics.MustRegister(x.files, x.rows, x.last, x.errors, x.seconds, x.failing)
	ctx, cancel := context.WithCancel(context.Background())
	x.cancel = cancel
	go x.loop(ctx)
	return x, nil
}

// degraded says why exports fail, for /readyz ("": they do not). The
// server stays ready: ingest and queries work, but retention waits for the
// export, so the disk grows until it is fixed.
func (x *exporter) degraded() string {
	if x == nil {
		return ""
	}
	f := x.failure.Load()
	if f == nil {
		return ""
	}
	return fmt.Sprintf("degraded: exporting to %s has failed %d time(s) since %s (retention waits for it): %s",
		x.cfg.Dir, f.runs, f.since.UTC().Format(time.RFC3339), source.Truncate(f.err, 500))
}

// guard returns the time before which retention may expire rows of
// table: the end of the last hour exported (zero: none yet, expire
// nothing). ok is false when the table is not exported.
func (x *exporter) guard(table string) (t time.Time, ok bool) {
	if x == nil {
		return time.Time{}, false
	}
	for _, name := range x.tables {
		if name == table {
			x.mu.Lock()
			defer x.mu.Unlock()
			return x.through[table], true
		}
	}
	return time.Time{}, false
}

func (x *exporter) loop(ctx context.Context) {
	defer close(x.done)
	every(ctx, x.cfg.Interval, func() error {
		start := time.Now()
		err := x.run(ctx)
		x.seconds.Set(time.Since(start).Seconds())
		if err == nil {
			x.failure.Store(nil)
			x.failing.Set(0)
		}
		return err
	}, func(err error) {
		f := exportFailure{since: time.Now(), runs: 1, err: err.Error()}
		if old := x.failure.Load(); old != nil {
			f.since, f.runs = old.since, old.runs+1
		}
		x.failure.Store(&f)
		x.failing.Set(1)
		x.errors.Inc()
		x.d.Limited.Log(slog.LevelError, "export", "exporting finished hours failed; tried again at the next interval (retention waits for it)", slog.String("error", source.Truncate(err.Error(), 1000)))
	})
}

// every runs fn at once and then every interval until ctx ends, giving
// its errors to failed (not those of ctx ending).
func every(ctx context.Context, interval time.Duration, fn func() error, failed func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := fn(); err != nil && ctx.Err() == nil {
			failed(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// run writes every hour that ended Delay ago or more and is not written
// yet, then records how far each table is written (in the writer's
// turn: shredduck_meta is a table like the others).
func (x *exporter) run(ctx context.Context) error {
	sealed := x.now().Add(-x.cfg.Delay).UTC().Truncate(time.Hour)
	var errs []error
	for _, table := range x.tables {
		if ok, err := x.d.DB.TableExists(ctx, table); err != nil || !ok {
			errs = append(errs, err)
			continue
		}
		x.mu.Lock()
		since := x.through[table]
		x.mu.Unlock()
		if !since.IsZero() && !since.Before(sealed) {
			continue
		}
		opt := ingest.ExportOptions{Dir: x.cfg.Dir, Tables: []string{table}, Since: since, Until: sealed}
		if since.IsZero() {
			// The first run: from the table's first hour.
			opt.Since = time.Unix(0, 0).UTC()
		}
		_, err := x.d.DB.Export(ctx, opt, func(f ingest.ExportedFile) {
			x.files.WithLabelValues(table).Inc()
			x.rows.WithLabelValues(table).Add(float64(f.Rows))
			x.d.Log.Debug("exported", slog.String("table", table), slog.String("file", f.Path), slog.Int64("rows", f.Rows))
		})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		err = x.d.Exclusive(ctx, func() error {
			return x.d.DB.SetMeta(context.Background(), exportKey(table), strconv.FormatInt(sealed.UnixNano(), 10))
		})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		x.mu.Lock()
		x.through[table] = sealed
		x.mu.Unlock()
		x.last.WithLabelValues(table).Set(float64(sealed.Unix()))
	}
	return errors.Join(errs...)
}

func (x *exporter) stop() {
	if x == nil {
		return
	}
	x.cancel()
	<-x.done
}
