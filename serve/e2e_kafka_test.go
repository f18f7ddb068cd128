//go:build e2e

package serve

// Kafka nodes as real processes: `shredduck serve --kafka-brokers` children
// of one consumer group consume a stream keyed by trace id from an
// in-process cluster while they are SIGKILLed, restarted and added; once
// they have caught up, the union of their tables holds every produced
// span exactly once; in the group test the nodes also roll sealed hours
// off to Parquet, each into its own directory, and the exports read
// together hold every span of those hours once. Run with
//
//	go test -tags e2e -run TestKafka -v ./serve/

import (
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shredduck/shredduck/internal/kafkatest"

	"github.com/shredduck/shredduck/ingest"
)

const kafkaSpans = 2 // per record

// kafkaNode is a shredduck serve child consuming the cluster.
func kafkaNode(t *testing.T, bin, db string, brokers []string, extra ...string) *e2eChild {
	t.Helper()
	return e2eStartChild(t, bin, db, append([]string{"--kafka-brokers", strings.Join(brokers, ","),
		"--kafka-session-timeout", "1s", "--log-level", "debug", "--max-visibility-lag", "200ms", "--memory-limit", "128MB", "--threads", "1"}, extra...)...)
}

// nodeQuery runs a query of one row of integers on a node, through
// /v1/query (the child holds its database's lock); nil before the table
// exists.
func nodeQuery(c *e2eChild, query string) ([]int, error) {
	resp, err := http.Post(c.url+"/v1/query?format=csv", "application/sql", strings.NewReader(query))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, nil // no table yet
	}
	lines := strings.Fields(string(b))
	var out []int
	for _, f := range strings.Split(lines[len(lines)-1], ",") {
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %q: %w", query, b, err)
		}
		out = append(out, n)
	}
	return out, nil
}

// TestKafkaCrashOneNode: one node SIGKILLed twice mid-stream and
// restarted on its file.
func TestKafkaCrashOneNode(t *testing.T) {
	kafkaCrash(t, 1, false, func(t *testing.T, nodes []*e2eChild, restart func(i int), add func()) {
		for range 2 {
			time.Sleep(700 * time.Millisecond)
			nodes[0].kill()
			restart(0)
		}
	})
}

// TestKafkaCrashGroup: two nodes, a third added while they run, one
// SIGKILLed and restarted at once, another SIGKILLed and restarted after
// its session expired; every node ends with some of the spans. Each node
// exports to a directory of its own and expires what it exported (a
// third of the spans are of each of two past hours, a third of an hour
// not over): the exports read together hold each span of the past hours
// once, the tables the rest.
func TestKafkaCrashGroup(t *testing.T) {
	kafkaCrash(t, 2, true, func(t *testing.T, nodes []*e2eChild, restart func(i int), add func()) {
		time.Sleep(500 * time.Millisecond)
		add()
		time.Sleep(700 * time.Millisecond)
		nodes[0].kill()
		time.Sleep(300 * time.Millisecond)
		restart(0)
		// Down past its session: the others are given its partitions and
		// wait for it to release them.
		time.Sleep(500 * time.Millisecond)
		nodes[1].kill()
		time.Sleep(2500 * time.Millisecond)
		restart(1)
	})
}

