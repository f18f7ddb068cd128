package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/source"
	"github.com/shredduck/shredduck/transforms"
	"github.com/twmb/franz-go/pkg/kgo"
)

func (src *kafkaSource) client() *kgo.Client {
	<-src.kcReady
	return src.kc
}

func (src *kafkaSource) Name() string { return kafkaSourceName }

// Seek rewinds every partition to its stored offset: a transaction failed
// and its records are fetched again.
func (src *kafkaSource) Seek(uint64) error {
	src.mu.Lock()
	rewind := map[string]map[int32]kgo.EpochOffset{}
	for tp, p := range src.parts {
		if p.settled() {
			continue
		}
		p.handed, p.next = p.stored, p.stored
		if p.state == partOwned {
			if rewind[tp.topic] == nil {
				rewind[tp.topic] = map[int32]kgo.EpochOffset{}
			}
			rewind[tp.topic][tp.part] = kgo.EpochOffset{Epoch: -1, Offset: p.stored}
		}
	}
	for t, ps := range rewind {
		for part := range ps {
			src.purge(topicPart{t, part})
		}
	}
	src.cond.Broadcast()
	src.mu.Unlock()
	if len(rewind) > 0 {
		src.client().SetOffsets(rewind)
	}
	return nil
}

func (src *kafkaSource) Stored(uint64) {}

// purge drops the fetched records of tp not yet handed out: its next
// records come from the position it is set to. The caller holds mu.
func (src *kafkaSource) purge(tp topicPart) {
	q := src.queue[:0]
	for _, r := range src.queue {
		if r.Topic != tp.topic || r.Partition != tp.part {
			q = append(q, r)
		}
	}
	clear(src.queue[len(q):])
	src.queue = q
}

func (src *kafkaSource) StoredKeys(pos map[string]uint64) {
	src.mu.Lock()
	for key, next := range pos {
		tp, ok := parseKey(key)
		if p := src.parts[tp]; ok && p != nil {
			p.stored = max(p.stored, int64(next))
			src.lag.WithLabelValues(tp.topic, strconv.Itoa(int(tp.part))).Set(float64(max(0, p.highWater-p.stored)))
		}
	}
	src.cond.Broadcast()
	src.mu.Unlock()
	select {
	case src.kick <- struct{}{}:
	default:
	}
}

func (src *kafkaSource) Next(ctx context.Context, wait time.Duration) (ingest.SourceItem, bool, error) {
	for polled := false; ; polled = true {
		src.mu.Lock()
		for len(src.queue) > 0 {
			r := src.queue[0]
			src.queue[0] = nil
			src.queue = src.queue[1:]
			tp := topicPart{r.Topic, r.Partition}
			p := src.parts[tp]
			if p == nil || p.state != partOwned || r.Offset < p.next {
				continue
			}
			p.next = r.Offset + 1
			p.handed = p.next
			src.mu.Unlock()
			item := src.decode(tp, r)
			if item.Batch != nil {
				src.mu.Lock()
				src.decodeMore(tp, p, &item)
				src.mu.Unlock()
			}
			return item, true, nil
		}
		src.mu.Unlock()
		if polled || wait <= 0 {
			return ingest.SourceItem{}, false, nil
		}
		pctx, cancel := context.WithTimeout(ctx, wait)
		fs := src.client().PollRecords(pctx, kafkaPollRecords)
		cancel()
		if fs.IsClientClosed() {
			return ingest.SourceItem{}, false, nil
		}
		for _, fe := range fs.Errors() {
			if errors.Is(fe.Err, context.DeadlineExceeded) || errors.Is(fe.Err, context.Canceled) {
				continue
			}
			src.d.Limited.Log(slog.LevelWarn, "kafka fetch", "fetching from Kafka failed; the client retries (check that the brokers are up and the topics exist)",
				slog.String("topic", fe.Topic), slog.Int("partition", int(fe.Partition)), slog.String("error", source.Truncate(fe.Err.Error(), 500)))
		}
		src.mu.Lock()
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			if p := src.parts[topicPart{fp.Topic, fp.Partition}]; p != nil && fp.HighWatermark > 0 {
				p.highWater = fp.HighWatermark
				src.lag.WithLabelValues(fp.Topic, strconv.Itoa(int(fp.Partition))).Set(float64(max(0, p.highWater-p.stored)))
			}
			src.queue = append(src.queue, fp.Records...)
		})
		src.mu.Unlock()
	}
}

