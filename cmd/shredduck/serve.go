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
	"github.com/shredduck/shredduck/serve/jaegerapi"
	"github.com/shredduck/shredduck/serve/pgwire"
	"github.com/shredduck/shredduck/serve/queryhttp"
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
	"young-columns":               "SHREDDUCK_YOUNG_COLUMNS",
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

// serveOpts are serve's flags, once parsed.
type serveOpts struct {
	maxBody          byteSize
	maxInflight      byteSize
	queueBytes       byteSize
	db               string
	httpAddr         string
	grpcAddr         string
	tokenFile        string
	maxRecords       int
	maxKeys          int
	queueRequests    int
	maxColumns       int
	density          float64
	young            int
	memLimit         string
	threads          int
	ckpt             string
	tracesTable      string
	logsTable        string
	metricsTable     string
	retryAfter       time.Duration
	readTimeout      time.Duration
	shutdownTimeout  time.Duration
	logLevel         string
	cpuProfile       string
	queryMaxBytes    byteSize
	queryMaxMemory   byteSize
	queryTimeout     time.Duration
	queryMaxRows     int
	queryConcurrency int
	ack              string
	logDir           string
	logMaxBytes      byteSize
	logSegmentBytes  byteSize
	maxLag           time.Duration
	openQuery        bool
	pgAddr           string
	pgMaxConns       int
	pgIdle           time.Duration
	tlsCert          string
	tlsKey           string
	kafkaBrokers     string
	kafkaTopics      string
	kafkaGroup       string
	kafkaFetch       byteSize
	kafkaSession     time.Duration
}

