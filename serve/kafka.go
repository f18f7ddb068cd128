package serve

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/shred"
	"github.com/shredduck/shredduck/source"
	"github.com/shredduck/shredduck/transforms"
)

// With --kafka-brokers the server consumes OTLP export requests from Kafka
// topics as a member of a consumer group, and a Loader stores them with
// each partition's next offset in the same DuckDB transaction
// (ingest.KeyedSource). Which node may store a partition is decided by
// the group's committed offsets and their metadata, "owned:<node>" or
// "released:<node>" (docs/SCALE-OUT.md has the argument):
//   - a node claims a partition (commits its start offset as owned by it,
//     fenced by the group generation) before it stores any of its records;
//   - it releases it (commits its stored offset as released) only once no
//     transaction of its loader can store more of it;
//   - a node assigned a partition another node owns and has not released
//     (that node died holding it) waits until that node releases it; a
//     node that starts releases what it owned and no longer holds.
// So one partition's records are stored by one node at a time, each
// starting exactly where the last stored.

// KafkaConfig configures the Kafka consumer; no Brokers: none.
type KafkaConfig struct {
	Brokers []string
	// Topics of the signals: traces, logs, metrics ("" leaves one out).
	Topics [3]string
	Group  string
	// FetchMaxBytes bounds one fetch response (default 16 MiB); the client
	// buffers at most two.
	FetchMaxBytes int32
	// SessionTimeout is how long the group waits for a silent member
	// before it moves its partitions (default 45 s); the rebalance timeout
	// is the same.
	SessionTimeout time.Duration
}

// Kafka defaults: the Collector's kafkaexporter's topics.
var DefaultKafkaTopics = [3]string{"otlp_spans", "otlp_logs", "otlp_metrics"}

const (
	DefaultKafkaGroup         = "shredduck"
	DefaultKafkaFetchMaxBytes = 16 << 20
	kafkaSourceName           = "kafka"
	kafkaNodeKey              = "kafka_node_id" // shredduck_meta
	kafkaPollRecords          = 1000
	metaOwned                 = "owned:"
	metaReleased              = "released:"
)

type topicPart struct {
	topic string
	part  int32
}

func (tp topicPart) key() string { return tp.topic + "/" + strconv.Itoa(int(tp.part)) }

func parseKey(key string) (topicPart, bool) {
	i := strings.LastIndexByte(key, '/')
	if i < 0 {
		return topicPart{}, false
	}
	n, err := strconv.ParseInt(key[i+1:], 10, 32)
	return topicPart{key[:i], int32(n)}, err == nil
}

// partState is where a partition is in this node's hands.
type partState uint8

const (
	partWaiting  partState = iota // assigned, not yet claimed: paused
	partOwned                     // claimed: its records go to the loader
	partRevoking                  // no longer assigned; released once settled
)

func (s partState) String() string {
	switch s {
	case partWaiting:
		return "waiting"
	case partOwned:
		return "owned"
	case partRevoking:
		return "revoking"
	}
	return "partState(" + strconv.Itoa(int(s)) + ")"
}

type kafkaPart struct {
	state     partState
	claimed   bool  // the group's metadata says this node owns it
	next      int64 // the next offset to hand out; lower ones (refetched after a rewind) are dropped
	handed    int64 // the position after the last record handed to the loader
	stored    int64 // the position stored in DuckDB
	commit    int64 // the offset last committed to the group
	highWater int64 // from the last fetch
	owner     string
}

func (p *kafkaPart) settled() bool { return p.handed <= p.stored }

type kafkaSource struct {
	s       *Server
	cfg     KafkaConfig
	kc      *kgo.Client   // client(): the group's callbacks start before NewClient returns
	kcReady chan struct{} // closed once kc is set
	node    string
	signals map[string]*signal // topic -> signal

	// Lock order: commitMu or pauseMu, then mu. mu is never held while
	// taking either, and neither is taken while holding the other (a
	// claim commits under commitMu before its resume takes pauseMu).
	mu    sync.Mutex // parts and queue; cond waits on it
	cond  *sync.Cond
	parts map[topicPart]*kafkaPart
	queue []*kgo.Record

	commitMu sync.Mutex // one commit to the group at a time, in order
	pauseMu  sync.Mutex // pausing and resuming fetches: a late pause must not undo a claim's resume
	kick     chan struct{}

	consumed *prometheus.CounterVec // topic
	bad      *prometheus.CounterVec // topic, reason
	lag      *prometheus.GaugeVec   // topic, partition

	reach brokerReach
}

