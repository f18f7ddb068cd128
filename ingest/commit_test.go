package ingest

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shredduck/shredduck/shred"
	"github.com/shredduck/shredduck/transforms"
)

// spanBatch decodes one OTLP/JSON request with n spans into a batch.
func spanBatch(t testing.TB, id, n int) *shred.Batch {
	t.Helper()
	req := `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"svc"}}]},"scopeSpans":[{"spans":[`
	for i := 0; i < n; i++ {
		if i > 0 {
			req += ","
		}
		req += fmt.Sprintf(`{"traceId":"%032x","spanId":"%016x","name":"s","startTimeUnixNano":"1","endTimeUnixNano":"2","attributes":[{"key":"req","value":{"intValue":"%d"}}]}`, id+1, i+1, id)
	}
	req += `]}]}]}`
	b := shred.NewBatch(transforms.Traces.Core())
	if _, err := transforms.Traces.AppendJSON(b, []byte(req)); err != nil {
		t.Fatal(err)
	}
	return b
}

// openCommitter opens a database in a temporary directory and a
// committer on it (both closed when the test ends), with first, when
// set, run before the committer starts; then it commits a first request
// of 3 spans, so that otel_traces exists.
func openCommitter(t *testing.T, first func(*DB)) (*DB, *Committer) {
	t.Helper()
	db, err := Open(filepath.Join(t.TempDir(), "c.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if first != nil {
		first(db)
	}
	c := db.NewCommitter(CommitOptions{})
	t.Cleanup(c.Close)
	if err := c.Submit(context.Background(), "otel_traces", transforms.Traces, spanBatch(t, 0, 3), 1); err != nil {
		t.Fatal(err)
	}
	return db, c
}

// submitAll submits batch(id) for otel_traces from senders goroutines,
// each sending ids s*each ... s*each+each-1 one after another, and fails
// the test if any Submit does.
func submitAll(t *testing.T, c *Committer, senders, each int, batch func(id int) *shred.Batch) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, senders*each)
	for s := 0; s < senders; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				id := s*each + i
				errs <- c.Submit(context.Background(), "otel_traces", transforms.Traces, batch(id), 100)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestCommitterGroupCommit(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "c.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var mu sync.Mutex
	var groups, committed int
	c := db.NewCommitter(CommitOptions{OnCommit: func(ci CommitInfo) {
		mu.Lock()
		defer mu.Unlock()
		if ci.Err == nil {
			groups++
			committed += ci.Requests
		}
	}})
	const senders, each = 8, 25
	submitAll(t, c, senders, each, func(id int) *shred.Batch { return spanBatch(t, id, 10) })
	c.Close()
	var n, distinct int
	if err := db.SQL.QueryRow(`SELECT count(*), count(DISTINCT req) FROM otel_traces`).Scan(&n, &distinct); err != nil {
		t.Fatal(err)
	}
	if n != senders*each*10 || distinct != senders*each {
		t.Errorf("rows %d (distinct requests %d), want %d (%d)", n, distinct, senders*each*10, senders*each)
	}
	if committed != senders*each {
		t.Errorf("OnCommit saw %d requests", committed)
	}
	t.Logf("%d requests in %d group commits", committed, groups)
	var views int
	if err := db.SQL.QueryRow(`SELECT count(*) FROM duckdb_views() WHERE NOT internal`).Scan(&views); err != nil || views != 0 {
		t.Errorf("%d views left behind (%v)", views, err)
	}
	if err := c.Submit(context.Background(), "otel_traces", transforms.Traces, spanBatch(t, 0, 1), 1); !errors.Is(err, ErrClosed) {
		t.Errorf("Submit after Close: %v", err)
	}
}

