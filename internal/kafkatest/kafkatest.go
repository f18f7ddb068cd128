// Package kafkatest holds what the Kafka tests of source/kafka and serve
// share: an in-process cluster, producers of OTLP trace requests, and
// offsets committed as a node that is gone would have left them.
package kafkatest

import (
	"context"
	"fmt"
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
)

// Cluster is an in-process Kafka-protocol cluster: 3 brokers, the
// topics given with 6 partitions each.
func Cluster(t testing.TB, topics ...string) *kfake.Cluster {
	t.Helper()
	if len(topics) == 0 {
		t.Fatal("kafkatest.Cluster: no topics: every produce would answer UNKNOWN_TOPIC_OR_PARTITION")
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(6, topics...),
		kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// Traces is export request i of a producer's stream: spans spans
// starting at start (Unix nanoseconds), their test.id "r<i>-<j>", all of
// one trace (the record's key).
func Traces(i, spans int, start int64) (key []byte, req ptraceotlp.ExportRequest) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "kafkatest")
	ss := rs.ScopeSpans().AppendEmpty()
	trace := pcommon.TraceID{0xab, byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)}
	for j := range spans {
		s := ss.Spans().AppendEmpty()
		s.SetName("op")
		s.SetTraceID(trace)
		s.SetSpanID(pcommon.SpanID{0xa5, byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i), byte(j)})
		s.SetStartTimestamp(pcommon.Timestamp(start))
		s.SetEndTimestamp(pcommon.Timestamp(start + 1_000_000))
		s.Attributes().PutStr("test.id", fmt.Sprintf("r%d-%d", i, j))
	}
	return trace[:], ptraceotlp.NewExportRequestFromTraces(td)
}

// Produce produces requests [from, to) to otlp_spans, keyed by
// trace id; every fourth as OTLP/JSON.
func Produce(t testing.TB, cl *kgo.Client, from, to, spans int) {
	t.Helper()
	ProduceAt(t, cl, from, to, spans, func(int) int64 { return 1_700_000_000_000_000_000 })
}

// ProduceAt is Produce with request i's spans starting at
// start(i).
func ProduceAt(t testing.TB, cl *kgo.Client, from, to, spans int, start func(i int) int64) {
	t.Helper()
	var recs []*kgo.Record
	for i := from; i < to; i++ {
		key, req := Traces(i, spans, start(i))
		var v []byte
		var err error
		if i%4 == 3 {
			v, err = req.MarshalJSON()
		} else {
			v, err = req.MarshalProto()
		}
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: "otlp_spans", Key: key, Value: v})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// Producer is a client of c that produces to a record key's partition.
func Producer(t testing.TB, c *kfake.Cluster) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// CommitAsNode commits offsets of otlp_spans to the (empty) group with
// metadata meta, as a node that held them and is gone would have left
// them.
func CommitAsNode(t testing.TB, c *kfake.Cluster, group, meta string, offsets map[int32]int64) {
	t.Helper()
	v := kversion.Stable()
	v.SetMaxKeyVersion(kmsg.OffsetCommit.Int16(), 9)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.MaxVersions(v))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = group, -1
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
