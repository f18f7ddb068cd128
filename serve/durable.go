package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/ingestlog"
	"github.com/shredduck/shredduck/shred"
	"github.com/shredduck/shredduck/source"
	"github.com/shredduck/shredduck/source/logload"
	"github.com/shredduck/shredduck/transforms"
)

// With --ack log a request is acknowledged once it is in the ingest log
// (ingestlog: fsynced, group-committed), and a Loader moves the log into
// DuckDB in large transactions that store the log position with the rows
// (ingest.Loader, source/logload). The request's decoded batch is handed
// to the loader in memory; after a restart, or when the handoff is full,
// the loader decodes the logged body again.

// Ack modes.
const (
	AckCommit = "commit" // 2xx once the rows are committed in DuckDB
	AckLog    = "log"    // 2xx once the request is in the ingest log
)

// durable is the server's ingest log and its loader (--ack log).
type durable struct {
	ld      *logload.Loader
	log     *ingestlog.Log         // ld's
	loaded  atomic.Uint64          // the position stored with the last load
	failing atomic.Pointer[string] // the last load's error, nil once one succeeds
	// writeFailing is the last append's error (a full disk), nil once one
	// succeeds or the loader frees segments.
	writeFailing atomic.Pointer[string]
	backlog      *logload.Backlog // when the records not yet loaded arrived
	loadedCh     atomic.Pointer[chan struct{}]
}

// openLog opens the ingest log at the position the database has loaded,
// and starts its loader (source/logload).
func (s *Server) openLog(checkpointBytes int64) error {
	d := &durable{backlog: logload.NewBacklog(s.cfg.MaxVisibilityLag)}
	ch := make(chan struct{})
	d.loadedCh.Store(&ch)
	ld, err := logload.Open(logload.Config{Dir: s.cfg.LogDir, MaxBytes: s.cfg.LogMaxBytes, SegmentBytes: s.cfg.LogSegmentBytes, HandoffBytes: s.cfg.QueueBytes},
		logload.Deps{
			DB:      s.db,
			Batches: s.batches,
			Loader: ingest.LoaderOptions{
				MaxColumns:      s.cfg.MaxColumns,
				MaxLag:          s.cfg.MaxVisibilityLag,
				CheckpointBytes: checkpointBytes,
				RetryAfter:      s.cfg.RetryAfter,
				OnLoad:          s.onLoad,
				OnCheckpoint:    s.onCheckpoint,
			},
			Metrics: logload.Metrics{Dropped: s.metrics.logRecordsDropped, CorruptBytes: s.metrics.logCorruptBytes, DecodedAgain: s.metrics.logDecodedAgain},
			Log:     s.log,
			Limited: s.limited,
			OnRelease: func(before, after int64) {
				if after < before {
					d.writeFailing.Store(nil) // room again, most likely: the next append tells
				}
				s.metrics.logBytes.Set(float64(after))
			},
			BeforeRead: func() {
				if hook := s.beforeLoad.Load(); hook != nil {
					(*hook)()
				}
			},
		})
	if err != nil {
		return err
	}
	s.durable = d // before Run: onLoad uses it
	d.ld, d.log = ld, ld.Log()
	d.loaded.Store(ld.Opened())
	age := d.backlogAge
	s.metrics.backlogAge.Store(&age)
	ld.Run()
	return nil
}

// drainLog loads what an ingest log holds and closes it (--ack commit
// after an --ack log run).
func (s *Server) drainLog(checkpointBytes int64) error {
	if err := s.openLog(checkpointBytes); err != nil {
		return err
	}
	s.log.Info("loading the ingest log an --ack log run left", slog.String("dir", s.cfg.LogDir))
	err := s.closeLog()
	s.durable = nil
	s.metrics.backlogAge.Store(nil)
	return err
}

// recordBuffers recycle the records appendLog encodes, up to
// maxPooledRecord bytes each.
var recordBuffers = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledRecord = 4 << 20