func TestCommitterIsolatesBadSubmission(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "c.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c := db.NewCommitter(CommitOptions{})
	defer c.Close()
	// Make otel_traces a traces table, then send a logs batch to it
	// alongside good ones: only the logs batch fails.
	if err := c.Submit(context.Background(), "otel_traces", transforms.Traces, spanBatch(t, 0, 1), 1); err != nil {
		t.Fatal(err)
	}
	logs := shred.NewBatch(transforms.Logs.Core())
	if _, err := transforms.Logs.AppendJSON(logs, []byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":"x"}}]}]}]}`)); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	results := make([]error, 5)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i == 2 {
				results[i] = c.Submit(context.Background(), "otel_traces", transforms.Logs, logs, 1)
				return
			}
			results[i] = c.Submit(context.Background(), "otel_traces", transforms.Traces, spanBatch(t, i+1, 3), 1)
		}()
	}
	wg.Wait()
	for i, err := range results {
		if (err != nil) != (i == 2) {
			t.Errorf("submission %d: %v", i, err)
		}
	}
	var n int
	db.SQL.QueryRow(`SELECT count(*) FROM otel_traces`).Scan(&n)
	if n != 1+4*3 {
		t.Errorf("rows %d, want %d", n, 1+4*3)
	}
}

func TestCommitterOverload(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "c.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c := db.NewCommitter(CommitOptions{QueueRequests: 1, QueueBytes: 1000})
	defer c.Close()
	var wg sync.WaitGroup
	var ok, overloaded, other sync.Map
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := c.Submit(context.Background(), "otel_traces", transforms.Traces, spanBatch(t, i, 50), 600)
			switch {
			case err == nil:
				ok.Store(i, true)
			case errors.Is(err, ErrOverloaded):
				overloaded.Store(i, true)
			default:
				other.Store(i, err)
			}
		}()
	}
	wg.Wait()
	count := func(m *sync.Map) (n int) {
		m.Range(func(any, any) bool { n++; return true })
		return
	}
	if count(&other) > 0 || count(&overloaded) == 0 || count(&ok) == 0 {
		t.Fatalf("ok %d, overloaded %d, other %d", count(&ok), count(&overloaded), count(&other))
	}
	// Every acknowledged request is stored, once; no other.
	var n, distinct int
	db.SQL.QueryRow(`SELECT count(*), count(DISTINCT req) FROM otel_traces`).Scan(&n, &distinct)
	if distinct != count(&ok) || n != 50*count(&ok) {
		t.Errorf("stored %d rows of %d requests; acknowledged %d", n, distinct, count(&ok))
	}
}

