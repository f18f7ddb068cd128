package pgwire

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shredduck/shredduck/serve/sqlpolicy"
)

// Runner runs the endpoint's queries: *sqlpolicy.Policy, shared with
// POST /v1/query so that both take their slots and memory from one
// budget.
type Runner interface {
	Run(ctx context.Context, q sqlpolicy.Query, sink sqlpolicy.Sink) (sqlpolicy.Result, error)
	Describe(ctx context.Context, q sqlpolicy.Query) (sqlpolicy.Description, error)
	Config() sqlpolicy.Config
}

// Config configures a Server. The zero value of a field means its default.
type Config struct {
	// Token, when set, is the password every connection must give
	// (cleartext password authentication; use TLS on other hosts' networks).
	// Without it any password, or none, is accepted.
	Token string
	// Off, when set, refuses every connection after its startup message
	// with this reason (what to change): the endpoint listens without a
	// token on an address other hosts reach.
	Off string
	// TLS, when set, is required: a connection must begin with an
	// SSLRequest (sslmode=require); plain-text sessions are refused.
	TLS *tls.Config
	// MaxConns bounds the sessions open at once (default 64). A session
	// beyond it takes the place of the session idle longest, if that one
	// has been idle for IdleEvict (default 30s); else it is refused with
	// SQLSTATE 53300.
	MaxConns int
	// IdleTimeout closes a session that sends nothing for this long
	// (default 15m; SQLSTATE 57P05), so that forgotten sessions do not
	// hold their slots.
	IdleTimeout time.Duration
	IdleEvict   time.Duration
	// StartupTimeout bounds the time from connecting to a session ready
	// for queries (default 10s).
	StartupTimeout time.Duration
	// Logger receives connection errors (default: discard).
	Logger *slog.Logger
	// Metrics, when set, gets the endpoint's metrics (metrics.go).
	Metrics prometheus.Registerer
}

// Defaults of Config.
const (
	DefaultMaxConns    = 64
	DefaultIdleTimeout = 15 * time.Minute
	DefaultIdleEvict   = 30 * time.Second
	// maxMessage bounds a message from a client: a query as long as
	// /v1/query takes (1 MiB) and room for its Bind's parameters.
	maxMessage = 1<<20 + 64<<10
	// maxPrepared bounds a session's prepared statements and portals.
	maxPrepared = 1024
	// writeTimeout bounds one write to a client: one that stops reading
	// loses its session instead of holding it.
	writeTimeout = time.Minute
)

// Server serves the PostgreSQL protocol on listeners.
type Server struct {
	run      Runner
	cfg      Config
	tokenSum []byte
	log      *slog.Logger
	sessions chan struct{} // a slot per open session

	mu    sync.Mutex
	conns map[uint32]*conn // by process ID, for CancelRequest
	all   map[net.Conn]struct{}

	settingsMu sync.Mutex
	settings   map[string]string // DuckDB's, for current_setting(); nil until read

	closing atomic.Bool
	wg      sync.WaitGroup
	metrics *metrics
}

// New makes a Server whose queries run on r.
func New(r Runner, cfg Config) *Server {
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.StartupTimeout <= 0 {
		cfg.StartupTimeout = 10 * time.Second
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.IdleEvict <= 0 {
		cfg.IdleEvict = DefaultIdleEvict
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &Server{run: r, cfg: cfg, log: cfg.Logger, sessions: make(chan struct{}, cfg.MaxConns),
		conns: map[uint32]*conn{}, all: map[net.Conn]struct{}{}, metrics: newMetrics(cfg.Metrics)}
	if cfg.Token != "" {
		sum := sha256.Sum256([]byte(cfg.Token))
		s.tokenSum = sum[:]
	}
	return s
}

// Serve accepts connections on l until ctx ends or l fails; then it
// closes every session (their running queries are interrupted) and
// returns once they are gone. It returns nil after ctx ended.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	stop := context.AfterFunc(ctx, func() {
		s.closing.Store(true)
		l.Close()
		s.mu.Lock()
		for nc := range s.all {
			nc.Close()
		}
		s.mu.Unlock()
	})
	defer stop()
	s.log.Info("listening", slog.String("port", "pg"), slog.String("addr", l.Addr().String()))
	var err error
	for {
		var nc net.Conn
		nc, err = l.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			break
		}
		s.mu.Lock()
		if s.closing.Load() {
			s.mu.Unlock()
			nc.Close()
			continue
		}
		s.all[nc] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			defer func() {
				s.mu.Lock()
				delete(s.all, nc)
				s.mu.Unlock()
				nc.Close()
			}()
			s.serveConn(ctx, nc)
		}()
	}
	s.wg.Wait()
	if ctx.Err() != nil || s.closing.Load() {
		return nil
	}
	return err
}