// brokerReach follows the client's exchanges with the brokers, for
// /readyz: a member exchanges heartbeats at least every heartbeat
// interval, so no answer from any broker for two of them (and a second),
// with errors since, means none is reachable.
type brokerReach struct {
	start   time.Time
	after   time.Duration
	ok, bad atomic.Int64 // Unix nanoseconds of the last answer, of the last failure
	err     atomic.Pointer[string]
}

func (b *brokerReach) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err != nil {
		b.failed(meta, err)
	}
}

func (b *brokerReach) OnBrokerE2E(meta kgo.BrokerMetadata, _ int16, e2e kgo.BrokerE2E) {
	if err := e2e.Err(); err != nil {
		b.failed(meta, err)
		return
	}
	b.ok.Store(time.Now().UnixNano())
}

func (b *brokerReach) failed(meta kgo.BrokerMetadata, err error) {
	msg := fmt.Sprintf("%s:%d: %s", meta.Host, meta.Port, source.Truncate(err.Error(), 200))
	b.err.Store(&msg)
	b.bad.Store(time.Now().UnixNano())
}

// unreachable says why no broker is reachable, or "".
func (b *brokerReach) unreachable() string {
	ok, bad := b.ok.Load(), b.bad.Load()
	since := max(ok, b.start.UnixNano())
	if bad <= ok || time.Since(time.Unix(0, since)) < b.after {
		return ""
	}
	what := "no broker has answered since the start"
	if ok > 0 {
		what = "no broker has answered for " + time.Since(time.Unix(0, ok)).Round(time.Second).String()
	}
	return what + " (last error: " + *b.err.Load() + ")"
}

// kafka is the server's Kafka consumer and its loader.
type kafka struct {
	src    *kafkaSource
	loader *ingest.Loader
	cancel context.CancelFunc
	done   chan error
	stop   chan struct{}
}

