package ingest_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

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
	seeks    []uint64
	arrived  time.Time // when set, every item's arrival (a backlog)
	spans    int       // spans per item (default 1)
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
	for end := time.Now().Add(wait); m.pos >= m.n; {
		if !time.Now().Before(end) || ctx.Err() != nil {
			return ingest.SourceItem{}, false, nil
		}
		m.mu.Unlock()
		time.Sleep(time.Millisecond)
		m.mu.Lock()
	}
	b := shred.NewBatch(transforms.Traces.Core())
	span := `{"name":"s` + strconv.Itoa(m.pos) + `","traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","startTimeUnixNano":"1","endTimeUnixNano":"2"}`
	line := `{"resourceSpans":[{"scopeSpans":[{"spans":[` + span + strings.Repeat(","+span, max(1, m.spans)-1) + `]}]}]}`
	if _, err := transforms.Traces.AppendJSON(b, []byte(line)); err != nil {
		return ingest.SourceItem{}, false, err
	}
	m.pos++
	arrived := m.arrived
	if arrived.IsZero() {
		arrived = time.Now()
	}
	return ingest.SourceItem{Table: "otel_traces", Tr: transforms.Traces, Batch: b, Bytes: int64(len(line)), Next: uint64(m.pos),
		Arrived: arrived, Release: func() { m.mu.Lock(); m.released++; m.mu.Unlock() }}, true, nil
}

func (m *memSource) Stored(pos uint64) {
	m.mu.Lock()
	m.stored = pos
	m.mu.Unlock()
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
	time.Sleep(2 * time.Millisecond)
	src.mu.Lock()
	src.n = 150 // more arrive while the loader collects its first transaction
	src.mu.Unlock()
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

// A transaction of more than a row group ends at the first item that
// completes a whole number of them; the rest starts the next one.
func TestLoaderCutsAtRowGroups(t *testing.T) {
	db := openDB(t)
	const perItem = 1000
	src := &memSource{n: 50, spans: perItem, arrived: time.Now()}
	var rows []int64
	l := db.NewLoader(src, ingest.LoaderOptions{MaxLag: time.Second,
		OnLoad: func(li ingest.LoadInfo) { rows = append(rows, li.Rows) }})
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
	first := int64((ingest.RowGroupRows + perItem - 1) / perItem * perItem)
	if len(rows) != 2 || rows[0] != first || rows[1] != 50*perItem-first {
		t.Fatalf("transactions of %v rows, want [%d %d]", rows, first, 50*perItem-first)
	}
	if src.released != 50 {
		t.Errorf("%d items released, want 50", src.released)
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
