package logload

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/ingestlog"
	"github.com/shredduck/shredduck/shred"
	"github.com/shredduck/shredduck/source"
	"github.com/shredduck/shredduck/transforms"
)

// logSource is the ingest log as an ingest.Source.
type logSource struct {
	d       *Deps
	l       *ingestlog.Log
	r       *ingestlog.Reader
	h       *handoff
	pending *logged           // read by merge but not taken into its item
	items   *source.BatchPool // the batches of merged items, kept at an item's size
}

// logged is a record read from the log; payload is valid until the
// reader's next read.
type logged struct {
	pos, next ingestlog.Position
	payload   []byte
}

// Requests are loaded several to an item, up to ItemRows rows: an
// item costs the loader's DuckDB append about 0.16 ms beyond its rows
// (one-span requests were loaded at 4,400 spans/s; 80-span ones cost the
// loader twice the CPU per span of 2,000-row items, BenchmarkLoader). The
// batches the door handed over are appended to the item's (shred's
// Batch.Append, a copy); a record without one is decoded into it.
const ItemRows = 2048

func (src *logSource) Name() string { return SourceName }

func (src *logSource) Seek(pos uint64) error {
	if src.r != nil {
		src.r.Close()
	}
	src.pending = nil
	if first := src.l.First(); ingestlog.Position(pos) < first {
		return fmt.Errorf("the database has loaded the ingest log up to position %d, but the log starts at %d: records between are missing", pos, first)
	}
	src.r = src.l.NewReader(ingestlog.Position(pos))
	return nil
}

func (src *logSource) Next(ctx context.Context, wait time.Duration) (ingest.SourceItem, bool, error) {
	if src.d.BeforeRead != nil {
		src.d.BeforeRead()
	}
	rec, ok, err := src.read()
	if !ok && err == nil && wait > 0 {
		wctx, cancel := context.WithTimeout(ctx, wait)
		werr := src.l.Wait(wctx, src.r.Pos())
		cancel()
		if werr != nil && !errors.Is(werr, context.DeadlineExceeded) && !errors.Is(werr, context.Canceled) {
			return ingest.SourceItem{}, false, werr
		}
		rec, ok, err = src.read()
	}
	var ce *ingestlog.CorruptError
	if errors.As(err, &ce) {
		return src.skipCorrupt(ce)
	}
	if err != nil || !ok {
		return ingest.SourceItem{}, false, err
	}
	var item ingest.SourceItem
	if it, ok := src.h.take(rec.pos, rec.next); ok {
		r, _ := decodeRecord(rec.payload)
		pool := src.d.Batches
		if it.run != nil {
			pool = src.items
		}
		item = ingest.SourceItem{Table: it.table, Tr: it.tr, Batch: it.b, Bytes: it.bytes, Next: uint64(rec.next),
			Arrived: r.arrived, Release: func() { pool.Put(it.tr, it.b) }}
		if it.run != nil {
			src.passRun(&item, it.run)
		}
		src.merge(&item, rec.pos, it.run != nil)
		return item, true, nil
	}
	item = src.replay(rec.pos, rec.next, rec.payload)
	src.merge(&item, rec.pos, false)
	return item, true, nil
}

// passRun makes item, taken from run r at its first record, all of r: the
// reader skips the run's other records, whose rows r's batch holds.
func (src *logSource) passRun(item *ingest.SourceItem, r *run) {
	item.Next = uint64(r.next)
	if r.next > src.r.Pos() {
		src.r.Skip(r.next)
		first, end := r.first, r.next
		item.Split = func() []ingest.SourceItem { return src.split(first, end) }
	}
}

// read returns the record merge left, or the next one in the log.
func (src *logSource) read() (logged, bool, error) {
	if p := src.pending; p != nil {
		src.pending = nil
		return *p, true, nil
	}
	pos, payload, ok, err := src.r.Next()
	return logged{pos: pos, next: src.r.Pos(), payload: payload}, ok, err
}

// merge decodes the small OTLP requests synced after a small item into
// its batch (ItemRows); the first record it does not take is left for
// the next read. start is the item's first record.
func (src *logSource) merge(item *ingest.SourceItem, start ingestlog.Position, merged bool) {
	if item.Batch == nil || item.Tr == nil || item.Batch.Rows >= ItemRows {
		return
	}
	for item.Batch.Rows < ItemRows {
		pos, payload, ok, err := src.r.Next()
		if !ok || err != nil {
			break // the reader stays at a corrupt record: the next read reports it
		}
		rec := logged{pos: pos, next: src.r.Pos(), payload: payload}
		if !src.mergeOne(item, rec, merged) {
			src.pending = &rec
			break
		}
		merged = true
	}
	if merged {
		end := ingestlog.Position(item.Next)
		item.Split = func() []ingest.SourceItem { return src.split(start, end) }
	}
}