// openKafka starts the consumer and its loader.
func (s *Server) openKafka(checkpointBytes int64) error {
	ctx := context.Background()
	cfg := s.cfg.Kafka
	if cfg.Group == "" {
		cfg.Group = DefaultKafkaGroup
	}
	if cfg.FetchMaxBytes <= 0 {
		cfg.FetchMaxBytes = DefaultKafkaFetchMaxBytes
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = 45 * time.Second
	}
	node, ok, err := s.db.Meta(ctx, kafkaNodeKey)
	if err != nil {
		return err
	}
	if !ok {
		var r [8]byte
		if _, err := rand.Read(r[:]); err != nil {
			return err
		}
		node = hex.EncodeToString(r[:])
		if err := s.db.SetMeta(ctx, kafkaNodeKey, node); err != nil {
			return err
		}
	}
	src := &kafkaSource{s: s, cfg: cfg, node: node, signals: map[string]*signal{}, parts: map[topicPart]*kafkaPart{}, kick: make(chan struct{}, 1), kcReady: make(chan struct{})}
	src.cond = sync.NewCond(&src.mu)
	src.reach.start, src.reach.after = time.Now(), 2*kafkaHeartbeat(cfg.SessionTimeout)+time.Second
	var topics []string
	for i, t := range cfg.Topics {
		if t == "" {
			continue
		}
		sig := s.signals[i]
		if sig.conflict != nil {
			return fmt.Errorf("cannot consume Kafka topic %s: %s", t, sig.conflict.msg)
		}
		if _, dup := src.signals[t]; dup {
			return fmt.Errorf("topic %s is given for two signals (--kafka-topics)", t)
		}
		src.signals[t] = sig
		topics = append(topics, t)
	}
	if len(topics) == 0 {
		return errors.New("no Kafka topic to consume")
	}
	src.consumed = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shredduck_kafka_records_total",
		Help: "Kafka records consumed (stored, or skipped as bad), by topic."}, []string{"topic"})
	src.bad = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shredduck_kafka_bad_records_total",
		Help: "Kafka records skipped because they are not OTLP export requests of the topic's signal, by topic and reason."}, []string{"topic", "reason"})
	src.lag = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "shredduck_kafka_lag_records",
		Help: "Records of a partition this node holds that are not stored yet: high watermark minus stored offset."}, []string{"topic", "partition"})
	s.metrics.reg.MustRegister(src.consumed, src.bad, src.lag, waitingCollector{src})

	// The commits with metadata (commit, fetchCommits) name topics; from
	// version 10 those requests take topic ids instead.
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(kmsg.OffsetCommit.Int16(), 9)
	versions.SetMaxKeyVersion(kmsg.OffsetFetch.Int16(), 9)
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.MaxVersions(versions),
		kgo.ConsumerGroup(cfg.Group),
		// A static member: a restarted node takes its partitions back at
		// once instead of waiting for its old session to expire, and a copy
		// of its database run beside it is fenced.
		kgo.InstanceID("shredduck-"+node),
		kgo.ConsumeTopics(topics...),
		kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(cfg.FetchMaxBytes),
		kgo.FetchMaxPartitionBytes(cfg.FetchMaxBytes),
		kgo.MaxConcurrentFetches(2),
		kgo.SessionTimeout(cfg.SessionTimeout),
		kgo.RebalanceTimeout(cfg.SessionTimeout),
		kgo.HeartbeatInterval(kafkaHeartbeat(cfg.SessionTimeout)),
		kgo.WithHooks(&src.reach),
		kgo.OnPartitionsAssigned(src.assigned),
		kgo.AdjustFetchOffsetsFn(src.adjust),
		kgo.OnPartitionsRevoked(src.revoked),
		kgo.OnPartitionsLost(src.revoked),
		kgo.WithLogger(kafkaLogger{s}),
	)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	src.kc = cl
	close(src.kcReady)
	loader := s.db.NewLoader(src, ingest.LoaderOptions{
		MaxColumns:      s.cfg.MaxColumns,
		MaxLag:          s.cfg.MaxVisibilityLag,
		CheckpointBytes: checkpointBytes,
		RetryAfter:      s.cfg.RetryAfter,
		OnLoad:          s.onKafkaLoad,
		OnCheckpoint:    s.onCheckpoint,
		OnDrop: func(it ingest.SourceItem, err error) {
			src.badRecord(it.Key, "unstorable", err)
		},
	})
	lctx, cancel := context.WithCancel(ctx)
	s.kafka = &kafka{src: src, loader: loader, cancel: cancel, done: make(chan error, 1), stop: make(chan struct{})}
	go func() { s.kafka.done <- loader.Run(lctx) }()
	go src.tend(s.kafka.stop)
	s.log.Info("consuming Kafka", slog.Any("brokers", cfg.Brokers), slog.Any("topics", topics), slog.String("group", cfg.Group), slog.String("node", node))
	return nil
}

func kafkaHeartbeat(session time.Duration) time.Duration { return min(3*time.Second, session/4) }

// kafkaReadiness is the consumer's part of /readyz: why the node is not
// ready (no broker reachable), or a note for a ready one (the partitions
// it is assigned that wait for another node's release).
func (s *Server) kafkaReadiness() (why, note string) {
	if s.kafka == nil {
		return "", ""
	}
	src := s.kafka.src
	if why := src.reach.unreachable(); why != "" {
		return "kafka: " + why, ""
	}
	var waiting []string
	for _, w := range src.waiting() {
		waiting = append(waiting, w.tp.key()+" (held by node "+w.holder+")")
	}
	if len(waiting) == 0 {
		return "", ""
	}
	return "", "kafka partitions assigned here wait for their holder to release them (start it again; if its file is lost, shredduck kafka-release --node ID): " + strings.Join(waiting, ", ")
}

type waitingPart struct {
	tp     topicPart
	holder string
}

// waiting lists the assigned partitions that another node owns and has
// not released, in order.
func (src *kafkaSource) waiting() []waitingPart {
	src.mu.Lock()
	var out []waitingPart
	for tp, p := range src.parts {
		if p.state == partWaiting && p.owner != "" {
			out = append(out, waitingPart{tp, p.owner})
		}
	}
	src.mu.Unlock()
	slices.SortFunc(out, func(a, b waitingPart) int {
		if c := strings.Compare(a.tp.topic, b.tp.topic); c != 0 {
			return c
		}
		return int(a.tp.part - b.tp.part)
	})
	return out
}

// waitingCollector reports the waiting partitions at each scrape.
type waitingCollector struct{ src *kafkaSource }