func kafkaCrash(t *testing.T, start int, export bool, script func(t *testing.T, nodes []*e2eChild, restart func(i int), add func())) {
	bin := e2eBuildShredduck(t)
	c := kafkatest.Cluster(t, DefaultKafkaTopics[:]...)
	prod := kafkatest.Producer(t, c)
	dir := t.TempDir()
	exports := filepath.Join(dir, "parquet")
	// Request i's spans start in one of two past hours (sealed at once,
	// exported and expired within a second of arriving) or in the next
	// hour (not over during the test: it stays in the tables).
	hour := time.Now().Truncate(time.Hour)
	sealed := func(i int) bool { return export && i%3 != 2 }
	startAt := func(i int) int64 {
		if !export {
			return 1_700_000_000_000_000_000
		}
		at := [3]time.Time{hour.Add(-3 * time.Hour), hour.Add(-2 * time.Hour), hour.Add(time.Hour)}[i%3]
		return at.Add(time.Duration(i) * time.Millisecond).UnixNano()
	}
	flags := func(node int) []string {
		if !export {
			return nil
		}
		return []string{"--export-dir", filepath.Join(exports, fmt.Sprintf("node%d", node)), "--export-delay", "1s", "--export-interval", "300ms",
			"--retention-traces", "1h", "--retention-interval", "300ms"}
	}
	var mu sync.Mutex
	var nodes []*e2eChild
	var dbs []string
	add := func() {
		db := fmt.Sprintf("%s/node%d.duckdb", dir, len(dbs))
		n := kafkaNode(t, bin, db, c.ListenAddrs(), flags(len(dbs))...)
		mu.Lock()
		nodes, dbs = append(nodes, n), append(dbs, db)
		mu.Unlock()
	}
	restart := func(i int) {
		n := kafkaNode(t, bin, dbs[i], c.ListenAddrs(), flags(i)...)
		mu.Lock()
		nodes[i] = n
		mu.Unlock()
	}
	for range start {
		add()
	}
	// The producer streams for the script's whole run.
	const batch = 20
	var produced int
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			kafkatest.ProduceAt(t, prod, produced, produced+batch, kafkaSpans, startAt)
			produced += batch
			time.Sleep(10 * time.Millisecond)
		}
	}()
	script(t, nodes, restart, add)
	time.Sleep(300 * time.Millisecond)
	close(stop)
	<-done
	want, wantSealed := produced*kafkaSpans, 0
	for i := range produced {
		if sealed(i) {
			wantSealed += kafkaSpans
		}
	}
	t.Logf("produced %d records, %d spans, %d of them of past hours", produced, want, wantSealed)

	// Caught up: the nodes' tables hold what was produced (with export:
	// the spans of the hour not over, those of the past hours expired
	// into the exports).
	ex, err := ingest.Open(filepath.Join(dir, "read.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	readExports := "read_parquet('" + exports + "/*/otel_traces/**/*.parquet', hive_partitioning = true, union_by_name = true)"
	exported := func() int {
		var n int
		if err := ex.SQL.QueryRow("SELECT count(*) FROM " + readExports).Scan(&n); err != nil {
			return 0 // no file yet
		}
		return n
	}
	cut := hour.Add(time.Hour).UnixMicro()
	deadline := time.Now().Add(60 * time.Second)
	for {
		total, old := 0, 0
		var counts []int
		for _, n := range nodes {
			k, err := nodeQuery(n, fmt.Sprintf("SELECT count(*), count(*) FILTER (WHERE start_time < make_timestamp(%d)) FROM otel_traces", cut))
			if err != nil {
				t.Fatalf("query: %v\n%s", err, n.log())
			}
			if k == nil {
				k = []int{0, 0}
			}
			total += k[0]
			old += k[1]
			counts = append(counts, k[0])
		}
		x := 0
		if export {
			x = exported()
		} else {
			old = 0 // without the export nothing expires: every span stays
		}
		if total-old >= want-wantSealed && old == 0 && x >= wantSealed {
			t.Logf("node counts %v, %d spans in the exports", counts, x)
			break
		}
		if time.Now().After(deadline) {
			for i, n := range nodes {
				var m string
				if resp, err := http.Get(n.url + "/metrics"); err == nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					for _, l := range strings.Split(string(b), "\n") {
						if strings.HasPrefix(l, "shredduck_kafka") {
							m += l + "\n"
						}
					}
				}
				t.Logf("node %d log:\n%s\nmetrics:\n%s", i, n.log(), m)
			}
			t.Fatalf("the nodes hold %v = %d spans (%d of past hours) after 60s and the exports %d; want %d in the tables and %d in the exports",
				counts, total, old, x, want-wantSealed, wantSealed)
		}
		time.Sleep(100 * time.Millisecond)
	}
	waited := 0
	for _, n := range nodes {
		waited += strings.Count(n.log(), "waits for the node that holds it")
		n.stop()
	}
	t.Logf("partitions waited for their holder %d times", waited)
	seen := map[string]int{}
	if export {
		// The exports of all nodes as one table: each span of the past
		// hours once, and every node's directory with some.
		var rows, distinct, nodesWith int
		if err := ex.SQL.QueryRow("SELECT count(*), count(DISTINCT span_id), count(DISTINCT filename.split('/')[-5]) FROM read_parquet('"+exports+
			"/*/otel_traces/**/*.parquet', hive_partitioning = true, union_by_name = true, filename = true)").Scan(&rows, &distinct, &nodesWith); err != nil {
			t.Fatal(err)
		}
		var files int
		if err := ex.SQL.QueryRow("SELECT count(*) FROM glob('" + exports + "/*/otel_traces/**/*.parquet')").Scan(&files); err != nil {
			t.Fatal(err)
		}
		t.Logf("exports: %d spans, %d distinct, in %d files of %d nodes", rows, distinct, files, nodesWith)
		if rows != wantSealed || distinct != wantSealed {
			t.Errorf("the exports hold %d spans, %d distinct; want %d of each", rows, distinct, wantSealed)
		}
		if nodesWith != len(dbs) {
			t.Errorf("%d of %d nodes exported spans", nodesWith, len(dbs))
		}
		ids, err := ex.SQL.Query("SELECT span_id FROM " + readExports)
		if err != nil {
			t.Fatal(err)
		}
		for ids.Next() {
			var id string
			if err := ids.Scan(&id); err != nil {
				t.Fatal(err)
			}
			seen[id]++
		}
		ids.Close()
	}
	for i, path := range dbs {
		db, err := ingest.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := db.SQL.Query(`SELECT span_id FROM otel_traces`)
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		k := 0
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			seen[id]++
			k++
		}
		rows.Close()
		db.Close()
		if k == 0 {
			t.Errorf("node %d stored no span", i)
		}
	}
	// Tables and exports together: every span once.
	var dups, missing int
	for i := range produced {
		for j := range kafkaSpans {
			switch seen[fmt.Sprintf("a5%08x%02x0000", i, j)] {
			case 0:
				missing++
			case 1:
			default:
				dups++
			}
		}
	}
	if dups > 0 || missing > 0 || len(seen) != want {
		t.Fatalf("of %d spans: %d stored more than once, %d missing, %d distinct", want, dups, missing, len(seen))
	}
	if export {
		// The rest of each node's table exported too (shredduck export):
		// all the exports read together hold every span once.
		for i, path := range dbs {
			if out, err := exec.Command(bin, "export", "--db", path, "--out", filepath.Join(exports, fmt.Sprintf("rest%d", i)), "--table", "otel_traces").CombinedOutput(); err != nil {
				t.Fatalf("shredduck export of node %d: %v\n%s", i, err, out)
			}
		}
		var rows, distinct int
		if err := ex.SQL.QueryRow("SELECT count(*), count(DISTINCT span_id) FROM "+readExports).Scan(&rows, &distinct); err != nil {
			t.Fatal(err)
		}
		t.Logf("every node's exports with the rest of its table: %d spans, %d distinct", rows, distinct)
		if rows != want || distinct != want {
			t.Errorf("the exports with the rest of the tables hold %d spans, %d distinct; want %d of each", rows, distinct, want)
		}
	}
}
