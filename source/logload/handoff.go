package logload

import (
	"sync"

	"github.com/shredduck/shredduck/ingestlog"
	"github.com/shredduck/shredduck/shred"
	"github.com/shredduck/shredduck/source"
	"github.com/shredduck/shredduck/transforms"
)

// handoff holds the decoded batches of logged requests until the loader
// reads their records, bounded in bytes: beyond the bound the loader
// decodes the logged body instead.
type handoff struct {
	mu    sync.Mutex
	next  ingestlog.Position // the loader's read position: later puts are late
	items map[ingestlog.Position]handed
	bytes int64
	max   int64
	open  *run              // the run a put of the next record may join
	runs  *source.BatchPool // the batches of runs (the loader's items')
	door  *source.BatchPool // where the door's merged batches go back
}

type handed struct {
	table string
	tr    transforms.Transform
	b     *shred.Batch
	bytes int64
	run   *run // instead of b: the batch was merged into run's
}

// A run is consecutive logged requests of one table and transform whose
// batches the log's writer merged, as it synced them, into one batch of at
// most ItemRows rows: the loader, on one thread the bottleneck, takes
// the run whole at its first record and passes over the others, instead
// of copying each batch into its item itself (mergeOne).
type run struct {
	first, next ingestlog.Position   // the run's records: [first, next)
	rest        []ingestlog.Position // the records after first
	table       string
	tr          transforms.Transform
	b           *shred.Batch
	bytes       int64
	taken       bool // by the loader, or given up: its records are read from the log
}

// put hands h a batch for the record [pos, next); false (the caller keeps
// b) when the loader has read past pos already or h is full. On true h
// owns b: it may merge it into a run and give it back to the door's pool.
func (h *handoff) put(pos, next ingestlog.Position, it handed) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if pos < h.next || h.bytes+it.bytes > h.max {
		return false
	}
	h.bytes += it.bytes
	if r := h.open; r != nil && !r.taken && r.next == pos && r.table == it.table && r.tr == it.tr &&
		r.b.Rows+it.b.Rows <= ItemRows && r.b.Append(it.b) == nil { // Append checks before it changes r.b
		r.next, r.rest, r.bytes = next, append(r.rest, pos), r.bytes+it.bytes
		h.items[pos] = handed{table: it.table, tr: it.tr, bytes: it.bytes, run: r}
		h.door.Put(it.tr, it.b)
		return true
	}
	h.open = nil
	if h.runs != nil && it.b.Rows < ItemRows {
		own := h.runs.Get(it.tr)
		if own.Append(it.b) == nil {
			r := &run{first: pos, next: next, table: it.table, tr: it.tr, b: own, bytes: it.bytes}
			h.open = r
			h.items[pos] = handed{table: it.table, tr: it.tr, bytes: it.bytes, run: r}
			h.door.Put(it.tr, it.b)
			return true
		}
		h.runs.Put(it.tr, own)
	}
	h.items[pos] = it
	return true
}

// take returns the batch for pos, if handed (a run's, whole, at its first
// record), and moves the read position past it. The batch of a run is the
// caller's from then on, to give back to h.runs.
func (h *handoff) take(pos, next ingestlog.Position) (handed, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.next = next
	it, ok := h.items[pos]
	if !ok {
		return handed{}, false
	}
	delete(h.items, pos)
	h.bytes -= it.bytes
	r := it.run
	if r == nil {
		return it, true
	}
	if h.open == r {
		h.open = nil
	}
	if r.taken {
		return handed{}, false // the run went to an item before (a load that failed, read again) or was given up
	}
	r.taken = true
	if r.first != pos { // the loader is inside the run: its batch holds records before pos
		h.runs.Put(r.tr, r.b)
		return handed{}, false
	}
	for _, p := range r.rest { // the loader skips them (passRun)
		delete(h.items, p)
	}
	h.bytes -= r.bytes - it.bytes
	h.next = r.next
	return handed{table: r.table, tr: r.tr, b: r.b, bytes: r.bytes, run: r}, true
}

// drain gives back every batch still held.
func (h *handoff) drain() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for p, it := range h.items {
		switch {
		case it.run == nil:
			h.door.Put(it.tr, it.b)
		case !it.run.taken:
			it.run.taken = true
			h.runs.Put(it.run.tr, it.run.b)
		}
		delete(h.items, p)
	}
	h.bytes, h.open = 0, nil
}

// peek returns the rows of the batch handed for pos, if there is one, and
// whether that batch is a run's.
func (h *handoff) peek(pos ingestlog.Position) (rows int, inRun, handed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	it, ok := h.items[pos]
	switch {
	case !ok:
		return 0, false, false
	case it.run != nil:
		return it.run.b.Rows, true, true
	}
	return it.b.Rows, false, true
}
