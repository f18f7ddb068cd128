package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/internal/tlsreload"
	"github.com/shredduck/shredduck/serve"
	"github.com/shredduck/shredduck/serve/pgwire"
	"github.com/shredduck/shredduck/serve/sqlpolicy"
	"github.com/shredduck/shredduck/shred"
)

// serveEnv maps each serve flag to the environment variable that sets it
// when the flag is not given.
var serveEnv = map[string]string{
	"db":                          "SHREDDUCK_DB",
	"http":                        "SHREDDUCK_HTTP",
	"grpc":                        "SHREDDUCK_GRPC",
	"token-file":                  "SHREDDUCK_TOKEN_FILE",
	"max-body":                    "SHREDDUCK_MAX_BODY",
	"max-inflight-bytes":          "SHREDDUCK_MAX_INFLIGHT_BYTES",
	"max-records":                 "SHREDDUCK_MAX_RECORDS",
	"max-keys":                    "SHREDDUCK_MAX_KEYS",
	"queue-requests":              "SHREDDUCK_QUEUE_REQUESTS",
	"queue-bytes":                 "SHREDDUCK_QUEUE_BYTES",
	"max-columns":                 "SHREDDUCK_MAX_COLUMNS",
	"column-density":              "SHREDDUCK_COLUMN_DENSITY",
	"memory-limit":                "SHREDDUCK_MEMORY_LIMIT",
	"threads":                     "SHREDDUCK_THREADS",
	"checkpoint-threshold":        "SHREDDUCK_CHECKPOINT_THRESHOLD",
	"traces-table":                "SHREDDUCK_TRACES_TABLE",
	"logs-table":                  "SHREDDUCK_LOGS_TABLE",
	"metrics-table":               "SHREDDUCK_METRICS_TABLE",
	"retry-after":                 "SHREDDUCK_RETRY_AFTER",
	"shutdown-timeout":            "SHREDDUCK_SHUTDOWN_TIMEOUT",
	"read-timeout":                "SHREDDUCK_READ_TIMEOUT",
	"log-level":                   "SHREDDUCK_LOG_LEVEL",
	"query-timeout":               "SHREDDUCK_QUERY_TIMEOUT",
	"query-max-rows":              "SHREDDUCK_QUERY_MAX_ROWS",
	"query-max-bytes":             "SHREDDUCK_QUERY_MAX_BYTES",
	"query-max-memory":            "SHREDDUCK_QUERY_MAX_MEMORY",
	"query-concurrency":           "SHREDDUCK_QUERY_CONCURRENCY",
	"allow-unauthenticated-query": "SHREDDUCK_ALLOW_UNAUTHENTICATED_QUERY",
	"ack":                         "SHREDDUCK_ACK",
	"log-dir":                     "SHREDDUCK_LOG_DIR",
	"log-max-bytes":               "SHREDDUCK_LOG_MAX_BYTES",
	"log-segment-bytes":           "SHREDDUCK_LOG_SEGMENT_BYTES",
	"max-visibility-lag":          "SHREDDUCK_MAX_VISIBILITY_LAG",
	"pg":                          "SHREDDUCK_PG",
	"pg-max-conns":                "SHREDDUCK_PG_MAX_CONNS",
	"pg-idle-timeout":             "SHREDDUCK_PG_IDLE_TIMEOUT",
	"tls-cert":                    "SHREDDUCK_TLS_CERT",
	"tls-key":                     "SHREDDUCK_TLS_KEY",
	"kafka-brokers":               "SHREDDUCK_KAFKA_BROKERS",
	"kafka-topics":                "SHREDDUCK_KAFKA_TOPICS",
	"kafka-group":                 "SHREDDUCK_KAFKA_GROUP",
	"kafka-fetch-max-bytes":       "SHREDDUCK_KAFKA_FETCH_MAX_BYTES",
	"kafka-session-timeout":       "SHREDDUCK_KAFKA_SESSION_TIMEOUT",
	"retention":                   "SHREDDUCK_RETENTION",
	"retention-traces":            "SHREDDUCK_RETENTION_TRACES",
	"retention-logs":              "SHREDDUCK_RETENTION_LOGS",
	"retention-metrics":           "SHREDDUCK_RETENTION_METRICS",
	"retention-interval":          "SHREDDUCK_RETENTION_INTERVAL",
	"retention-step-rows":         "SHREDDUCK_RETENTION_STEP_ROWS",
	"export-dir":                  "SHREDDUCK_EXPORT_DIR",
	"export-delay":                "SHREDDUCK_EXPORT_DELAY",
	"export-interval":             "SHREDDUCK_EXPORT_INTERVAL",
}