// Group commits overlap (one COMMITs while the next is written); schema
// changes must not: submissions that keep adding and widening columns,
// from many senders at once, all land with their values as sent.
func TestCommitterSchemaChangesUnderLoad(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "c.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var mu sync.Mutex
	var groups int
	c := db.NewCommitter(CommitOptions{OnCommit: func(ci CommitInfo) {
		mu.Lock()
		groups++
		mu.Unlock()
	}})
	const senders, each = 8, 30
	// Submission id has attribute k<id%5>, or, every 10th, a new key
	// n<id>; its value is the integer id, except for every 13th
	// submission, which sends it as a string: a stray of a BIGINT column,
	// whose count the catalog takes while other groups commit (a group
	// with strays goes on alone, as one that changes a schema does).
	key := func(id int) string {
		if id%10 == 3 {
			return fmt.Sprintf("n%d", id)
		}
		return fmt.Sprintf("k%d", id%5)
	}
	value := func(id int) string {
		if id%13 == 5 {
			return fmt.Sprintf(`{"stringValue":"s%d"}`, id)
		}
		return fmt.Sprintf(`{"intValue":"%d"}`, id)
	}
	// Deferred core columns get storage while other groups commit too:
	// every 7th submission has a trace_state, every 11th a dropped-events
	// count.
	deferred := func(id int) string {
		var f string
		if id%7 == 6 {
			f += fmt.Sprintf(`"traceState":"ts%d",`, id)
		}
		if id%11 == 10 {
			f += fmt.Sprintf(`"droppedEventsCount":%d,`, id)
		}
		return f
	}
	batch := func(id int) *shred.Batch {
		req := fmt.Sprintf(`{"resourceSpans":[{"scopeSpans":[{"spans":[{%s"traceId":"%032x","spanId":"%016x","name":"s","attributes":[{"key":"req","value":{"intValue":"%d"}},{"key":"%s","value":%s}]}]}]}]}`,
			deferred(id), id+1, id+1, id, key(id), value(id))
		b := shred.NewBatch(transforms.Traces.Core())
		if _, err := transforms.Traces.AppendJSON(b, []byte(req)); err != nil {
			t.Fatal(err)
		}
		return b
	}
	submitAll(t, c, senders, each, batch)
	c.Close()
	rows, err := db.SQL.Query(`SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = 'otel_traces' AND regexp_matches(column_name, '^[kn][0-9]+$')`)
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]string{}
	for rows.Next() {
		var n, typ string
		rows.Scan(&n, &typ)
		types[n] = typ
	}
	rows.Close()
	if len(types) != 5+senders*each/10 {
		t.Fatalf("attribute columns %v, want k0..k4 and n3, n13, ...", types)
	}
	var strays, inMap int64
	if err := db.SQL.QueryRow(`SELECT (SELECT sum(strays) FROM shredduck_columns WHERE table_name = 'otel_traces'),
		(SELECT coalesce(sum(cardinality(attributes_str)), 0) FROM otel_traces)`).Scan(&strays, &inMap); err != nil {
		t.Fatal(err)
	}
	if strays != inMap || strays == 0 {
		t.Errorf("the catalog counts %d strays, attributes_str holds %d", strays, inMap)
	}
	for id := 0; id < senders*each; id++ {
		col := key(id)
		var got string
		if err := db.SQL.QueryRow(fmt.Sprintf(`SELECT coalesce("%s"::VARCHAR, attributes_str['%s']) FROM otel_traces WHERE req = ?`, col, col), id).Scan(&got); err != nil {
			t.Fatalf("request %d: %v", id, err)
		}
		want := fmt.Sprint(id)
		if id%13 == 5 {
			want = fmt.Sprintf("s%d", id)
		}
		if got != want {
			t.Errorf("request %d: %s = %q (%s), want %q", id, col, got, types[col], want)
		}
		if err := db.SQL.QueryRow(`SELECT coalesce(trace_state, 'NULL') || ' ' || dropped_events_count FROM otel_traces WHERE req = ?`, id).Scan(&got); err != nil {
			t.Fatalf("request %d: %v", id, err)
		}
		want = "NULL 0"
		if id%7 == 6 {
			want = fmt.Sprintf("ts%d 0", id)
		}
		if id%11 == 10 {
			want = want[:len(want)-1] + fmt.Sprint(id)
		}
		if got != want {
			t.Errorf("request %d: trace_state, dropped_events_count = %q, want %q", id, got, want)
		}
	}
	var n int
	db.SQL.QueryRow(`SELECT count(*) FROM otel_traces`).Scan(&n)
	if n != senders*each {
		t.Errorf("rows %d, want %d", n, senders*each)
	}
	t.Logf("%d group commits (including retries and failures)", groups)
}

// A COMMIT that fails before it ends its transaction (DuckDB out of memory
// while heavy queries run), followed by a ROLLBACK that fails too, leaves
// the connection in an aborted transaction. It must not go back to the
// pool in that state: the next group, on a pool of one connection, commits.
func TestCommitterFailedCommitLeavesPoolClean(t *testing.T) {
	db, c := openCommitter(t, func(db *DB) { db.SQL.SetMaxOpenConns(1) })
	submit := func(id int) error {
		return c.Submit(context.Background(), "otel_traces", transforms.Traces, spanBatch(t, id, 3), 1)
	}
	commitStatement = "SELECT error('injected: out of memory at COMMIT')"
	rollbackStatement = "SELECT error('injected: out of memory at ROLLBACK')"
	err := submit(1)
	commitStatement, rollbackStatement = "COMMIT", "ROLLBACK"
	if err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("the injected COMMIT failure: %v", err)
	}
	for id := 2; id < 5; id++ {
		if err := submit(id); err != nil {
			t.Fatalf("submission %d after a failed COMMIT: %v", id, err)
		}
	}
	var n, distinct int
	if err := db.SQL.QueryRow(`SELECT count(*), count(DISTINCT req) FROM otel_traces`).Scan(&n, &distinct); err != nil {
		t.Fatal(err)
	}
	if n != 4*3 || distinct != 4 {
		t.Errorf("%d rows of %d requests, want 12 of 4 (the failed one absent)", n, distinct)
	}
}

