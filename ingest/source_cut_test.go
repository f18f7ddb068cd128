package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/shred"
	"github.com/shredduck/shredduck/transforms"
)

// Tests of a Loader's transactions that end inside an item (cutAtRowGroup)
// against the shapes that make it hard: items of several row groups, items
// of several tables in one transaction, items DuckDB cannot take, retries
// item by item, drains, failed transactions and restarts whose source
// groups its records into items otherwise. Every case checks that each row
// of each good record is stored once, and that the Loader released every
// item it was given exactly once.

// cutRec is one record of a cutSource.
type cutRec struct {
	table string // otel_traces, otel_logs or otel_metrics
	rows  int
	bad   bool   // its batch cannot be finished: ErrRejected
	attrs string // extra attributes of every row, as OTLP/JSON KeyValues
}

// cutSource is a Source over cutRecs: record i is position i. An item
// holds the records group(i) says from i on (1 if nil), merged into one
// batch with a Split that gives them one by one. Each row has the
// attributes rec (its record) and j (its index in the record).
type cutSource struct {
	t     *testing.T
	recs  []cutRec
	group func(pos int) int

	mu       sync.Mutex
	pos      int
	n        int // records available (all when 0)
	err      error
	failNext int // Next calls before err is returned once (0: never)
	calls    int
	seeks    []uint64
	stored   uint64
	releases []int // per item handed out (Split's parts too): Release calls
	batches  map[int]*shred.Batch
}

func (s *cutSource) Name() string { return "cut" }

func (s *cutSource) Seek(pos uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pos = int(pos)
	s.seeks = append(s.seeks, pos)
	return nil
}

func (s *cutSource) Stored(pos uint64) {
	s.mu.Lock()
	s.stored = pos
	s.mu.Unlock()
}

func (s *cutSource) trOf(table string) transforms.Transform {
	for _, tr := range transforms.All() {
		if tr.Table() == table {
			return tr
		}
	}
	s.t.Fatalf("no transform of %s", table)
	return nil
}