var waitingDesc = prometheus.NewDesc("shredduck_kafka_partition_waiting",
	"1 for each partition assigned to this node that waits for the node holding it (holder) to release it.", []string{"topic", "partition", "holder"}, nil)

func (c waitingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- waitingDesc }

func (c waitingCollector) Collect(ch chan<- prometheus.Metric) {
	for _, w := range c.src.waiting() {
		ch <- prometheus.MustNewConstMetric(waitingDesc, prometheus.GaugeValue, 1, w.tp.topic, strconv.Itoa(int(w.tp.part)), w.holder)
	}
}

// closeKafka stores what the consumer holds, releases its partitions and
// leaves the group.
func (s *Server) closeKafka() error {
	k := s.kafka
	k.cancel()
	err := <-k.done
	close(k.stop)
	src := k.src
	src.mu.Lock()
	for _, p := range src.parts {
		if p.state != partRevoking {
			p.state = partRevoking
		}
		if !p.settled() {
			p.handed = p.stored // the loader has stopped: what it did not store it never will
		}
	}
	src.queue = nil
	src.cond.Broadcast() // a revocation waiting for the loader
	src.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	src.releaseSettled(ctx)
	cancel()
	src.client().Close()
	return err
}

func (s *Server) onKafkaLoad(li ingest.LoadInfo) {
	s.metrics.onCommit(ingest.CommitInfo{Requests: li.Items, Rows: li.Rows, Tables: li.Tables, Duration: li.Duration, Err: li.Err})
	if li.Err != nil {
		s.limited.Log(slog.LevelWarn, "kafka loader", "storing Kafka records failed; retrying from the stored offsets", slog.String("error", source.Truncate(li.Err.Error(), 500)))
		return
	}
	s.metrics.visibilityLag.Set(li.Lag.Seconds())
}

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
			src.s.limited.Log(slog.LevelWarn, "kafka fetch", "fetching from Kafka failed; the client retries (check that the brokers are up and the topics exist)",
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
	sig := src.signals[tp.topic]
	if sig == nil || len(r.Value) == 0 {
		return item
	}
	if int64(len(r.Value)) > src.s.cfg.MaxBody {
		src.badRecord(item.Key, reasonTooLarge, fmt.Errorf("a %d-byte record, more than --max-body %d", len(r.Value), src.s.cfg.MaxBody))
		return item
	}
	f := recordFormat(r.Value)
	d, err := source.Decode(src.s.batches, source.Request{Format: f, Tr: sig.tr, Data: r.Value},
		shred.Limits{MaxRows: src.s.cfg.MaxRecords, MaxKeys: src.s.cfg.MaxKeys})
	if err != nil {
		src.badRecord(item.Key, decodeReason(err), fmt.Errorf("cannot decode a %d-byte %s %s request at offset %d: %w (%s)", len(r.Value), f, sig.name, r.Offset, err, source.Snippet(r.Value)))
		return item
	}
	if d.Rejected != nil {
		src.s.metrics.rejectedRecords.WithLabelValues("kafka", reasonInvalidRecord).Add(float64(d.Rejected.Records))
	}
	if d.Batch == nil {
		return item
	}
	item.Table, item.Tr, item.Batch, item.Release = sig.table, sig.tr, d.Batch, d.Release
	return item
}