const serveUsage = `Usage: shredduck serve [flags]

Receives OpenTelemetry data and commits it to a DuckDB file:
  OTLP/HTTP  POST /v1/traces, /v1/logs, /v1/metrics (protobuf or JSON; gzip, deflate, zstd)
  OTLP/gRPC  the Trace/Logs/MetricsService Export methods, on --grpc and on --http (h2c)
  NDJSON     POST /v1/ndjson/{table}?transform=auto|otlp-traces|otlp-logs|otlp-metrics
  query      POST /v1/query: one read-only SELECT, as JSON or CSV
  PostgreSQL --pg: the same read-only queries over the PostgreSQL protocol (psql, Grafana, ...)
  Kafka      --kafka-brokers: OTLP export requests from Kafka topics, as a consumer group member
  health     GET /healthz (process up), /readyz (database open, queue not full)
  metrics    GET /metrics (Prometheus)
A request is answered 200 (gRPC OK) once it is fsynced in the ingest log
(--ack log, the default): its rows are visible to queries within
--max-visibility-lag (1s) while DuckDB keeps up, and a crash loses none of
them. --ack commit answers only after the rows are committed (read your
writes), at about a third of the throughput.
SIGINT/SIGTERM stop accepting, finish the requests in flight, commit,
checkpoint and exit 0. See docs/SERVE.md.

Every flag can also be set by the environment variable named in its
description; a flag on the command line wins. The token can be given as
SHREDDUCK_TOKEN (the token itself) or in a file (--token-file); it is
never accepted as a flag, which other users could read in ps.

Flags:
`

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runServeEnv(ctx, args, stdout, stderr, os.LookupEnv)
}

