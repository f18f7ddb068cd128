package kafka

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
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/shred"
	"github.com/shredduck/shredduck/source"
	"github.com/shredduck/shredduck/transforms"
)

// With --kafka-brokers shredduck consumes OTLP export requests from Kafka
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

// Config configures the Kafka consumer; no Brokers: none.
type Config struct {
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

// Defaults: the Collector's kafkaexporter's topics.
var DefaultTopics = [3]string{"otlp_spans", "otlp_logs", "otlp_metrics"}

const (
	DefaultGroup         = "shredduck"
	DefaultFetchMaxBytes = 16 << 20
	kafkaSourceName      = "kafka"
	kafkaNodeKey         = "kafka_node_id" // shredduck_meta
	kafkaPollRecords     = 1000
	// kafkaFetchMaxWait bounds a broker's long poll. A fetch counts
	// against MaxConcurrentFetches (2) while it waits, so with more
	// brokers than that, two whose partitions had run dry held both slots
	// for franz-go's default 5 s while a third had a backlog: catch-up
	// stalled for seconds in some runs (docs/SCALE-OUT.md).
	kafkaFetchMaxWait = 250 * time.Millisecond
	metaOwned         = "owned:"
	metaReleased      = "released:"
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
	d       Deps
	cfg     Config
	kc      *kgo.Client   // client(): the group's callbacks start before NewClient returns
	kcReady chan struct{} // closed once kc is set
	node    string
	signals map[string]Signal // topic -> signal

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

// Signal is what the records of a topic are: OTLP export requests of one
// signal, stored in Table.
type Signal struct {
	Name  string // traces, logs, metrics
	Table string
	Tr    transforms.Transform
}

// Deps is what the consumer uses of the server that starts it.
type Deps struct {
	DB      *ingest.DB
	Batches *source.BatchPool
	// Signals are the signals of Config.Topics, by index (traces, logs,
	// metrics).
	Signals [3]Signal
	// MaxBody bounds a record's bytes; Limits each record's decoded
	// batch (--max-records, --max-keys).
	MaxBody int64
	Limits  shred.Limits
	// Loader is the loader's options; the consumer sets OnDrop and wraps
	// OnLoad (which gets every load's outcome, for metrics).
	Loader ingest.LoaderOptions
	// OnRejected counts records a decoder left out of a stored request.
	OnRejected func(records int)
	Log        *slog.Logger
	Limited    *source.LimitedLog
	Metrics    prometheus.Registerer
}

// Consumer is a Kafka consumer group member and its loader.
type Consumer struct {
	src    *kafkaSource
	loader *ingest.Loader
	cancel context.CancelFunc
	done   chan error
	stop   chan struct{}
}

// Start joins the group and starts the consumer and its loader.
func Start(cfg Config, d Deps) (*Consumer, error) {
	ctx := context.Background()
	if cfg.Group == "" {
		cfg.Group = DefaultGroup
	}
	if cfg.FetchMaxBytes <= 0 {
		cfg.FetchMaxBytes = DefaultFetchMaxBytes
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = 45 * time.Second
	}
	node, err := nodeID(ctx, d.DB)
	if err != nil {
		return nil, err
	}
	src := &kafkaSource{d: d, cfg: cfg, node: node, signals: map[string]Signal{}, parts: map[topicPart]*kafkaPart{}, kick: make(chan struct{}, 1), kcReady: make(chan struct{})}
	src.cond = sync.NewCond(&src.mu)
	src.reach.start, src.reach.after = time.Now(), 2*kafkaHeartbeat(cfg.SessionTimeout)+time.Second
	var topics []string
	for i, t := range cfg.Topics {
		if t == "" {
			continue
		}
		if _, dup := src.signals[t]; dup {
			return nil, fmt.Errorf("topic %s is given for two signals (--kafka-topics)", t)
		}
		src.signals[t] = d.Signals[i]
		topics = append(topics, t)
	}
	if len(topics) == 0 {
		return nil, errors.New("no Kafka topic to consume")
	}
	src.registerMetrics()
	cl, err := newClient(cfg, node, topics, src)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	src.kc = cl
	close(src.kcReady)
	opts := d.Loader
	opts.OnLoad = src.onLoad
	opts.OnDrop = func(it ingest.SourceItem, err error) {
		src.badRecord(it.Key, "unstorable", err)
	}
	loader := d.DB.NewLoader(src, opts)
	lctx, cancel := context.WithCancel(ctx)
	c := &Consumer{src: src, loader: loader, cancel: cancel, done: make(chan error, 1), stop: make(chan struct{})}
	go func() { c.done <- loader.Run(lctx) }()
	go src.tend(c.stop)
	d.Log.Info("consuming Kafka", slog.Any("brokers", cfg.Brokers), slog.Any("topics", topics), slog.String("group", cfg.Group), slog.String("node", node))
	return c, nil
}

// nodeID is this database's node id in the group (shredduck_meta), made
// on the first start.
func nodeID(ctx context.Context, db *ingest.DB) (string, error) {
	node, ok, err := db.Meta(ctx, kafkaNodeKey)
	if err != nil || ok {
		return node, err
	}
	var r [8]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", err
	}
	node = hex.EncodeToString(r[:])
	return node, db.SetMeta(ctx, kafkaNodeKey, node)
}

func (src *kafkaSource) registerMetrics() {
	src.consumed = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shredduck_kafka_records_total",
		Help: "Kafka records consumed (stored, or skipped as bad), by topic."}, []string{"topic"})
	src.bad = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shredduck_kafka_bad_records_total",
		Help: "Kafka records skipped because they are not OTLP export requests of the topic's signal, by topic and reason."}, []string{"topic", "reason"})
	src.lag = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "shredduck_kafka_lag_records",
		Help: "Records of a partition this node holds that are not stored yet: high watermark minus stored offset."}, []string{"topic", "partition"})
	src.d.Metrics.MustRegister(src.consumed, src.bad, src.lag, waitingCollector{src})
}