// recordFormat tells a record's encoding by its first non-blank byte:
// OTLP/JSON starts with '{', protobuf never does.
func recordFormat(v []byte) source.Format {
	if i := strings.IndexFunc(string(v[:min(len(v), 64)]), func(c rune) bool { return c != ' ' && c != '\t' && c != '\r' && c != '\n' }); i >= 0 && v[i] == '{' {
		return formatJSON
	}
	return formatProto
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
		if len(r.Value) == 0 || int64(len(r.Value)) > src.s.cfg.MaxBody {
			return // decode counts it, as the first of an item
		}
		rows := b.Rows
		b.Mark()
		f := recordFormat(r.Value)
		_, err := source.AppendOTLP(sig.tr, f, r.Value, b)
		var rej *transforms.RejectedError
		switch {
		case source.IsLimit(err):
			b.Rollback(rows)
			return // the record starts the next item
		case err != nil && !errors.As(err, &rej):
			b.Rollback(rows)
			src.badRecord(item.Key, decodeReason(err), fmt.Errorf("cannot decode a %d-byte %s %s request at offset %d: %w (%s)", len(r.Value), f, sig.name, r.Offset, err, source.Snippet(r.Value)))
		case rej != nil:
			src.s.metrics.rejectedRecords.WithLabelValues("kafka", reasonInvalidRecord).Add(float64(rej.Records))
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
	src.s.limited.Log(slog.LevelWarn, "kafka bad "+reason, "a Kafka record is skipped: it is not an OTLP export request of the topic's signal",
		slog.String("topic", tp.topic), slog.Int("partition", int(tp.part)), slog.String("reason", reason), slog.String("error", source.Truncate(err.Error(), 500)))
}

// assigned notes new partitions; adjust claims them.
func (src *kafkaSource) assigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	src.s.log.Debug("kafka partitions assigned", slog.Any("partitions", assigned))
	src.mu.Lock()
	defer src.mu.Unlock()
	for t, ps := range assigned {
		for _, part := range ps {
			tp := topicPart{t, part}
			if p := src.parts[tp]; p != nil && p.state == partRevoking {
				p.state = partWaiting // still settling or unreleased: claimed again by tend
				continue
			}
			src.parts[tp] = &kafkaPart{state: partWaiting}
		}
	}
}

// adjust decides where each newly assigned partition starts: it claims
// those it may take and pauses the others.
func (src *kafkaSource) adjust(ctx context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	commits, err := src.fetchCommits(ctx)
	if err != nil {
		src.s.log.Warn("cannot read the group's committed offsets; the assigned partitions wait", slog.String("error", err.Error()))
	}
	src.mu.Lock()
	// What the group says this node owns and no longer holds (it stopped
	// without releasing): released by tend once read from the database.
	for tp, c := range commits {
		if c.meta == metaOwned+src.node && src.parts[tp] == nil {
			src.parts[tp] = &kafkaPart{state: partRevoking, claimed: true, handed: -1, stored: -1, commit: c.offset}
		}
	}
	src.mu.Unlock()
	var pause, resume map[string][]int32
	for t, ps := range offsets {
		for part := range ps {
			tp := topicPart{t, part}
			start, ok := int64(0), false
			if err == nil {
				start, ok = src.claim(ctx, tp, commits[tp])
			}
			if ok {
				ps[part] = kgo.NewOffset().At(start).WithEpoch(-1)
				if resume == nil {
					resume = map[string][]int32{}
				}
				resume[t] = append(resume[t], part)
				continue
			}
			if pause == nil {
				pause = map[string][]int32{}
			}
			pause[t] = append(pause[t], part)
		}
	}
	if kafkaAfterClaims != nil {
		kafkaAfterClaims(src)
	}
	src.pauseMu.Lock()
	defer src.pauseMu.Unlock()
	if pause != nil {
		// tend may have claimed one since its claim here failed (the
		// partition was assigned before this callback ran): it starts
		// where that claim put it instead of being paused for good.
		src.mu.Lock()
		for t, ps := range pause {
			keep := ps[:0]
			for _, part := range ps {
				if p := src.parts[topicPart{t, part}]; p != nil && p.state == partOwned {
					offsets[t][part] = kgo.NewOffset().At(p.next).WithEpoch(-1)
					if resume == nil {
						resume = map[string][]int32{}
					}
					resume[t] = append(resume[t], part)
					continue
				}
				keep = append(keep, part)
			}
			pause[t] = keep
		}
		src.mu.Unlock()
		src.client().PauseFetchPartitions(pause)
	}
	if resume != nil {
		// A pause outlives the assignment it was made in.
		src.client().ResumeFetchPartitions(resume)
	}
	src.kickTend()
	return offsets, nil
}

// kafkaAfterClaims, set by tests, runs in adjust between its claims and
// its pauses.
var kafkaAfterClaims func(*kafkaSource)

