package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	partitions = 6
	groupName  = "shredduck" // shredduck serve's default --kafka-group
)

// cluster is an in-process Kafka-protocol cluster (kfake: 3 brokers, the
// traces topic with 6 partitions) and a producer and admin client of it.
// It runs in this process: its CPU is the driver's.
type cluster struct {
	brokers []string
	fake    *kfake.Cluster
	cl      *kgo.Client
	adm     *kadm.Client
}

func startCluster() (*cluster, error) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(partitions, tracesTopic))
	if err != nil {
		return nil, fmt.Errorf("kafka cluster: %w", err)
	}
	// The Kafka clients' default partitioner: murmur2 of the key, so that
	// one trace's records go to one partition.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(100_000))
	if err != nil {
		c.Close()
		return nil, err
	}
	return &cluster{brokers: c.ListenAddrs(), fake: c, cl: cl, adm: kadm.NewClient(cl)}, nil
}

func (c *cluster) close() {
	c.cl.Close()
	c.fake.Close()
}

// produce produces recs and waits until the cluster has acknowledged them.
func (c *cluster) produce(ctx context.Context, recs []*kgo.Record) error {
	const chunk = 5000
	for len(recs) > 0 {
		n := min(chunk, len(recs))
		if err := c.cl.ProduceSync(ctx, recs[:n]...).FirstErr(); err != nil {
			return fmt.Errorf("produce: %w", err)
		}
		recs = recs[n:]
	}
	return nil
}

// waitGroup waits until the nodes between them have claimed every
// partition of the traces topic, each node its share (6/K, give or take
// one). A claim is shredduck's commit of the partition's offset with the
// metadata "owned:<node id>" (docs/SCALE-OUT.md).
func (c *cluster) waitGroup(ctx context.Context, nodes int) error {
	var state string
	for {
		offs, err := c.adm.FetchOffsets(ctx, groupName)
		if err == nil {
			err = offs.Error()
		}
		if err == nil {
			owners := map[string]int{}
			claimed := 0
			offs.Each(func(o kadm.OffsetResponse) {
				if owner, ok := strings.CutPrefix(o.Metadata, "owned:"); ok && o.Topic == tracesTopic {
					owners[owner]++
					claimed++
				}
			})
			lo, hi := partitions, 0
			for _, n := range owners {
				lo, hi = min(lo, n), max(hi, n)
			}
			state = fmt.Sprintf("%d of %d partitions claimed, by %v", claimed, partitions, owners)
			if claimed == partitions && len(owners) == nodes && hi-lo <= 1 {
				return nil
			}
		} else {
			state = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("consumer group %s: want every partition claimed by %d nodes: %s", groupName, nodes, state)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// endOffsets returns the end offset of every partition of the traces
// topic.
func (c *cluster) endOffsets(ctx context.Context) (map[int32]int64, error) {
	offs, err := c.adm.ListEndOffsets(ctx, tracesTopic)
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("kafka end offsets: %w", err)
	}
	ends := map[int32]int64{}
	offs.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
	return ends, nil
}