// batch returns record i decoded (once; items append a copy).
func (s *cutSource) batch(i int) *shred.Batch {
	if b := s.batches[i]; b != nil {
		return b
	}
	r := s.recs[i]
	tr := s.trOf(r.table)
	var sb strings.Builder
	attrs := func(j int) string {
		a := fmt.Sprintf(`[{"key":"rec","value":{"intValue":%d}},{"key":"j","value":{"intValue":%d}}`, i, j)
		if r.attrs != "" {
			a += "," + r.attrs
		}
		return a + "]"
	}
	switch r.table {
	case "otel_traces":
		sb.WriteString(`{"resourceSpans":[{"scopeSpans":[{"spans":[`)
		for j := range r.rows {
			if j > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, `{"name":"s","traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","startTimeUnixNano":"1","endTimeUnixNano":"2","attributes":%s}`, attrs(j))
		}
	case "otel_logs":
		sb.WriteString(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[`)
		for j := range r.rows {
			if j > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, `{"timeUnixNano":"1","body":{"stringValue":"b"},"attributes":%s}`, attrs(j))
		}
	default:
		sb.WriteString(`{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"m","gauge":{"dataPoints":[`)
		for j := range r.rows {
			if j > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, `{"timeUnixNano":"1","asInt":"1","attributes":%s}`, attrs(j))
		}
		sb.WriteString(`]}}`)
	}
	sb.WriteString(`]}]}]}`)
	b := shred.NewBatch(tr.Core())
	if _, err := tr.AppendJSON(b, []byte(sb.String())); err != nil {
		s.t.Fatal(err)
	}
	if s.batches == nil {
		s.batches = map[int]*shred.Batch{}
	}
	s.batches[i] = b
	return b
}

// item makes the item of records [from, to), counting its releases.
func (s *cutSource) item(from, to int) ingest.SourceItem {
	r := s.recs[from]
	tr := s.trOf(r.table)
	b := shred.NewBatch(tr.Core())
	bad := false
	for i := from; i < to; i++ {
		if err := b.Append(s.batch(i)); err != nil {
			s.t.Fatal(err)
		}
		bad = bad || s.recs[i].bad
	}
	if bad {
		b.Core[0].AppendNull() // a core column longer than the batch: Finish refuses it
	}
	id := len(s.releases)
	s.releases = append(s.releases, 0)
	it := ingest.SourceItem{Table: r.table, Tr: tr, Batch: b, Next: uint64(to), Arrived: time.Now(),
		Release: func() { s.mu.Lock(); s.releases[id]++; s.mu.Unlock() }}
	if to-from > 1 {
		it.Split = func() []ingest.SourceItem {
			s.mu.Lock()
			defer s.mu.Unlock()
			var parts []ingest.SourceItem
			for i := from; i < to; i++ {
				parts = append(parts, s.item(i, i+1))
			}
			return parts
		}
	}
	return it
}

func (s *cutSource) Next(ctx context.Context, wait time.Duration) (ingest.SourceItem, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.failNext > 0 {
		if s.failNext--; s.failNext == 0 {
			return ingest.SourceItem{}, false, errors.New("the source fails once")
		}
	}
	if s.err != nil {
		return ingest.SourceItem{}, false, s.err
	}
	n := s.n
	if n == 0 {
		n = len(s.recs)
	}
	if s.pos >= n {
		s.mu.Unlock()
		time.Sleep(min(wait, 5*time.Millisecond))
		s.mu.Lock()
		return ingest.SourceItem{}, false, nil
	}
	g := 1
	if s.group != nil {
		g = max(1, s.group(s.pos))
	}
	end := s.pos + g
	for i := s.pos + 1; i < end; i++ {
		if i >= n || s.recs[i].table != s.recs[s.pos].table {
			end = i
			break
		}
	}
	it := s.item(s.pos, end)
	s.pos = end
	return it, true, nil
}

// checkReleased checks that every item the source handed out was
// released once.
func (s *cutSource) checkReleased(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, n := range s.releases {
		if n != 1 {
			t.Errorf("item %d of %d released %d times", id, len(s.releases), n)
		}
	}
}

// checkRows checks that each row of each good record is stored once and
// that the rows of the bad ones are not.
func (s *cutSource) checkRows(t *testing.T, db *ingest.DB) {
	t.Helper()
	want := map[string][]string{}
	for i, r := range s.recs {
		if !r.bad {
			want[r.table] = append(want[r.table], fmt.Sprintf("%d:%d:%d", i, r.rows, r.rows))
		}
	}
	for _, table := range []string{"otel_traces", "otel_logs", "otel_metrics"} {
		var got []string
		if tableExists(t, db, table) {
			for _, row := range queryStrings(t, db, "SELECT rec, count(*), count(DISTINCT j) FROM "+table+" GROUP BY rec ORDER BY rec") {
				got = append(got, strings.Join(row, ":"))
			}
		}
		if g, w := strings.Join(got, " "), strings.Join(want[table], " "); g != w {
			t.Errorf("%s: records:rows:distinct rows\n got %s\nwant %s", table, g, w)
		}
	}
}

// cutRun runs a Loader over src until it stored the position after every
// record (or 20 s), then drains it; onLoad sees every transaction.
func cutRun(t *testing.T, db *ingest.DB, src *cutSource, opt ingest.LoaderOptions) error {
	t.Helper()
	l := db.NewLoader(src, opt)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		src.mu.Lock()
		s := src.stored
		src.mu.Unlock()
		if s == uint64(len(src.recs)) {
			break
		}
	}
	cancel()
	return <-done
}

// storedRows returns the (position, rows) rows of shredduck_sources.
func storedRows(t *testing.T, db *ingest.DB) string {
	t.Helper()
	var out []string
	for _, r := range queryStrings(t, db, "SELECT position, rows FROM shredduck_sources WHERE source = 'cut' ORDER BY position, rows") {
		out = append(out, r[0]+"/"+r[1])
	}
	return strings.Join(out, " ")
}

func traces(rows int) cutRec { return cutRec{table: "otel_traces", rows: rows} }
func logs(rows int) cutRec   { return cutRec{table: "otel_logs", rows: rows} }
func metrics(rows int) cutRec {
	return cutRec{table: "otel_metrics", rows: rows}
}
func bad(r cutRec) cutRec { r.bad = true; return r }

// An item of more than three row groups: the first transaction stores
// three whole ones of it, the next the rest.
func TestLoaderCutsABigItem(t *testing.T) {
	db := openDB(t)
	rg := ingest.RowGroupRows
	src := &cutSource{t: t, recs: []cutRec{traces(3*rg + 5000), traces(2000), traces(2000)}}
	var positions []string
	err := cutRun(t, db, src, ingest.LoaderOptions{MaxLag: 200 * time.Millisecond, OnLoad: func(li ingest.LoadInfo) {
		positions = append(positions, fmt.Sprint(li.Position, "+", li.Rows))
	}})
	if err != nil {
		t.Fatal(err)
	}
	src.checkRows(t, db)
	src.checkReleased(t)
	if got, want := storedRows(t, db), fmt.Sprintf("0/%d 3/0", 3*rg); got != want {
		t.Errorf("stored positions %s, want %s (loads %v)", got, want, positions)
	}
}

// Items of three tables in one transaction: only the largest table's
// item that crosses a row group is cut; the items after it, of any table,
// start the next transaction.
func TestLoaderCutsAmongTables(t *testing.T) {
	db := openDB(t)
	rg := ingest.RowGroupRows
	src := &cutSource{t: t, recs: []cutRec{
		traces(rg / 2), logs(rg / 3), metrics(1000), traces(rg / 3), logs(rg / 3),
		traces(rg / 2), metrics(rg / 2), logs(rg / 2), traces(100), metrics(rg), logs(10),
	}}
	var loads []ingest.LoadInfo
	if err := cutRun(t, db, src, ingest.LoaderOptions{MaxLag: 200 * time.Millisecond, OnLoad: func(li ingest.LoadInfo) { loads = append(loads, li) }}); err != nil {
		t.Fatal(err)
	}
	src.checkRows(t, db)
	src.checkReleased(t)
	partial := strings.Count(storedRows(t, db), "/") - strings.Count(storedRows(t, db), "/0")
	if partial == 0 {
		t.Errorf("no transaction ended inside an item (stored %s): the test tests nothing", storedRows(t, db))
	}
}

// A record DuckDB cannot take that is the item a transaction would end
// inside, or the one right after it, or one of a merged item that crosses
// the boundary: it is dropped alone, every other row is stored once.
func TestLoaderCutsAroundARejectedItem(t *testing.T) {
	rg := ingest.RowGroupRows
	for _, tc := range []struct {
		name  string
		recs  []cutRec
		group func(int) int
		drops string
	}{
		{"the split item", []cutRec{traces(rg / 2), bad(traces(rg)), traces(1000), traces(rg)}, nil, "2"},
		{"after the split item", []cutRec{traces(rg / 2), traces(rg), bad(traces(1000)), traces(rg)}, nil, "3"},
		{"later in the next transaction", []cutRec{traces(rg / 2), traces(rg), traces(rg / 2), bad(traces(10)), traces(10)}, nil, "4"},
		{"in a merged split item", []cutRec{traces(rg / 2), traces(rg / 4), bad(traces(rg / 4)), traces(rg / 4), traces(100)},
			func(pos int) int { return map[int]int{1: 3}[pos] }, "3"},
		{"alone in a merged item", []cutRec{traces(rg / 4), bad(traces(rg / 4)), traces(rg / 4)},
			func(pos int) int { return 3 }, "2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openDB(t)
			src := &cutSource{t: t, recs: tc.recs, group: tc.group}
			var dropped []string
			err := cutRun(t, db, src, ingest.LoaderOptions{MaxLag: 200 * time.Millisecond, OnDrop: func(it ingest.SourceItem, err error) {
				dropped = append(dropped, fmt.Sprint(it.Next))
			}})
			if err != nil {
				t.Fatal(err)
			}
			src.checkRows(t, db)
			src.checkReleased(t)
			if got := strings.Join(dropped, ","); got != tc.drops {
				t.Errorf("dropped the items ending at %s, want %s", got, tc.drops)
			}
		})
	}
}

// Strays of a column before an item that adds one to the same table,
// where that item is the one the transaction ends inside: the column keeps
// its type, the strays go to the overflow and the catalog's count, and the
// items go into transactions as any others. (Before strays, the string
// widened w from DOUBLE to VARCHAR with an UPDATE, after which DuckDB
// cannot commit an ALTER TABLE of the table: the items were stored one by
// one, the cut item whole and alone. OTLP data no longer needs such a
// widening; NDJSON's "NULL"[] to JSON does: TestWALReplayShapes.)
func TestLoaderStraysBeforeANewKey(t *testing.T) {
	db := openDB(t)
	rg := ingest.RowGroupRows
	// The table with w DOUBLE first, in a transaction of its own.
	first := &cutSource{t: t, recs: []cutRec{{table: "otel_traces", rows: 1, attrs: `{"key":"w","value":{"doubleValue":2}}`}}}
	if err := cutRun(t, db, first, ingest.LoaderOptions{}); err != nil {
		t.Fatal(err)
	}
	recs := []cutRec{
		{table: "otel_traces", rows: 10, attrs: `{"key":"w","value":{"stringValue":"x"}}`}, // strays of DOUBLE w
		{table: "otel_traces", rows: rg, attrs: `{"key":"k","value":{"stringValue":"v"}}`}, // adds k
		traces(100),
	}
	// Positions go on from the first source's.
	src := &cutSource{t: t, recs: append([]cutRec{first.recs[0]}, recs...)}
	src.pos = 1
	src.batches = map[int]*shred.Batch{}
	var errs []string
	var loads []string
	err := cutRun(t, db, src, ingest.LoaderOptions{MaxLag: 200 * time.Millisecond, OnLoad: func(li ingest.LoadInfo) {
		if li.Err != nil {
			errs = append(errs, li.Err.Error())
		}
		loads = append(loads, fmt.Sprintf("%d items %d rows to %d", li.Items, li.Rows, li.Position))
	}})
	if err != nil {
		t.Fatal(err)
	}
	src.checkRows(t, db)
	src.checkReleased(t)
	first.checkReleased(t)
	if len(errs) > 0 {
		t.Errorf("failed transactions: %v", errs)
	}
	if got := queryStrings(t, db, `SELECT any_value(typeof(w)), count(w), count(attributes_str['w']), count(k), min(w) FROM otel_traces`); strings.Join(got[0], ",") != fmt.Sprintf("DOUBLE,1,10,%d,2", rg) {
		t.Errorf("w's type, w, its strays and k values, the least w: %v", got[0])
	}
	if c := catalogEntry(t, db, "otel_traces", "record", "w"); c.Type != "DOUBLE" || c.Strays != 10 {
		t.Errorf("catalog of w: %s, %d strays; want DOUBLE, 10", c.Type, c.Strays)
	}
	if len(loads) == 0 {
		t.Error("no loads")
	}
}

// Drained (its context ends) with the rest of a cut item taken: the drain
// stores it and everything after.
func TestLoaderDrainsACutItem(t *testing.T) {
	db := openDB(t)
	rg := ingest.RowGroupRows
	src := &cutSource{t: t, recs: []cutRec{traces(rg/2 + 7), traces(rg + 11), traces(3), traces(2 * rg)}}
	l := db.NewLoader(src, ingest.LoaderOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // draining from the start: no waits
	if err := l.Run(ctx); err != nil {
		t.Fatal(err)
	}
	src.checkRows(t, db)
	src.checkReleased(t)
	if got := storedRows(t, db); !strings.HasSuffix(got, " 4/0") || strings.Count(got, "/0") == strings.Count(got, "/") {
		t.Errorf("stored positions %s: want some inside an item, then 4/0", got)
	}
}

// The source fails right after a transaction that ended inside an item
// (the next one never commits); the retry passes over the stored rows.
func TestLoaderRetriesAfterACut(t *testing.T) {
	rg := ingest.RowGroupRows
	for _, group := range []func(int) int{nil, func(int) int { return 2 }} {
		db := openDB(t)
		src := &cutSource{t: t, recs: []cutRec{traces(rg / 2), traces(rg), traces(100), traces(rg / 3), traces(rg)}, group: group}
		var loads int
		err := cutRun(t, db, src, ingest.LoaderOptions{MaxLag: 200 * time.Millisecond, RetryAfter: 10 * time.Millisecond, OnLoad: func(li ingest.LoadInfo) {
			loads++
			if loads == 1 {
				src.mu.Lock()
				src.failNext = 1
				src.mu.Unlock()
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		src.checkRows(t, db)
		src.checkReleased(t)
		if len(src.seeks) < 2 {
			t.Errorf("seeks %v: the source never failed", src.seeks)
		}
	}
}

// A restart after a transaction that ended inside an item, where the new
// source groups the same records into items otherwise (one item of
// several records before, one per record after, or the reverse, or other
// boundaries): the rows stored are passed over by count, across items.
func TestLoaderResumesRegrouped(t *testing.T) {
	rg := ingest.RowGroupRows
	recs := []cutRec{traces(rg/3 + 1), traces(rg/3 + 1), traces(rg/3 + 1), traces(rg / 3), traces(rg / 3), traces(77), traces(rg / 2)}
	groups := map[string]func(int) int{
		"1":   nil,
		"3":   func(int) int { return 3 },
		"2":   func(int) int { return 2 },
		"odd": func(pos int) int { return 1 + pos%2 },
	}
	for _, c := range [][2]string{{"3", "1"}, {"1", "3"}, {"2", "3"}, {"3", "2"}, {"odd", "3"}, {"3", "odd"}} {
		t.Run(c[0]+" then "+c[1], func(t *testing.T) {
			db := openDB(t)
			src := &cutSource{t: t, recs: recs, group: groups[c[0]]}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			loads := 0
			l := db.NewLoader(src, ingest.LoaderOptions{MaxLag: 200 * time.Millisecond, OnLoad: func(li ingest.LoadInfo) {
				if loads++; loads == 1 {
					src.mu.Lock()
					src.err = errors.New("the source fails until the restart")
					src.mu.Unlock()
					cancel() // draining, the loader returns the failure
				}
			}})
			if err := l.Run(ctx); err == nil {
				t.Fatal("the loader did not fail")
			}
			stored := storedRows(t, db)
			if strings.Count(stored, "/0") == strings.Count(stored, "/") {
				t.Fatalf("stored %s: no transaction ended inside an item", stored)
			}
			src.checkReleased(t)
			src2 := &cutSource{t: t, recs: recs, group: groups[c[1]]}
			ctx2, cancel2 := context.WithCancel(context.Background())
			cancel2()
			if err := db.NewLoader(src2, ingest.LoaderOptions{}).Run(ctx2); err != nil {
				t.Fatal(err)
			}
			src2.checkRows(t, db)
			src2.checkReleased(t)
		})
	}
}