// claim takes a waiting partition if no other node holds it: it commits
// the start offset as owned by this node and returns it.
func (src *kafkaSource) claim(ctx context.Context, tp topicPart, c groupCommit) (int64, bool) {
	// One claim at a time, from its first look at the partition: the
	// group's callback and tend both claim, and a claim that found the
	// partition owned by the other would take it for revoked.
	src.commitMu.Lock()
	defer src.commitMu.Unlock()
	src.mu.Lock()
	p := src.parts[tp]
	if p == nil || p.state != partWaiting || (p.claimed && !p.settled()) {
		src.mu.Unlock()
		return 0, false
	}
	src.mu.Unlock()
	if owner, ok := strings.CutPrefix(c.meta, metaOwned); ok && owner != src.node {
		src.mu.Lock()
		p.owner = owner
		src.mu.Unlock()
		src.s.limited.Log(slog.LevelWarn, "kafka wait "+tp.key(), "an assigned partition waits for the node that holds it to release it (it stopped without releasing: start it again)",
			slog.String("topic", tp.topic), slog.Int("partition", int(tp.part)), slog.String("holder", owner))
		return 0, false
	}
	stored, has, err := src.s.db.StoredPosition(ctx, kafkaSourceName+"/"+tp.key())
	if err != nil {
		src.s.limited.Log(slog.LevelError, "kafka claim", "cannot read a partition's stored offset; it waits", slog.String("error", err.Error()))
		return 0, false
	}
	start := max(c.offset, 0)
	if has && int64(stored) > start {
		if c.meta != metaOwned+src.node {
			src.s.log.Warn("this node stored a partition past the group's committed offset; it resumes from its own",
				slog.String("topic", tp.topic), slog.Int("partition", int(tp.part)), slog.Int64("committed", c.offset), slog.Uint64("stored", stored))
		}
		start = int64(stored)
	}
	err = src.commit(ctx, map[topicPart]int64{tp: start}, metaOwned)
	src.mu.Lock()
	if err != nil {
		src.mu.Unlock()
		src.s.limited.Log(slog.LevelWarn, "kafka claim", "cannot claim an assigned partition in the group; it waits", slog.String("topic", tp.topic), slog.Int("partition", int(tp.part)), slog.String("error", err.Error()))
		return 0, false
	}
	if cur := src.parts[tp]; cur != p || p.state != partWaiting {
		// Revoked meanwhile: the claim landed, so it is released by tend.
		src.parts[tp] = &kafkaPart{state: partRevoking, claimed: true, handed: start, stored: start, commit: start}
		src.mu.Unlock()
		return 0, false
	}
	*p = kafkaPart{state: partOwned, claimed: true, next: start, handed: start, stored: start, commit: start, highWater: p.highWater}
	src.purge(tp)
	src.s.log.Debug("kafka partition claimed", slog.String("topic", tp.topic), slog.Int("partition", int(tp.part)), slog.Int64("start", start))
	src.mu.Unlock()
	return start, true
}

// revoked stops handing out the partitions, waits until the loader has
// stored what it took of them, and releases them.
func (src *kafkaSource) revoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	src.s.log.Debug("kafka partitions revoked", slog.Any("partitions", revoked))
	src.mu.Lock()
	for t, ps := range revoked {
		for _, part := range ps {
			tp := topicPart{t, part}
			p := src.parts[tp]
			if p == nil {
				continue
			}
			if !p.claimed {
				delete(src.parts, tp)
				continue
			}
			p.state = partRevoking
			src.lag.DeleteLabelValues(t, strconv.Itoa(int(part)))
			src.purge(tp)
		}
	}
	deadline := time.Now().Add(src.cfg.SessionTimeout / 2)
	t := time.AfterFunc(time.Until(deadline), func() { src.mu.Lock(); src.cond.Broadcast(); src.mu.Unlock() })
	defer t.Stop()
	for time.Now().Before(deadline) && !src.allSettled(revoked) {
		src.cond.Wait()
	}
	src.mu.Unlock()
	src.releaseSettled(ctx)
}

func (src *kafkaSource) allSettled(ps map[string][]int32) bool {
	for t, parts := range ps {
		for _, part := range parts {
			if p := src.parts[topicPart{t, part}]; p != nil && p.state == partRevoking && !p.settled() {
				return false
			}
		}
	}
	return true
}