// newKey returns a process ID not in use and a secret key for
// CancelRequest.
func (s *Server) register(c *conn) {
	var b [8]byte
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		rand.Read(b[:])
		pid := binary.BigEndian.Uint32(b[:4]) & 0x7fffffff
		if _, taken := s.conns[pid]; pid != 0 && !taken {
			c.pid, c.secret = pid, append([]byte(nil), b[4:]...)
			s.conns[pid] = c
			return
		}
	}
}

func (s *Server) unregister(c *conn) {
	s.mu.Lock()
	if s.conns[c.pid] == c {
		delete(s.conns, c.pid)
	}
	s.mu.Unlock()
}

// cancel interrupts the query running in session pid if key is its key.
// A wrong key does nothing, as in PostgreSQL, which tells the client
// nothing either.
func (s *Server) cancel(pid uint32, key []byte) {
	s.mu.Lock()
	c := s.conns[pid]
	s.mu.Unlock()
	if c == nil || subtle.ConstantTimeCompare(c.secret, key) != 1 {
		return
	}
	c.cancelQuery()
}

// checkPassword compares a password with the token in constant time
// (over digests, so that not even its length leaks).
func (s *Server) checkPassword(pw string) bool {
	sum := sha256.Sum256([]byte(pw))
	return subtle.ConstantTimeCompare(sum[:], s.tokenSum) == 1
}

// duckdbSettings reads DuckDB's settings, once they are read (they are
// locked while the server runs), for current_setting(). When they cannot
// be read, current_setting() answers the reported parameters alone, and
// the next query tries again.
func (s *Server) duckdbSettings(ctx context.Context) map[string]string {
	s.settingsMu.Lock()
	defer s.settingsMu.Unlock()
	if s.settings != nil {
		return s.settings
	}
	sink := &settingsSink{m: map[string]string{}}
	if _, err := s.run.Run(ctx, sqlpolicy.Query{SQL: "SELECT name, CAST(value AS VARCHAR) FROM duckdb_settings()"}, sink); err != nil {
		s.log.Warn("cannot read DuckDB's settings for current_setting()", slog.String("error", err.Error()))
		return nil
	}
	s.settings = sink.m
	return s.settings
}

type settingsSink struct{ m map[string]string }

func (*settingsSink) Columns([]sqlpolicy.Column) error { return nil }

func (s *settingsSink) Row(vals []any) (bool, error) {
	k, _ := vals[0].(string)
	v, _ := vals[1].(string)
	s.m[k] = v
	return true, nil
}

// evictIdle ends the session idle longest, if it has been idle for
// IdleEvict, to make room for a new one; it reports whether it did. The
// session's slot is free once its loop has returned.
func (s *Server) evictIdle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	var pick *conn
	var since int64
	for _, c := range s.conns {
		if t := c.idleSince.Load(); t != 0 && !c.evicted.Load() && (pick == nil || t < since) {
			pick, since = c, t
		}
	}
	if pick == nil || time.Since(time.Unix(0, since)) < s.cfg.IdleEvict {
		return false
	}
	pick.evicted.Store(true)
	pick.nc.SetReadDeadline(time.Now())
	return true
}