// mergeOne adds rec to item's batch if it is an OTLP request of the
// item's table and transform, of less than an item's rows. The first
// (merged false) moves the item's rows into a batch of src.items first:
// grown to an item's size once, it stays so, and the door's batches stay
// a request's size.
func (src *logSource) mergeOne(item *ingest.SourceItem, rec logged, merged bool) bool {
	r, err := decodeRecord(rec.payload)
	if err != nil || r.body.Kind != KindOTLP || r.table != item.Table || r.body.Fixed != item.Tr.Name() {
		return false
	}
	rows, inRun, handed := src.h.peek(rec.pos)
	if handed && (inRun || rows >= ItemRows) {
		return false // a run starts there: the next item
	}
	if !merged {
		own := src.items.Get(item.Tr)
		if err := own.Append(item.Batch); err != nil {
			src.items.Put(item.Tr, own)
			return false
		}
		if item.Release != nil {
			item.Release()
		}
		tr := item.Tr
		item.Batch, item.Release = own, func() { src.items.Put(tr, own) }
	}
	if handed {
		it, _ := src.h.take(rec.pos, rec.next)
		err := item.Batch.Append(it.b) // it checks the batches before it changes one
		src.d.Batches.Put(it.tr, it.b)
		if err != nil {
			src.d.Limited.Log(slog.LevelError, "merge", "cannot merge a request's batch into a loader item; it is decoded again alone", slog.String("error", err.Error()))
			return false
		}
		item.Next = uint64(rec.next)
		item.Bytes += int64(len(r.body.Data))
		return true
	}
	src.d.Metrics.DecodedAgain.Inc()
	b := item.Batch
	at := b.Rows
	b.Mark()
	_, err = source.AppendOTLP(item.Tr, r.body.Format, r.body.Data, b)
	var rej *transforms.RejectedError
	if err != nil && !errors.As(err, &rej) {
		b.Rollback(at)
		return false // loaded alone, it is dropped with its error
	}
	item.Next = uint64(rec.next)
	item.Bytes += int64(len(r.body.Data))
	return true
}

// split reads the records [start, end) of a merged item again, each an
// item of its own.
func (src *logSource) split(start, end ingestlog.Position) []ingest.SourceItem {
	r := src.l.NewReader(start)
	defer r.Close()
	var out []ingest.SourceItem
	for r.Pos() < end {
		pos, payload, ok, err := r.Next()
		if !ok || err != nil {
			break
		}
		out = append(out, src.replay(pos, r.Pos(), payload))
	}
	return out
}

// replay decodes a logged request whose batch was not handed over (after
// a restart, or a full handoff).
func (src *logSource) replay(pos, next ingestlog.Position, payload []byte) ingest.SourceItem {
	src.d.Metrics.DecodedAgain.Inc()
	item := ingest.SourceItem{Next: uint64(next), Arrived: time.Now()}
	rec, err := decodeRecord(payload)
	if err != nil {
		src.dropped(pos, "", err)
		return item
	}
	item.Arrived, item.Table = rec.arrived, rec.table
	var fixed transforms.Transform
	if rec.body.Fixed != "" {
		if fixed, err = transforms.Lookup(rec.body.Fixed); err != nil {
			src.dropped(pos, rec.table, err)
			return item
		}
	}
	req := source.Request{NDJSON: rec.body.Kind != KindOTLP, Format: rec.body.Format, Tr: fixed, Data: rec.body.Data}
	if !req.NDJSON && fixed == nil {
		src.dropped(pos, rec.table, errors.New("a logged OTLP request without its transform"))
		return item
	}
	// No limits: the request was acknowledged under the door's, and a
	// limit lowered since must not drop it.
	d, err := source.Decode(src.d.Batches, req, shred.Limits{})
	if err != nil {
		src.dropped(pos, rec.table, err)
		return item
	}
	item.Tr, item.Batch, item.Bytes, item.Release = d.Tr, d.Batch, int64(len(rec.body.Data)), d.Release
	return item
}

// skipCorrupt moves past a corrupt part of a sealed segment, to the next
// segment: those acknowledged records are lost, said loudly.
func (src *logSource) skipCorrupt(ce *ingestlog.CorruptError) (ingest.SourceItem, bool, error) {
	next, lost, err := src.r.SkipSegment()
	if err != nil {
		return ingest.SourceItem{}, false, fmt.Errorf("%w (and cannot skip it: %v)", ce, err)
	}
	src.d.Metrics.CorruptBytes.Add(float64(lost))
	src.d.Log.Error("the ingest log lost acknowledged records: a corrupt segment is skipped", slog.String("error", ce.Error()), slog.Int64("bytes_skipped", lost))
	return ingest.SourceItem{Next: uint64(next), Arrived: time.Now()}, true, nil
}

func (src *logSource) dropped(pos ingestlog.Position, table string, err error) {
	src.d.Metrics.Dropped.Inc()
	src.d.Limited.Log(slog.LevelError, "ingest log replay", "a logged request cannot be decoded again and is skipped",
		slog.Uint64("position", uint64(pos)), slog.String("table", table), slog.String("error", source.Truncate(err.Error(), 500)))
}

func (src *logSource) Stored(pos uint64) {
	before := src.l.Size()
	if err := src.l.Release(ingestlog.Position(pos)); err != nil {
		src.d.Limited.Log(slog.LevelWarn, "ingest log release", "cannot remove a loaded segment", slog.String("error", err.Error()))
	}
	if src.d.OnRelease != nil {
		src.d.OnRelease(before, src.l.Size())
	}
}
