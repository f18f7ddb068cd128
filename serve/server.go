package serve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/retention"
	"github.com/shredduck/shredduck/serve/queryhttp"
	"github.com/shredduck/shredduck/source"
	"github.com/shredduck/shredduck/source/kafka"
	"github.com/shredduck/shredduck/transforms"
)

// Config configures a Server. The zero value of a field means its default.
type Config struct {
	// MaxBody is the largest request body, in bytes after decompression
	// (default 64 MiB). Larger bodies get 413 (gRPC RESOURCE_EXHAUSTED).
	MaxBody int64
	Limits  // memory: the in-flight budget and records per request (budget.go)
	// QueueRequests and QueueBytes bound the commit queue (defaults 1024
	// submissions, 256 MiB of input). Beyond them requests get 503 with
	// Retry-After (gRPC UNAVAILABLE).
	QueueRequests int
	QueueBytes    int64
	// MaxColumns is the limit of dynamic (attribute) columns per table
	// (default ingest.DefaultMaxColumns).
	MaxColumns int
	// MemoryLimit, when set, is DuckDB's memory_limit (e.g. "256MB"), set
	// once when the server is made.
	MemoryLimit string
	// CheckpointThreshold is the WAL size at which the committer
	// checkpoints (default "128MB", in DuckDB's syntax; DuckDB's own is
	// 16 MiB). See ingest.DB.Configure for why the server raises it.
	CheckpointThreshold string
	// Threads is DuckDB's thread count, set once when the server is made
	// (default: one fewer than the cores, at least 1; see New).
	Threads int
	// TracesTable, LogsTable and MetricsTable route the OTLP signals
	// (defaults otel_traces, otel_logs, otel_metrics).
	TracesTable, LogsTable, MetricsTable string
	// Token, when set, is required on every endpoint but /healthz and
	// /readyz as `Authorization: Bearer <Token>`.
	Token string
	// RetryAfter is the delay an overloaded server asks clients to wait
	// (default 1s).
	RetryAfter time.Duration
	// ReadTimeout bounds the time to read one request's body (default 1
	// minute): a client that sends slower gets 408 (gRPC
	// DEADLINE_EXCEEDED) and its connection is closed, instead of holding
	// a handler and its buffer for ever.
	ReadTimeout time.Duration
	// ShutdownTimeout bounds how long Serve waits for requests in flight
	// after its context ends (default 30s).
	ShutdownTimeout time.Duration
	// Gatherer, when set, adds its metrics to /metrics: those of the
	// process rather than of this Server (Doors' reopenings).
	Gatherer prometheus.Gatherer
	// Logger receives the server's structured log (default: discard).
	Logger *slog.Logger
	// LogInterval is the least time between two log lines about refused
	// requests of one endpoint and reason (default 10s).
	LogInterval time.Duration
	// Ack is when a request is answered 2xx: AckCommit (default) once its
	// rows are committed in DuckDB, AckLog once it is in the ingest log
	// in LogDir (durable.go), its rows visible within MaxVisibilityLag
	// (default 1s) while DuckDB keeps up. LogMaxBytes bounds the log
	// (default 1 GiB; beyond it 503 with Retry-After).
	Ack              string
	LogDir           string
	LogMaxBytes      int64
	LogSegmentBytes  int64 // a segment file's size before the next starts (default 64 MiB)
	MaxVisibilityLag time.Duration
	// Retention deletes the OTLP tables' old rows in the background
	// (package retention); the zero value keeps everything.
	Retention Retention
	// Export, when its Dir is set, writes each finished hour of the OTLP
	// tables to Parquet (package retention); retention then never expires an hour
	// not written yet.
	Export Export
	// now, when set (tests), is the clock by which retention and the
	// export judge records' times (time.Now otherwise): the export soak
	// (e2e_soak_test.go) runs an hour in seconds.
	now func() time.Time
	// Query, when set, serves POST /v1/query (behind the token). When nil,
	// queryhttp.Default's, on the server's database.
	Query http.Handler
	// Traces, when set, serves Jaeger's query HTTP API under /api/ (behind
	// the token, as Query): serve/jaegerapi on the same query policy.
	Traces http.Handler
	// TracesGRPC, when set, serves more gRPC procedures (by path) beside
	// OTLP's, on both ports and behind the token: Jaeger's remote storage
	// API (serve/jaegerapi).
	TracesGRPC map[string]http.Handler
	// Kafka, when it has brokers, consumes OTLP from Kafka topics
	// (source/kafka, wired in kafka.go) beside the ports.
	Kafka KafkaConfig
	// TLS, when set, serves both ports over TLS only (HTTP/1.1 and
	// HTTP/2 by ALPN, so gRPC too); it holds the certificate.
	TLS *tls.Config
}

