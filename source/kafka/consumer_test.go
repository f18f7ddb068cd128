package kafka

import (
	"cmp"
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shredduck/shredduck/internal/kafkatest"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/shred"
	"github.com/shredduck/shredduck/source"
	"github.com/shredduck/shredduck/transforms"
)

// startConsumer starts a consumer on a new database, as serve does, and
// closes both when the test ends.
func startConsumer(t *testing.T, cfg Config, lag time.Duration) *Consumer {
	t.Helper()
	db, err := ingest.Open(filepath.Join(t.TempDir(), "test.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := Start(cfg, Deps{
		DB:      db,
		Batches: source.NewBatchPool(source.DoorKeptBytes),
		Signals: [3]Signal{
			{Name: "traces", Table: "otel_traces", Tr: transforms.Traces},
			{Name: "logs", Table: "otel_logs", Tr: transforms.Logs},
			{Name: "metrics", Table: "otel_metrics", Tr: transforms.Metrics},
		},
		MaxBody:    64 << 20,
		Limits:     shred.Limits{MaxRows: 100_000, MaxKeys: 1000},
		Loader:     ingest.LoaderOptions{MaxLag: cmp.Or(lag, time.Second)},
		OnRejected: func(int) {},
		Log:        log,
		Limited:    source.NewLimitedLog(log, time.Second),
		Metrics:    prometheus.NewRegistry(),
	})
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
		db.Close()
	})
	return c
}

// waitSpans waits until otel_traces holds want rows, and returns its
// count of distinct span ids and of rows.
func waitSpans(t *testing.T, db *ingest.DB, want int, within time.Duration) (distinct, rows int) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := db.SQL.QueryRow(`SELECT count(DISTINCT span_id), count(*) FROM otel_traces`).Scan(&distinct, &rows)
		if err == nil && rows >= want || time.Now().After(deadline) {
			return distinct, rows
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Two claims of one waiting partition at once (the group's callback and
// the tender both claim waiting partitions) leave it claimed once: the
// second used to find it owned, take that for a revocation and release
// it, and the node then dropped the partition's records until the next
// rebalance.
func TestKafkaClaimOnce(t *testing.T) {
	c := kafkatest.Cluster(t, DefaultTopics[:]...)
	src := startConsumer(t, Config{Brokers: c.ListenAddrs(), Topics: DefaultTopics, SessionTimeout: 2 * time.Second}, 0).src
	tp := topicPart{"otlp_spans", 0}
	state := func() partState {
		src.mu.Lock()
		defer src.mu.Unlock()
		if p := src.parts[tp]; p != nil {
			return p.state
		}
		return partState(255) // not assigned
	}
	for deadline := time.Now().Add(10 * time.Second); state() != partOwned; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("otlp_spans/0 not claimed: state %v", state())
		}
	}
	commits, err := src.fetchCommits(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Assigned again, as after a rebalance; both claims get past their
	// first look before either commits (they take turns at cmu).
	src.commitMu.Lock()
	src.mu.Lock()
	src.parts[tp].state = partWaiting
	src.mu.Unlock()
	var claimed atomic.Int32
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, ok := src.claim(context.Background(), tp, commits[tp]); ok {
				claimed.Add(1)
			}
		}()
	}
	time.Sleep(100 * time.Millisecond)
	src.commitMu.Unlock()
	wg.Wait()
	if got := state(); got != partOwned || claimed.Load() != 1 {
		t.Fatalf("after two claims at once: state %v (want %v), claimed %d times (want 1)", got, partOwned, claimed.Load())
	}
}

// A partition the group's callback could not claim (another node held
// it) but the tender claimed before the callback paused it is consumed:
// the late pause used to stop it for good (TestKafkaRelease saw two
// claimed partitions never read).
func TestKafkaClaimBeforePause(t *testing.T) {
	c := kafkatest.Cluster(t, DefaultTopics[:]...)
	kafkatest.CommitAsNode(t, c, DefaultGroup, "owned:ghost", map[int32]int64{2: 0})
	tp := topicPart{"otlp_spans", 2}
	var once sync.Once
	kafkaAfterClaims = func(src *kafkaSource) {
		once.Do(func() {
			// The holder's release, as this member commits it (the group
			// takes commits only from its members).
			if err := src.commit(context.Background(), map[topicPart]int64{tp: 0}, metaReleased); err != nil {
				t.Error(err)
				return
			}
			src.kickTend()
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				src.mu.Lock()
				p := src.parts[tp]
				owned := p != nil && p.state == partOwned
				src.mu.Unlock()
				if owned {
					return
				}
			}
			t.Error("the tender did not claim otlp_spans/2 while the group's callback ran")
		})
	}
	t.Cleanup(func() { kafkaAfterClaims = nil })
	cons := startConsumer(t, Config{Brokers: c.ListenAddrs(), Topics: DefaultTopics, SessionTimeout: 2 * time.Second}, 100*time.Millisecond)
	prod := kafkatest.Producer(t, c)
	const n = 120
	kafkatest.Produce(t, prod, 0, n, 1)
	if distinct, rows := waitSpans(t, cons.src.d.DB, n, 20*time.Second); distinct != n || rows != n {
		t.Fatalf("otel_traces holds %d rows, %d distinct spans; want %d of each", rows, distinct, n)
	}
}
