package ingest

import (
	"context"
	"errors"
	"time"
)

// A Loader of a source without keys streams: it writes each item into
// the transaction as it arrives and releases its batch at once, instead
// of collecting a transaction's items first (collect, load). The loader
// then holds an item's rows, not a row group's: the collected batches
// were 60-90 MB of the server's Go heap under streaming load
// (docs/SERVE.md, Memory). load's retries, splits and drops need the
// items, so a transaction that fails to write is rolled back, the source
// is read again from the stored position, and the next transaction
// collects (hold). A keyed source (Kafka) and a serial loader collect.

// streams reports whether the next transaction streams; a hold is spent.
func (l *Loader) streams() bool {
	hold := l.hold
	l.hold = false
	_, keyed := l.src.(KeyedSource)
	return !hold && !keyed && !l.opt.Serial && (len(l.serialTo) == 0 || l.serialLeft <= 0)
}

// streamTx is a transaction being streamed.
type streamTx struct {
	l    *Loader
	tx   *Tx // begun at the first item with rows
	g    *gather
	pos  positions
	busy time.Duration // spent writing, for LoadInfo.Duration
}

// stream takes the items of one transaction as collect does, writing
// each as it comes, and commits it as load does. took is false when no
// item came.
func (l *Loader) stream(ctx context.Context, draining bool) (took bool, err error) {
	s := &streamTx{l: l, g: newGather(l.opt.MaxRows), pos: l.positions()}
	defer func() {
		if err != nil && s.tx != nil {
			l.rollback(s.tx)
		}
	}()
	carry := l.carry
	l.carry = nil
	for i, it := range carry {
		if err := s.take(it); err != nil {
			for _, rest := range carry[i+1:] {
				rest.release()
			}
			return true, l.holdBack(s, err)
		}
	}
	for !s.g.full() {
		it, ok, err := l.next(ctx, s.g, draining)
		if err != nil {
			return true, err
		}
		if !ok {
			break
		}
		if err := s.take(it); err != nil {
			return true, l.holdBack(s, err)
		}
	}
	if s.g.items == 0 {
		return false, nil
	}
	return true, s.commit()
}

// take writes it into the transaction and releases it. The item that
// brings its table to MaxRows is cut where the table's rows reach a whole
// number of row groups, as cutAtRowGroup does; the rest is carried to the
// next transaction.
func (s *streamTx) take(it SourceItem) error {
	l := s.l
	if n := it.rows(); n > 0 && it.Key == "" {
		before := s.g.perTable[it.Table]
		whole := (before + n) / RowGroupRows * RowGroupRows
		if whole >= l.opt.MaxRows && whole > before && before+n > whole {
			rest := it
			it.to = it.end() - (before + n - whole)
			it.Release = nil // the rest's transaction releases the batch
			rest.from = it.to
			l.carry = append(l.carry, rest)
		}
	}
	defer it.release()
	if it.rows() > 0 {
		if s.tx == nil {
			if err := s.begin(); err != nil {
				return err
			}
		}
		start := time.Now()
		_, err := l.writeItem(s.tx, it)
		s.busy += time.Since(start)
		if err != nil {
			return err
		}
	}
	s.pos.add(it)
	if s.g.items == 0 {
		s.pos.arrived = it.Arrived
	}
	s.g.add(it, l.opt.MaxLag)
	return nil
}

// begin begins the transaction beside the pipelined COMMIT, unless that
// changed a schema: then after it, which this one's rows must see.
func (s *streamTx) begin() error {
	if p := s.l.prev; p != nil && p.changed {
		if err := s.l.finish(); err != nil {
			return err
		}
	}
	tx, err := s.l.beginTx(false)
	if err != nil {
		return err
	}
	s.tx = tx
	return nil
}

// commit stores the positions and commits: pipelined when rows were
// written, else (records without rows only move the position) now.
func (s *streamTx) commit() error {
	l := s.l
	pipe := s.tx != nil
	if !pipe {
		if err := l.finish(); err != nil {
			return err
		}
		tx, err := l.beginTx(false)
		if err != nil {
			return err
		}
		s.tx = tx
	}
	// The items and rows written are the gathered ones.
	s.pos.items, s.pos.rows = s.g.items, int64(s.g.rows)
	start := time.Now()
	if err := l.end(s.tx, s.pos, pipe, s.busy); err != nil {
		return l.holdBack(s, err)
	}
	if !pipe && l.opt.OnLoad != nil {
		l.opt.OnLoad(LoadInfo{Items: s.pos.items, Position: s.pos.last, Duration: time.Since(start),
			Lag: time.Since(s.pos.arrived), Tables: s.tx.Stats()})
	}
	return nil
}

// holdBack rolls back a transaction that could not be written, and has
// the source give its items again for the next transaction, which
// collects them (load). A failed pipelined COMMIT is Run's to handle.
func (l *Loader) holdBack(s *streamTx, cause error) error {
	var prevFailed *errPrevFailed
	if errors.As(cause, &prevFailed) {
		return cause
	}
	if s.tx != nil {
		l.rollback(s.tx)
		s.tx = nil
	}
	for _, it := range l.carry {
		it.release()
	}
	l.carry = nil
	// What is read again starts after the last stored position.
	if err := l.finish(); err != nil {
		return err
	}
	if err := l.src.Seek(l.pos); err != nil {
		return errors.Join(cause, err)
	}
	l.skip, l.at = l.rows, l.pos
	l.hold = true
	return nil
}
