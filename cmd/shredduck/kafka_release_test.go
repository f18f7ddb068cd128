package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/serve"
)

// A node consumes a group in which two gone nodes own partitions: lost
// (no longer a member) and hung (still a member, then a dead process
// whose session has not expired). kafka-release refuses a member (the
// live node, hung) without --force, releases lost's and, with --force,
// hung's partitions at their committed offsets; the node then stores
// each of those partitions from that offset on, every record once.
func TestKafkaRelease(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(6, serve.DefaultKafkaTopics[:]...),
		kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := strings.Join(c.ListenAddrs(), ",")
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	const n = 240
	var recs []*kgo.Record
	for i := range n {
		td := ptrace.NewTraces()
		s := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		s.SetName("op")
		s.SetTraceID(pcommon.TraceID{0xab, byte(i >> 8), byte(i)})
		s.SetSpanID(pcommon.SpanID{0xa5, byte(i >> 8), byte(i)})
		s.SetStartTimestamp(1_700_000_000_000_000_000)
		s.Attributes().PutStr("test.id", fmt.Sprint(i))
		v, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: "otlp_spans", Key: []byte(fmt.Sprint(i)), Value: v})
	}
	if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// The gone nodes stored each of their partitions' first half.
	perPart := map[int32]int64{}
	for _, r := range recs {
		perPart[r.Partition]++
	}
	held := map[int32]int64{1: perPart[1] / 2, 4: perPart[4] / 2, 2: perPart[2] / 2}
	commitOwned(t, c, "owned:lost", map[int32]int64{1: held[1], 4: held[4]})
	commitOwned(t, c, "owned:hung", map[int32]int64{2: held[2]})
	want := map[string]bool{}
	for i, r := range recs {
		if off, ok := held[r.Partition]; !ok || r.Offset >= off {
			want[fmt.Sprint(i)] = true
		}
	}

	// hung is still a member of the group (subscribed to another topic,
	// so that the node is given every partition of otlp_spans).
	hung, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumerGroup(serve.DefaultKafkaGroup),
		kgo.InstanceID("shredduck-hung"), kgo.ConsumeTopics("otlp_metrics"), kgo.SessionTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer hung.Close()
	go func() {
		for !hung.PollRecords(context.Background(), 10).IsClientClosed() {
		}
	}()
	for _, gen := hung.GroupMetadata(); gen < 0; _, gen = hung.GroupMetadata() {
		time.Sleep(10 * time.Millisecond)
	}

	db, err := ingest.Open(filepath.Join(t.TempDir(), "node.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.ColumnDensity = 0 // test.id a column from the first record on
	var nodeLog syncBuffer
	srv, err := serve.New(db, serve.Config{MemoryLimit: "256MB", MaxVisibilityLag: 50 * time.Millisecond,
		Logger: slog.New(slog.NewJSONHandler(&nodeLog, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Kafka:  serve.KafkaConfig{Brokers: c.ListenAddrs(), Topics: serve.DefaultKafkaTopics, SessionTimeout: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	ready := func(want string) {
		t.Helper()
		var body []byte
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			resp, err := http.Get(hs.URL + "/readyz")
			if err != nil {
				t.Fatal(err)
			}
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.HasSuffix(string(body), want) {
				return
			}
		}
		t.Fatalf("/readyz: %q, want it to end with %q", body, want)
	}
	ready("otlp_spans/1 (held by node lost), otlp_spans/2 (held by node hung), otlp_spans/4 (held by node lost)\n")

	release := func(wantCode int, args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code := runKafkaRelease(context.Background(), append([]string{"--kafka-brokers", brokers}, args...), &stdout, &stderr)
		if code != wantCode {
			t.Fatalf("kafka-release %q: exit %d, want %d\nstdout: %s\nstderr: %s", args, code, wantCode, &stdout, &stderr)
		}
		return stdout.String() + stderr.String()
	}
	self, _, err := db.Meta(context.Background(), "kafka_node_id")
	if err != nil {
		t.Fatal(err)
	}
	for _, node := range []string{self, "hung"} {
		if out := release(exitError, "--node", node); !strings.Contains(out, "node "+node+" is a member of group shredduck") {
			t.Errorf("releasing the member %s: %q", node, out)
		}
	}
	out := release(exitOK, "--node", "lost")
	t.Logf("kafka-release --node lost:\n%s", out)
	if strings.Contains(out, "note: cannot remove") {
		t.Errorf("kafka-release --node lost did not leave the group: %q", out)
	}
	for _, line := range []string{
		fmt.Sprintf("released otlp_spans/1 at offset %d (was owned:lost)\nreleased otlp_spans/4 at offset %d (was owned:lost)\n2 partitions released", held[1], held[4]),
		"What node lost stored is gone with its database file, except the hours it exported",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("kafka-release --node lost printed %q; want %q in it", out, line)
		}
	}
	ready("otlp_spans/2 (held by node hung)\n")
	// hung's process dies; as a static member it stays in the group
	// until its session expires: --force is for that window.
	hung.Close()
	if out := release(exitError, "--node", "hung"); !strings.Contains(out, "node hung is a member of group shredduck") {
		t.Errorf("releasing hung after its process died, within its session: %q", out)
	}
	out = release(exitOK, "--node", "hung", "--force")
	if strings.Contains(out, "note: cannot remove") {
		t.Errorf("kafka-release --node hung --force did not leave the group: %q", out)
	}
	if !strings.Contains(out, fmt.Sprintf("released otlp_spans/2 at offset %d (was owned:hung)\n", held[2])) {
		t.Errorf("kafka-release --node hung --force printed %q", out)
	}
	ready("ready\n")
	if out := release(exitOK, "--node", "lost"); !strings.Contains(out, "node lost owns no partition of group shredduck: nothing to release") {
		t.Errorf("a second release printed %q", out)
	}

	// The node stores the released partitions from their offsets.
	got := map[string]int{}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var k int
		if db.SQL.QueryRow(`SELECT count(*) FROM otel_traces`).Scan(&k); k >= len(want) {
			break
		}
	}
	rows, err := db.SQL.Query(`SELECT "test.id" FROM otel_traces`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		got[id]++
	}
	rows.Close()
	for id, k := range got {
		if k != 1 || !want[id] {
			t.Errorf("record %s stored %d times (want: %v)", id, k, want[id])
		}
	}
	if len(got) != len(want) {
		missing := map[int32]int{}
		for i, r := range recs {
			if id := fmt.Sprint(i); want[id] && got[id] == 0 {
				missing[r.Partition]++
			}
		}
		resp, err := http.Get(hs.URL + "/metrics")
		var metrics string
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			for _, l := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(l, "shredduck_kafka") {
					metrics += l + "\n"
				}
			}
		}
		t.Errorf("%d records stored, want %d; missing by partition %v\nmetrics:\n%s\nnode log:\n%s", len(got), len(want), missing, metrics, nodeLog.String())
	}
}

// syncBuffer is a bytes.Buffer for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// commitOwned commits offsets of otlp_spans to the empty group with
// metadata meta, as a node that held them and is gone left them.
func commitOwned(t *testing.T, c *kfake.Cluster, meta string, offsets map[int32]int64) {
	t.Helper()
	v := kversion.Stable()
	v.SetMaxKeyVersion(kmsg.OffsetCommit.Int16(), 9)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.MaxVersions(v))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = serve.DefaultKafkaGroup, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "otlp_spans"
	for part, off := range offsets {
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset, p.Metadata = part, off, &meta
		rt.Partitions = append(rt.Partitions, p)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range resp.Topics[0].Partitions {
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			t.Fatalf("commit %d: %v", p.Partition, err)
		}
	}
}
