//go:build e2e

package serve

// Kafka nodes as real processes: `shredduck serve --kafka-brokers` children
// of one consumer group consume a stream keyed by trace id from an
// in-process cluster while they are SIGKILLed, restarted and added; once
// they have caught up, the union of their tables holds every produced
// span exactly once. Run with
//
//	go test -tags e2e -run TestKafka -v ./serve/

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shredduck/shredduck/ingest"
)

const kafkaSpans = 2 // per record

// kafkaNode is a shredduck serve child consuming the cluster.
func kafkaNode(t *testing.T, bin, db string, brokers []string) *e2eChild {
	t.Helper()
	return e2eStartChild(t, bin, db, "--kafka-brokers", strings.Join(brokers, ","),
		"--kafka-session-timeout", "1s", "--log-level", "debug", "--max-visibility-lag", "200ms", "--memory-limit", "128MB", "--threads", "1")
}

// nodeCount is a node's count of rows in otel_traces, through /v1/query
// (the child holds its database's lock).
func nodeCount(c *e2eChild) (int, error) {
	resp, err := http.Post(c.url+"/v1/query?format=csv", "application/sql", strings.NewReader("SELECT count(*) FROM otel_traces"))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return 0, nil // no table yet
	}
	lines := strings.Fields(string(b))
	return strconv.Atoi(lines[len(lines)-1])
}

// TestKafkaCrashOneNode: one node SIGKILLed twice mid-stream and
// restarted on its file.
func TestKafkaCrashOneNode(t *testing.T) {
	kafkaCrash(t, 1, func(t *testing.T, nodes []*e2eChild, restart func(i int), add func()) {
		for range 2 {
			time.Sleep(700 * time.Millisecond)
			nodes[0].kill()
			restart(0)
		}
	})
}

// TestKafkaCrashGroup: two nodes, a third added while they run, one
// SIGKILLed and restarted at once, another SIGKILLed and restarted after
// its session expired; every node ends with some of the spans.
func TestKafkaCrashGroup(t *testing.T) {
	kafkaCrash(t, 2, func(t *testing.T, nodes []*e2eChild, restart func(i int), add func()) {
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

func kafkaCrash(t *testing.T, start int, script func(t *testing.T, nodes []*e2eChild, restart func(i int), add func())) {
	bin := e2eBuildShredduck(t)
	c := kafkaCluster(t)
	prod := kafkaProducer(t, c)
	dir := t.TempDir()
	var mu sync.Mutex
	var nodes []*e2eChild
	var dbs []string
	add := func() {
		db := fmt.Sprintf("%s/node%d.duckdb", dir, len(dbs))
		n := kafkaNode(t, bin, db, c.ListenAddrs())
		mu.Lock()
		nodes, dbs = append(nodes, n), append(dbs, db)
		mu.Unlock()
	}
	restart := func(i int) {
		n := kafkaNode(t, bin, dbs[i], c.ListenAddrs())
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
			produceTraces(t, prod, produced, produced+batch, kafkaSpans)
			produced += batch
			time.Sleep(10 * time.Millisecond)
		}
	}()
	script(t, nodes, restart, add)
	time.Sleep(300 * time.Millisecond)
	close(stop)
	<-done
	want := produced * kafkaSpans
	t.Logf("produced %d records, %d spans", produced, want)

	// Caught up: the nodes' counts add up to what was produced and stay.
	deadline := time.Now().Add(60 * time.Second)
	for {
		total := 0
		var counts []int
		for _, n := range nodes {
			k, err := nodeCount(n)
			if err != nil {
				t.Fatalf("query: %v\n%s", err, n.log())
			}
			total += k
			counts = append(counts, k)
		}
		if total >= want {
			t.Logf("node counts %v", counts)
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
			t.Fatalf("the nodes hold %v = %d spans after 60s, want %d", counts, total, want)
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
}