func runServeEnv(ctx context.Context, args []string, stdout, stderr io.Writer, lookupEnv func(string) (string, bool)) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	maxBody := byteSize(serve.DefaultMaxBody)
	maxInflight := byteSize(serve.DefaultMaxInflightBytes)
	queueBytes := byteSize(serve.DefaultQueueBytes)
	db := fs.String("db", defaultDB, "DuckDB database file (created if missing)")
	httpAddr := fs.String("http", "127.0.0.1:4318", "OTLP/HTTP, NDJSON, health and metrics address (also takes gRPC); empty or off: none")
	grpcAddr := fs.String("grpc", "127.0.0.1:4317", "OTLP/gRPC address; empty or off: none")
	tokenFile := fs.String("token-file", "", "file holding the bearer token required on every endpoint but /healthz and /readyz (trimmed)")
	fs.Var(&maxBody, "max-body", "largest request `size` after decompression (e.g. 64MiB); larger: 413")
	fs.Var(&maxInflight, "max-inflight-bytes", "`size` of the memory the requests in flight may hold at once: bodies read and inflated, decoded batches waiting for their commit (at least --max-body); beyond: 503 + Retry-After")
	maxRecords := fs.Int("max-records", serve.DefaultMaxRecords, "records (spans, log records, data points, NDJSON rows) per request at most; more: 413")
	maxKeys := fs.Int("max-keys", serve.DefaultMaxKeys, "distinct attribute keys per request at most (each is a column or a catalog row of its table for good); more: 400, nothing stored")
	queueRequests := fs.Int("queue-requests", serve.DefaultQueueRequests, "requests waiting for a commit at most; beyond: 503 + Retry-After")
	fs.Var(&queueBytes, "queue-bytes", "`size` of the input waiting for a commit at most (e.g. 256MiB); beyond: 503 + Retry-After")
	maxColumns := fs.Int("max-columns", ingest.DefaultMaxColumns, "stored attribute columns per table at most (the memory limit may allow fewer); other keys go to the typed overflow maps")
	density := fs.Float64("column-density", shred.DefaultDensity, "share of a table's recent records (at least 20 records) that must carry an attribute key for it to get a stored column; rarer keys go to the typed overflow maps and still read as columns through shredduck query (docs/SCHEMA.md); 0: every key, up to --max-columns")
	memLimit := fs.String("memory-limit", "256MB", "DuckDB's memory_limit (it spills to disk beyond it); empty: DuckDB's default, 80% of RAM")
	threads := fs.Int("threads", 0, "DuckDB's threads, for /v1/query (checkpoints use every core); 0: one fewer than the cores (at least 1), leaving a core to receiving (docs/SERVE.md)")
	ckpt := fs.String("checkpoint-threshold", "128MB", "WAL size at which the committer checkpoints the database, on every core (DuckDB's checkpoint_threshold is set to 4x it; DuckDB's default, 16MiB, stalls streaming ingest: docs/SERVE.md)")
	tracesTable := fs.String("traces-table", serve.DefaultTracesTable, "table for OTLP traces")
	logsTable := fs.String("logs-table", serve.DefaultLogsTable, "table for OTLP logs")
	metricsTable := fs.String("metrics-table", serve.DefaultMetricsTable, "table for OTLP metrics")
	retryAfter := fs.Duration("retry-after", time.Second, "delay an overloaded server asks clients to wait (Retry-After, gRPC RetryInfo)")
	readTimeout := fs.Duration("read-timeout", time.Minute, "how long a request may take to send its body; slower: 408 (gRPC DEADLINE_EXCEEDED)")
	shutdownTimeout := fs.Duration("shutdown-timeout", 30*time.Second, "on SIGTERM, how long to wait for requests in flight")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error (JSON log on stderr)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file (for measuring)")
	queryMaxBytes := byteSize(serve.DefaultQueryMaxBytes)
	var queryMaxMemory byteSize
	queryTimeout := fs.Duration("query-timeout", serve.DefaultQueryTimeout, "/v1/query: the longest a query may run; slower: 504")
	queryMaxRows := fs.Int("query-max-rows", serve.DefaultQueryMaxRows, "/v1/query: rows of a response at most; a longer result is cut and marked truncated")
	fs.Var(&queryMaxBytes, "query-max-bytes", "/v1/query: `size` of a response at most (e.g. 16MiB); a larger result is cut and marked truncated")
	fs.Var(&queryMaxMemory, "query-max-memory", "/v1/query and --pg: `size` of DuckDB's memory the running queries may hold together; past it one query is stopped with 503 (PostgreSQL 53200), the others run on (default: half of --memory-limit, the rest is kept for ingest)")
	queryConcurrency := fs.Int("query-concurrency", serve.DefaultMaxConcurrent, "/v1/query: queries running at once; more wait for a slot until their timeout, then 503")
	ack := fs.String("ack", serve.AckLog, "when a request is answered 2xx: log (it is fsynced in the ingest log in --log-dir, and a loader commits it within --max-visibility-lag) or commit (its rows are committed in DuckDB: read your writes, slower): docs/SERVE.md")
	logDir := fs.String("log-dir", "", "--ack log: the ingest log's directory (default: the database file's name + .ingestlog)")
	logMaxBytes := byteSize(1 << 30)
	fs.Var(&logMaxBytes, "log-max-bytes", "--ack log: `size` of the ingest log on disk at most (e.g. 1GiB); beyond it, while the loader catches up: 503 + Retry-After")
	logSegmentBytes := byteSize(64 << 20)
	fs.Var(&logSegmentBytes, "log-segment-bytes", "--ack log: `size` of an ingest log segment file; loaded segments are removed whole")
	maxLag := fs.Duration("max-visibility-lag", time.Second, "--ack log: how long an acknowledged request waits at most before the loader commits it (while DuckDB keeps up); a loader further behind holds new requests")
	openQuery := fs.Bool("allow-unauthenticated-query", false, "/v1/query and --pg without a token on an address that is not loopback (they read every record; ingest is open either way)")
	pgAddr := fs.String("pg", "", "PostgreSQL wire protocol address for read-only queries (e.g. 127.0.0.1:5432; the password is the token); empty or off: none")
	pgMaxConns := fs.Int("pg-max-conns", pgwire.DefaultMaxConns, "--pg: sessions open at once at most; a session beyond takes the place of one idle for 30s or more, else it is refused (SQLSTATE 53300)")
	pgIdle := fs.Duration("pg-idle-timeout", pgwire.DefaultIdleTimeout, "--pg: a session that sends nothing for this long is closed (SQLSTATE 57P05)")
	tlsCert := fs.String("tls-cert", "", "PEM certificate (chain) file: serve --http, --grpc and --pg over TLS only (with --tls-key)")
	tlsKey := fs.String("tls-key", "", "PEM private key file of --tls-cert")
	kafkaBrokers := fs.String("kafka-brokers", "", "Kafka brokers (host:port,...) to consume OTLP export requests from (otlp_proto or otlp_json, as the Collector's kafkaexporter writes them), each record stored once: docs/SCALE-OUT.md; empty: none")
	kafkaTopics := fs.String("kafka-topics", strings.Join(serve.DefaultKafkaTopics[:], ","), "--kafka-brokers: the topics of traces, logs and metrics, in that order (an empty one leaves its signal out)")
	kafkaGroup := fs.String("kafka-group", serve.DefaultKafkaGroup, "--kafka-brokers: the consumer group; the nodes of one cluster share it")
	kafkaFetch := byteSize(serve.DefaultKafkaFetchMaxBytes)
	fs.Var(&kafkaFetch, "kafka-fetch-max-bytes", "--kafka-brokers: `size` of one fetch response at most (two are buffered); a larger record is still fetched whole")
	kafkaSession := fs.Duration("kafka-session-timeout", 45*time.Second, "--kafka-brokers: how long the group waits for a silent node before it moves its partitions (also the rebalance timeout)")
	retentionConfig := retentionFlags(fs)
	noteEnv(fs, serveEnv)
	fs.Usage = func() {
		fmt.Fprint(stderr, serveUsage)
		fs.PrintDefaults()
	}
	given, code, ok := parseFlags(fs, args, serveEnv, lookupEnv, stderr)
	if !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "shredduck serve: unexpected arguments %q\n", fs.Args())
		return exitUsage
	}
	if *density < 0 || *density > 1 {
		fmt.Fprintf(stderr, "shredduck serve: --column-density %g: want a share between 0 and 1\n", *density)
		return exitUsage
	}
	// A wrong --db is refused before anything else: before a listener
	// takes a port or a profile file is written.
	if err := checkDB(*db); err != nil {
		fmt.Fprintf(stderr, "shredduck serve: %v\n", err)
		return exitUsage
	}
	if _, err := ingest.CheckPath(*db); err != nil {
		fmt.Fprintf(stderr, "shredduck serve: %v\n", err)
		return exitError
	}

	token, err := serveToken(*tokenFile, given["token-file"], lookupEnv)
	if err != nil {
		fmt.Fprintf(stderr, "shredduck serve: %v\n", err)
		return exitUsage
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(stderr, "shredduck serve: --log-level: %v\n", err)
		return exitUsage
	}
	var tlsConfig *tls.Config
	if (*tlsCert == "") != (*tlsKey == "") {
		fmt.Fprintln(stderr, "shredduck serve: --tls-cert and --tls-key go together")
		return exitUsage
	}
	// A renewed pair (the files replaced) is served to new connections,
	// without a restart.
	var certs *tlsreload.Certificate
	if *tlsCert != "" {
		if certs, err = tlsreload.New(*tlsCert, *tlsKey); err != nil {
			fmt.Fprintf(stderr, "shredduck serve: --tls-cert/--tls-key: %v\n", err)
			return exitUsage
		}
		tlsConfig = certs.Config()
	}
	if disabled(*httpAddr) && disabled(*grpcAddr) {
		fmt.Fprintln(stderr, "shredduck serve: --http and --grpc are both off")
		return exitUsage
	}
	var kafka serve.KafkaConfig
	if !disabled(*kafkaBrokers) {
		for b := range strings.SplitSeq(*kafkaBrokers, ",") {
			if b = strings.TrimSpace(b); b != "" {
				kafka.Brokers = append(kafka.Brokers, b)
			}
		}
		topics := strings.Split(*kafkaTopics, ",")
		if len(topics) != 3 {
			fmt.Fprintf(stderr, "shredduck serve: --kafka-topics %q: want three topics, of traces, logs and metrics (e.g. otlp_spans,otlp_logs,otlp_metrics; leave one empty to skip its signal)\n", *kafkaTopics)
			return exitUsage
		}
		for i, t := range topics {
			kafka.Topics[i] = strings.TrimSpace(t)
		}
		kafka.Group, kafka.FetchMaxBytes, kafka.SessionTimeout = *kafkaGroup, int32(min(int64(kafkaFetch), 1<<30)), *kafkaSession
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "shredduck serve: %v\n", err)
			return exitUsage
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "shredduck serve: %v\n", err)
			return exitError
		}
		defer pprof.StopCPUProfile()
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	if certs != nil {
		certs.Log = log
	}
	if lim, ok := goMemoryLimit(int64(maxInflight), os.LookupEnv); ok {
		debug.SetMemoryLimit(lim)
	}

	var httpL, grpcL, pgL net.Listener
	closeListeners := func() {
		for _, l := range []net.Listener{httpL, grpcL, pgL} {
			if l != nil {
				l.Close()
			}
		}
	}
	if !disabled(*httpAddr) {
		if httpL, err = net.Listen("tcp", *httpAddr); err != nil {
			fmt.Fprintf(stderr, "shredduck serve: --http: %v\n", err)
			return exitError
		}
	}
	if !disabled(*grpcAddr) {
		if grpcL, err = net.Listen("tcp", *grpcAddr); err != nil {
			closeListeners()
			fmt.Fprintf(stderr, "shredduck serve: --grpc: %v\n", err)
			return exitError
		}
	}
	if !disabled(*pgAddr) {
		if pgL, err = net.Listen("tcp", *pgAddr); err != nil {
			closeListeners()
			fmt.Fprintf(stderr, "shredduck serve: --pg: %v\n", err)
			return exitError
		}
	}
	p := &serveProcess{db: *db, density: *density, log: log, stderr: stderr, httpL: httpL, grpcL: grpcL, pgL: pgL,
		policy: sqlpolicy.Config{
			Timeout: *queryTimeout, MaxRows: *queryMaxRows, MaxBytes: int64(queryMaxBytes),
			MaxMemory: int64(queryMaxMemory), MaxConcurrent: *queryConcurrency,
		}}
	// Queries read every record: without a token they are off on an
	// address other hosts reach, unless asked for.
	if token == "" && httpL != nil && !loopback(httpL.Addr()) {
		if *openQuery {
			log.Warn("the query endpoint is open to the network without a token: it reads every record", "http", httpL.Addr().String())
		} else {
			log.Warn("query endpoint off: --http is not a loopback address and no token is set", "http", httpL.Addr().String(),
				"fix", "set a token (--token-file, $SHREDDUCK_TOKEN) or --allow-unauthenticated-query")
			p.queryOff = fmt.Sprintf("the query endpoint is off: this server listens on %s without a token; start it with a token (--token-file, $SHREDDUCK_TOKEN) and send it, or with --allow-unauthenticated-query", httpL.Addr())
		}
	}
	retention, export := retentionConfig()
	p.cfg = serve.Config{
		MaxBody: int64(maxBody), QueueRequests: *queueRequests, QueueBytes: int64(queueBytes),
		Limits:     serve.Limits{MaxInflightBytes: int64(maxInflight), MaxRecords: *maxRecords, MaxKeys: *maxKeys},
		MaxColumns: *maxColumns, MemoryLimit: *memLimit, Threads: *threads, CheckpointThreshold: *ckpt,
		TracesTable: *tracesTable, LogsTable: *logsTable, MetricsTable: *metricsTable,
		Token: token, RetryAfter: *retryAfter, ReadTimeout: *readTimeout, ShutdownTimeout: *shutdownTimeout, Logger: log,
		Ack: *ack, LogDir: cmp.Or(*logDir, *db+".ingestlog"), LogMaxBytes: int64(logMaxBytes),
		LogSegmentBytes: int64(logSegmentBytes), MaxVisibilityLag: *maxLag,
		TLS: tlsConfig, Kafka: kafka,
		Retention: retention, Export: export,
	}
	if pgL != nil {
		p.pgCfg = pgwire.Config{Token: token, TLS: tlsConfig, MaxConns: *pgMaxConns, IdleTimeout: *pgIdle, Logger: log}
		if token == "" && !loopback(pgL.Addr()) {
			if *openQuery {
				log.Warn("the PostgreSQL endpoint is open to the network without a token: it reads every record", "pg", pgL.Addr().String())
			} else {
				log.Warn("PostgreSQL endpoint refuses sessions: --pg is not a loopback address and no token is set", "pg", pgL.Addr().String(),
					"fix", "set a token (--token-file, $SHREDDUCK_TOKEN) or --allow-unauthenticated-query")
				p.pgCfg.Off = fmt.Sprintf("queries are off: this server listens on %s without a token; start it with a token (--token-file, $SHREDDUCK_TOKEN) and give it as the password, or with --allow-unauthenticated-query", pgL.Addr())
			}
		}
	}
	return p.run(ctx)
}

