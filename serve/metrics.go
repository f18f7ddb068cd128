package serve

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/shredduck/shredduck/ingest"
)

// metrics are the server's Prometheus metrics, in a registry of its own
// (so that several servers, as in tests, do not collide), served at
// /metrics in the text format.
type metrics struct {
	reg              *prometheus.Registry
	requests         *prometheus.CounterVec // endpoint, code
	rejectedRequests *prometheus.CounterVec // endpoint, reason
	rejectedRecords  *prometheus.CounterVec // endpoint, reason
	records          *prometheus.CounterVec // table
	columnsAdded     *prometheus.CounterVec // table
	columnsWidened   *prometheus.CounterVec // table
	strays           *prometheus.CounterVec // table
	commitRows       prometheus.Histogram
	commitRequests   prometheus.Histogram
	commitSeconds    prometheus.Histogram
	commitErrors     prometheus.Counter
	checkpoints      *prometheus.HistogramVec // result
	// --ack log (durable.go)
	logBytes          prometheus.Gauge
	logCorruptBytes   prometheus.Counter
	logRecordsDropped prometheus.Counter
	logDecodedAgain   prometheus.Counter
	visibilityLag     prometheus.Gauge
	logLoadedPosition prometheus.Gauge
	logPaced          prometheus.Counter
	logPaceSeconds    prometheus.Histogram
	backlogAge        atomic.Pointer[func() time.Duration] // set while the log is open
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shredduck_requests_total",
			Help: "Requests answered, by endpoint and status (HTTP status code, or gRPC code name).",
		}, []string{"endpoint", "code"}),
		rejectedRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shredduck_rejected_requests_total",
			Help: "Requests refused, by endpoint and reason (bad_data, too_large, overloaded, ...).",
		}, []string{"endpoint", "reason"}),
		rejectedRecords: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shredduck_rejected_records_total",
			Help: "Records decoded but not committed, by endpoint and reason: overload, commit failure, shutdown, and invalid_record (left out of a committed request: partial success). Records of undecodable requests are not counted here.",
		}, []string{"endpoint", "reason"}),
		records: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shredduck_records_total",
			Help: "Records (spans, log records, data points, NDJSON rows) committed, by table.",
		}, []string{"table"}),
		columnsAdded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shredduck_columns_added_total",
			Help: "Columns added to tables by schema evolution (new attribute keys, and deferred core columns given storage for their first non-default value), by table.",
		}, []string{"table"}),
		columnsWidened: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shredduck_columns_widened_total",
			Help: "Columns whose type was widened, by table.",
		}, []string{"table"}),
		strays: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shredduck_stray_values_total",
			Help: "Attribute values committed to the overflow under a key that has a stored column, because the column would take them only by a lossy widening (a string under a BIGINT key; docs/SCHEMA.md, 5.6), by table.",
		}, []string{"table"}),
		commitRows: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "shredduck_commit_rows",
			Help:    "Rows per group commit.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 10), // 1 .. 262144
		}),
		commitRequests: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "shredduck_commit_requests",
			Help:    "Requests per group commit.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 11), // 1 .. 1024
		}),
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "shredduck_commit_duration_seconds",
			Help:    "Duration of a group commit (write and COMMIT).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12), // 1ms .. ~24s
		}),
		commitErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shredduck_commit_errors_total",
			Help: "Group commits (or retries of one submission) that failed.",
		}),
		checkpoints: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "shredduck_checkpoint_duration_seconds",
			Help:    "Duration of the checkpoints the committer runs when the WAL reaches --checkpoint-threshold (commits wait for them), by result (ok, error).",
			Buckets: prometheus.ExponentialBuckets(0.01, 2.5, 10), // 10ms .. ~38s
		}, []string{"result"}),
		logBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shredduck_ingest_log_bytes",
			Help: "Bytes of the ingest log's segment files on disk (--ack log; bounded by --log-max-bytes).",
		}),
		logCorruptBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shredduck_ingest_log_corrupt_bytes_total",
			Help: "Bytes of acknowledged requests lost to corrupt ingest log segments (checksum mismatches in synced data), skipped by the loader.",
		}),
		logRecordsDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shredduck_ingest_log_dropped_total",
			Help: "Logged (acknowledged) requests the loader could not decode again or store, skipped and logged.",
		}),
		logDecodedAgain: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shredduck_ingest_log_decoded_again_total",
			Help: "Logged requests the loader decoded again from the log because their decoded rows were not in memory (after a restart, or with the handoff at --queue-bytes).",
		}),
		visibilityLag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shredduck_visibility_lag_seconds",
			Help: "For the loader's last transaction: the time from the oldest request's append to the ingest log to its commit (--max-visibility-lag bounds it while DuckDB keeps up).",
		}),
		logLoadedPosition: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "shredduck_ingest_log_loaded_position",
			Help: "The ingest log position stored with the loader's last transaction: every request before it is committed.",
		}),
		logPaced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shredduck_ingest_log_paced_total",
			Help: "Requests held before decoding because the oldest record the loader had not stored was older than --max-visibility-lag (--ack log).",
		}),
		logPaceSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "shredduck_ingest_log_pace_seconds",
			Help:    "How long paced requests were held (--ack log).",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 12), // 5ms .. ~10s
		}),
	}
	backlog := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "shredduck_ingest_log_backlog_seconds",
		Help: "How long the oldest acknowledged request not yet stored in DuckDB has waited (--ack log; 0 when the loader has stored everything).",
	}, func() float64 {
		if f := m.backlogAge.Load(); f != nil {
			return (*f)().Seconds()
		}
		return 0
	})
	m.reg.MustRegister(m.requests, m.rejectedRequests, m.rejectedRecords, m.records, m.columnsAdded,
		m.columnsWidened, m.strays, m.commitRows, m.commitRequests, m.commitSeconds, m.commitErrors, m.checkpoints,
		m.logBytes, m.logCorruptBytes, m.logRecordsDropped, m.logDecodedAgain, m.visibilityLag, m.logLoadedPosition,
		m.logPaced, m.logPaceSeconds, backlog,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// registerQueue exports the committer's queue depth and bounds.
func (m *metrics) registerQueue(c *ingest.Committer, maxRequests int, maxBytes int64) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "shredduck_queue_requests",
			Help: "Submissions waiting for a group commit.",
		}, func() float64 { n, _ := c.QueueDepth(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "shredduck_queue_bytes",
			Help: "Input bytes of the submissions waiting for a group commit.",
		}, func() float64 { _, n := c.QueueDepth(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "shredduck_queue_max_requests",
			Help: "Bound of the commit queue in submissions (--queue-requests).",
		}, func() float64 { return float64(maxRequests) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "shredduck_queue_max_bytes",
			Help: "Bound of the commit queue in input bytes (--queue-bytes).",
		}, func() float64 { return float64(maxBytes) }),
	)
}

