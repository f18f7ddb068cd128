//go:build e2e

package serve

// A node that consumes Kafka and takes OTLP/HTTP at once, both streams
// adding and widening columns of otel_traces, SIGKILLed at random points
// and restarted on its file: the Kafka loader and the HTTP writer (the
// Committer, or with --ack log the ingest log's loader) change one table's
// schema beside each other while checkpoints run (ingest/gate.go). Run
// with
//
//	go test -tags e2e -run TestKafkaCrashWithHTTP -v ./serve/

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shredduck/shredduck/internal/kafkatest"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/shred"
)

const (
	mixedSpans = 3  // per request, of either stream
	wideBlock  = 40 // requests of a stream per wide.<n> key
)

// mixedTraces is request i of the stream tagged tag: keyedTraces with
// streamKeys, and a key wide.<i/40>, the same in both streams, whose
// value is i as an integer, then as a double, then as a string within its
// 40 requests, so that its column is added, widened once (BIGINT to
// DOUBLE) and then takes strays (its strings go to attributes_str).
func mixedTraces(tag byte, i int) ptraceotlp.ExportRequest {
	_, req := keyedTraces(tag, i, mixedSpans, streamKeys(tag, i)...)
	key := fmt.Sprintf("wide.%d", i/wideBlock)
	spans := req.Traces().ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	for j := range spans.Len() {
		attrs := spans.At(j).Attributes()
		switch (i % wideBlock) * 3 / wideBlock {
		case 0:
			attrs.PutInt(key, int64(i))
		case 1:
			attrs.PutDouble(key, float64(i))
		default:
			attrs.PutStr(key, strconv.Itoa(i))
		}
	}
	return req
}

// childMetric sums the samples of a metric on a child's /metrics; -1 if
// they cannot be read.
func childMetric(c *e2eChild, name string) float64 {
	resp, err := http.Get(c.url + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, name+" ") && !strings.HasPrefix(l, name+"{") {
			continue
		}
		v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}

// TestKafkaCrashWithHTTP: one node consumes a Kafka stream and takes
// OTLP/HTTP requests, both with attribute keys that keep appearing and
// changing type, with a small checkpoint threshold; it is SIGKILLed at
// random points, five times, and restarted on its file. In the end every
// record produced is stored once, every acknowledged request once, every
// other request whole or not at all; every span's widened values are its
// own; DuckDB reads every column of the table, checkpoints it and opens
// it again.
func TestKafkaCrashWithHTTP(t *testing.T) {
	bin := e2eBuildShredduck(t)
	for _, mode := range []struct {
		name  string
		flags []string
	}{
		{"ack commit", nil},
		{"ack log", []string{"--ack", "log", "--log-segment-bytes", "64KiB"}},
	} {
		t.Run(mode.name, func(t *testing.T) { kafkaCrashWithHTTP(t, bin, mode.flags...) })
	}
}