// define declares serve's flags on fs, into o.
func (o *serveOpts) define(fs *flag.FlagSet) {
	o.maxBody = byteSize(serve.DefaultMaxBody)
	o.maxInflight = byteSize(serve.DefaultMaxInflightBytes)
	o.queueBytes = byteSize(serve.DefaultQueueBytes)
	fs.StringVar(&o.db, "db", defaultDB, "DuckDB database file (created if missing)")
	fs.StringVar(&o.httpAddr, "http", "127.0.0.1:4318", "OTLP/HTTP, NDJSON, health and metrics address (it takes gRPC too); empty or off: no HTTP listener")
	fs.StringVar(&o.grpcAddr, "grpc", "127.0.0.1:4317", "OTLP/gRPC address; empty or off: no gRPC-only listener")
	fs.StringVar(&o.tokenFile, "token-file", "", "file holding the bearer token required on every endpoint but /healthz and /readyz (trimmed)")
	fs.Var(&o.maxBody, "max-body", "largest request `size` after decompression (e.g. 64MiB); a larger request is refused with 413")
	fs.Var(&o.maxInflight, "max-inflight-bytes", "`size` of the memory the requests in flight may hold at once: bodies read and inflated, decoded batches waiting for their commit (at least --max-body); beyond: 503 + Retry-After")
	fs.IntVar(&o.maxRecords, "max-records", serve.DefaultMaxRecords, "records (spans, log records, data points, NDJSON rows) per request at most; a request with more is refused with 413")
	fs.IntVar(&o.maxKeys, "max-keys", serve.DefaultMaxKeys, "distinct attribute keys per request at most (each is a column or a catalog row of its table for good); a request with more is refused with 400 and nothing of it is stored")
	fs.IntVar(&o.queueRequests, "queue-requests", serve.DefaultQueueRequests, "requests waiting for a commit at most; beyond: 503 + Retry-After")
	fs.Var(&o.queueBytes, "queue-bytes", "`size` of the input waiting for a commit at most (e.g. 256MiB); beyond: 503 + Retry-After")
	fs.IntVar(&o.maxColumns, "max-columns", ingest.DefaultMaxColumns, "stored attribute columns per table at most (the memory limit may allow fewer); other keys go to the typed overflow maps")
	fs.Float64Var(&o.density, "column-density", shred.DefaultDensity, "share of a table's recent records (at least 20 records) that must carry an attribute key for it to get a stored column; rarer keys go to the typed overflow maps and still read as columns through shredduck query (docs/SCHEMA.md); 0: every key, up to --max-columns")
	fs.IntVar(&o.young, "young-columns", shred.DefaultYoung, "attribute columns a table has before --column-density decides: below it every key gets a stored column at once (docs/SCHEMA.md, 5.5); 0: the density rule from the first key")
	fs.StringVar(&o.memLimit, "memory-limit", "256MB", "DuckDB's memory_limit (it spills to disk beyond it); empty: DuckDB's default, 80% of RAM")
	fs.IntVar(&o.threads, "threads", 0, "DuckDB's threads, for /v1/query (checkpoints use every core); 0: one fewer than the cores (at least 1), leaving a core to receiving (docs/SERVE.md)")
	fs.StringVar(&o.ckpt, "checkpoint-threshold", "128MB", "WAL size at which the committer checkpoints the database, on every core (DuckDB's checkpoint_threshold is set to 4x it; DuckDB's default, 16MiB, stalls streaming ingest: docs/SERVE.md)")
	fs.StringVar(&o.tracesTable, "traces-table", serve.DefaultTracesTable, "table for OTLP traces")
	fs.StringVar(&o.logsTable, "logs-table", serve.DefaultLogsTable, "table for OTLP logs")
	fs.StringVar(&o.metricsTable, "metrics-table", serve.DefaultMetricsTable, "table for OTLP metrics")
	fs.DurationVar(&o.retryAfter, "retry-after", time.Second, "delay an overloaded server asks clients to wait (Retry-After, gRPC RetryInfo)")
	fs.DurationVar(&o.readTimeout, "read-timeout", time.Minute, "how long a request may take to send its body; slower: 408 (gRPC DEADLINE_EXCEEDED)")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 30*time.Second, "on SIGTERM, how long to wait for requests in flight")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error (JSON log on stderr)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (for measuring)")
	o.queryMaxBytes = byteSize(queryhttp.DefaultMaxBytes)
	fs.DurationVar(&o.queryTimeout, "query-timeout", queryhttp.DefaultTimeout, "/v1/query: the longest a query may run; slower: 504")
	fs.IntVar(&o.queryMaxRows, "query-max-rows", queryhttp.DefaultMaxRows, "/v1/query: rows of a response at most; a longer result is cut and marked truncated")
	fs.Var(&o.queryMaxBytes, "query-max-bytes", "/v1/query: `size` of a response at most (e.g. 16MiB); a larger result is cut and marked truncated")
	fs.Var(&o.queryMaxMemory, "query-max-memory", "/v1/query and --pg: `size` of DuckDB's memory the running queries may hold together; past it one query is stopped with 503 (PostgreSQL 53200), the others run on (default: half of --memory-limit, the rest is kept for ingest)")
	fs.IntVar(&o.queryConcurrency, "query-concurrency", queryhttp.DefaultMaxConcurrent, "/v1/query: queries running at once; more wait for a slot until their timeout, then 503")
	fs.StringVar(&o.ack, "ack", serve.AckLog, "when a request is answered 2xx: log (it is fsynced in the ingest log in --log-dir, and a loader commits it within --max-visibility-lag) or commit (its rows are committed in DuckDB: read your writes, slower): docs/SERVE.md")
	fs.StringVar(&o.logDir, "log-dir", "", "--ack log: the ingest log's directory (default: the database file's name + .ingestlog)")
	o.logMaxBytes = byteSize(1 << 30)
	fs.Var(&o.logMaxBytes, "log-max-bytes", "--ack log: `size` of the ingest log on disk at most (e.g. 1GiB); beyond it, while the loader catches up: 503 + Retry-After")
	o.logSegmentBytes = byteSize(64 << 20)
	fs.Var(&o.logSegmentBytes, "log-segment-bytes", "--ack log: `size` of an ingest log segment file; loaded segments are removed whole")
	fs.DurationVar(&o.maxLag, "max-visibility-lag", time.Second, "--ack log: how long an acknowledged request waits at most before the loader commits it (while DuckDB keeps up); a loader further behind holds new requests")
	fs.BoolVar(&o.openQuery, "allow-unauthenticated-query", false, "/v1/query and --pg without a token on an address that is not loopback (they read every record; ingest is open either way)")
	fs.StringVar(&o.pgAddr, "pg", "", "PostgreSQL wire protocol address for read-only queries (e.g. 127.0.0.1:5432; the password is the token); empty or off: no PostgreSQL endpoint")
	fs.IntVar(&o.pgMaxConns, "pg-max-conns", pgwire.DefaultMaxConns, "--pg: sessions open at once at most; a session beyond takes the place of one idle for 30s or more, else it is refused (SQLSTATE 53300)")
	fs.DurationVar(&o.pgIdle, "pg-idle-timeout", pgwire.DefaultIdleTimeout, "--pg: a session that sends nothing for this long is closed (SQLSTATE 57P05)")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "PEM certificate (chain) file: serve --http, --grpc and --pg over TLS only (with --tls-key)")
	fs.StringVar(&o.tlsKey, "tls-key", "", "PEM private key file of --tls-cert")
	fs.StringVar(&o.kafkaBrokers, "kafka-brokers", "", "Kafka brokers (host:port,...) to consume OTLP export requests from (otlp_proto or otlp_json, as the Collector's kafkaexporter writes them), each record stored once: docs/SCALE-OUT.md; empty: no Kafka consumer")
	fs.StringVar(&o.kafkaTopics, "kafka-topics", strings.Join(serve.DefaultKafkaTopics[:], ","), "--kafka-brokers: the topics of traces, logs and metrics, in that order (an empty one leaves its signal out)")
	fs.StringVar(&o.kafkaGroup, "kafka-group", serve.DefaultKafkaGroup, "--kafka-brokers: the consumer group; the nodes of one cluster share it")
	o.kafkaFetch = byteSize(serve.DefaultKafkaFetchMaxBytes)
	fs.Var(&o.kafkaFetch, "kafka-fetch-max-bytes", "--kafka-brokers: `size` of one fetch response at most (two are buffered); a larger record is still fetched whole")
	fs.DurationVar(&o.kafkaSession, "kafka-session-timeout", 45*time.Second, "--kafka-brokers: how long the group waits for a silent node before it moves its partitions (also the rebalance timeout)")
}

