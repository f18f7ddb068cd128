package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kafkaTopics are the kafkaexporter's default topics, which shredduck
// consumes by default; docs/scale-out/collector-kafka.yaml names them.
var kafkaTopics = []string{"otlp_spans", "otlp_logs", "otlp_metrics"}

const (
	kafkaPartitions = 6
	kafkaGroup      = "shredduck" // shredduck serve's default --kafka-group
)

// kafkaCluster is an in-process Kafka-protocol cluster and an admin
// client of it.
type kafkaCluster struct {
	brokers []string
	fake    *kfake.Cluster
	client  *kgo.Client
	adm     *kadm.Client
}

// startKafka starts a cluster of 3 brokers with the topics pre-created, 6
// partitions each, as serve's tests have it.
func startKafka() (*kafkaCluster, error) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(kafkaPartitions, kafkaTopics...))
	if err != nil {
		return nil, fmt.Errorf("kafka cluster: %w", err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		c.Close()
		return nil, err
	}
	return &kafkaCluster{brokers: c.ListenAddrs(), fake: c, client: cl, adm: kadm.NewClient(cl)}, nil
}

func (k *kafkaCluster) close() {
	k.client.Close()
	k.fake.Close()
}

// waitGroup waits until the nodes have claimed every partition between
// them and each holds some: records sent earlier could all go to the
// first node to join. A claim is shredduck's commit of the partition's
// offset with the metadata "owned:<node id>" (docs/SCALE-OUT.md).
func (k *kafkaCluster) waitGroup(ctx context.Context, nodes int) error {
	var state string
	for {
		offs, err := k.adm.FetchOffsets(ctx, kafkaGroup)
		if err == nil {
			err = offs.Error()
		}
		if err == nil {
			owners := map[string]int{}
			claimed := 0
			offs.Each(func(o kadm.OffsetResponse) {
				if owner, ok := strings.CutPrefix(o.Metadata, "owned:"); ok {
					owners[owner]++
					claimed++
				}
			})
			state = fmt.Sprintf("%d of %d partitions claimed, by %v", claimed, len(kafkaTopics)*kafkaPartitions, owners)
			if claimed == len(kafkaTopics)*kafkaPartitions && len(owners) == nodes {
				fmt.Fprintf(os.Stderr, "collector: consumer group %s: %s\n", kafkaGroup, state)
				return nil
			}
		} else {
			state = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("consumer group %s: want every partition claimed by %d nodes: %s", kafkaGroup, nodes, state)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// settle waits until the nodes have stored every record the cluster
// holds (for each partition, the highest next offset a node stored in
// shredduck_sources is the partition's end offset), so that a duplicate
// still on its way cannot slip past the check, and returns the problems
// it saw: bad records, a spans partition left empty (the trace-id keys
// should spread them).
func (k *kafkaCluster) settle(ctx context.Context, client *http.Client, nodes []*shredduck) ([]string, error) {
	ends, err := k.endOffsets(ctx)
	if err != nil {
		return nil, err
	}
	var stored map[string]int64
	for {
		stored = map[string]int64{}
		for _, sd := range nodes {
			if err := storedOffsets(ctx, client, sd.url, stored); err != nil {
				return nil, err
			}
		}
		behind := 0
		for key, end := range ends {
			if stored[key] < end {
				behind++
			}
		}
		if behind == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("the nodes did not store everything in Kafka before the timeout: %d partitions behind; end offsets %v, stored %v", behind, ends, stored)
		case <-time.After(100 * time.Millisecond):
		}
	}
	var problems []string
	for _, t := range kafkaTopics {
		var recs int64
		var parts []string
		for p := range kafkaPartitions {
			end := ends[t+"/"+strconv.Itoa(p)]
			recs += end
			parts = append(parts, strconv.FormatInt(end, 10))
			if t == kafkaTopics[0] && end == 0 {
				problems = append(problems, fmt.Sprintf("kafka: %s partition %d is empty: are the records keyed by trace id?", t, p))
			}
		}
		fmt.Fprintf(os.Stderr, "collector: kafka %-12s %d records, per partition %s\n", t, recs, strings.Join(parts, " "))
	}
	for i, sd := range nodes {
		lines, err := metricLines(ctx, client, sd.url, "shredduck_kafka_")
		if err != nil {
			return nil, err
		}
		var consumed, bad float64
		for _, l := range lines {
			f := strings.Fields(l)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			switch {
			case strings.HasPrefix(l, "shredduck_kafka_records_total{"):
				consumed += v
			case strings.HasPrefix(l, "shredduck_kafka_bad_records_total{"):
				bad += v
				if v > 0 {
					problems = append(problems, fmt.Sprintf("node%d: %s (log: %s)", i+1, l, sd.log))
				}
			}
		}
		fmt.Fprintf(os.Stderr, "collector: node%d consumed %.0f kafka records, %.0f bad\n", i+1, consumed, bad)
	}
	return problems, nil
}

// endOffsets returns every partition's end offset ("topic/partition" as
// shredduck_sources names it, without its "kafka/" prefix).
func (k *kafkaCluster) endOffsets(ctx context.Context) (map[string]int64, error) {
	offs, err := k.adm.ListEndOffsets(ctx, kafkaTopics...)
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("kafka end offsets: %w", err)
	}
	ends := map[string]int64{}
	offs.Each(func(o kadm.ListedOffset) { ends[o.Topic+"/"+strconv.Itoa(int(o.Partition))] = o.Offset })
	return ends, nil
}

// storedOffsets raises stored[topic/partition] to the next offset node url
// stored for it.
func storedOffsets(ctx context.Context, client *http.Client, url string, stored map[string]int64) error {
	r, err := queryRow(ctx, client, url, `SELECT coalesce(string_agg(source || '=' || p, ','), '') FROM
		(SELECT source, max(position) AS p FROM shredduck_sources WHERE source LIKE 'kafka/%' GROUP BY source)`)
	if err != nil {
		return err
	}
	for kv := range strings.SplitSeq(r[0], ",") {
		key, v, ok := strings.Cut(strings.TrimPrefix(kv, "kafka/"), "=")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("shredduck_sources %q: %w", kv, err)
		}
		stored[key] = max(stored[key], n)
	}
	return nil
}