// appendLog acknowledges a decoded request by logging it; the handoff
// takes b, or it goes back to the pool.
func (s *Server) appendLog(table string, tr transforms.Transform, b *shred.Batch, inputBytes int64, body logload.Body) *apiError {
	d := s.durable
	bufp := recordBuffers.Get().(*[]byte)
	rec := logload.AppendRecord((*bufp)[:0], table, body, time.Now())
	defer func() { // the log keeps no reference once Append returns
		if cap(rec) <= maxPooledRecord {
			*bufp = rec[:0]
			recordBuffers.Put(bufp)
		}
	}()
	if need := int64(len(rec)) + 64; need > s.cfg.LogMaxBytes || len(rec) > ingestlog.MaxRecord {
		s.batches.Put(tr, b)
		return &apiError{status: http.StatusRequestEntityTooLarge, code: codeResourceExhausted, reason: reasonTooLarge,
			msg: fmt.Sprintf("the request takes %d bytes in the ingest log, more than it holds (--log-max-bytes %d); send smaller requests", need, s.cfg.LogMaxBytes)}
	}
	// The batch is handed over before the loader can read the record:
	// handed after Append returned, the loader often had read it already
	// and decoded the logged body again, on its one thread.
	b.SetLimits(shred.Limits{}) // the request's account ends with it; the handoff's bound holds
	handedOver := false
	pos, err := d.log.AppendThen(context.Background(), rec, func(pos, next ingestlog.Position) {
		handedOver = d.ld.Hand(pos, next, table, tr, b, inputBytes)
	})
	if err != nil {
		s.batches.Put(tr, b)
		switch {
		case errors.Is(err, ingestlog.ErrFull):
			return s.logFullError()
		case errors.Is(err, ingestlog.ErrClosed):
			return s.closedError()
		}
		msg := fmt.Sprintf("cannot write the ingest log; retry later: %v", err)
		d.writeFailing.Store(&msg)
		return &apiError{status: http.StatusServiceUnavailable, code: codeUnavailable, reason: reasonUnavailable,
			msg: msg, retryAfter: s.cfg.RetryAfter}
	}
	d.writeFailing.Store(nil)
	d.backlog.Appended(pos, time.Now())
	s.metrics.logBytes.Set(float64(d.log.Size()))
	if !handedOver {
		s.batches.Put(tr, b)
	}
	return nil
}

func (s *Server) logFullError() *apiError {
	return &apiError{status: http.StatusServiceUnavailable, code: codeUnavailable, reason: reasonOverloaded,
		msg: "the ingest log is full (--log-max-bytes) while the loader catches up; retry later", retryAfter: s.cfg.RetryAfter}
}

// closeLog stops taking requests into the log, waits for the loader to
// load all of it, and closes it.
func (s *Server) closeLog() error {
	return s.durable.ld.Close()
}

// onLoad is the loader's LoaderOptions.OnLoad hook.
func (s *Server) onLoad(li ingest.LoadInfo) {
	s.metrics.onCommit(ingest.CommitInfo{Requests: li.Items, Rows: li.Rows, Tables: li.Tables, Duration: li.Duration, Err: li.Err})
	if li.Err != nil {
		msg := source.Truncate(li.Err.Error(), 500)
		s.durable.failing.Store(&msg)
		s.limited.Log(slog.LevelWarn, "loader", "loading the ingest log failed; retrying", slog.String("error", msg))
		return
	}
	s.durable.failing.Store(nil)
	s.metrics.visibilityLag.Set(li.Lag.Seconds())
	s.metrics.logLoadedPosition.Set(float64(li.Position))
	s.durable.loaded.Store(li.Position)
	s.durable.signalLoaded()
}

// WaitLoaded returns once every request acknowledged before the call is
// committed (with --ack log; at once otherwise), or with ctx's error.
func (s *Server) WaitLoaded(ctx context.Context) error {
	d := s.durable
	if d == nil {
		return nil
	}
	target := uint64(d.log.Durable())
	for d.loaded.Load() < target {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
	return nil
}