// newClient makes the group member's client.
func newClient(cfg Config, node string, topics []string, src *kafkaSource) (*kgo.Client, error) {
	// The commits with metadata (commit, fetchCommits) name topics; from
	// version 10 those requests take topic ids instead.
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(kmsg.OffsetCommit.Int16(), 9)
	versions.SetMaxKeyVersion(kmsg.OffsetFetch.Int16(), 9)
	return kgo.NewClient(
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
		kgo.FetchMaxWait(kafkaFetchMaxWait),
		kgo.SessionTimeout(cfg.SessionTimeout),
		kgo.RebalanceTimeout(cfg.SessionTimeout),
		kgo.HeartbeatInterval(kafkaHeartbeat(cfg.SessionTimeout)),
		kgo.WithHooks(&src.reach),
		kgo.OnPartitionsAssigned(src.assigned),
		kgo.AdjustFetchOffsetsFn(src.adjust),
		kgo.OnPartitionsRevoked(src.revoked),
		kgo.OnPartitionsLost(src.revoked),
		kgo.WithLogger(kafkaLogger{src.d.Limited}),
	)
}

func kafkaHeartbeat(session time.Duration) time.Duration { return min(3*time.Second, session/4) }

// Readiness is the consumer's part of /readyz: why the node is not
// ready (no broker reachable), or a note for a ready one (the partitions
// it is assigned that wait for another node's release).
func (c *Consumer) Readiness() (why, note string) {
	src := c.src
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

// Exclusive runs fn between two of the loader's transactions.
func (c *Consumer) Exclusive(ctx context.Context, fn func() error) error {
	return c.loader.Exclusive(ctx, fn)
}

// Generation is the group generation the member is in, -1 before it
// joins.
func (c *Consumer) Generation() int32 {
	_, gen := c.src.client().GroupMetadata()
	return gen
}

// Close stores what the consumer holds, releases its partitions and
// leaves the group.
func (c *Consumer) Close() error {
	k := c
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

func (src *kafkaSource) onLoad(li ingest.LoadInfo) {
	if f := src.d.Loader.OnLoad; f != nil {
		f(li)
	}
	if li.Err != nil {
		src.d.Limited.Log(slog.LevelWarn, "kafka loader", "storing Kafka records failed; retrying from the stored offsets", slog.String("error", source.Truncate(li.Err.Error(), 500)))
		return
	}
}