// The one-by-one retry of a failed group must not take queued submissions
// into its transactions: a bad one among them failed the retried innocent
// ones with its error.
func TestCommitterRetryTakesNothingQueued(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "c.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// The first commit's OnCommit holds the committer until the queue is
	// filled, so that the next group is exactly what the test queued.
	entered, release := make(chan struct{}), make(chan struct{})
	var calls int
	c := db.NewCommitter(CommitOptions{OnCommit: func(CommitInfo) {
		if calls++; calls == 1 {
			close(entered)
			<-release
		}
	}})
	defer c.Close()
	logs := func() *shred.Batch {
		b := shred.NewBatch(transforms.Logs.Core())
		if _, err := transforms.Logs.AppendJSON(b, []byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":"x"}}]}]}]}`)); err != nil {
			t.Fatal(err)
		}
		return b
	}
	first := make(chan error, 1)
	go func() {
		first <- c.Submit(context.Background(), "otel_traces", transforms.Traces, spanBatch(t, 0, 1), 1)
	}()
	<-entered
	// good, bad, good, good, bad, good, good: the group of the first two
	// fails; retrying its good one alone must not take the rest.
	bad := []bool{false, true, false, false, true, false, false}
	results := make([]chan error, len(bad))
	for i, isBad := range bad {
		results[i] = make(chan error, 1)
		go func() {
			if isBad {
				results[i] <- c.Submit(context.Background(), "otel_traces", transforms.Logs, logs(), 1)
				return
			}
			results[i] <- c.Submit(context.Background(), "otel_traces", transforms.Traces, spanBatch(t, i+1, 3), 1)
		}()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			if n, _ := c.QueueDepth(); n == i+1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("submission %d is not queued", i)
			}
		}
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for i, isBad := range bad {
		err := <-results[i]
		if (err != nil) != isBad {
			t.Errorf("submission %d (bad %v): %v", i, isBad, err)
		}
	}
	var n int
	db.SQL.QueryRow(`SELECT count(*) FROM otel_traces`).Scan(&n)
	if n != 1+5*3 {
		t.Errorf("rows %d, want %d", n, 1+5*3)
	}
}

// Exclusive runs its function between groups, with no group being
// written meanwhile: a group submitted while it runs commits after it;
// DELETEs in it (retention's) never conflict with the appends around
// them. After Close it returns ErrClosed.
func TestCommitterExclusive(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "c.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c := db.NewCommitter(CommitOptions{})
	if err := c.Submit(context.Background(), "otel_traces", transforms.Traces, spanBatch(t, 0, 10), 100); err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	exclusiveDone := make(chan error, 1)
	go func() {
		exclusiveDone <- c.Exclusive(context.Background(), func() error {
			close(entered)
			<-release
			_, err := db.SQL.Exec("DELETE FROM otel_traces WHERE req = 0")
			return err
		})
	}()
	<-entered
	submitted := make(chan error, 1)
	go func() {
		submitted <- c.Submit(context.Background(), "otel_traces", transforms.Traces, spanBatch(t, 1, 10), 100)
	}()
	select {
	case err := <-submitted:
		t.Fatalf("a group committed while Exclusive's function ran: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := <-exclusiveDone; err != nil {
		t.Fatal(err)
	}
	if err := <-submitted; err != nil {
		t.Fatal(err)
	}
	// Under load, DELETE turns never make a group fail.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var turns int
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := c.Exclusive(context.Background(), func() error {
				_, err := db.SQL.Exec("DELETE FROM otel_traces WHERE rowid IN (SELECT rowid FROM otel_traces LIMIT 3)")
				return err
			}); err != nil {
				t.Error(err)
				return
			}
			turns++
		}
	}()
	submitAll(t, c, 4, 30, func(id int) *shred.Batch { return spanBatch(t, 100+id, 5) })
	close(stop)
	wg.Wait()
	t.Logf("%d turns beside 120 submissions", turns)
	c.Close()
	if err := c.Exclusive(context.Background(), func() error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("Exclusive after Close: %v", err)
	}
}

