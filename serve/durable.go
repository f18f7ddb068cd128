package serve

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/ingestlog"
	"github.com/shredduck/shredduck/shred"
	"github.com/shredduck/shredduck/source"
	"github.com/shredduck/shredduck/transforms"
)

// With --ack log a request is acknowledged once it is in the ingest log
// (ingestlog: fsynced, group-committed), and a Loader moves the log into
// DuckDB in large transactions that store the log position with the rows
// (ingest.Loader). The request's decoded batch is handed to the loader in
// memory; after a restart, or when the handoff is full, the loader decodes
// the logged body again.

// Ack modes.
const (
	AckCommit = "commit" // 2xx once the rows are committed in DuckDB
	AckLog    = "log"    // 2xx once the request is in the ingest log
)

// logSourceName is the ingest log's key in shredduck_sources.
const logSourceName = "ingest_log"

// A logged request: a header, then the body as it was decoded (after
// decompression).
//
//	version   byte     1
//	kind      byte     1 OTLP, 2 NDJSON
//	format    byte     OTLP: the format constant (JSON 0, protobuf 1)
//	arrived   int64    little-endian Unix nanoseconds of the append
//	table     uvarint length, bytes
//	transform uvarint length, bytes ("" for NDJSON of any transform)
//	body      the rest
const (
	recordVersion = 1
	kindOTLP      = 1
	kindNDJSON    = 2
)

// logBody is what a request's rows were decoded from, for the log.
type logBody struct {
	kind   byte
	format format
	fixed  string // the transform the body was decoded with; "" for NDJSON auto
	data   []byte
}

func encodeRecord(dst []byte, table string, body logBody, arrived time.Time) []byte {
	dst = append(dst, recordVersion, body.kind, byte(body.format))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(arrived.UnixNano()))
	dst = binary.AppendUvarint(dst, uint64(len(table)))
	dst = append(dst, table...)
	dst = binary.AppendUvarint(dst, uint64(len(body.fixed)))
	dst = append(dst, body.fixed...)
	return append(dst, body.data...)
}

type logRecord struct {
	table   string
	body    logBody
	arrived time.Time
}

