package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/shredduck/shredduck/shred"
	"github.com/shredduck/shredduck/transforms"
	"github.com/shredduck/shredduck/transforms/jsonsplit"
)

// Options control a load.
type Options struct {
	Table      string // target table; "" uses each transform's default
	Transform  string // auto (default) or a transform name
	MaxDepth   int    // nesting limit of the none transform (default 16)
	BatchRows  int    // rows per batch handed to DuckDB (default 122880)
	MaxErrors  int    // bad records skipped before the load fails (default 0)
	MaxColumns int    // dynamic columns per table (default 2000)
	Workers    int    // decode goroutines (default GOMAXPROCS)
	// MemoryLimit, when set, is DuckDB's memory_limit for the load (e.g.
	// "300MB"); DuckDB spills to disk beyond it.
	MemoryLimit string
	// Read, when set, receives the count of input bytes read (compressed
	// size), for progress reporting.
	Read *atomic.Int64
	// chunks writes through the C appender as the Committer does
	// (chunks.go); tests compare the two paths.
	chunks bool
}

// DefaultBatchRows is the default batch size: one DuckDB row group.
const DefaultBatchRows = 122880

// chunkBytes is the size of the NDJSON chunks decode workers take.
const chunkBytes = 4 << 20

// maxErrorSamples bounds the error messages a result keeps.
const maxErrorSamples = 20

// Result is what a load did.
type Result struct {
	Tables       []*TableStats `json:"tables"`
	Records      int64         `json:"records"`
	Errors       int           `json:"errors"`
	ErrorSamples []string      `json:"error_samples,omitempty"`
	Bytes        int64         `json:"bytes"`
	Seconds      float64       `json:"seconds"`
}

// RecordError is a record (line or request) that could not be loaded.
type RecordError struct {
	Input   string
	Line    int // 1-based; 0 for a whole binary request
	Snippet string
	Err     error
}

func (e *RecordError) Error() string {
	loc := e.Input
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d", e.Input, e.Line)
	}
	if e.Snippet != "" {
		return fmt.Sprintf("%s: %v (input starts %q)", loc, e.Err, e.Snippet)
	}
	return fmt.Sprintf("%s: %v", loc, e.Err)
}

func (e *RecordError) Unwrap() error { return e.Err }

// ErrTooManyErrors wraps the first record error when a load fails because
// of bad records.
var ErrTooManyErrors = errors.New("too many bad records")

type jobKind uint8

const (
	jobLines jobKind = iota // NDJSON: one request per line
	jobDocs                 // one or more concatenated JSON requests
	jobProto                // one binary protobuf request
)

type job struct {
	seq   int
	input string
	line  int // line number of data[0]
	kind  jobKind
	data  []byte
}

type tableBatch struct {
	tr    transforms.Transform
	b     *shred.Batch
	bytes int64
}

// batchPool recycles batches (and their column buffers) between the decode
// workers and DuckDB, one pool per transform.
type batchPool map[transforms.Transform]*sync.Pool

// maxPooledBatch caps the memory of a batch kept for reuse.
const maxPooledBatch = 256 << 20

func newBatchPool(more ...transforms.Transform) batchPool {
	p := make(batchPool)
	for _, tr := range append(transforms.All(), more...) {
		p[tr] = &sync.Pool{New: func() any { return shred.NewBatch(tr.Core()) }}
	}
	return p
}

func (p batchPool) get(tr transforms.Transform) *shred.Batch {
	return p[tr].Get().(*shred.Batch)
}

// put returns a batch once nothing refers to its memory.
func (p batchPool) put(tr transforms.Transform, b *shred.Batch) {
	if b.Bytes() > maxPooledBatch {
		return
	}
	b.Reset()
	p[tr].Put(b)
}

type result struct {
	seq     int
	batches []tableBatch
	errs    []*RecordError
	records int64
}