// releaseSettled releases the revoked partitions the loader is done with.
func (src *kafkaSource) releaseSettled(ctx context.Context) {
	src.commitMu.Lock()
	defer src.commitMu.Unlock()
	src.mu.Lock()
	var unknown []topicPart
	rel := map[topicPart]int64{}
	for tp, p := range src.parts {
		if p.state != partRevoking || !p.claimed {
			continue
		}
		if p.stored < 0 {
			unknown = append(unknown, tp)
		} else if p.settled() {
			rel[tp] = p.stored
		}
	}
	src.mu.Unlock()
	for _, tp := range unknown {
		// Held by the last run: its stored offset is in the database.
		pos, _, err := src.s.db.StoredPosition(ctx, kafkaSourceName+"/"+tp.key())
		if err != nil {
			src.s.limited.Log(slog.LevelError, "kafka release", "cannot read a partition's stored offset to release it", slog.String("error", err.Error()))
			continue
		}
		src.mu.Lock()
		if p := src.parts[tp]; p != nil && p.stored < 0 {
			// Its claim committed the offset it started at, which may be
			// past what it stored since: the part between is stored by
			// the nodes before it.
			p.stored = max(int64(pos), p.commit)
			p.handed = p.stored
			if p.state == partRevoking {
				rel[tp] = p.stored
			}
		}
		src.mu.Unlock()
	}
	if len(rel) == 0 {
		return
	}
	// Only what the group still says this node owns: an earlier release
	// whose answer was lost may have landed, and the next holder claimed
	// the partition since.
	commits, err := src.fetchCommits(ctx)
	if err != nil {
		src.s.limited.Log(slog.LevelWarn, "kafka release", "cannot read the group's offsets to release partitions; retrying", slog.String("error", err.Error()))
		return
	}
	src.mu.Lock()
	for tp := range rel {
		if commits[tp].meta != metaOwned+src.node {
			delete(rel, tp)
			if p := src.parts[tp]; p != nil && p.state == partRevoking {
				delete(src.parts, tp)
			} else if p != nil {
				p.claimed = false
			}
		}
	}
	src.mu.Unlock()
	if len(rel) == 0 {
		return
	}
	src.s.log.Debug("kafka partitions releasing", slog.Any("partitions", fmt.Sprint(rel)))
	if err := src.commit(ctx, rel, metaReleased); err != nil {
		src.s.limited.Log(slog.LevelWarn, "kafka release", "cannot release partitions in the group; retrying (their next holder waits)", slog.String("error", err.Error()))
		return
	}
	src.mu.Lock()
	for tp, pos := range rel {
		if p := src.parts[tp]; p != nil && p.state == partRevoking && p.stored == pos {
			delete(src.parts, tp)
		} else if p != nil {
			p.claimed = false // released; claimed again if assigned again
		}
	}
	src.mu.Unlock()
}

func (src *kafkaSource) kickTend() {
	select {
	case src.kick <- struct{}{}:
	default:
	}
}

// tend runs until stop: it releases settled revoked partitions, claims
// waiting ones, and commits the stored offsets of owned ones (so that
// the group's lag shows them).
func (src *kafkaSource) tend(stop chan struct{}) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		case <-src.kick:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		src.releaseSettled(ctx)
		src.mu.Lock()
		var waiting []topicPart
		progress := map[topicPart]int64{}
		for tp, p := range src.parts {
			switch {
			case p.state == partWaiting:
				waiting = append(waiting, tp)
			case p.state == partOwned && p.stored > p.commit:
				progress[tp] = p.stored
			}
		}
		src.mu.Unlock()
		if len(waiting) > 0 {
			if commits, err := src.fetchCommits(ctx); err == nil {
				for _, tp := range waiting {
					if start, ok := src.claim(ctx, tp, commits[tp]); ok {
						src.pauseMu.Lock()
						src.client().SetOffsets(map[string]map[int32]kgo.EpochOffset{tp.topic: {tp.part: {Epoch: -1, Offset: start}}})
						src.client().ResumeFetchPartitions(map[string][]int32{tp.topic: {tp.part}})
						src.pauseMu.Unlock()
					}
				}
			}
		}
		if len(progress) > 0 {
			src.commitMu.Lock()
			src.mu.Lock()
			for tp := range progress {
				if p := src.parts[tp]; p == nil || p.state != partOwned {
					delete(progress, tp) // revoked meanwhile: its release says where it got to
				}
			}
			src.mu.Unlock()
			if err := src.commit(ctx, progress, metaOwned); err == nil {
				src.mu.Lock()
				for tp, pos := range progress {
					if p := src.parts[tp]; p != nil {
						p.commit = max(p.commit, pos)
					}
				}
				src.mu.Unlock()
			}
			src.commitMu.Unlock()
		}
		cancel()
	}
}

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
type kafkaLogger struct{ s *Server }

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
	l.s.limited.Log(lv, "kafka client "+msg, "kafka client: "+msg, attrs...)
}