// serveProcess is a running `shredduck serve`: its listeners and what every
// opening of its database is made with. The database is opened again, in
// the process, when DuckDB invalidates it (serve.Supervise).
type serveProcess struct {
	db                string
	density           float64
	log               *slog.Logger
	stderr            io.Writer
	httpL, grpcL, pgL net.Listener
	policy            sqlpolicy.Config
	queryOff          string // the query endpoint's refusal ("": on)
	cfg               serve.Config
	pgCfg             pgwire.Config
}

func (p *serveProcess) run(ctx context.Context) int {
	doors := serve.NewDoors(serve.DoorsConfig{TLS: p.cfg.TLS, Logger: p.log, RetryAfter: p.cfg.RetryAfter})
	p.cfg.Gatherer = doors.Gatherer()
	runner := &policySwitch{cfg: sqlpolicy.New(nil, p.policy).Config(), why: "the server is starting"}
	// The PostgreSQL endpoint lives as long as the process, in front of
	// the policy of the database of the moment; should its listener
	// fail, the whole server stops.
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	pgDone := make(chan error, 1)
	if p.pgL != nil {
		p.pgCfg.Metrics = doors.Registerer()
		pgSrv := pgwire.New(runner, p.pgCfg)
		go func() {
			err := pgSrv.Serve(sctx, p.pgL)
			stop()
			pgDone <- err
		}()
	} else {
		pgDone <- nil
	}
	opened := false
	err := serve.Supervise(sctx, doors, p.httpL, p.grpcL, func() (*serve.Instance, error) {
		inst, policy, err := p.open()
		if err == nil {
			runner.set(policy, "")
			if !opened {
				p.log.Info("serving", slog.String("db", p.db), slog.Bool("auth", p.cfg.Token != ""),
					slog.Int64("max_body", p.cfg.MaxBody), slog.String("memory_limit", p.cfg.MemoryLimit))
			}
			opened = true
		}
		return inst, err
	}, func(why string) { runner.set(nil, why) })
	stop()
	if perr := <-pgDone; perr != nil && err == nil {
		err = fmt.Errorf("--pg: %w", perr)
	}
	if err != nil {
		fmt.Fprintf(p.stderr, "shredduck serve: %v\n", err)
		return exitError
	}
	p.log.Info("stopped: database checkpointed and closed")
	return exitOK
}

