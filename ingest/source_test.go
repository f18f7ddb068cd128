package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/duckdb/duckdb-go/v2"
	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/shred"
	"github.com/shredduck/shredduck/transforms"
)

// memSource is a Source over records in memory: record i is position i,
// its item's Next i+1; each holds one span named by its index.
type memSource struct {
	mu       sync.Mutex
	n        int // records available
	pos      int
	stored   uint64
	released int
	out      int // items given and not yet released, and the most at once
	maxOut   int
	seeks    []uint64
	arrived  time.Time // when set, every item's arrival (a backlog)
	spans    int       // spans per item (default 1)
	err      error     // when set, what Next returns
	// failAt, when > 0: Next fails once at that position, then calls
	// failed (if set).
	failAt int
	failed func()
	// empty, when set: the records from that position on have no batch
	// (records the source could not decode).
	empty int
}

func (m *memSource) Name() string { return "mem" }

func (m *memSource) Seek(pos uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pos = int(pos)
	m.seeks = append(m.seeks, pos)
	return nil
}

func (m *memSource) Next(ctx context.Context, wait time.Duration) (ingest.SourceItem, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return ingest.SourceItem{}, false, m.err
	}
	if m.failAt > 0 && m.pos == m.failAt {
		m.failAt = 0
		if m.failed != nil {
			m.failed()
		}
		return ingest.SourceItem{}, false, errors.New("the source fails once")
	}
	for end := time.Now().Add(wait); m.pos >= m.n; {
		if !time.Now().Before(end) || ctx.Err() != nil {
			return ingest.SourceItem{}, false, nil
		}
		m.mu.Unlock()
		time.Sleep(time.Millisecond)
		m.mu.Lock()
	}
	if m.empty > 0 && m.pos >= m.empty {
		m.pos++
		return ingest.SourceItem{Next: uint64(m.pos), Arrived: time.Now()}, true, nil
	}
	b, size, err := spansBatch("s"+strconv.Itoa(m.pos), max(1, m.spans))
	if err != nil {
		return ingest.SourceItem{}, false, err
	}
	m.pos++
	arrived := m.arrived
	if arrived.IsZero() {
		arrived = time.Now()
	}
	m.out++
	m.maxOut = max(m.maxOut, m.out)
	return ingest.SourceItem{Table: "otel_traces", Tr: transforms.Traces, Batch: b, Bytes: int64(size), Next: uint64(m.pos),
		Arrived: arrived, Release: func() { m.mu.Lock(); m.released++; m.out--; m.mu.Unlock() }}, true, nil
}

// spansBatch is a batch of one request of n spans named name, and the
// size of the request's OTLP/JSON.
func spansBatch(name string, n int) (*shred.Batch, int, error) {
	b := shred.NewBatch(transforms.Traces.Core())
	span := `{"name":"` + name + `","traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","startTimeUnixNano":"1","endTimeUnixNano":"2"}`
	line := `{"resourceSpans":[{"scopeSpans":[{"spans":[` + span + strings.Repeat(","+span, n-1) + `]}]}]}`
	_, err := transforms.Traces.AppendJSON(b, []byte(line))
	return b, len(line), err
}

func (m *memSource) Stored(pos uint64) {
	m.mu.Lock()
	m.stored = pos
	m.mu.Unlock()
}

// A Loader of a source without keys writes each item as it arrives and
// releases it then, rather than holding a transaction's items until its
// COMMIT: the server's Go heap held a row group of decoded batches.
func TestLoaderReleasesEachItemOnceWritten(t *testing.T) {
	db := openDB(t)
	src := &memSource{n: 600, spans: 3}
	loads := loadUntilStored(t, db, src, ingest.LoaderOptions{MaxRows: 1000, MaxLag: 2 * time.Second}, 600)
	if n := rowCount(t, db, "otel_traces"); n != 1800 {
		t.Fatalf("%d rows, want 1800", n)
	}
	if src.released != 600 || src.maxOut > 1 {
		t.Errorf("%d items released, at most %d held at once; want 600 and 1", src.released, src.maxOut)
	}
	// A transaction ends at MaxRows (334 items of 3 spans), the rest in
	// the next.
	if len(loads) != 2 || loads[0].Rows != 1002 || loads[0].Items != 334 || loads[1].Rows != 798 {
		for _, li := range loads {
			t.Logf("load: %d items, %d rows, %v", li.Items, li.Rows, li.Err)
		}
		t.Errorf("%d loads, want 2 of 1002 and 798 rows", len(loads))
	}
}