func runServeEnv(ctx context.Context, args []string, stdout, stderr io.Writer, lookupEnv func(string) (string, bool)) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &serveOpts{}
	o.define(fs)
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
	if o.young < 0 {
		fmt.Fprintf(stderr, "shredduck serve: --young-columns %d: want 0 or more\n", o.young)
		return exitUsage
	}
	if o.density < 0 || o.density > 1 {
		fmt.Fprintf(stderr, "shredduck serve: --column-density %g: want a share between 0 and 1\n", o.density)
		return exitUsage
	}
	// A wrong --db is refused before anything else: before a listener
	// takes a port or a profile file is written.
	if err := checkDB(o.db); err != nil {
		fmt.Fprintf(stderr, "shredduck serve: %v\n", err)
		return exitUsage
	}
	if _, err := ingest.CheckPath(o.db); err != nil {
		fmt.Fprintf(stderr, "shredduck serve: %v\n", err)
		return exitError
	}

	token, err := serveToken(o.tokenFile, given["token-file"], lookupEnv)
	if err != nil {
		fmt.Fprintf(stderr, "shredduck serve: %v\n", err)
		return exitUsage
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		fmt.Fprintf(stderr, "shredduck serve: --log-level: %v\n", err)
		return exitUsage
	}
	tlsConfig, certs, err := tlsFlags(o.tlsCert, o.tlsKey)
	if err != nil {
		fmt.Fprintf(stderr, "shredduck serve: %v\n", err)
		return exitUsage
	}
	if disabled(o.httpAddr) && disabled(o.grpcAddr) {
		fmt.Fprintln(stderr, "shredduck serve: --http and --grpc are both off")
		return exitUsage
	}
	kafka, err := kafkaFlags(o.kafkaBrokers, o.kafkaTopics, o.kafkaGroup, o.kafkaFetch, o.kafkaSession)
	if err != nil {
		fmt.Fprintf(stderr, "shredduck serve: %v\n", err)
		return exitUsage
	}
	if o.cpuProfile != "" {
		stop, code := startCPUProfile(o.cpuProfile, stderr)
		if stop == nil {
			return code
		}
		defer stop()
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	if certs != nil {
		certs.Log = log
	}
	if lim, ok := goMemoryLimit(int64(o.maxInflight), os.LookupEnv); ok {
		debug.SetMemoryLimit(lim)
	}
	if _, ok := os.LookupEnv("GOGC"); !ok {
		// A heap of 1.5 times what is live, not 2: beside DuckDB's
		// --memory-limit every MiB of Go's counts against the server's
		// RSS (docs/SERVE.md, Memory).
		debug.SetGCPercent(serveGCPercent)
	}

	ls, err := listen(map[string]string{"http": o.httpAddr, "grpc": o.grpcAddr, "pg": o.pgAddr})
	if err != nil {
		fmt.Fprintf(stderr, "shredduck serve: %v\n", err)
		return exitError
	}
	httpL, grpcL, pgL := ls["http"], ls["grpc"], ls["pg"]
	p := &serveProcess{db: o.db, density: o.density, young: o.young, log: log, stderr: stderr, httpL: httpL, grpcL: grpcL, pgL: pgL,
		policy: sqlpolicy.Config{
			Timeout: o.queryTimeout, MaxRows: o.queryMaxRows, MaxBytes: int64(o.queryMaxBytes),
			MaxMemory: int64(o.queryMaxMemory), MaxConcurrent: o.queryConcurrency,
		}}
	retention, export := retentionConfig()
	p.cfg = serve.Config{
		MaxBody: int64(o.maxBody), QueueRequests: o.queueRequests, QueueBytes: int64(o.queueBytes),
		Limits:     serve.Limits{MaxInflightBytes: int64(o.maxInflight), MaxRecords: o.maxRecords, MaxKeys: o.maxKeys},
		MaxColumns: o.maxColumns, MemoryLimit: o.memLimit, Threads: o.threads, CheckpointThreshold: o.ckpt,
		TracesTable: o.tracesTable, LogsTable: o.logsTable, MetricsTable: o.metricsTable,
		Token: token, RetryAfter: o.retryAfter, ReadTimeout: o.readTimeout, ShutdownTimeout: o.shutdownTimeout, Logger: log,
		Ack: o.ack, LogDir: cmp.Or(o.logDir, o.db+".ingestlog"), LogMaxBytes: int64(o.logMaxBytes),
		LogSegmentBytes: int64(o.logSegmentBytes), MaxVisibilityLag: o.maxLag,
		TLS: tlsConfig, Kafka: kafka,
		Retention: retention, Export: export,
	}
	p.pgCfg = pgwire.Config{Token: token, TLS: tlsConfig, MaxConns: o.pgMaxConns, IdleTimeout: o.pgIdle, Logger: log}
	p.closeToNetwork(token == "", o.openQuery)
	return p.run(ctx)
}