// open opens the database and makes the server on it, the policy of its
// queries shared by /v1/query and --pg (they share its slots and its share
// of DuckDB's memory).
func (p *serveProcess) open() (*serve.Instance, *sqlpolicy.Policy, error) {
	d, err := ingest.Open(p.db)
	if err != nil {
		return nil, nil, fmt.Errorf("%v%s", err, lockedHint(err, "serve"))
	}
	d.ColumnDensity = p.density // checked with the other flags
	if d.Recovered != "" {
		p.log.Warn("database recovered on open", "db", p.db, "what", d.Recovered)
	}
	// The server puts its token check in front of the query handler. The
	// handler answers 500 until LockDown, which comes after New's SETs.
	policy := sqlpolicy.New(d, p.policy)
	cfg := p.cfg
	cfg.Query = serve.NewQueryHandler(d, serve.QueryConfig{Policy: policy})
	if p.queryOff != "" {
		cfg.Query = serve.QueryOff(p.queryOff)
	}
	srv, err := serve.New(d, cfg)
	if err == nil {
		if err = serve.LockDown(d); err != nil {
			srv.Close()
		}
	}
	if err != nil {
		d.Close()
		return nil, nil, err
	}
	return &serve.Instance{Server: srv, Close: func() error {
		if err := d.Close(); err != nil {
			return fmt.Errorf("closing %s: %w", p.db, err)
		}
		return nil
	}}, policy, nil
}