// Defaults.
const (
	DefaultMaxBody       = 64 << 20
	DefaultQueueRequests = 1024
	DefaultQueueBytes    = 256 << 20
	DefaultTracesTable   = "otel_traces"
	DefaultLogsTable     = "otel_logs"
	DefaultMetricsTable  = "otel_metrics"
	DefaultLogMaxBytes   = 1 << 30
)

// Server receives OTLP over HTTP and gRPC and NDJSON over HTTP and
// commits it to a database through one group-committing Committer.
type Server struct {
	db        *ingest.DB
	cfg       Config
	committer *ingest.Committer
	metrics   *metrics
	log       *slog.Logger
	limited   *source.LimitedLog
	batches   *source.BatchPool
	mem       *budget // Limits.MaxInflightBytes (budget.go)
	signals   []*signal
	tables    sync.Map     // lower-case table name -> tableEntry (tables.go)
	handler   http.Handler // everything, on the HTTP port
	grpc      http.Handler // the gRPC methods only, on the gRPC port
	closing   atomic.Bool
	httpAddr  atomic.Pointer[string] // the HTTP listener's, once serving
	closeOnce sync.Once
	durable   *durable        // --ack log
	kafka     *kafka.Consumer // --kafka-brokers
	retention *retention.Jobs // Retention and Export

	// beforeSubmit, when set by a test, runs before each Submit with the
	// request's context.
	beforeSubmit atomic.Pointer[func(context.Context)]
	// beforeLoad, when set by a test, runs before the loader reads the
	// ingest log (--ack log).
	beforeLoad atomic.Pointer[func()]
}

// New makes a server on db: it sets DuckDB's memory limit, checks that the
// routing tables are free or hold their signal, and starts the committer.
// Call Serve, or Handler and then Close.
func New(db *ingest.DB, cfg Config) (*Server, error) {
	cfg.withDefaults()
	set := ingest.Settings{MemoryLimit: cfg.MemoryLimit, CheckpointThreshold: cfg.CheckpointThreshold, Threads: cfg.Threads}
	checkpointBytes, err := db.Configure(&set)
	if err != nil {
		return nil, err
	}
	cfg.CheckpointThreshold, cfg.Threads = set.CheckpointThreshold, set.Threads
	s := &Server{db: db, cfg: cfg, log: cfg.Logger, metrics: newMetrics(), batches: source.NewBatchPool(source.DoorKeptBytes)}
	s.limited = source.NewLimitedLog(s.log, cfg.LogInterval)
	if err := s.initMemory(); err != nil {
		return nil, err
	}
	s.signals = []*signal{
		{name: "traces", path: "/v1/traces", procedure: otlpProcedures[0], tr: transforms.Traces, table: cfg.TracesTable},
		{name: "logs", path: "/v1/logs", procedure: otlpProcedures[1], tr: transforms.Logs, table: cfg.LogsTable},
		{name: "metrics", path: "/v1/metrics", procedure: otlpProcedures[2], tr: transforms.Metrics, table: cfg.MetricsTable},
	}
	if err := s.routeSignals(context.Background()); err != nil {
		return nil, err
	}
	if err := s.createRoutingTables(context.Background()); err != nil {
		return nil, err
	}
	s.committer = db.NewCommitter(ingest.CommitOptions{
		MaxColumns:    cfg.MaxColumns,
		QueueRequests: cfg.QueueRequests,
		QueueBytes:    cfg.QueueBytes,
		OnCommit:      s.onCommit,

		CheckpointBytes: checkpointBytes,
		OnCheckpoint:    s.onCheckpoint,
	})
	s.metrics.registerQueue(s.committer, cfg.QueueRequests, cfg.QueueBytes)
	if err := s.openAck(checkpointBytes); err != nil {
		s.committer.Close()
		return nil, err
	}
	if len(cfg.Kafka.Brokers) > 0 {
		if err := s.openKafka(checkpointBytes); err != nil {
			s.Close()
			return nil, fmt.Errorf("cannot consume Kafka: %w", err)
		}
	}
	// After every writer exists: export and expiry take their turns with
	// all of them (s.exclusive reads s.kafka).
	if err := s.startRetention(); err != nil {
		s.Close()
		return nil, fmt.Errorf("export: %w", err)
	}
	s.handler, s.grpc = s.routes()
	return s, nil
}

