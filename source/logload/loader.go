package logload

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/ingestlog"
	"github.com/shredduck/shredduck/shred"
	"github.com/shredduck/shredduck/source"
	"github.com/shredduck/shredduck/transforms"
)

// Config is where the ingest log is and how large it may grow.
type Config struct {
	Dir          string
	MaxBytes     int64 // the log's bound (ingestlog.Options)
	SegmentBytes int64
	// HandoffBytes bounds the decoded batches handed to the loader in
	// memory (Hand); beyond it the loader decodes the logged bodies.
	HandoffBytes int64
}

// Metrics are the loader's counters.
type Metrics struct {
	Dropped      prometheus.Counter // logged requests that cannot be decoded again or stored
	CorruptBytes prometheus.Counter // bytes lost to corrupt segments
	DecodedAgain prometheus.Counter // logged requests decoded from the log, not handed over
}

// Deps is what the loader uses of the server that opens it.
type Deps struct {
	DB *ingest.DB
	// Batches is the doors' pool: the batches handed over (Hand) come
	// from it and go back to it, and the log's replays take theirs there.
	Batches *source.BatchPool
	// Loader is the loader's options; the loader sets OnDrop.
	Loader  ingest.LoaderOptions
	Metrics Metrics
	Log     *slog.Logger
	Limited *source.LimitedLog
	// OnRelease, when set, runs after the loader released stored
	// segments, with the log's size before and after.
	OnRelease func(before, after int64)
	// BeforeRead, when set (tests), runs before each read of the log.
	BeforeRead func()
}

// Loader is the ingest log and the ingest.Loader that moves it into the
// database.
type Loader struct {
	log    *ingestlog.Log
	src    *logSource
	loader *ingest.Loader
	start  uint64
	cancel context.CancelFunc
	done   chan error
}

// Open opens the ingest log in cfg.Dir at the position the database has
// loaded; Run starts its loader.
func Open(cfg Config, d Deps) (*Loader, error) {
	ctx := context.Background()
	if err := bindLog(ctx, d.DB, cfg.Dir); err != nil {
		return nil, err
	}
	pos, _, err := d.DB.StoredPosition(ctx, SourceName)
	if err != nil {
		return nil, err
	}
	l, rec, err := ingestlog.Open(ingestlog.Options{Dir: cfg.Dir, MaxBytes: cfg.MaxBytes, SegmentBytes: cfg.SegmentBytes, Start: ingestlog.Position(pos)})
	if err != nil {
		return nil, err
	}
	if first := l.First(); ingestlog.Position(pos) < first {
		l.Close()
		return nil, fmt.Errorf("the database has loaded the ingest log in %s up to position %d, but the log starts at %d: acknowledged requests between are missing (move the directory away to start a new log)", cfg.Dir, pos, first)
	}
	if rec.Cut > 0 {
		d.Log.Warn("ingest log: cut a torn tail (a crash mid-append; those requests were not acknowledged)",
			slog.Int64("bytes", rec.Cut), slog.Uint64("position", uint64(rec.CutAt)))
	}
	if backlog := l.Durable() - ingestlog.Position(pos); backlog > 0 {
		d.Log.Info("ingest log: loading what the last run acknowledged", slog.Uint64("bytes", uint64(backlog)))
	}
	src := &logSource{d: &d, l: l, items: source.NewBatchPool(source.ItemsKeptBytes)}
	src.h = &handoff{items: map[ingestlog.Position]handed{}, max: cfg.HandoffBytes, runs: src.items, door: d.Batches}
	opts := d.Loader
	opts.OnDrop = func(it ingest.SourceItem, err error) {
		d.Metrics.Dropped.Inc()
		d.Log.Error("an acknowledged request cannot be stored and is skipped", slog.String("table", it.Table), slog.String("error", source.Truncate(err.Error(), 500)))
	}
	loader := d.DB.NewLoader(src, opts)
	return &Loader{log: l, src: src, loader: loader, start: pos, done: make(chan error, 1)}, nil
}

// Run starts the loader; Close stops it.
func (ld *Loader) Run() {
	lctx, cancel := context.WithCancel(context.Background())
	ld.cancel = cancel
	go func() { ld.done <- ld.loader.Run(lctx) }()
}

// Log is the ingest log, for the doors' appends.
func (ld *Loader) Log() *ingestlog.Log { return ld.log }

// Opened is the position the database had loaded when the log was
// opened.
func (ld *Loader) Opened() uint64 { return ld.start }

// Hand gives the loader the decoded batch of the record [pos, next) of
// table, which the log's writer just synced (ingestlog.Log.AppendThen),
// so that the loader need not decode the logged body again. False when
// the loader has read past pos already or the handoff is full: the caller
// keeps b. On true the loader owns b and gives it back to Deps.Batches.
func (ld *Loader) Hand(pos, next ingestlog.Position, table string, tr transforms.Transform, b *shred.Batch, bytes int64) bool {
	return ld.src.h.put(pos, next, handed{table: table, tr: tr, b: b, bytes: bytes})
}

// Exclusive runs fn between two of the loader's transactions.
func (ld *Loader) Exclusive(ctx context.Context, fn func() error) error {
	return ld.loader.Exclusive(ctx, fn)
}

// Close waits for the loader, started by Run, to load everything the log
// holds, and closes the log.
func (ld *Loader) Close() error {
	ld.cancel()
	err := <-ld.done
	ld.src.h.drain()
	if ld.src.r != nil {
		ld.src.r.Close()
	}
	return errors.Join(err, ld.log.Close())
}

// OwnerFile, in the log's directory, holds the id of the database
// the log belongs to (shredduck_meta's ingest_log_id): a database file
// replaced or removed beside its log must not take the old one's records,
// nor a log another database's.
const (
	OwnerFile = "DATABASE_ID"
	logIDKey  = "ingest_log_id"
)

// bindLog checks that the log directory belongs to this database, or
// makes it so when one of them has no id yet.
func bindLog(ctx context.Context, db *ingest.DB, dir string) error {
	dbID, hasDB, err := db.Meta(ctx, logIDKey)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(filepath.Join(dir, OwnerFile))
	logID := strings.TrimSpace(string(b))
	switch {
	case err == nil && hasDB && logID == dbID:
		return nil
	case err == nil:
		return fmt.Errorf("the ingest log in %s belongs to another database (id %s; this one's is %q): move the directory away, or give --log-dir", dir, logID, dbID)
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("cannot read the ingest log's owner: %w", err)
	}
	if segs, _ := filepath.Glob(filepath.Join(dir, "*.seg")); len(segs) > 0 {
		return fmt.Errorf("the ingest log in %s has no %s file: it is not one this database wrote; move the directory away, or give --log-dir", dir, OwnerFile)
	}
	if !hasDB {
		var r [16]byte
		if _, err := rand.Read(r[:]); err != nil {
			return err
		}
		dbID = hex.EncodeToString(r[:])
		if err := db.SetMeta(ctx, logIDKey, dbID); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cannot create the ingest log directory: %w", err)
	}
	return writeSynced(filepath.Join(dir, OwnerFile), []byte(dbID+"\n"))
}

// writeSynced writes a small file whole: a temporary file, fsynced,
// renamed.
func writeSynced(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err = f.Write(data); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	return nil
}
