package serve

import (
	"fmt"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/shred"
	"github.com/shredduck/shredduck/source/kafka"
)

// KafkaConfig configures the Kafka consumer (source/kafka); no Brokers:
// none.
type KafkaConfig = kafka.Config

// Kafka defaults: the Collector's kafkaexporter's topics.
var DefaultKafkaTopics = kafka.DefaultTopics

const (
	DefaultKafkaGroup         = kafka.DefaultGroup
	DefaultKafkaFetchMaxBytes = kafka.DefaultFetchMaxBytes
)

// openKafka starts the Kafka consumer (source/kafka) and its loader.
func (s *Server) openKafka(checkpointBytes int64) error {
	var sigs [3]kafka.Signal
	for i, t := range s.cfg.Kafka.Topics {
		sig := s.signals[i]
		if t != "" && sig.conflict != nil {
			return fmt.Errorf("cannot consume Kafka topic %s: %s", t, sig.conflict.msg)
		}
		sigs[i] = kafka.Signal{Name: sig.name, Table: sig.table, Tr: sig.tr}
	}
	c, err := kafka.Start(s.cfg.Kafka, kafka.Deps{
		DB:      s.db,
		Batches: s.batches,
		Signals: sigs,
		MaxBody: s.cfg.MaxBody,
		Limits:  shred.Limits{MaxRows: s.cfg.MaxRecords, MaxKeys: s.cfg.MaxKeys},
		Loader: ingest.LoaderOptions{
			MaxColumns:      s.cfg.MaxColumns,
			MaxLag:          s.cfg.MaxVisibilityLag,
			CheckpointBytes: checkpointBytes,
			RetryAfter:      s.cfg.RetryAfter,
			OnLoad:          s.onSourceLoad,
			OnCheckpoint:    s.onCheckpoint,
		},
		OnRejected: func(n int) {
			s.metrics.rejectedRecords.WithLabelValues("kafka", reasonInvalidRecord).Add(float64(n))
		},
		Log:     s.log,
		Limited: s.limited,
		Metrics: s.metrics.reg,
	})
	if err != nil {
		return err
	}
	s.kafka = c
	return nil
}

// onSourceLoad counts a source loader's transaction (Kafka's, the ingest
// log's) as the committer's are counted.
func (s *Server) onSourceLoad(li ingest.LoadInfo) {
	s.metrics.onCommit(ingest.CommitInfo{Requests: li.Items, Rows: li.Rows, Tables: li.Tables, Duration: li.Duration, Err: li.Err})
	if li.Err == nil {
		s.metrics.visibilityLag.Set(li.Lag.Seconds())
	}
}

// kafkaReadiness is the consumer's part of /readyz (kafka.Consumer's
// Readiness), nothing without one.
func (s *Server) kafkaReadiness() (why, note string) {
	if s.kafka == nil {
		return "", ""
	}
	return s.kafka.Readiness()
}
