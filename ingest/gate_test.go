package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/shred"
	"github.com/shredduck/shredduck/transforms"
)

// keyedSpans returns a batch of n spans named prefix-i.. with an attribute
// key that is new every few batches.
func keyedSpans(t *testing.T, prefix string, i, n int) *shred.Batch {
	t.Helper()
	b := shred.NewBatch(transforms.Traces.Core())
	for k := range n {
		line := fmt.Sprintf(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"%s-%d-%d","traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","startTimeUnixNano":"1","endTimeUnixNano":"2","attributes":[{"key":"%s.%d","value":{"stringValue":"v"}}]}]}]}]}`,
			prefix, i, k, prefix, i/3)
		if _, err := transforms.Traces.AppendJSON(b, []byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// schemaSource is a Source of n items from keyedSpans.
type schemaSource struct {
	t   *testing.T
	n   int
	pos int
}

func (s *schemaSource) Name() string          { return "keyed" }
func (s *schemaSource) Seek(pos uint64) error { s.pos = int(pos); return nil }
func (s *schemaSource) Stored(uint64)         {}
func (s *schemaSource) Next(ctx context.Context, wait time.Duration) (ingest.SourceItem, bool, error) {
	if s.pos >= s.n {
		return ingest.SourceItem{}, false, nil
	}
	s.pos++
	return ingest.SourceItem{Table: "otel_traces", Tr: transforms.Traces, Batch: keyedSpans(s.t, "l", s.pos, 3), Next: uint64(s.pos), Arrived: time.Now()}, true, nil
}

// A Committer and a Loader add columns to one table at once: every row is
// there, and the checkpoint after finds the table whole. (Without the
// writers' gate, rows one committed while the other's ALTER TABLE was
// open were lost: "misaligned count" at the checkpoint.)
func TestWritersChangeSchemasApart(t *testing.T) {
	db := openDB(t)
	const loaderItems, senders, perSender = 150, 3, 50
	c := db.NewCommitter(ingest.CommitOptions{})
	l := db.NewLoader(&schemaSource{t: t, n: loaderItems}, ingest.LoaderOptions{MaxLag: 2 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			for i := range perSender {
				if err := c.Submit(context.Background(), "otel_traces", transforms.Traces, keyedSpans(t, fmt.Sprintf("c%d", s), i, 3), 100); err != nil {
					t.Errorf("submit: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	c.Close()
	if n, want := rowCount(t, db, "otel_traces"), int64(3*(loaderItems+senders*perSender)); n != want {
		t.Errorf("%d rows, want %d", n, want)
	}
	if err := db.Checkpoint(context.Background()); err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
}

// A writer sees the schema changes another writer committed since its
// last transaction: after a Loader widened w from BIGINT to DOUBLE and
// added k, the Committer's next integer beyond ±2^53 is a stray of the
// DOUBLE column (kept exactly, in the overflow), not an integer appended
// to what it took for a BIGINT column (DuckDB would round it), and its k
// goes into the column the Loader added (not a second ADD COLUMN, which
// DuckDB refuses). Before, each writer kept the table's schema as it had
// last seen it.
func TestWritersSeeEachOthersSchemas(t *testing.T) {
	db := openDB(t)
	batch := func(name string, attrs ...attr) *shred.Batch {
		b := shred.NewBatch(transforms.Traces.Core())
		if _, err := transforms.Traces.AppendJSON(b, []byte(traceLine(nil, span{name, attrs}))); err != nil {
			t.Fatal(err)
		}
		return b
	}
	c := db.NewCommitter(ingest.CommitOptions{})
	defer c.Close()
	submit := func(name string, attrs ...attr) {
		t.Helper()
		if err := c.Submit(context.Background(), "otel_traces", transforms.Traces, batch(name, attrs...), 100); err != nil {
			t.Fatalf("submit %s: %v", name, err)
		}
	}
	submit("a", attr{"w", 2})
	src := &sliceSource{items: []ingest.SourceItem{{Table: "otel_traces", Tr: transforms.Traces,
		Batch: batch("b", attr{"w", 2.5}, attr{"k", "v"}), Next: 1, Arrived: time.Now()}}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := db.NewLoader(src, ingest.LoaderOptions{}).Run(ctx); err != nil {
		t.Fatal(err)
	}
	submit("c", attr{"w", 1<<53 + 1})
	submit("d", attr{"k", "v2"})
	for col, want := range map[string]string{"w": "[2.0 2.5 ~9007199254740993 <NULL>]", "k": "[<NULL> v <NULL> v2]"} {
		if got := fmt.Sprint(strayValues(t, db, "otel_traces", col, "name")); got != want {
			t.Errorf("%s = %s, want %s", col, got, want)
		}
	}
}

// A shared load that began before another writer committed may not widen a
// column: DuckDB's ALTER casts that writer's rows too, but the check that
// a BIGINT column holds no integer beyond ±2^53 before it becomes DOUBLE
// sees only the load's snapshot. It stops with ErrExclusive, which the
// Committer and the Loaders answer by writing again alone: then the check
// sees b's integer, the column stays BIGINT and the double is a stray.
// Before, such a widening in an old snapshot read b's 6 as "6.0"
// (TestKafkaCrashWithHTTP: "wide.0 VARCHAR 6.0"); a widening to DOUBLE
// there would round b's integer.
func TestWidenSeesRowsCommittedSinceBegin(t *testing.T) {
	db := openDB(t)
	ctx := ctxFor(t)
	write := func(tx *ingest.Tx, name string, attrs ...attr) error {
		b := shred.NewBatch(transforms.Traces.Core())
		if _, err := transforms.Traces.AppendJSON(b, []byte(traceLine(nil, span{name, attrs}))); err != nil {
			t.Fatal(err)
		}
		return tx.Write("otel_traces", transforms.Traces, b, 0, nil)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	tx, err := db.Begin(ctx, 0)
	must(err)
	must(write(tx, "a", attr{"w", 2}))
	must(tx.Commit())

	a, err := ingest.BeginShared(ctx, db)
	must(err)
	must(write(a, "a2", attr{"w", 3}))
	b, err := ingest.BeginShared(ctx, db)
	must(err)
	must(write(b, "b", attr{"w", 1<<53 + 1}))
	must(b.Commit())
	switch err := write(a, "c", attr{"w", 2.5}); {
	case err == nil:
		t.Error("a widened in a snapshot older than b's commit")
		must(a.Commit())
	case errors.Is(err, ingest.ErrExclusive):
		a.Rollback()
		tx, err = db.Begin(ctx, 0)
		must(err)
		must(write(tx, "a2", attr{"w", 3}))
		must(write(tx, "c", attr{"w", 2.5}))
		must(tx.Commit())
	default:
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(strayValues(t, db, "otel_traces", "w", "name")), "[2 3 9007199254740993 ~2.5]"; got != want {
		t.Errorf("w = %s, want %s", got, want)
	}
	if got := queryColumn(t, db, "SELECT CAST(attributes_double['w'] AS VARCHAR) FROM otel_traces WHERE name = 'c'"); fmt.Sprint(got) != "[2.5]" {
		t.Errorf("attributes_double['w'] of c = %v, want [2.5]", got)
	}
	if c := catalogEntry(t, db, "otel_traces", "record", "w"); c.Type != "BIGINT" || c.Strays != 1 {
		t.Errorf("catalog of w: %s, %d strays; want BIGINT, 1", c.Type, c.Strays)
	}
}