func kafkaCrashWithHTTP(t *testing.T, bin string, extra ...string) {
	const (
		rounds      = 5
		httpWorkers = 2
	)
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0))
	t.Logf("seed %d", seed)
	c := kafkatest.Cluster(t, DefaultKafkaTopics[:]...)
	prod := kafkatest.Producer(t, c)
	db := filepath.Join(t.TempDir(), "node.duckdb")
	// Every key a column (the memory limit, not the density, bounds them).
	flags := append([]string{"--checkpoint-threshold", "256KB", "--column-density", "0", "--memory-limit", "1GB"}, extra...)

	// The producer streams from the first round to the last, while the
	// node is down too.
	var producing atomic.Int64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			var recs []*kgo.Record
			from := int(producing.Load())
			for i := from; i < from+10; i++ {
				req := mixedTraces('k', i)
				var v []byte
				var err error
				if i%4 == 3 {
					v, err = req.MarshalJSON()
				} else {
					v, err = req.MarshalProto()
				}
				if err != nil {
					t.Error(err)
					return
				}
				key := req.Traces().ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceID()
				recs = append(recs, &kgo.Record{Topic: "otlp_spans", Key: key[:], Value: v})
			}
			if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				t.Errorf("produce: %v", err)
				return
			}
			producing.Add(int64(len(recs)))
			time.Sleep(100 * time.Millisecond)
		}
	}()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-done
	}()

	var (
		mu       sync.Mutex
		outcomes = make(map[int]crashOutcome) // HTTP request i: sent once, never again
		seq      atomic.Int64
	)
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: httpWorkers}}
	var child *e2eChild
	for round := range rounds {
		child = kafkaNode(t, bin, db, c.ListenAddrs(), flags...)
		var wg sync.WaitGroup
		var acked, refused atomic.Int64
		for range httpWorkers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(seq.Add(1)) - 1
					body, err := mixedTraces('h', i).MarshalProto()
					if err != nil {
						t.Error(err)
						return
					}
					out := crashPost(context.Background(), client, child.url, body)
					mu.Lock()
					outcomes[i] = out
					mu.Unlock()
					if out == crashAcked {
						acked.Add(1)
						time.Sleep(30 * time.Millisecond)
						continue
					}
					select {
					case <-child.exited:
						return
					case <-time.After(50 * time.Millisecond): // a 503 under load: not sent again
						refused.Add(1)
					}
				}
			}()
		}
		time.Sleep(time.Second + time.Duration(rng.Int64N(int64(2*time.Second))))
		added := childMetric(child, "shredduck_columns_added_total")
		widened := childMetric(child, "shredduck_columns_widened_total")
		checkpoints := childMetric(child, "shredduck_checkpoint_duration_seconds_count")
		child.kill()
		wg.Wait()
		if ws, ok := child.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: the node did not die of SIGKILL: %v\n%s", round, child.cmd.ProcessState, child.log())
		}
		mu.Lock()
		sent := len(outcomes)
		mu.Unlock()
		t.Logf("round %d: killed after %d columns added, %.0f widened, %.0f checkpoints, %d HTTP requests acknowledged, %d refused; %d requests sent, %d records produced so far",
			round, int(added), widened, checkpoints, acked.Load(), refused.Load(), sent, producing.Load())
		if acked.Load() == 0 {
			t.Fatalf("round %d: no HTTP request acknowledged\n%s", round, child.log())
		}
	}
	close(stop)
	<-done
	produced := int(producing.Load())
	var ackedReqs int
	for _, out := range outcomes {
		if out == crashAcked {
			ackedReqs++
		}
	}

	// The last start catches up on Kafka (and with --ack log loads what
	// its log holds), then stops cleanly.
	child = kafkaNode(t, bin, db, c.ListenAddrs(), flags...)
	wantK := produced * mixedSpans
	deadline := time.Now().Add(60 * time.Second)
	for {
		k, err := nodeQuery(child, `SELECT count(*) FILTER (WHERE starts_with("test.id", 'k')), count(*) FILTER (WHERE starts_with("test.id", 'h')) FROM otel_traces`)
		if err != nil {
			t.Fatalf("query: %v\n%s", err, child.log())
		}
		if k != nil && k[0] >= wantK && k[1] >= ackedReqs*mixedSpans {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node holds %v Kafka and HTTP spans after 60s; want %d and at least %d\n%s", k, wantK, ackedReqs*mixedSpans, child.log())
		}
		time.Sleep(100 * time.Millisecond)
	}
	child.stop()

	d, err := ingest.Open(db)
	if err != nil {
		t.Fatalf("open after the crashes: %v", err)
	}
	// Per request: its spans' count and distinct span ids.
	type stored struct{ rows, ids int }
	reqs := map[string]stored{}
	keyQuery(t, d, `SELECT regexp_extract("test.id", '^(.[0-9]+)-', 1), count(*), count(DISTINCT span_id) FROM otel_traces GROUP BY 1`, nil, func(rows *sql.Rows) error {
		var id string
		var s stored
		err := rows.Scan(&id, &s.rows, &s.ids)
		reqs[id] = s
		return err
	})
	var bad []string
	check := func(id string, mayMiss bool) {
		s, ok := reqs[id]
		delete(reqs, id)
		if ok && s.rows == mixedSpans && s.ids == mixedSpans || !ok && mayMiss {
			return
		}
		bad = append(bad, fmt.Sprintf("%s: %d rows, %d span ids", id, s.rows, s.ids))
	}
	for i := range produced {
		check(fmt.Sprintf("k%d", i), false)
	}
	var unackedStored int
	for i, out := range outcomes {
		id := fmt.Sprintf("h%d", i)
		if _, ok := reqs[id]; ok && out == crashFailed {
			unackedStored++
		}
		check(id, out == crashFailed)
	}
	for id, s := range reqs {
		bad = append(bad, fmt.Sprintf("%s: %d rows of a request never sent", id, s.rows))
	}
	if len(bad) > 0 {
		t.Errorf("%d requests not stored as they should be (once, whole; an unacknowledged one whole or not at all), e.g. %v", len(bad), bad[:min(10, len(bad))])
	}
	t.Logf("%d Kafka records stored once; of %d HTTP requests %d acknowledged (stored once), %d not acknowledged but stored",
		produced, len(outcomes), ackedReqs, unackedStored)

	// Each span's values are its own: num widened from BIGINT to DOUBLE;
	// each wide.<n> widened from BIGINT to DOUBLE, its strings strays in
	// attributes_str under the same key (the column keeps its type), or,
	// where a string came first, a VARCHAR column whose every value reads
	// as the integer's text.
	var blocks int
	keyQuery(t, d, `SELECT max(CAST(regexp_extract("test.id", '^.([0-9]+)-', 1) AS INT)) // `+strconv.Itoa(wideBlock)+` FROM otel_traces`, nil,
		func(rows *sql.Rows) error { return rows.Scan(&blocks) })
	var wrongs []string
	for n := range blocks + 1 {
		key := fmt.Sprintf("wide.%d", n)
		keyQuery(t, d, `SELECT "test.id", CAST(num AS VARCHAR), coalesce(CAST(w AS VARCHAR), stray), typeof(w) FROM (SELECT "test.id", num,
			`+shred.QuoteIdent(key)+` AS w, attributes_str['`+key+`'] AS stray,
			CAST(regexp_extract("test.id", '^.([0-9]+)-', 1) AS INT) AS i FROM otel_traces)
			WHERE i // `+strconv.Itoa(wideBlock)+` = ? AND (num IS DISTINCT FROM CASE WHEN i < 100 THEN i ELSE i + 0.5 END
			OR (w IS NULL) = (stray IS NULL) OR TRY_CAST(coalesce(CAST(w AS VARCHAR), stray) AS DOUBLE) IS DISTINCT FROM i
			OR stray IS DISTINCT FROM NULL AND stray IS DISTINCT FROM CAST(i AS VARCHAR)
			OR typeof(w) = 'VARCHAR' AND w IS DISTINCT FROM CAST(i AS VARCHAR))
			ORDER BY 1`, []any{n}, func(rows *sql.Rows) error {
			var id, num, w, typ sql.NullString
			err := rows.Scan(&id, &num, &w, &typ)
			wrongs = append(wrongs, fmt.Sprintf("%s: num %s, wide.%d %s %s", id.String, num.String, n, typ.String, w.String))
			return err
		})
	}
	if len(wrongs) > 0 {
		t.Errorf("%d spans with a wrong num or wide.<n> value, e.g. %v", len(wrongs), wrongs[:min(len(wrongs), 12)])
	}

	// DuckDB reads every column of every row, checkpoints, and opens the
	// file again with the same rows.
	scan := func(q interface {
		QueryRow(string, ...any) *sql.Row
		Query(string, ...any) (*sql.Rows, error)
	}) (rows int, cols int) {
		t.Helper()
		names, err := q.Query(`SELECT column_name FROM duckdb_columns() WHERE table_name = 'otel_traces' AND schema_name = 'main' ORDER BY column_index`)
		if err != nil {
			t.Fatal(err)
		}
		var counts []string
		for names.Next() {
			var n string
			if err := names.Scan(&n); err != nil {
				t.Fatal(err)
			}
			counts = append(counts, "count("+shred.QuoteIdent(n)+") + count(*) FILTER (WHERE "+shred.QuoteIdent(n)+" IS NULL)")
		}
		names.Close()
		dest := make([]any, len(counts)+1)
		got := make([]int, len(counts)+1)
		for i := range dest {
			dest[i] = &got[i]
		}
		if err := q.QueryRow("SELECT count(*), " + strings.Join(counts, ", ") + " FROM otel_traces").Scan(dest...); err != nil {
			t.Fatalf("a scan of every column: %v", err)
		}
		for i, n := range got[1:] {
			if n != got[0] {
				t.Errorf("column %d of otel_traces scans %d rows; the table has %d", i, n, got[0])
			}
		}
		return got[0], len(counts)
	}
	rows, cols := scan(d.SQL)
	if _, err := d.SQL.Exec("CHECKPOINT"); err != nil {
		t.Fatalf("CHECKPOINT: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	raw, err := sql.Open("duckdb", db)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	again, _ := scan(raw)
	if again != rows {
		t.Errorf("after a checkpoint and an open otel_traces has %d rows; before, %d", again, rows)
	}
	t.Logf("otel_traces: %d rows, %d columns, every one scanned whole before and after a checkpoint", rows, cols)
}