// withDefaults fills in the defaults of the fields left zero.
func (cfg *Config) withDefaults() {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.QueueRequests <= 0 {
		cfg.QueueRequests = DefaultQueueRequests
	}
	if cfg.QueueBytes <= 0 {
		cfg.QueueBytes = DefaultQueueBytes
	}
	if cfg.MaxColumns <= 0 {
		cfg.MaxColumns = ingest.DefaultMaxColumns
	}
	if cfg.LogMaxBytes <= 0 {
		cfg.LogMaxBytes = DefaultLogMaxBytes
	}
	if cfg.MaxVisibilityLag <= 0 {
		cfg.MaxVisibilityLag = time.Second
	}
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = time.Second
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 30 * time.Second
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = time.Minute
	}
	if cfg.LogInterval <= 0 {
		cfg.LogInterval = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cfg.TracesTable = cmpOr(cfg.TracesTable, DefaultTracesTable)
	cfg.LogsTable = cmpOr(cfg.LogsTable, DefaultLogsTable)
	cfg.MetricsTable = cmpOr(cfg.MetricsTable, DefaultMetricsTable)
}

// openAck sets up the ack mode: with --ack log the ingest log and its
// loader; with --ack commit, the loading of a log an --ack log run left.
// The caller closes the committer when it fails.
func (s *Server) openAck(checkpointBytes int64) error {
	cfg := s.cfg
	switch cfg.Ack {
	case "", AckCommit:
		// A log an --ack log run left is loaded first: it holds
		// acknowledged requests.
		if cfg.LogDir != "" {
			if _, err := os.Stat(cfg.LogDir); err == nil {
				if err := s.drainLog(checkpointBytes); err != nil {
					return fmt.Errorf("cannot load the ingest log %s an --ack log run left: %w", cfg.LogDir, err)
				}
			}
		}
	case AckLog:
		if cfg.LogDir == "" {
			return errors.New("--ack log needs the ingest log's directory")
		}
		if err := s.openLog(checkpointBytes); err != nil {
			return fmt.Errorf("cannot open the ingest log: %w", err)
		}
	default:
		return fmt.Errorf("unknown ack mode %q (want %s or %s)", cfg.Ack, AckCommit, AckLog)
	}
	return nil
}

// readDeadline gives each request ReadTimeout to deliver its body (per
// stream on HTTP/2).
func (s *Server) readDeadline(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			// Not every ResponseWriter supports deadlines (tests'
			// recorders); the header timeout still applies then.
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.cfg.ReadTimeout))
		}
		h.ServeHTTP(w, r)
	})
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (s *Server) onCommit(ci ingest.CommitInfo) {
	s.metrics.onCommit(ci)
	if ci.Err != nil {
		s.limited.Log(slog.LevelError, "commit", "group commit failed",
			slog.Int("requests", ci.Requests), slog.Int64("rows", ci.Rows), slog.String("error", source.Truncate(ci.Err.Error(), 1000)))
	}
}

func (s *Server) onCheckpoint(d time.Duration, err error) {
	s.metrics.onCheckpoint(d, err)
	if err != nil {
		s.limited.Log(slog.LevelError, "checkpoint", "checkpoint failed (the WAL keeps the commits; tried again when it has grown by an eighth of --checkpoint-threshold)",
			slog.String("error", source.Truncate(err.Error(), 1000)))
		return
	}
	s.log.Debug("checkpoint", slog.Duration("duration", d))
}