// Load reads the inputs, shreds them and writes them in one transaction:
// on any failure nothing of the load is committed.
func (d *DB) Load(ctx context.Context, inputs []Input, opt Options) (*Result, error) {
	start := time.Now()
	if opt.BatchRows <= 0 {
		opt.BatchRows = DefaultBatchRows
	}
	if opt.Workers <= 0 {
		opt.Workers = runtime.GOMAXPROCS(0)
	}
	if opt.Read == nil {
		opt.Read = new(atomic.Int64)
	}
	// JSON objects that are not OTLP requests go to none with --transform
	// auto, line by line.
	none := transforms.NewNDJSON(opt.MaxDepth)
	var fixed transforms.Transform
	switch opt.Transform {
	case "", transforms.Auto:
	case transforms.None:
		fixed = none
	default:
		var err error
		if fixed, err = transforms.Lookup(opt.Transform); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	pool := newBatchPool(none)
	jobs := make(chan job, opt.Workers)
	results := make(chan result, opt.Workers)
	var readErr error
	go func() {
		defer close(jobs)
		readErr = readInputs(ctx, inputs, opt.Read, jobs)
	}()
	var wg sync.WaitGroup
	for i := 0; i < opt.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := worker{fixed: fixed, none: none, batchRows: opt.BatchRows, pool: pool}
			for j := range jobs {
				select {
				case results <- w.do(j):
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(results) }()

	if opt.MemoryLimit != "" {
		if _, err := d.SQL.ExecContext(ctx, "SET memory_limit = "+shred.QuoteString(opt.MemoryLimit)); err != nil {
			cancel()
			return nil, fmt.Errorf("--memory-limit %q: %w", opt.MemoryLimit, err)
		}
	}
	tx, err := d.Begin(ctx, opt.MaxColumns)
	if err != nil {
		return nil, err
	}
	tx.tune.enabled = true
	tx.chunks = opt.chunks
	res := &Result{}
	wr := &writer{tx: tx, opt: opt, res: res, pool: pool}
	err = func() error {
		pending := make(map[int]result)
		next := 0
		for r := range results {
			pending[r.seq] = r
			for {
				r, ok := pending[next]
				if !ok {
					break
				}
				delete(pending, next)
				next++
				if err := wr.add(r); err != nil {
					return err
				}
			}
		}
		if readErr != nil {
			return readErr
		}
		return ctx.Err()
	}()
	if err != nil {
		cancel()
		for range results { // let workers finish
		}
		tx.Rollback()
		return res, err
	}
	if err := tx.Commit(); err != nil {
		return res, err
	}
	res.Tables = tx.Stats()
	for _, t := range res.Tables {
		res.Bytes += t.Bytes
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// writer hands the workers' batches to the load in input order.
type writer struct {
	tx    *Tx
	opt   Options
	res   *Result
	pool  batchPool
	names map[[2]string]string // (table, transform) -> resolveTable's name
}

func (w *writer) add(r result) error {
	for _, e := range r.errs {
		w.res.Errors++
		if len(w.res.ErrorSamples) < maxErrorSamples {
			w.res.ErrorSamples = append(w.res.ErrorSamples, e.Error())
		}
		if w.res.Errors > w.opt.MaxErrors {
			w.drop(r.batches)
			if w.opt.MaxErrors == 0 {
				return e
			}
			return fmt.Errorf("%w (more than --max-errors %d); first: %v", ErrTooManyErrors, w.opt.MaxErrors, w.res.ErrorSamples[0])
		}
	}
	w.res.Records += r.records
	for i, tb := range r.batches {
		name := w.opt.Table
		if name == "" {
			name = tb.tr.Table()
		}
		name, err := w.resolve(name, tb.tr)
		if err != nil {
			w.drop(r.batches[i:])
			return err
		}
		done := func() { w.pool.put(tb.tr, tb.b) }
		if err := w.tx.Write(name, tb.tr, tb.b, tb.bytes, done); err != nil {
			w.drop(r.batches[i+1:])
			return err
		}
	}
	return nil
}

// resolve is Tx.resolveTable, once per table and transform of a load.
func (w *writer) resolve(name string, tr transforms.Transform) (string, error) {
	key := [2]string{name, tr.Name()}
	if n, ok := w.names[key]; ok {
		return n, nil
	}
	n, err := w.tx.resolveTable(name, tr)
	if err != nil {
		return "", err
	}
	if w.names == nil {
		w.names = make(map[[2]string]string)
	}
	w.names[key] = n
	return n, nil
}

func (w *writer) drop(tbs []tableBatch) {
	for _, tb := range tbs {
		w.pool.put(tb.tr, tb.b)
	}
}

// worker decodes jobs into batches; it is owned by one goroutine.
type worker struct {
	fixed     transforms.Transform
	none      transforms.Transform // for non-OTLP objects with auto
	batchRows int
	pool      batchPool
	cur       map[transforms.Transform]*tableBatch
	out       []tableBatch
}

func (w *worker) batch(tr transforms.Transform) *tableBatch {
	if w.cur == nil {
		w.cur = make(map[transforms.Transform]*tableBatch)
	}
	tb := w.cur[tr]
	if tb == nil {
		tb = &tableBatch{tr: tr, b: w.pool.get(tr)}
		w.cur[tr] = tb
	}
	return tb
}

// flush moves full (or, with all, every non-empty) batches to the output.
func (w *worker) flush(all bool) error {
	for tr, tb := range w.cur {
		if tb.b.Rows == 0 && !all {
			continue
		}
		if tb.b.Rows >= w.batchRows || all {
			if err := tb.b.Finish(); err != nil {
				return err
			}
			w.out = append(w.out, *tb)
			delete(w.cur, tr)
		}
	}
	return nil
}

func (w *worker) do(j job) result {
	r := result{seq: j.seq}
	fail := func(line int, data []byte, err error) {
		r.errs = append(r.errs, &RecordError{Input: j.input, Line: line, Snippet: snippet(data), Err: err})
	}
	switch j.kind {
	case jobProto:
		tr := w.fixed
		if tr == nil {
			var err error
			if tr, err = transforms.DetectProto(j.input, j.data); err != nil {
				fail(0, nil, notOTLP(j.data, err))
				break
			}
			if tr == nil { // empty request
				break
			}
		}
		tb := w.batch(tr)
		n, err := tr.AppendProto(tb.b, j.data)
		if err != nil {
			fail(0, nil, err)
			if !rejectedOnly(err) {
				break
			} // else the request's other records are loaded
		}
		tb.bytes += int64(len(j.data))
		r.records += int64(n)
	case jobLines:
		line := j.line
		data := j.data
		for len(data) > 0 {
			i := bytes.IndexByte(data, '\n')
			var l []byte
			if i < 0 {
				l, data = data, nil
			} else {
				l, data = data[:i], data[i+1:]
			}
			w.request(&r, j.input, line, l, fail)
			line++
		}
	case jobDocs:
		var sp jsonsplit.Splitter
		sp.Reset(j.data)
		for {
			doc, line, ok := sp.Next()
			if !ok {
				break
			}
			w.request(&r, j.input, j.line+line, doc, fail)
		}
		if err := sp.Err(); err != nil {
			fail(j.line+sp.Line(), sp.Rest(), err)
		}
	}
	if err := w.flush(true); err != nil {
		fail(0, nil, err)
	}
	r.batches, w.out = w.out, nil
	return r
}

// request decodes one JSON export request.
func (w *worker) request(r *result, input string, line int, data []byte, fail func(int, []byte, error)) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return
	}
	tr := w.fixed
	if tr == nil {
		var err error
		tr, err = transforms.DetectJSON(data)
		switch {
		case errors.Is(err, transforms.ErrNotOTLP):
			tr = w.none
		case err != nil:
			fail(line, data, err)
			return
		}
		if tr == nil {
			return // empty request
		}
	}
	tb := w.batch(tr)
	n, err := tr.AppendJSON(tb.b, data)
	if err != nil {
		fail(line, data, err)
		if !rejectedOnly(err) {
			return
		} // else the request's other records are loaded
	}
	tb.bytes += int64(len(data)) + 1
	r.records += int64(n)
	if tb.b.Rows >= w.batchRows {
		if err := w.flush(false); err != nil {
			fail(line, nil, err)
		}
	}
}

// rejectedOnly reports whether a decoder's error only left some records
// of the request out (transforms.RejectedError): the request's other rows
// are in the batch. Each such request counts as one bad record against
// MaxErrors.
func rejectedOnly(err error) bool {
	var rej *transforms.RejectedError
	return errors.As(err, &rej)
}

func snippet(b []byte) string {
	const n = 80
	s := string(b)
	if len(s) > n {
		s = s[:n] + "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// readInputs turns the inputs into jobs: NDJSON in chunks of whole lines,
// other JSON as one document job, protobuf as one request.
func readInputs(ctx context.Context, inputs []Input, read *atomic.Int64, jobs chan<- job) error {
	seq := 0
	send := func(j job) bool {
		j.seq = seq
		seq++
		select {
		case jobs <- j:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for _, in := range inputs {
		r, closeFn, err := openInput(in, read)
		if err != nil {
			return err
		}
		err = readInput(ctx, in, r, send)
		cerr := closeFn()
		if err != nil {
			return err
		}
		if cerr != nil {
			return cerr
		}
	}
	return nil
}

func readInput(ctx context.Context, in Input, r io.Reader, send func(job) bool) error {
	name := in.Name
	if name == "-" {
		name = "stdin"
	}
	buf := make([]byte, chunkBytes)
	n, eof, err := fill(r, buf)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	first := buf[:n]
	trimmed := bytes.TrimLeft(first, " \t\r\n")
	if len(trimmed) == 0 && eof {
		return nil // empty input
	}
	// JSON starts with '{' (an object) or, for a bad NDJSON line, is at
	// least a complete value on its first line.
	if isProtoName(in.Name) || (len(trimmed) > 0 && trimmed[0] != '{' && !jsonsplit.FirstLineComplete(first)) {
		data, err := readRest(first, r, eof)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		send(job{input: name, kind: jobProto, data: data})
		return nil
	}
	if !jsonsplit.FirstLineComplete(first) && !secondLineObject(first) {
		data, err := readRest(first, r, eof)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		send(job{input: name, kind: jobDocs, data: data, line: 1})
		return nil
	}
	// NDJSON: chunks end at a '\n'; a line longer than a chunk grows it.
	line := 1
	carry := first
	for {
		if eof {
			if len(carry) > 0 {
				send(job{input: name, kind: jobLines, data: carry, line: line})
			}
			return nil
		}
		cut := bytes.LastIndexByte(carry, '\n')
		if cut < 0 {
			more := make([]byte, len(carry), 2*len(carry)+chunkBytes)
			copy(more, carry)
			n, end, err := fill(r, more[len(carry):cap(more)])
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			carry, eof = more[:len(carry)+n], end
			continue
		}
		chunk := carry[:cut+1]
		rest := carry[cut+1:]
		next := make([]byte, len(rest)+chunkBytes)
		copy(next, rest)
		n, end, err := fill(r, next[len(rest):])
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		eof = end
		if !send(job{input: name, kind: jobLines, data: chunk, line: line}) {
			return ctx.Err()
		}
		line += bytes.Count(chunk, []byte{'\n'})
		carry = next[:len(rest)+n]
	}
}

// secondLineObject reports whether the second non-empty line of data is a
// complete JSON object: then data is NDJSON whose first line is bad (cut
// off, say), not pretty-printed JSON, whose second line never is one.
func secondLineObject(data []byte) bool {
	data = bytes.TrimLeft(data, " \t\r\n")
	i := bytes.IndexByte(data, '\n')
	if i < 0 {
		return false
	}
	rest := bytes.TrimLeft(data[i+1:], " \t\r\n")
	return len(rest) > 0 && rest[0] == '{' && jsonsplit.FirstLineComplete(rest)
}

// fill reads until buf is full or the input ends (eof). Unlike
// io.ReadFull it tells a clean end (io.EOF) from a cut-off compressed
// stream, whose reader returns io.ErrUnexpectedEOF: that is an error.
func fill(r io.Reader, buf []byte) (n int, eof bool, err error) {
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err == io.EOF {
			return n, true, nil
		}
		if err != nil {
			return n, false, err
		}
	}
	return n, false, nil
}

func readRest(first []byte, r io.Reader, eof bool) ([]byte, error) {
	if eof {
		return first, nil
	}
	var buf bytes.Buffer
	buf.Write(first)
	_, err := buf.ReadFrom(r)
	return buf.Bytes(), err
}

// notOTLP explains why input that is neither JSON nor OTLP protobuf was
// refused: text (CSV, logs, YAML) is called what it is instead of a
// protobuf request whose signal could not be told.
func notOTLP(data []byte, err error) error {
	head := data[:min(len(data), 256)]
	for !utf8.Valid(head) && len(head) > 0 && len(data) > 256 {
		head = head[:len(head)-1] // a rune cut at the end
	}
	if len(head) == 0 || !utf8.Valid(head) {
		return err
	}
	for _, r := range string(head) {
		if r < 0x20 && r != '\t' && r != '\n' && r != '\r' {
			return err // binary: a protobuf request of no known signal
		}
	}
	line, _, _ := strings.Cut(string(head), "\n")
	return fmt.Errorf("line 1 is not JSON and the input is not OTLP protobuf (it starts %q): shredduck ingest takes NDJSON or JSON documents and binary OTLP export requests", truncateRunes(line, 60))
}

func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}