// policySwitch runs the PostgreSQL endpoint's queries on the policy of the
// database of the moment; while there is none (the database is being
// opened again) they fail as unavailable. set waits for the queries
// running on the policy it replaces.
type policySwitch struct {
	mu  sync.RWMutex
	p   *sqlpolicy.Policy
	why string
	cfg sqlpolicy.Config
}

func (s *policySwitch) set(p *sqlpolicy.Policy, why string) {
	s.mu.Lock()
	s.p, s.why = p, why
	s.mu.Unlock()
}

func (s *policySwitch) unavailable() error {
	return &sqlpolicy.Error{Kind: sqlpolicy.KindUnavailable, Msg: s.why + "; retry in a moment"}
}

func (s *policySwitch) Run(ctx context.Context, q sqlpolicy.Query, sink sqlpolicy.Sink) (sqlpolicy.Result, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.p == nil {
		return sqlpolicy.Result{}, s.unavailable()
	}
	return s.p.Run(ctx, q, sink)
}

func (s *policySwitch) Describe(ctx context.Context, q sqlpolicy.Query) (sqlpolicy.Description, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.p == nil {
		return sqlpolicy.Description{}, s.unavailable()
	}
	return s.p.Describe(ctx, q)
}

func (s *policySwitch) Config() sqlpolicy.Config { return s.cfg }