// closeToNetwork turns the query surfaces off on addresses other hosts
// reach when there is no token, unless open: queries read every record.
func (p *serveProcess) closeToNetwork(noToken, open bool) {
	const fix = "set a token (--token-file, $SHREDDUCK_TOKEN) or --allow-unauthenticated-query"
	if noToken && p.httpL != nil && !loopback(p.httpL.Addr()) {
		if open {
			p.log.Warn("the query endpoint is open to the network without a token: it reads every record", "http", p.httpL.Addr().String())
		} else {
			p.log.Warn("query endpoint off: --http is not a loopback address and no token is set", "http", p.httpL.Addr().String(), "fix", fix)
			p.queryOff = fmt.Sprintf("the query endpoint is off: this server listens on %s without a token; start it with a token (--token-file, $SHREDDUCK_TOKEN) and send it, or with --allow-unauthenticated-query", p.httpL.Addr())
		}
	}
	if noToken && p.pgL != nil && !loopback(p.pgL.Addr()) {
		if open {
			p.log.Warn("the PostgreSQL endpoint is open to the network without a token: it reads every record", "pg", p.pgL.Addr().String())
		} else {
			p.log.Warn("PostgreSQL endpoint refuses sessions: --pg is not a loopback address and no token is set", "pg", p.pgL.Addr().String(), "fix", fix)
			p.pgCfg.Off = fmt.Sprintf("queries are off: this server listens on %s without a token; start it with a token (--token-file, $SHREDDUCK_TOKEN) and give it as the password, or with --allow-unauthenticated-query", p.pgL.Addr())
		}
	}
}