// Records without rows (that the source could not decode) move the
// stored position in a transaction of their own, after the one with rows.
func TestLoaderStoresThePositionPastRecordsWithoutRows(t *testing.T) {
	db := openDB(t)
	src := &memSource{n: 10, empty: 4}
	loads := loadUntilStored(t, db, src, ingest.LoaderOptions{MaxRows: 4, MaxLag: 100 * time.Millisecond}, 10)
	if n := rowCount(t, db, "otel_traces"); n != 4 {
		t.Fatalf("%d rows, want 4", n)
	}
	if pos, ok, err := db.StoredPosition(context.Background(), "mem"); err != nil || !ok || pos != 10 {
		t.Fatalf("stored position %d %v %v, want 10", pos, ok, err)
	}
	if len(loads) != 2 || loads[0].Rows != 4 || loads[1].Rows != 0 || loads[1].Items != 6 || loads[1].Position != 10 || loads[1].Err != nil {
		for _, li := range loads {
			t.Logf("load: %d items, %d rows, position %d, %v", li.Items, li.Rows, li.Position, li.Err)
		}
		t.Errorf("%d loads, want one of 4 rows and one of the 6 records without", len(loads))
	}
}

// A transaction with a quarter of MaxRows commits once records stop
// coming (burstGap), not at its deadline (half of MaxLag); a smaller one
// waits for the deadline.
func TestLoaderCommitsABurstWhenItEnds(t *testing.T) {
	db := openDB(t)
	src := &memSource{n: 30}
	start := time.Now()
	loads := loadUntilStored(t, db, src, ingest.LoaderOptions{MaxRows: 100, MaxLag: 40 * time.Second}, 30)
	if took := time.Since(start); took > 10*time.Second || len(loads) != 1 || loads[0].Rows != 30 {
		t.Errorf("30 of 100 rows stored after %v in %d loads, want one before the deadline (20 s)", took, len(loads))
	}

	src = &memSource{n: 20}
	db = openDB(t)
	l := db.NewLoader(src, ingest.LoaderOptions{MaxRows: 100, MaxLag: 40 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- l.Run(ctx) }()
	time.Sleep(time.Second)
	src.mu.Lock()
	stored := src.stored
	src.mu.Unlock()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if stored != 0 || src.stored != 20 {
		t.Errorf("20 of 100 rows: stored position %d after a second, %d after the drain; want 0 and 20", stored, src.stored)
	}
}

// loadUntilStored runs a loader of src until its stored position is pos,
// and returns its loads.
func loadUntilStored(t *testing.T, db *ingest.DB, src *memSource, opt ingest.LoaderOptions, pos uint64) []ingest.LoadInfo {
	t.Helper()
	var loads []ingest.LoadInfo
	opt.OnLoad = func(li ingest.LoadInfo) { loads = append(loads, li) }
	l := db.NewLoader(src, opt)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- l.Run(ctx) }()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		src.mu.Lock()
		s := src.stored
		src.mu.Unlock()
		if s == pos {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("stored position %d, want %d", s, pos)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return loads
}

// A Loader stores every record once with the position after it, drains
// what the source holds when its context ends, and a new loader on the
// same database resumes at the stored position.
func TestLoaderResumes(t *testing.T) {
	db := openDB(t)
	src := &memSource{n: 250}
	var infos []ingest.LoadInfo
	l := db.NewLoader(src, ingest.LoaderOptions{MaxRows: 100, MaxLag: 20 * time.Millisecond,
		OnLoad: func(li ingest.LoadInfo) { infos = append(infos, li) }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- l.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		src.mu.Lock()
		s := src.stored
		src.mu.Unlock()
		if s == 250 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	src.mu.Lock()
	src.n = 300 // arrive as the loader is told to stop: drained
	src.mu.Unlock()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if pos, ok, err := db.StoredPosition(context.Background(), "mem"); err != nil || !ok || pos != 300 {
		t.Fatalf("stored position %d %v %v, want 300", pos, ok, err)
	}
	if n := rowCount(t, db, "otel_traces"); n != 300 {
		t.Fatalf("%d rows, want 300", n)
	}
	if src.released != 300 {
		t.Errorf("%d items released, want 300", src.released)
	}
	for _, li := range infos {
		if li.Err != nil || li.Rows > 100 {
			t.Errorf("a load of %d rows: %v", li.Rows, li.Err)
		}
	}
	// A new loader: Seek to the stored position, nothing twice.
	src2 := &memSource{n: 310}
	l2 := db.NewLoader(src2, ingest.LoaderOptions{MaxLag: 10 * time.Millisecond})
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if err := l2.Run(ctx2); err != nil {
		t.Fatal(err)
	}
	if len(src2.seeks) == 0 || src2.seeks[0] != 300 {
		t.Errorf("the second loader seeks %v, want 300 first", src2.seeks)
	}
	if n := rowCount(t, db, "otel_traces"); n != 310 {
		t.Fatalf("%d rows after the second loader, want 310", n)
	}
}

// A backlog (records that arrived long before: a restart, a sender faster
// than DuckDB) is loaded in full transactions, not one record each.
func TestLoaderBacklog(t *testing.T) {
	db := openDB(t)
	src := &memSource{n: 250, arrived: time.Now().Add(-time.Hour)}
	var loads int
	l := db.NewLoader(src, ingest.LoaderOptions{MaxRows: 100, OnLoad: func(ingest.LoadInfo) { loads++ }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- l.Run(ctx) }()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		src.mu.Lock()
		s := src.stored
		src.mu.Unlock()
		if s == 250 {
			break
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := rowCount(t, db, "otel_traces"); n != 250 || loads > 3 {
		t.Fatalf("%d rows in %d transactions, want 250 in 3", n, loads)
	}
}

// A loader that is behind (its first record waited past half the lag)
// waits for a full transaction while records keep coming, instead of
// committing the few that were there: DuckDB stores a row group at a time
// at a fraction of the cost. Once they stop coming it takes what it has.
func TestLoaderBehindTakesFullTransactions(t *testing.T) {
	db := openDB(t)
	src := &memSource{n: 30, arrived: time.Now().Add(-600 * time.Millisecond)}
	var rows []int64
	l := db.NewLoader(src, ingest.LoaderOptions{MaxRows: 100, MaxLag: time.Second,
		OnLoad: func(li ingest.LoadInfo) { rows = append(rows, li.Rows) }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- l.Run(ctx) }()
	// More arrive once the loader has taken the first 30 and is collecting.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		src.mu.Lock()
		taken := src.pos
		if taken >= 30 {
			src.n = 150
		}
		src.mu.Unlock()
		if taken >= 30 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the loader took none of the first 30 records")
		}
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		src.mu.Lock()
		s := src.stored
		src.mu.Unlock()
		if s == 150 {
			break
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0] != 100 || rows[1] != 50 {
		t.Fatalf("transactions of %v rows, want [100 50]", rows)
	}
}

// A transaction of more than a row group ends at a whole number of them,
// inside the item that crosses the boundary; the rest of that item starts
// the next transaction. Every row group but the last is full, every
// record is stored once, and every item is released once.
func TestLoaderCutsAtRowGroups(t *testing.T) {
	db := openDB(t)
	const perItem = 1000
	src := &memSource{n: 50, spans: perItem, arrived: time.Now()}
	var rows []int64
	var positions []uint64
	l := db.NewLoader(src, ingest.LoaderOptions{MaxLag: time.Second,
		OnLoad: func(li ingest.LoadInfo) { rows = append(rows, li.Rows); positions = append(positions, li.Position) }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- l.Run(ctx) }()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		src.mu.Lock()
		s := src.stored
		src.mu.Unlock()
		if s == 50 {
			break
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	split := ingest.RowGroupRows / perItem // the item that crosses the boundary
	if len(rows) != 2 || rows[0] != ingest.RowGroupRows || rows[1] != 50*perItem-ingest.RowGroupRows ||
		positions[0] != uint64(split) || positions[1] != 50 {
		t.Fatalf("transactions of %v rows to positions %v, want [%d %d] to [%d 50]", rows, positions, ingest.RowGroupRows, 50*perItem-ingest.RowGroupRows, split)
	}
	if src.released != 50 {
		t.Errorf("%d items released, want 50", src.released)
	}
	checkOnce(t, db, 50, perItem)
	if got := queryStrings(t, db, `SELECT string_agg(n::VARCHAR, ',' ORDER BY g) FROM (SELECT row_group_id AS g, max(start + count) - min(start) AS n
		FROM pragma_storage_info('otel_traces') WHERE column_name = 'name' AND segment_type = 'VARCHAR' GROUP BY ALL)`); got[0][0] != fmt.Sprintf("%d,%d", ingest.RowGroupRows, 50*perItem-ingest.RowGroupRows) {
		t.Errorf("row groups of %s rows, want %d,%d", got[0][0], ingest.RowGroupRows, 50*perItem-ingest.RowGroupRows)
	}
}

// checkOnce checks that otel_traces holds perItem spans of each of the n
// records of a memSource, none twice.
func checkOnce(t *testing.T, db *ingest.DB, n, perItem int) {
	t.Helper()
	got := queryStrings(t, db, "SELECT count(*), sum(c)::BIGINT, min(c), max(c) FROM (SELECT name, count(*) AS c FROM otel_traces GROUP BY name)")
	if want := []string{strconv.Itoa(n), strconv.Itoa(n * perItem), strconv.Itoa(perItem), strconv.Itoa(perItem)}; strings.Join(got[0], ",") != strings.Join(want, ",") {
		t.Errorf("records, rows, fewest and most rows of a record: %v, want %v", got[0], want)
	}
}

// A loader that stops after a transaction that ended inside an item (a
// crash, or a failed transaction and a retry) resumes at that item's row:
// each row is stored once. The source fails as the second transaction
// takes its first whole record, after the first ended inside the one
// before (while that first one commits, unless Serial).
func TestLoaderResumesInsideAnItem(t *testing.T) {
	for _, restart := range []bool{false, true} {
		for _, serial := range []bool{false, true} {
			t.Run(fmt.Sprintf("restart=%v/serial=%v", restart, serial), func(t *testing.T) {
				db := openDB(t)
				const perItem = 1000
				split := ingest.RowGroupRows / perItem
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				src := &memSource{n: 50, spans: perItem, arrived: time.Now(), failAt: split + 1}
				if restart {
					// Draining, the loader tries a few times, then returns
					// the failure (failed runs under src.mu).
					src.failed = func() { cancel(); src.err = errors.New("the source is gone") }
				}
				var loads atomic.Int64
				l := db.NewLoader(src, ingest.LoaderOptions{MaxLag: time.Second, RetryAfter: 10 * time.Millisecond, Serial: serial,
					OnLoad: func(li ingest.LoadInfo) {
						if li.Err == nil && li.Position == 50 && !restart {
							cancel()
						}
						loads.Add(1)
					}})
				err := l.Run(ctx)
				if restart != (err != nil) {
					t.Fatalf("Run: %v", err)
				}
				got := queryStrings(t, db, "SELECT position, rows FROM shredduck_sources ORDER BY position, rows LIMIT 1 OFFSET 0")
				if got[0][0] != strconv.Itoa(split) || got[0][1] != strconv.Itoa(ingest.RowGroupRows-split*perItem) {
					t.Errorf("first stored position %v, want [%d %d]", got[0], split, ingest.RowGroupRows-split*perItem)
				}
				if !restart && (len(src.seeks) < 2 || src.seeks[1] != uint64(split)) {
					t.Errorf("seeks %v, want the retry's at %d", src.seeks, split)
				}
				if restart {
					src = &memSource{n: 50, spans: perItem, arrived: time.Now()}
					ctx, cancel := context.WithCancel(context.Background())
					cancel()
					if err := db.NewLoader(src, ingest.LoaderOptions{}).Run(ctx); err != nil {
						t.Fatal(err)
					}
				}
				checkOnce(t, db, 50, perItem)
			})
		}
	}
}

// failSecondPipelinedCommit fails a Loader's second pipelined COMMIT with
// err after delay, while the next transaction is written; it counts the
// pipelined COMMITs.
func failSecondPipelinedCommit(t *testing.T, delay time.Duration, err error) *atomic.Int64 {
	var commits atomic.Int64
	ingest.FailPipelinedCommits(t, func() error {
		if commits.Add(1) == 2 {
			time.Sleep(delay)
			return err
		}
		return nil
	})
	return &commits
}

// A pipelined COMMIT that fails takes the transaction written beside it
// with it: the loader reads again from the last stored position, loads
// serially up to where the failed one ended, and stores every record
// once.
func TestLoaderPipelinedCommitFails(t *testing.T) {
	db := openDB(t)
	const perItem = 1000
	failSecondPipelinedCommit(t, 50*time.Millisecond, errors.New("injected: the disk is full"))
	src := &memSource{n: 200, spans: perItem, arrived: time.Now()}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var failed []ingest.LoadInfo
	l := db.NewLoader(src, ingest.LoaderOptions{MaxLag: time.Second, RetryAfter: 10 * time.Millisecond, OnLoad: func(li ingest.LoadInfo) {
		if li.Err != nil {
			failed = append(failed, li)
		}
		if li.Err == nil && li.Position == 200 {
			cancel()
		}
	}})
	if err := l.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if len(failed) != 1 || !strings.Contains(failed[0].Err.Error(), "injected") {
		t.Fatalf("failed transactions %+v, want the injected one", failed)
	}
	if len(src.seeks) != 2 || src.seeks[1] != uint64(ingest.RowGroupRows/perItem) {
		t.Errorf("seeks %v, want the retry's at the first transaction's end, %d", src.seeks, ingest.RowGroupRows/perItem)
	}
	checkOnce(t, db, 200, perItem)
}

// A drain (at shutdown) whose COMMIT fails once, or whose source fails
// once, tries again and stores every record; it used to return at its
// first failure and leave the rest in the source for the next start.
func TestLoaderDrainRetries(t *testing.T) {
	for _, how := range []string{"commit", "source"} {
		t.Run(how, func(t *testing.T) {
			db := openDB(t)
			const perItem = 1000
			src := &memSource{n: 100, spans: perItem, arrived: time.Now()}
			var fails atomic.Int32
			if how == "commit" {
				ingest.FailPipelinedCommits(t, func() error {
					if fails.Add(1) == 2 {
						return errors.New("injected: a write conflict")
					}
					return nil
				})
			} else {
				src.failAt = 50
				src.failed = func() { fails.Add(1) }
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // draining from the start
			l := db.NewLoader(src, ingest.LoaderOptions{RetryAfter: 10 * time.Millisecond})
			if err := l.Run(ctx); err != nil {
				t.Fatalf("the drain returned %v after one passing failure", err)
			}
			if fails.Load() < 1 {
				t.Fatal("the fault never fired")
			}
			checkOnce(t, db, 100, perItem)
		})
	}
}

// A pipelined COMMIT that fails with an error that reads as the data's
// (DuckDB's INVALID_INPUT) while the transaction after it fails for one
// record of its own: that failure waits for the earlier COMMIT's, and the
// source is read again from before it; only the bad record is dropped.
// Before, the earlier failure reached the transaction's records retried
// one by one, and the first of them was dropped as if it were bad; the
// later failure was reported first.
func TestLoaderPipelinedFailureBesideABadRecord(t *testing.T) {
	db := openDB(t)
	// The next transaction fails meanwhile.
	failSecondPipelinedCommit(t, 100*time.Millisecond, &duckdb.Error{Type: duckdb.ErrorTypeInvalidInput, Msg: "injected: invalid input"})
	spans := func(name string, n int) *shred.Batch {
		b, _, err := spansBatch(name, n)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	bad := spans("bad", 1)
	bad.Core[0].AppendNull() // a column longer than the batch: Finish refuses it
	src := &sliceSource{}
	for i, b := range []*shred.Batch{spans("zero", 3), spans("first", 3), spans("b", 1), bad, spans("c", 1)} {
		src.items = append(src.items, ingest.SourceItem{Table: "otel_traces", Tr: transforms.Traces, Batch: b, Next: uint64(i + 1), Arrived: time.Now()})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var failures []string
	var dropped []uint64
	l := db.NewLoader(src, ingest.LoaderOptions{MaxRows: 3, MaxLag: time.Second, RetryAfter: 10 * time.Millisecond,
		OnLoad: func(li ingest.LoadInfo) {
			if li.Err != nil {
				failures = append(failures, li.Err.Error())
			}
			if li.Err == nil && li.Position == 5 {
				cancel()
			}
		},
		OnDrop: func(it ingest.SourceItem, err error) { dropped = append(dropped, it.Next) },
	})
	if err := l.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if len(failures) == 0 || !strings.Contains(failures[0], "injected") {
		t.Errorf("failures reported %q, want the injected one first", failures)
	}
	if fmt.Sprint(dropped) != "[4]" {
		t.Errorf("dropped records %v, want [4]", dropped)
	}
	got := queryStrings(t, db, "SELECT string_agg(p || ':' || c, ',' ORDER BY p) FROM (SELECT name AS p, count(*) AS c FROM otel_traces GROUP BY p)")
	if want := "b:1,c:1,first:3,zero:3"; got[0][0] != want {
		t.Errorf("stored %s, want %s", got[0][0], want)
	}
}

// keyedSource is memSource split over keys: record i is key i%keys,
// position (per key) i/keys.
type keyedSource struct {
	memSource
	keys       int
	storedKeys map[string]uint64
}

func (k *keyedSource) Next(ctx context.Context, wait time.Duration) (ingest.SourceItem, bool, error) {
	it, ok, err := k.memSource.Next(ctx, wait)
	if ok {
		i := int(it.Next) - 1
		it.Key, it.Next = "t/"+strconv.Itoa(i%k.keys), uint64(i/k.keys+1)
	}
	return it, ok, err
}

func (k *keyedSource) StoredKeys(pos map[string]uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for key, p := range pos {
		k.storedKeys[key] = p
	}
}

// rewindingKeyed is a KeyedSource as Kafka's: record i is key i%keys at
// that key's position i/keys; Seek sends every key back to its stored
// position (the records after it come again).
type rewindingKeyed struct {
	mu         sync.Mutex
	n, keys, i int
	spans      int
	stored     map[string]uint64
	seeks      int
	arrived    time.Time
}

func (k *rewindingKeyed) Name() string  { return "rk" }
func (k *rewindingKeyed) Stored(uint64) {}
func (k *rewindingKeyed) Seek(uint64) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.i = 0
	k.seeks++
	return nil
}

func (k *rewindingKeyed) StoredKeys(pos map[string]uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for key, p := range pos {
		k.stored[key] = max(k.stored[key], p)
	}
}

func (k *rewindingKeyed) storedAll(want uint64) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	for key := range k.keys {
		if k.stored["t/"+strconv.Itoa(key)] != want {
			return false
		}
	}
	return true
}

func (k *rewindingKeyed) Next(ctx context.Context, wait time.Duration) (ingest.SourceItem, bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for k.i < k.n {
		r := k.i
		k.i++
		key, kp := "t/"+strconv.Itoa(r%k.keys), uint64(r/k.keys)
		if kp < k.stored[key] {
			continue
		}
		b, _, err := spansBatch("s"+strconv.Itoa(r), k.spans)
		if err != nil {
			return ingest.SourceItem{}, false, err
		}
		return ingest.SourceItem{Table: "otel_traces", Tr: transforms.Traces, Batch: b, Key: key, Next: kp + 1, Arrived: k.arrived}, true, nil
	}
	k.mu.Unlock()
	time.Sleep(min(wait, 10*time.Millisecond))
	k.mu.Lock()
	return ingest.SourceItem{}, false, nil
}

// A KeyedSource's transactions are pipelined too. When a COMMIT fails, the
// transaction written beside it goes along, every key goes back to its
// stored position, and the keys of the failed one load serially until they
// pass where it ended; then pipelined again. Every record is stored once,
// and the source hears each key's end.
func TestLoaderKeyedPipelinedCommitFails(t *testing.T) {
	db := openDB(t)
	const records, keys, perItem = 240, 3, 1000
	commits := failSecondPipelinedCommit(t, 50*time.Millisecond, errors.New("injected: the disk is full"))
	src := &rewindingKeyed{n: records, keys: keys, spans: perItem, stored: map[string]uint64{}, arrived: time.Now()}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var failed []ingest.LoadInfo
	var mu sync.Mutex
	l := db.NewLoader(src, ingest.LoaderOptions{MaxLag: time.Second, RetryAfter: 10 * time.Millisecond, OnLoad: func(li ingest.LoadInfo) {
		mu.Lock()
		defer mu.Unlock()
		if li.Err != nil {
			failed = append(failed, li)
		}
	}})
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	for deadline := time.Now().Add(30 * time.Second); !src.storedAll(records / keys); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("stored keys %v after 30 s", src.stored)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(failed) != 1 || !strings.Contains(failed[0].Err.Error(), "injected") {
		t.Fatalf("failed transactions %+v, want the injected one", failed)
	}
	if src.seeks < 2 {
		t.Errorf("%d seeks, want the retry's too", src.seeks)
	}
	if n := commits.Load(); n < 3 {
		t.Errorf("%d pipelined COMMITs, want pipelining again after the retry", n)
	}
	checkOnce(t, db, records, perItem)
	for key := range keys {
		if pos, ok, err := db.StoredPosition(context.Background(), "rk/t/"+strconv.Itoa(key)); err != nil || !ok || pos != records/keys {
			t.Errorf("rk/t/%d: stored %d, %v, %v; want %d", key, pos, ok, err, records/keys)
		}
	}
}

// A KeyedSource's items store each key's position as source/key, in the
// transaction of their rows, and the source hears of each.
func TestLoaderKeyed(t *testing.T) {
	db := openDB(t)
	src := &keyedSource{memSource: memSource{n: 30}, keys: 3, storedKeys: map[string]uint64{}}
	l := db.NewLoader(src, ingest.LoaderOptions{MaxRows: 7, MaxLag: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- l.Run(ctx) }()
	for deadline := time.Now().Add(10 * time.Second); ; {
		src.mu.Lock()
		n := len(src.storedKeys)
		all := n == 3 && src.storedKeys["t/0"] == 10 && src.storedKeys["t/1"] == 10 && src.storedKeys["t/2"] == 10
		src.mu.Unlock()
		if all {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stored keys %v", src.storedKeys)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		pos, ok, err := db.StoredPosition(context.Background(), "mem/t/"+strconv.Itoa(i))
		if err != nil || !ok || pos != 10 {
			t.Errorf("mem/t/%d: stored %d, %v, %v; want 10", i, pos, ok, err)
		}
	}
	if _, ok, _ := db.StoredPosition(context.Background(), "mem"); ok {
		t.Error("a keyed source's items stored a position under its bare name")
	}
	var rows int
	if err := db.SQL.QueryRow("SELECT count(*) FROM otel_traces").Scan(&rows); err != nil || rows != 30 {
		t.Errorf("otel_traces holds %d rows (%v), want 30", rows, err)
	}
}

// An item a source made of several records whose data cannot be stored
// is split: only the record at fault is dropped, the others are stored,
// and the position moves past all of them.
func TestLoaderSplitsARejectedItem(t *testing.T) {
	db := openDB(t)
	span := func(name string, broken bool) *shred.Batch {
		b := shred.NewBatch(transforms.Traces.Core())
		line := `{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"` + name + `","traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","startTimeUnixNano":"1","endTimeUnixNano":"2"}]}]}]}`
		if _, err := transforms.Traces.AppendJSON(b, []byte(line)); err != nil {
			t.Fatal(err)
		}
		if broken {
			b.Core[0].AppendNull() // a core column longer than the batch: Finish refuses it
		}
		return b
	}
	item := func(name string, broken bool, next uint64) ingest.SourceItem {
		return ingest.SourceItem{Table: "otel_traces", Tr: transforms.Traces, Batch: span(name, broken), Next: next, Arrived: time.Now()}
	}
	splits := 0
	merged := item("merged", true, 4) // records 1..3, one of them bad
	merged.Split = func() []ingest.SourceItem {
		splits++
		return []ingest.SourceItem{item("a", false, 2), item("bad", true, 3), item("c", false, 4)}
	}
	var dropped []string
	src := &sliceSource{items: []ingest.SourceItem{item("first", false, 1), merged, item("last", false, 5)}}
	l := db.NewLoader(src, ingest.LoaderOptions{OnDrop: func(it ingest.SourceItem, err error) {
		dropped = append(dropped, strconv.FormatUint(it.Next, 10))
	}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Run(ctx); err != nil {
		t.Fatal(err)
	}
	var names []string
	rows, err := db.SQL.Query("SELECT name FROM otel_traces ORDER BY name")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		rows.Scan(&n)
		names = append(names, n)
	}
	rows.Close()
	if got := strings.Join(names, ","); got != "a,c,first,last" || splits != 1 || strings.Join(dropped, ",") != "3" {
		t.Errorf("stored %s, %d splits, dropped the items ending at %v; want a,c,first,last, 1 split, 3", got, splits, dropped)
	}
	if pos, _, _ := db.StoredPosition(context.Background(), "bench"); pos != 5 {
		t.Errorf("stored position %d, want 5", pos)
	}
}

// A record whose data DuckDB refuses on append (here text that is not
// UTF-8, which the decoders keep out) is dropped on its own; the records
// around it are stored. The loader used to retry it forever, stalling
// every record behind it.
func TestLoaderDropsDataDuckDBRefuses(t *testing.T) {
	db := openDB(t)
	item := func(name string, next uint64) ingest.SourceItem {
		b := shred.NewBatch(transforms.Traces.Core())
		line := `{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"` + name + `","traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","startTimeUnixNano":"1","endTimeUnixNano":"2"}]}]}]}`
		if _, err := transforms.Traces.AppendJSON(b, []byte(line)); err != nil {
			t.Fatal(err)
		}
		return ingest.SourceItem{Table: "otel_traces", Tr: transforms.Traces, Batch: b, Next: next, Arrived: time.Now()}
	}
	bad := item("bad", 2)
	for i, c := range transforms.Traces.Core() {
		if c.Name == "name" {
			col := bad.Batch.Core[i]
			col.Data[col.Offs[0]] = 0xff // no longer UTF-8
		}
	}
	var dropped []string
	src := &sliceSource{items: []ingest.SourceItem{item("first", 1), bad, item("last", 3)}}
	l := db.NewLoader(src, ingest.LoaderOptions{RetryAfter: 10 * time.Millisecond, OnDrop: func(it ingest.SourceItem, err error) {
		dropped = append(dropped, fmt.Sprint(it.Next, ": ", err))
	}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the loader did not get past the record DuckDB refuses")
	}
	got := queryStrings(t, db, "SELECT string_agg(name, ',' ORDER BY name) FROM otel_traces")
	if got[0][0] != "first,last" || len(dropped) != 1 || !strings.HasPrefix(dropped[0], "2: ") {
		t.Errorf("stored %s, dropped %v; want first,last and the item ending at 2", got[0][0], dropped)
	}
	if pos, _, _ := db.StoredPosition(context.Background(), "bench"); pos != 3 {
		t.Errorf("stored position %d, want 3", pos)
	}
}

// A loader prunes shredduck_sources' old position rows between its
// pipelined transactions, and the pruning fails none of them: the loader
// seeks only once, and the table keeps a few rows of the source.
func TestLoaderPrunesPositions(t *testing.T) {
	db := openDB(t)
	const records = 120
	src := &memSource{n: records, arrived: time.Now().Add(-time.Hour)}
	l := db.NewLoader(src, ingest.LoaderOptions{MaxRows: 3})
	// Each COMMIT takes a while, as a row group's does, so that the next
	// transaction is built and written while it runs.
	ingest.FailPipelinedCommits(t, func() error { time.Sleep(100 * time.Millisecond); return nil })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		src.mu.Lock()
		s := src.stored
		src.mu.Unlock()
		if s == records || time.Now().After(deadline) {
			break
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := rowCount(t, db, "otel_traces"); n != records {
		t.Fatalf("%d rows, want %d", n, records)
	}
	if len(src.seeks) != 1 {
		t.Errorf("the loader sought %v: a transaction failed and was loaded again", src.seeks)
	}
	var kept int
	if err := db.SQL.QueryRow("SELECT count(*) FROM shredduck_sources WHERE source = 'mem'").Scan(&kept); err != nil {
		t.Fatal(err)
	}
	if kept > 2*16 {
		t.Errorf("shredduck_sources keeps %d rows of the source: its old positions are not pruned", kept)
	}
}