// goHeapBase is the Go heap the server needs beside the requests in
// flight: the committer, pools, metrics, the query endpoint's results.
const goHeapBase = 192 << 20

// goMemoryLimit is the Go runtime's soft memory limit for a server whose
// requests may hold maxInflight bytes, unless $GOMEMLIMIT sets one: the
// garbage collector otherwise lets the heap grow to twice what is live
// before it collects, and request buffers that are given up (a body
// refused half-way, a buffer outgrown) would double the bound. DuckDB's
// memory is not Go's; --memory-limit bounds it.
func goMemoryLimit(maxInflight int64, lookupEnv func(string) (string, bool)) (int64, bool) {
	if _, ok := lookupEnv("GOMEMLIMIT"); ok {
		return 0, false
	}
	return maxInflight + goHeapBase, true
}

func disabled(addr string) bool { return addr == "" || addr == "off" }

// serveToken returns the bearer token: from --token-file when given as a
// flag, else from $SHREDDUCK_TOKEN or the file named by
// $SHREDDUCK_TOKEN_FILE (not both). "" means no authentication.
func serveToken(file string, fileFlag bool, lookupEnv func(string) (string, bool)) (string, error) {
	envToken, hasEnvToken := lookupEnv("SHREDDUCK_TOKEN")
	if !fileFlag && hasEnvToken {
		if _, hasEnvFile := lookupEnv("SHREDDUCK_TOKEN_FILE"); hasEnvFile {
			return "", errors.New("both $SHREDDUCK_TOKEN and $SHREDDUCK_TOKEN_FILE are set; set one")
		}
		token := strings.TrimSpace(envToken)
		if token == "" {
			return "", errors.New("$SHREDDUCK_TOKEN is empty")
		}
		return token, nil
	}
	if file == "" {
		return "", nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("token file %s is empty", file)
	}
	return token, nil
}

// byteSize is a flag of bytes: a number with an optional unit, KB, MB, GB
// (powers of 1000) or KiB, MiB, GiB (powers of 1024), as DuckDB reads them.
type byteSize int64