// routes builds the handler of the HTTP port and that of the gRPC port.
func (s *Server) routes() (all, grpcOnly http.Handler) {
	mux := http.NewServeMux()
	gmux := http.NewServeMux()
	var auth *bearerAuth
	if s.cfg.Token != "" {
		auth = newBearerAuth(s.cfg.Token)
	}
	grpcHandlers := s.grpcHandlers()
	for path, h := range s.cfg.TracesGRPC {
		grpcHandlers[path] = h
	}
	grpcPaths := make(map[string]bool)
	for path := range grpcHandlers {
		grpcPaths[path] = true
	}
	protect := func(endpoint string, grpc bool, h http.Handler) http.Handler {
		h = s.readDeadline(s.withAccount(h, grpc))
		h = auth.wrap(h, grpcPaths, func(r *http.Request, e *apiError) { s.reject(endpoint, e, r.RemoteAddr, nil) })
		return s.metrics.count(endpoint, grpc, h)
	}
	for _, sig := range s.signals {
		mux.Handle(sig.path, protect(sig.path, false, s.mustAnswer(sig.path, s.handleOTLP(sig))))
	}
	for path, h := range grpcHandlers {
		ph := protect(path, true, s.mustAnswer(path, h))
		mux.Handle(path, ph)
		gmux.Handle(path, ph)
	}
	mux.Handle(ndjsonPrefix, protect("/v1/ndjson", false, s.mustAnswer("/v1/ndjson", http.HandlerFunc(s.handleNDJSON))))
	query := s.cfg.Query
	if query == nil {
		query = queryhttp.Default(s.db)
	}
	if query != nil {
		mux.Handle("/v1/query", protect("/v1/query", false, query))
	}
	if s.cfg.Traces != nil {
		mux.Handle("/api/", protect("/api/", false, s.cfg.Traces))
	}
	mux.Handle("/metrics", protect("/metrics", false, s.metrics.handler(s.cfg.Gatherer)))
	mux.Handle("/healthz", s.metrics.count("/healthz", false, http.HandlerFunc(s.handleHealth)))
	mux.Handle("/readyz", s.metrics.count("/readyz", false, http.HandlerFunc(s.handleReady)))
	notFound := protect("other", false, http.HandlerFunc(s.handleNotFound))
	mux.Handle("/", notFound)
	gmux.Handle("/", protect("other", false, http.HandlerFunc(s.handleGRPCPortNotFound)))
	return mux, gmux
}

// handleGRPCPortNotFound answers what is not gRPC on the gRPC-only port:
// OTLP/HTTP sent there (an exporter's port set to 4317) is told where the
// HTTP port is.
func (s *Server) handleGRPCPortNotFound(w http.ResponseWriter, r *http.Request) {
	f, _ := requestFormat(r.Header.Get("Content-Type"))
	where := "the --http address"
	if a := s.httpAddr.Load(); a != nil {
		where = "http://" + *a
	}
	writeError(w, f, &apiError{status: http.StatusNotFound, code: codeNotFound, reason: reasonNotFound,
		msg: fmt.Sprintf("this is shredduck's OTLP/gRPC port: no endpoint %s here; send OTLP/HTTP, NDJSON and queries to %s", source.Truncate(r.URL.Path, 200), where)})
}

func (s *Server) handleNotFound(w http.ResponseWriter, r *http.Request) {
	f, _ := requestFormat(r.Header.Get("Content-Type"))
	writeError(w, f, &apiError{status: http.StatusNotFound, code: codeNotFound, reason: reasonNotFound,
		msg: fmt.Sprintf("no endpoint %s (OTLP: /v1/traces, /v1/logs, /v1/metrics; NDJSON: /v1/ndjson/{table})", source.Truncate(r.URL.Path, 200))})
}

// handleHealth answers 200 while the process is up.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, "ok\n")
}