// decode turns a record into an item; a bad one becomes an item without
// rows, so that its offset is stored past it.
func (src *kafkaSource) decode(tp topicPart, r *kgo.Record) ingest.SourceItem {
	src.consumed.WithLabelValues(tp.topic).Inc()
	// Arrived is when this node fetched the record, not the producer's
	// timestamp: on a backlog those are old, and the loader would commit
	// every poll's records alone instead of filling its transactions.
	// The lag gauge shows how far behind the node is.
	item := ingest.SourceItem{Key: tp.key(), Next: uint64(r.Offset + 1), Arrived: time.Now(), Bytes: int64(len(r.Value))}
	sig, ok := src.signals[tp.topic]
	if !ok || len(r.Value) == 0 {
		return item
	}
	if int64(len(r.Value)) > src.d.MaxBody {
		src.badRecord(item.Key, "too_large", fmt.Errorf("a %d-byte record, more than --max-body %d", len(r.Value), src.d.MaxBody))
		return item
	}
	f := recordFormat(r.Value)
	d, err := source.Decode(src.d.Batches, source.Request{Format: f, Tr: sig.Tr, Data: r.Value}, src.d.Limits)
	if err != nil {
		src.badRecord(item.Key, decodeReason(err), fmt.Errorf("cannot decode a %d-byte %s %s request at offset %d: %w (%s)", len(r.Value), f, sig.Name, r.Offset, err, source.Snippet(r.Value)))
		return item
	}
	if d.Rejected != nil {
		src.d.OnRejected(d.Rejected.Records)
	}
	if d.Batch == nil {
		return item
	}
	item.Table, item.Tr, item.Batch, item.Release = sig.Table, sig.Tr, d.Batch, d.Release
	return item
}

// recordFormat tells a record's encoding by its first non-blank byte:
// OTLP/JSON starts with '{', protobuf never does.
func recordFormat(v []byte) source.Format {
	if i := strings.IndexFunc(string(v[:min(len(v), 64)]), func(c rune) bool { return c != ' ' && c != '\t' && c != '\r' && c != '\n' }); i >= 0 && v[i] == '{' {
		return source.FormatJSON
	}
	return source.FormatProto
}

// decodeReason is the bad-records label of a record that did not decode.
func decodeReason(err error) string {
	if errors.Is(err, transforms.ErrWrongSignal) {
		return "wrong_signal"
	}
	return "bad_data"
}

// kafkaItemRows is how many rows decodeMore gathers into one item: the
// loader writes each item's batch as its own chunk, which costs as much
// for one row as for thousands (a record of one span, as the Collector's
// kafkaexporter writes a one-span trace, took ~300 us of CPU alone).
const kafkaItemRows = 2048

// decodeMore decodes the records of tp queued right after the item's into
// its batch, until it holds kafkaItemRows rows or the next record is of
// another partition; a bad one is skipped with its offset, as decode
// skips it. The caller holds mu.
func (src *kafkaSource) decodeMore(tp topicPart, p *kafkaPart, item *ingest.SourceItem) {
	sig := src.signals[tp.topic]
	b := item.Batch
	for b.Rows < kafkaItemRows && len(src.queue) > 0 {
		r := src.queue[0]
		if r.Topic != tp.topic || r.Partition != tp.part || src.parts[tp] != p || p.state != partOwned {
			return
		}
		if r.Offset < p.next { // fetched again after a rewind
			src.queue[0] = nil
			src.queue = src.queue[1:]
			continue
		}
		if len(r.Value) == 0 || int64(len(r.Value)) > src.d.MaxBody {
			return // decode counts it, as the first of an item
		}
		rows := b.Rows
		b.Mark()
		f := recordFormat(r.Value)
		_, err := source.AppendOTLP(sig.Tr, f, r.Value, b)
		var rej *transforms.RejectedError
		switch {
		case source.IsLimit(err):
			b.Rollback(rows)
			return // the record starts the next item
		case err != nil && !errors.As(err, &rej):
			b.Rollback(rows)
			src.badRecord(item.Key, decodeReason(err), fmt.Errorf("cannot decode a %d-byte %s %s request at offset %d: %w (%s)", len(r.Value), f, sig.Name, r.Offset, err, source.Snippet(r.Value)))
		case rej != nil:
			src.d.OnRejected(rej.Records)
		}
		src.queue[0] = nil
		src.queue = src.queue[1:]
		src.consumed.WithLabelValues(tp.topic).Inc()
		p.next = r.Offset + 1
		p.handed = p.next
		item.Next = uint64(p.next)
		item.Bytes += int64(len(r.Value))
	}
}

func (src *kafkaSource) badRecord(key, reason string, err error) {
	tp, _ := parseKey(key)
	src.bad.WithLabelValues(tp.topic, reason).Inc()
	src.d.Limited.Log(slog.LevelWarn, "kafka bad "+reason, "a Kafka record is skipped: it is not an OTLP export request of the topic's signal",
		slog.String("topic", tp.topic), slog.Int("partition", int(tp.part)), slog.String("reason", reason), slog.String("error", source.Truncate(err.Error(), 500)))
}