func decodeRecord(b []byte) (logRecord, error) {
	var r logRecord
	if len(b) < 11 {
		return r, fmt.Errorf("a logged request of %d bytes is too short", len(b))
	}
	if b[0] != recordVersion {
		return r, fmt.Errorf("a logged request of version %d; this shredduck reads version %d", b[0], recordVersion)
	}
	r.body.kind, r.body.format = b[1], format(b[2])
	r.arrived = time.Unix(0, int64(binary.LittleEndian.Uint64(b[3:11])))
	b = b[11:]
	str := func() (string, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return "", false
		}
		s := string(b[k : k+int(n)])
		b = b[k+int(n):]
		return s, true
	}
	var ok1, ok2 bool
	r.table, ok1 = str()
	r.body.fixed, ok2 = str()
	if !ok1 || !ok2 || (r.body.kind != kindOTLP && r.body.kind != kindNDJSON) {
		return r, errors.New("a logged request with a bad header")
	}
	r.body.data = b
	return r, nil
}

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
// most logItemRows rows: the loader, on one thread the bottleneck, takes
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
		r.b.Rows+it.b.Rows <= logItemRows && r.b.Append(it.b) == nil { // Append checks before it changes r.b
		r.next, r.rest, r.bytes = next, append(r.rest, pos), r.bytes+it.bytes
		h.items[pos] = handed{table: it.table, tr: it.tr, bytes: it.bytes, run: r}
		h.door.Put(it.tr, it.b)
		return true
	}
	h.open = nil
	if h.runs != nil && it.b.Rows < logItemRows {
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

// logSource is the ingest log as an ingest.Source.
type logSource struct {
	s       *Server
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

// Requests are loaded several to an item, up to logItemRows rows: an
// item costs the loader's DuckDB append about 0.16 ms beyond its rows
// (one-span requests were loaded at 4,400 spans/s; 80-span ones cost the
// loader twice the CPU per span of 2,000-row items, BenchmarkLoader). The
// batches the door handed over are appended to the item's (shred's
// Batch.Append, a copy); a record without one is decoded into it.
const logItemRows = 2048

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

func (src *logSource) Name() string { return logSourceName }

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
	if hook := src.s.beforeLoad.Load(); hook != nil {
		(*hook)()
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
		pool := src.s.batches
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
// its batch (logItemRows); the first record it does not take is left for
// the next read. start is the item's first record.
func (src *logSource) merge(item *ingest.SourceItem, start ingestlog.Position, merged bool) {
	if item.Batch == nil || item.Tr == nil || item.Batch.Rows >= logItemRows {
		return
	}
	for item.Batch.Rows < logItemRows {
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
	if err != nil || r.body.kind != kindOTLP || r.table != item.Table || r.body.fixed != item.Tr.Name() {
		return false
	}
	rows, inRun, handed := src.h.peek(rec.pos)
	if handed && (inRun || rows >= logItemRows) {
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
		src.s.batches.Put(it.tr, it.b)
		if err != nil {
			src.s.limited.Log(slog.LevelError, "merge", "cannot merge a request's batch into a loader item; it is decoded again alone", slog.String("error", err.Error()))
			return false
		}
		item.Next = uint64(rec.next)
		item.Bytes += int64(len(r.body.data))
		return true
	}
	src.s.metrics.logDecodedAgain.Inc()
	b := item.Batch
	at := b.Rows
	b.Mark()
	_, err = source.AppendOTLP(item.Tr, r.body.format, r.body.data, b)
	var rej *transforms.RejectedError
	if err != nil && !errors.As(err, &rej) {
		b.Rollback(at)
		return false // loaded alone, it is dropped with its error
	}
	item.Next = uint64(rec.next)
	item.Bytes += int64(len(r.body.data))
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
	src.s.metrics.logDecodedAgain.Inc()
	item := ingest.SourceItem{Next: uint64(next), Arrived: time.Now()}
	rec, err := decodeRecord(payload)
	if err != nil {
		src.dropped(pos, "", err)
		return item
	}
	item.Arrived, item.Table = rec.arrived, rec.table
	var fixed transforms.Transform
	if rec.body.fixed != "" {
		if fixed, err = transforms.Lookup(rec.body.fixed); err != nil {
			src.dropped(pos, rec.table, err)
			return item
		}
	}
	req := source.Request{NDJSON: rec.body.kind != kindOTLP, Format: rec.body.format, Tr: fixed, Data: rec.body.data}
	if !req.NDJSON && fixed == nil {
		src.dropped(pos, rec.table, errors.New("a logged OTLP request without its transform"))
		return item
	}
	// No limits: the request was acknowledged under the door's, and a
	// limit lowered since must not drop it.
	d, err := source.Decode(src.s.batches, req, shred.Limits{})
	if err != nil {
		src.dropped(pos, rec.table, err)
		return item
	}
	item.Tr, item.Batch, item.Bytes, item.Release = d.Tr, d.Batch, int64(len(rec.body.data)), d.Release
	return item
}

// skipCorrupt moves past a corrupt part of a sealed segment, to the next
// segment: those acknowledged records are lost, said loudly.
func (src *logSource) skipCorrupt(ce *ingestlog.CorruptError) (ingest.SourceItem, bool, error) {
	next, lost, err := src.r.SkipSegment()
	if err != nil {
		return ingest.SourceItem{}, false, fmt.Errorf("%w (and cannot skip it: %v)", ce, err)
	}
	src.s.metrics.logCorruptBytes.Add(float64(lost))
	src.s.log.Error("the ingest log lost acknowledged records: a corrupt segment is skipped", slog.String("error", ce.Error()), slog.Int64("bytes_skipped", lost))
	return ingest.SourceItem{Next: uint64(next), Arrived: time.Now()}, true, nil
}

func (src *logSource) dropped(pos ingestlog.Position, table string, err error) {
	src.s.metrics.logRecordsDropped.Inc()
	src.s.limited.Log(slog.LevelError, "ingest log replay", "a logged request cannot be decoded again and is skipped",
		slog.Uint64("position", uint64(pos)), slog.String("table", table), slog.String("error", source.Truncate(err.Error(), 500)))
}

func (src *logSource) Stored(pos uint64) {
	before := src.l.Size()
	if err := src.l.Release(ingestlog.Position(pos)); err != nil {
		src.s.limited.Log(slog.LevelWarn, "ingest log release", "cannot remove a loaded segment", slog.String("error", err.Error()))
	}
	after := src.l.Size()
	if after < before && src.s.durable != nil {
		src.s.durable.writeFailing.Store(nil) // room again, most likely: the next append tells
	}
	src.s.metrics.logBytes.Set(float64(after))
}

// durable is the server's ingest log and its loader (--ack log).
type durable struct {
	log     *ingestlog.Log
	src     *logSource
	loader  *ingest.Loader
	cancel  context.CancelFunc
	done    chan error
	loaded  atomic.Uint64          // the position stored with the last load
	failing atomic.Pointer[string] // the last load's error, nil once one succeeds
	// writeFailing is the last append's error (a full disk), nil once one
	// succeeds or the loader frees segments.
	writeFailing atomic.Pointer[string]
	backlog      *backlog // when the records not yet loaded arrived (pace.go)
	loadedCh     atomic.Pointer[chan struct{}]
}

// openLog opens the ingest log at the position the database has loaded,
// and starts the loader.
func (s *Server) openLog(checkpointBytes int64) error {
	ctx := context.Background()
	if err := s.bindLog(ctx); err != nil {
		return err
	}
	pos, _, err := s.db.StoredPosition(ctx, logSourceName)
	if err != nil {
		return err
	}
	l, rec, err := ingestlog.Open(ingestlog.Options{Dir: s.cfg.LogDir, MaxBytes: s.cfg.LogMaxBytes, SegmentBytes: s.cfg.LogSegmentBytes, Start: ingestlog.Position(pos)})
	if err != nil {
		return err
	}
	if first := l.First(); ingestlog.Position(pos) < first {
		l.Close()
		return fmt.Errorf("the database has loaded the ingest log in %s up to position %d, but the log starts at %d: acknowledged requests between are missing (move the directory away to start a new log)", s.cfg.LogDir, pos, first)
	}
	if rec.Cut > 0 {
		s.log.Warn("ingest log: cut a torn tail (a crash mid-append; those requests were not acknowledged)",
			slog.Int64("bytes", rec.Cut), slog.Uint64("position", uint64(rec.CutAt)))
	}
	if backlog := l.Durable() - ingestlog.Position(pos); backlog > 0 {
		s.log.Info("ingest log: loading what the last run acknowledged", slog.Uint64("bytes", uint64(backlog)))
	}
	src := &logSource{s: s, l: l, items: source.NewBatchPool(source.ItemsKeptBytes)}
	src.h = &handoff{items: map[ingestlog.Position]handed{}, max: s.cfg.QueueBytes, runs: src.items, door: s.batches}
	loader := s.db.NewLoader(src, ingest.LoaderOptions{
		MaxColumns:      s.cfg.MaxColumns,
		MaxLag:          s.cfg.MaxVisibilityLag,
		CheckpointBytes: checkpointBytes,
		RetryAfter:      s.cfg.RetryAfter,
		OnLoad:          s.onLoad,
		OnCheckpoint:    s.onCheckpoint,
		OnDrop: func(it ingest.SourceItem, err error) {
			s.metrics.logRecordsDropped.Inc()
			s.log.Error("an acknowledged request cannot be stored and is skipped", slog.String("table", it.Table), slog.String("error", source.Truncate(err.Error(), 500)))
		},
	})
	lctx, cancel := context.WithCancel(ctx)
	d := &durable{log: l, src: src, loader: loader, cancel: cancel, done: make(chan error, 1), backlog: newBacklog(s.cfg.MaxVisibilityLag)}
	d.loaded.Store(pos)
	ch := make(chan struct{})
	d.loadedCh.Store(&ch)
	s.durable = d
	age := d.backlogAge
	s.metrics.backlogAge.Store(&age)
	go func() { d.done <- loader.Run(lctx) }()
	return nil
}

// logOwnerFile, in the log's directory, holds the id of the database
// the log belongs to (shredduck_meta's ingest_log_id): a database file
// replaced or removed beside its log must not take the old one's records,
// nor a log another database's.
const (
	logOwnerFile = "DATABASE_ID"
	logIDKey     = "ingest_log_id"
)

// bindLog checks that the log directory belongs to this database, or
// makes it so when one of them has no id yet.
func (s *Server) bindLog(ctx context.Context) error {
	dir := s.cfg.LogDir
	dbID, hasDB, err := s.db.Meta(ctx, logIDKey)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(filepath.Join(dir, logOwnerFile))
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
		return fmt.Errorf("the ingest log in %s has no %s file: it is not one this database wrote; move the directory away, or give --log-dir", dir, logOwnerFile)
	}
	if !hasDB {
		var r [16]byte
		if _, err := rand.Read(r[:]); err != nil {
			return err
		}
		dbID = hex.EncodeToString(r[:])
		if err := s.db.SetMeta(ctx, logIDKey, dbID); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cannot create the ingest log directory: %w", err)
	}
	return writeSynced(filepath.Join(dir, logOwnerFile), []byte(dbID+"\n"))
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
func (s *Server) appendLog(table string, tr transforms.Transform, b *shred.Batch, inputBytes int64, body logBody) *apiError {
	d := s.durable
	bufp := recordBuffers.Get().(*[]byte)
	rec := encodeRecord((*bufp)[:0], table, body, time.Now())
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
		handedOver = d.src.h.put(pos, next, handed{table: table, tr: tr, b: b, bytes: inputBytes})
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
	d.backlog.appended(pos, time.Now())
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
	d := s.durable
	d.cancel()
	err := <-d.done
	d.src.h.drain()
	if d.src.r != nil {
		d.src.r.Close()
	}
	return errors.Join(err, d.log.Close())
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