// A key that overflowed at first gets its stored column (a promotion: an
// ALTER TABLE) in one group while the next is written: that group must
// wait for the promotion's COMMIT (it appended to a column its snapshot
// did not have: "the column must exist in the table", a 503 in serve).
func TestCommitterPromotionThenPipelinedGroup(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "c.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.ColumnDensity = shred.DefaultDensity
	db.YoungColumns = 0 // a key promoted by density
	c := db.NewCommitter(CommitOptions{})
	defer c.Close()
	next := 0
	batch := func(n int, withKey func(i int) bool) *shred.Batch {
		var sp []string
		for range n {
			next++
			attr := ""
			if withKey(next) {
				attr = fmt.Sprintf(`,"attributes":[{"key":"p","value":{"intValue":"%d"}}]`, next)
			}
			sp = append(sp, fmt.Sprintf(`{"traceId":"%032x","spanId":"%016x","name":"s"%s}`, next, next, attr))
		}
		b := shred.NewBatch(transforms.Traces.Core())
		if _, err := transforms.Traces.AppendJSON(b, []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[`+strings.Join(sp, ",")+`]}]}]}`)); err != nil {
			t.Fatal(err)
		}
		return b
	}
	submit := func(b *shred.Batch) error {
		return c.Submit(context.Background(), "otel_traces", transforms.Traces, b, 100)
	}
	// p on 1 of 2,000 spans: below the 1% density, it overflows.
	if err := submit(batch(2000, func(i int) bool { return i == 1 })); err != nil {
		t.Fatal(err)
	}
	// The promoting group waits before its COMMIT until the next group
	// has been submitted, so that the next one is planned behind it.
	committing, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hold := func() {
		once.Do(func() {
			close(committing)
			<-release
		})
	}
	beforeGroupCommit.Store(&hold)
	defer beforeGroupCommit.Store(nil)
	crossing, after := batch(100, func(int) bool { return true }), batch(10, func(int) bool { return true })
	promote := make(chan error, 1)
	go func() { promote <- submit(crossing) }() // p crosses the density: promoted
	<-committing
	second := make(chan error, 1)
	go func() { second <- submit(after) }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, bytes := c.QueueDepth(); bytes >= 200 {
			break // submitted (each counts its 100 input bytes until answered) behind the promoting group
		}
		if time.Now().After(deadline) {
			t.Fatal("the second submit never queued")
		}
	}
	close(release)
	if err := <-second; err != nil {
		t.Fatalf("the group after a promotion: %v", err)
	}
	if err := <-promote; err != nil {
		t.Fatalf("the promotion: %v", err)
	}
	var promoted int
	if err := db.SQL.QueryRow(`SELECT count(*) FROM shredduck_columns WHERE table_name = 'otel_traces' AND column_name = 'p' AND promoted IS NOT NULL`).Scan(&promoted); err != nil || promoted != 1 {
		t.Fatalf("p promoted: %d %v", promoted, err)
	}
	// The promotion moved the first value into the column (backfill): a
	// plain reader counts all 111.
	var n int
	if err := db.SQL.QueryRow(`SELECT count(p) FROM otel_traces`).Scan(&n); err != nil || n != 111 {
		t.Fatalf("%d values in column p (%v), want 111", n, err)
	}
}