func (b *byteSize) String() string {
	n := int64(*b)
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

func (b *byteSize) Set(s string) error {
	s = strings.TrimSpace(s)
	i := len(s)
	for i > 0 && (s[i-1] < '0' || s[i-1] > '9') {
		i--
	}
	num, unit := s[:i], strings.ToLower(strings.TrimSpace(s[i:]))
	mult := map[string]int64{"": 1, "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9,
		"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[unit]
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || mult == 0 || n <= 0 || n > (1<<62)/mult {
		return fmt.Errorf("%q is not a size (e.g. 1048576, 64MiB, 256MB)", s)
	}
	*b = byteSize(n * mult)
	return nil
}

// age is a flag of a duration that also takes days (7d, 1d12h); 0 or
// off is none. A negative value means not given.
// retentionFlags defines serve's retention and export flags on fs; the
// function it returns gives their configuration once fs is parsed (the
// per-table flags override --retention, each for its table only).
func retentionFlags(fs *flag.FlagSet) func() (serve.Retention, serve.Export) {
	var retention, retTraces, retLogs, retMetrics age
	retTraces, retLogs, retMetrics = -1, -1, -1
	fs.Var(&retention, "retention", "how long the OTLP tables keep a record, by its own time (span start, log time, data point time), e.g. 7d, 36h; older rows are deleted in the background and their space reused (docs/RETENTION.md); 0: for ever")
	fs.Var(&retTraces, "retention-traces", "--retention for the traces table (default: --retention)")
	fs.Var(&retLogs, "retention-logs", "--retention for the logs table (default: --retention)")
	fs.Var(&retMetrics, "retention-metrics", "--retention for the metrics table (default: --retention)")
	retInterval := fs.Duration("retention-interval", 0, "time between two retention runs (default: a minute, or a tenth of the shortest retention)")
	retStep := fs.Int("retention-step-rows", serve.DefaultRetentionStepRows, "rows one retention DELETE removes at most; ingestion waits for each step (with --export-dir a step is an hour)")
	exportDir := fs.String("export-dir", "", "write each hour of the OTLP tables to Parquet in this directory once it is over (the layout of shredduck export); retention then never expires an hour not written yet (docs/RETENTION.md)")
	exportDelay := fs.Duration("export-delay", 5*time.Minute, "--export-dir: how long after an hour ends it is written; records arriving later for it are not in its file")
	exportInterval := fs.Duration("export-interval", time.Minute, "--export-dir: time between two looks for hours to write")
	return func() (serve.Retention, serve.Export) {
		return serve.Retention{Traces: retTraces.or(retention), Logs: retLogs.or(retention), Metrics: retMetrics.or(retention),
				Interval: *retInterval, StepRows: *retStep},
			serve.Export{Dir: *exportDir, Delay: *exportDelay, Interval: *exportInterval}
	}
}

type age time.Duration

func (a *age) String() string {
	d := time.Duration(*a)
	switch {
	case d < 0:
		return ""
	case d > 0 && d%(24*time.Hour) == 0:
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	}
	return d.String()
}

func (a *age) Set(s string) error {
	s = strings.TrimSpace(s)
	if s == "off" || s == "0" {
		*a = 0
		return nil
	}
	var days int64
	if i := strings.IndexByte(s, 'd'); i > 0 {
		n, err := strconv.ParseInt(s[:i], 10, 64)
		if err != nil || n < 0 || n > 100_000 {
			return fmt.Errorf("%q is not a duration (e.g. 7d, 36h, 90m, off)", s)
		}
		days, s = n, s[i+1:]
	}
	var d time.Duration
	if s != "" {
		var err error
		if d, err = time.ParseDuration(s); err != nil || d < 0 {
			return fmt.Errorf("%q is not a duration (e.g. 7d, 36h, 90m, off)", s)
		}
	}
	*a = age(time.Duration(days)*24*time.Hour + d)
	return nil
}

// or returns a, or def when a was not given.
func (a age) or(def age) time.Duration {
	if a < 0 {
		return time.Duration(max(def, 0))
	}
	return time.Duration(a)
}

// loopback reports whether a listener's address is reachable from this
// host only.
func loopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}