// handleReady answers 200 when the database answers, the commit queue
// has room, commits succeed (ingest.Committer.Health) and a Kafka
// consumer reaches a broker, else 503. A 200 names what is degraded
// (failing exports) without taking the server out of service.
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	var why string
	switch {
	case s.closing.Load():
		why = "shutting down"
	case s.committer.Full():
		why = "commit queue is full"
	case s.durable != nil && s.durable.log.Size() >= s.cfg.LogMaxBytes:
		why = "the ingest log is full"
	case s.durable != nil && s.durable.writeFailing.Load() != nil:
		why = source.Truncate(*s.durable.writeFailing.Load(), 500)
	case s.durable != nil && s.durable.failing.Load() != nil:
		why = "loading the ingest log fails: " + *s.durable.failing.Load()
	default:
		if why, _ = s.kafkaReadiness(); why != "" {
			break
		}
		if err := s.committer.Health(ctx); err != nil {
			why = "commits fail: " + source.Truncate(err.Error(), 500)
			break
		}
		if err := s.db.SQL.PingContext(ctx); err != nil {
			why = "database: " + err.Error()
		}
	}
	if why != "" {
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "not ready: "+why+"\n")
		return
	}
	notes := []string{"ready"}
	if _, note := s.kafkaReadiness(); note != "" {
		notes = append(notes, note)
	}
	if note := s.retention.Degraded(); note != "" {
		notes = append(notes, note)
	}
	io.WriteString(w, strings.Join(notes, "; ")+"\n")
}

// Registerer is the registry /metrics serves, for the metrics of endpoints
// that run beside the server (the PostgreSQL endpoint).
func (s *Server) Registerer() prometheus.Registerer { return s.metrics.reg }

// Handler returns the handler of the HTTP port: OTLP/HTTP, NDJSON, the
// OTLP/gRPC methods (over h2c), /metrics, /healthz and /readyz.
func (s *Server) Handler() http.Handler { return s.handler }

// GRPCHandler returns the handler of the gRPC port: the three OTLP Export
// methods.
func (s *Server) GRPCHandler() http.Handler { return s.grpc }

// Serve serves the HTTP port on httpL and the gRPC port on grpcL (either
// may be nil) until ctx ends, a listener fails or DuckDB invalidates the
// database. Then it stops accepting, waits for requests in flight (up to
// Config.ShutdownTimeout), and commits everything accepted (Close). The
// caller closes the database afterwards. Serve returns nil after a
// shutdown by ctx. (Supervise serves a succession of Servers instead,
// reopening the database.)
func (s *Server) Serve(ctx context.Context, httpL, grpcL net.Listener) error {
	defer s.Close()
	d := NewDoors(DoorsConfig{TLS: s.cfg.TLS, Logger: s.log, RetryAfter: s.cfg.RetryAfter})
	d.Open(s)
	if err := d.Start(httpL, grpcL); err != nil {
		return err
	}
	err := s.Run(ctx, d.Failed())
	s.closing.Store(true)
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	d.Shutdown(sctx)
	return err
}

// Run waits until ctx ends (nil), a listener fails (an error from
// failed), or DuckDB invalidates the database (an error wrapping
// ingest.ErrInvalidated).
func (s *Server) Run(ctx context.Context, failed <-chan error) error {
	select {
	case <-ctx.Done():
		s.log.Info("shutting down: waiting for requests in flight")
		return nil
	case err := <-failed:
		s.log.Error("server failed; shutting down", slog.String("error", err.Error()))
		return err
	case <-s.db.Invalidated():
		// Nothing commits again on this database (ingest/invalid.go):
		// only opening the file again (Supervise) makes it usable.
		err := s.db.InvalidatedErr()
		s.log.Error("the database is unusable until it is opened again", slog.String("error", err.Error()))
		return err
	}
}

func (s *Server) setHTTPAddr(a string) {
	if a != "" {
		s.httpAddr.Store(&a)
	}
}

// Close stops the committer after committing everything it accepted.
// Submissions after Close get 503 (gRPC UNAVAILABLE). It is safe to call
// more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.closing.Store(true)
		if s.kafka != nil {
			if err := s.kafka.Close(); err != nil {
				s.log.Error("Kafka records taken are not all stored; the next start fetches them again", slog.String("error", err.Error()))
			} else {
				s.log.Info("Kafka consumer stopped: what it took is stored and its partitions released")
			}
		}
		s.retention.Stop()
		if s.durable != nil {
			if err := s.closeLog(); err != nil {
				s.log.Error("the ingest log is not loaded whole; the next start loads the rest", slog.String("error", err.Error()))
			} else {
				s.log.Info("ingest log loaded: everything acknowledged is committed")
			}
		}
		s.committer.Close()
		s.log.Info("committer closed: everything accepted is committed")
	})
}
