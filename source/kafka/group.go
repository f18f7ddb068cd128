package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/shredduck/shredduck/source"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type groupCommit struct {
	offset int64 // -1: none
	meta   string
}

// fetchCommits reads the group's committed offsets and their metadata.
func (src *kafkaSource) fetchCommits(ctx context.Context) (map[topicPart]groupCommit, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = src.cfg.Group
	req.RequireStable = true
	resp, err := req.RequestWith(ctx, src.client())
	if err != nil {
		return nil, fmt.Errorf("cannot read the committed offsets of group %s: %w", src.cfg.Group, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("cannot read the committed offsets of group %s: %w", src.cfg.Group, err)
	}
	out := map[topicPart]groupCommit{}
	add := func(topic string, part int32, offset int64, meta *string, code int16) {
		if code != 0 {
			return
		}
		c := groupCommit{offset: offset}
		if meta != nil {
			c.meta = *meta
		}
		out[topicPart{topic, part}] = c
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			add(t.Topic, p.Partition, p.Offset, p.Metadata, p.ErrorCode)
		}
	}
	for _, g := range resp.Groups {
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
			return nil, fmt.Errorf("cannot read the committed offsets of group %s: %w", src.cfg.Group, err)
		}
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				add(t.Topic, p.Partition, p.Offset, p.Metadata, p.ErrorCode)
			}
		}
	}
	return out, nil
}

// commit commits offsets to the group with metadata kind+node, in this
// member's generation: a member the group has moved on from is refused.
func (src *kafkaSource) commit(ctx context.Context, offsets map[topicPart]int64, kind string) error {
	member, gen := src.client().GroupMetadata()
	if gen < 0 {
		return errors.New("not a member of the group yet")
	}
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.MemberID, req.Generation = src.cfg.Group, member, gen
	meta := kind + src.node
	byTopic := map[string]int{}
	for tp, off := range offsets {
		i, ok := byTopic[tp.topic]
		if !ok {
			i = len(req.Topics)
			byTopic[tp.topic] = i
			t := kmsg.NewOffsetCommitRequestTopic()
			t.Topic = tp.topic
			req.Topics = append(req.Topics, t)
		}
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset, p.Metadata = tp.part, off, &meta
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	resp, err := req.RequestWith(ctx, src.client())
	if err != nil {
		return fmt.Errorf("cannot commit offsets to group %s: %w", src.cfg.Group, err)
	}
	var errs []error
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				errs = append(errs, fmt.Errorf("%s/%d: %w", t.Topic, p.Partition, err))
			}
		}
	}
	return errors.Join(errs...)
}

// kafkaLogger passes the client's warnings and errors to the server's
// log, rate-limited (a broker outage logs every retry).
type kafkaLogger struct{ l *source.LimitedLog }

func (l kafkaLogger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (l kafkaLogger) Log(level kgo.LogLevel, msg string, kv ...any) {
	lv := slog.LevelWarn
	if level == kgo.LogLevelError {
		lv = slog.LevelError
	}
	attrs := make([]slog.Attr, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		attrs = append(attrs, slog.Any(fmt.Sprint(kv[i]), kv[i+1]))
	}
	l.l.Log(lv, "kafka client "+msg, "kafka client: "+msg, attrs...)
}