// tlsFlags loads --tls-cert and --tls-key (nil without them). A renewed
// pair (the files replaced) is served to new connections, without a
// restart.
func tlsFlags(cert, key string) (*tls.Config, *tlsreload.Certificate, error) {
	if (cert == "") != (key == "") {
		return nil, nil, errors.New("--tls-cert and --tls-key go together")
	}
	if cert == "" {
		return nil, nil, nil
	}
	certs, err := tlsreload.New(cert, key)
	if err != nil {
		return nil, nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
	}
	return certs.Config(), certs, nil
}

// kafkaFlags is the Kafka consumer of the --kafka-* flags (none without
// brokers).
func kafkaFlags(brokers, topics, group string, fetch byteSize, session time.Duration) (serve.KafkaConfig, error) {
	var kafka serve.KafkaConfig
	if disabled(brokers) {
		return kafka, nil
	}
	for b := range strings.SplitSeq(brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			kafka.Brokers = append(kafka.Brokers, b)
		}
	}
	ts := strings.Split(topics, ",")
	if len(ts) != 3 {
		return kafka, fmt.Errorf("--kafka-topics %q: want three topics, of traces, logs and metrics (e.g. otlp_spans,otlp_logs,otlp_metrics; leave one empty to skip its signal)", topics)
	}
	for i, t := range ts {
		kafka.Topics[i] = strings.TrimSpace(t)
	}
	kafka.Group, kafka.FetchMaxBytes, kafka.SessionTimeout = group, int32(min(int64(fetch), 1<<30)), session
	return kafka, nil
}

// startCPUProfile starts writing a CPU profile to path; stop ends it
// (nil, with the exit code, when it could not start).
func startCPUProfile(path string, stderr io.Writer) (stop func(), code int) {
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(stderr, "shredduck serve: %v\n", err)
		return nil, exitUsage
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		fmt.Fprintf(stderr, "shredduck serve: %v\n", err)
		return nil, exitError
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, exitOK
}

// listen opens the listeners of the addresses by name ("http", "grpc",
// "pg"), none for an address that is off; on a failure it closes those
// it opened.
func listen(addrs map[string]string) (map[string]net.Listener, error) {
	ls := map[string]net.Listener{}
	for _, name := range []string{"http", "grpc", "pg"} {
		if disabled(addrs[name]) {
			continue
		}
		l, err := net.Listen("tcp", addrs[name])
		if err != nil {
			for _, l := range ls {
				l.Close()
			}
			return nil, fmt.Errorf("--%s: %w", name, err)
		}
		ls[name] = l
	}
	return ls, nil
}

// serveProcess is a running `shredduck serve`: its listeners and what every
// opening of its database is made with. The database is opened again, in
// the process, when DuckDB invalidates it (serve.Supervise).
type serveProcess struct {
	db                string
	density           float64
	young             int
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
	d.ColumnDensity, d.YoungColumns = p.density, p.young // checked with the other flags
	if d.Recovered != "" {
		p.log.Warn("database recovered on open", "db", p.db, "what", d.Recovered)
	}
	// The server puts its token check in front of the query handler. The
	// handler answers 500 until LockDown, which comes after New's SETs.
	policy := sqlpolicy.New(d, p.policy)
	cfg := p.cfg
	cfg.Query = queryhttp.NewHandler(d, queryhttp.Config{Policy: policy})
	traces := jaegerapi.New(policy, jaegerapi.Config{Table: cmp.Or(cfg.TracesTable, serve.DefaultTracesTable)})
	cfg.Traces, cfg.TracesGRPC = traces, traces.GRPC()
	if p.queryOff != "" {
		cfg.Query = queryhttp.Off(p.queryOff)
		cfg.Traces, cfg.TracesGRPC = queryhttp.Off(p.queryOff), jaegerapi.GRPCOff(p.queryOff)
	}
	srv, err := serve.New(d, cfg)
	if err == nil {
		if err = queryhttp.LockDown(d); err != nil {
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

// serveGCPercent is the server's GOGC unless $GOGC sets one.
const serveGCPercent = 50

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