// onCommit is the committer's CommitOptions.OnCommit hook.
func (m *metrics) onCommit(ci ingest.CommitInfo) {
	m.commitSeconds.Observe(ci.Duration.Seconds())
	m.commitRequests.Observe(float64(ci.Requests))
	if ci.Err != nil {
		m.commitErrors.Inc()
		return
	}
	m.commitRows.Observe(float64(ci.Rows))
	for _, t := range ci.Tables {
		if t.Rows > 0 {
			m.records.WithLabelValues(t.Table).Add(float64(t.Rows))
		}
		if n := t.ColumnsAdded + t.ColumnsStored; n > 0 {
			m.columnsAdded.WithLabelValues(t.Table).Add(float64(n))
		}
		if t.ColumnsWidened > 0 {
			m.columnsWidened.WithLabelValues(t.Table).Add(float64(t.ColumnsWidened))
		}
		if t.Strays > 0 {
			m.strays.WithLabelValues(t.Table).Add(float64(t.Strays))
		}
	}
}

// onCheckpoint is the committer's CommitOptions.OnCheckpoint hook.
func (m *metrics) onCheckpoint(d time.Duration, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.checkpoints.WithLabelValues(result).Observe(d.Seconds())
}

func (m *metrics) handler(more prometheus.Gatherer) http.Handler {
	var g prometheus.Gatherer = m.reg
	if more != nil {
		g = prometheus.Gatherers{m.reg, more}
	}
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{Registry: m.reg})
}

// statusRecorder remembers a response's status for the request counter.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Flush lets gRPC and Connect stream through the recorder; it sends
// the header, with 200 unless one was written.
func (r *statusRecorder) Flush() {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController and unwrapWriter reach the
// connection's writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// unwrapWriter returns the writer under any wrappers: http.MaxBytesReader
// needs the server's own writer to close the connection after a body over
// the limit.
func unwrapWriter(w http.ResponseWriter) http.ResponseWriter {
	for {
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return w
		}
		w = u.Unwrap()
	}
}

// count wraps an endpoint's handler with the request counter. For gRPC
// calls the code is the grpc-status trailer's, as a code name.
func (m *metrics) count(endpoint string, grpc bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		code := rec.status
		if code == 0 {
			code = http.StatusOK
		}
		label := strconv.Itoa(code)
		if grpc {
			if st := grpcStatus(w.Header()); st != "" {
				label = st
			}
		}
		m.requests.WithLabelValues(endpoint, label).Inc()
	})
}
