package serve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/serve/queryhttp"
	"github.com/shredduck/shredduck/source"
)

// Doors are the HTTP and gRPC ports for the life of the process, in front
// of the Server of the moment. When DuckDB invalidates the database, only
// opening the file again makes it usable (ingest/invalid.go), so Supervise
// closes that Server and its database and puts a new one behind the same
// ports, without the process exiting: the listeners stay open, and while
// no Server is behind them every request is answered 503 with Retry-After
// (gRPC UNAVAILABLE with RetryInfo), /readyz says why, /healthz is 200.
type Doors struct {
	cfg     DoorsConfig
	cur     atomic.Pointer[door]
	servers []*http.Server
	errc    chan error
	addr    atomic.Pointer[string] // the HTTP listener's
	srv     atomic.Pointer[Server] // the Server behind the doors, nil while closed

	reg     *prometheus.Registry
	reopens prometheus.Counter
}

// DoorsConfig configures Doors.
type DoorsConfig struct {
	TLS        *tls.Config
	Logger     *slog.Logger
	RetryAfter time.Duration // of the 503s while no Server is behind the doors (default 1s)
}

// door is what the doors lead to: a Server's handlers, or the 503s while
// there is none. Requests hold mu for reading; drain takes it for writing
// to wait for them.
type door struct {
	all, grpc http.Handler
	mu        sync.RWMutex
	drained   bool
}

// NewDoors makes Doors with no Server behind them yet: every request gets
// 503 until Open.
func NewDoors(cfg DoorsConfig) *Doors {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = time.Second
	}
	d := &Doors{cfg: cfg, errc: make(chan error, 2), reg: prometheus.NewRegistry(),
		reopens: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shredduck_database_reopened_total",
			Help: "Times the server opened its database again in the process after DuckDB invalidated it.",
		})}
	d.reg.MustRegister(d.reopens)
	d.cur.Store(d.closedDoor("the server is starting"))
	return d
}

// Gatherer is the doors' own metrics (the reopenings), for every Server
// behind them to serve on /metrics (Config.Gatherer).
func (d *Doors) Gatherer() prometheus.Gatherer { return d.reg }

// Registerer takes the metrics of what lives as long as the doors (the
// PostgreSQL endpoint), which every Server then serves on /metrics.
func (d *Doors) Registerer() prometheus.Registerer { return d.reg }

// Start serves httpL and grpcL (either may be nil) until Shutdown.
func (d *Doors) Start(httpL, grpcL net.Listener) error {
	if httpL == nil && grpcL == nil {
		return errors.New("serve: no listener")
	}
	if httpL != nil {
		a := httpL.Addr().String()
		d.addr.Store(&a)
		if s := d.srv.Load(); s != nil {
			s.setHTTPAddr(a)
		}
		d.start(httpL, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { d.serve(w, r, false) }), "http")
	}
	if grpcL != nil {
		d.start(grpcL, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { d.serve(w, r, true) }), "grpc")
	}
	return nil
}

func (d *Doors) start(l net.Listener, h http.Handler, name string) {
	var p http.Protocols
	p.SetHTTP1(true)
	if d.cfg.TLS != nil {
		p.SetHTTP2(true)
	} else {
		p.SetUnencryptedHTTP2(true) // h2c with prior knowledge, as gRPC clients speak it
	}
	srv := &http.Server{
		Handler:           h,
		Protocols:         &p,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(d.cfg.Logger.Handler(), slog.LevelWarn),
	}
	if d.cfg.TLS != nil {
		srv.TLSConfig = d.cfg.TLS.Clone()
	}
	d.servers = append(d.servers, srv)
	d.cfg.Logger.Info("listening", slog.String("port", name), slog.String("addr", l.Addr().String()), slog.Bool("tls", d.cfg.TLS != nil))
	go func() {
		var err error
		if srv.TLSConfig != nil {
			err = srv.ServeTLS(l, "", "") // the certificate is in TLSConfig; ServeTLS adds h2 to ALPN
		} else {
			err = srv.Serve(l)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.errc <- fmt.Errorf("%s server: %w", name, err)
		}
	}()
}

// Failed delivers a listener's failure.
func (d *Doors) Failed() <-chan error { return d.errc }

// serve hands a request to the current door; a request that took a door
// while it was being drained takes the next one.
func (d *Doors) serve(w http.ResponseWriter, r *http.Request, grpcPort bool) {
	for {
		cur := d.cur.Load()
		cur.mu.RLock()
		if cur.drained {
			cur.mu.RUnlock()
			continue
		}
		if grpcPort {
			cur.grpc.ServeHTTP(w, r)
		} else {
			cur.all.ServeHTTP(w, r)
		}
		cur.mu.RUnlock()
		return
	}
}

// Open puts s behind the doors (before Start: the first requests find it).
func (d *Doors) Open(s *Server) {
	d.srv.Store(s)
	s.setHTTPAddr(d.httpAddr())
	d.swap(&door{all: s.handler, grpc: s.grpc})
}

// Close puts the 503s behind the doors, saying why, and returns once the
// requests that reached the Server before have been answered.
func (d *Doors) Close(why string) {
	d.srv.Store(nil)
	d.swap(d.closedDoor(why))
}

func (d *Doors) swap(next *door) {
	old := d.cur.Swap(next)
	old.mu.Lock()
	old.drained = true
	old.mu.Unlock()
}

// Shutdown stops the listeners, waiting up to ctx's end for requests in
// flight, then closes their connections.
func (d *Doors) Shutdown(ctx context.Context) {
	var wg sync.WaitGroup
	for _, srv := range d.servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.Shutdown(ctx); err != nil {
				d.cfg.Logger.Warn("requests still in flight after the shutdown timeout; closing their connections", slog.String("error", err.Error()))
				srv.Close()
			}
		}()
	}
	wg.Wait()
}

func (d *Doors) httpAddr() string {
	if a := d.addr.Load(); a != nil {
		return *a
	}
	return ""
}

// otlpProcedures are the gRPC methods of the OTLP Export services.
var otlpProcedures = []string{
	"/opentelemetry.proto.collector.trace.v1.TraceService/Export",
	"/opentelemetry.proto.collector.logs.v1.LogsService/Export",
	"/opentelemetry.proto.collector.metrics.v1.MetricsService/Export",
}

// closedDoor answers every request while no Server is behind the doors.
func (d *Doors) closedDoor(why string) *door {
	unavailable := &apiError{status: http.StatusServiceUnavailable, code: codeUnavailable, reason: reasonClosed,
		msg: why + "; retry", retryAfter: d.cfg.RetryAfter}
	grpcMux := http.NewServeMux()
	for _, procedure := range otlpProcedures {
		grpcMux.Handle(procedure, connect.NewUnaryHandler(procedure,
			func(context.Context, *connect.Request[rawMessage]) (*connect.Response[rawMessage], error) {
				return nil, grpcErrorOf(unavailable)
			}, connect.WithCodec(rawCodec{}), connect.WithCodec(rawCodec{json: true})))
	}
	metrics := promhttp.HandlerFor(d.reg, promhttp.HandlerOpts{})
	all := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") || strings.HasPrefix(r.Header.Get("Content-Type"), "application/connect"):
			grpcMux.ServeHTTP(w, r)
		case r.URL.Path == "/healthz":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			fmt.Fprint(w, "ok\n")
		case r.URL.Path == "/readyz":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready: %s\n", why)
		case r.URL.Path == "/metrics":
			metrics.ServeHTTP(w, r)
		case r.URL.Path == "/v1/query":
			w.Header().Set("Retry-After", strconv.Itoa(int((d.cfg.RetryAfter+time.Second-1)/time.Second)))
			queryhttp.WriteError(w, http.StatusServiceUnavailable, why+"; retry in a moment")
		default:
			f, _ := requestFormat(r.Header.Get("Content-Type"))
			writeError(w, f, unavailable)
		}
	})
	return &door{all: all, grpc: grpcMux}
}

// Instance is one opening of the database, with the Server on it.
type Instance struct {
	Server *Server
	// Close closes the database, after the Server is closed (and
	// whatever else used the database has stopped).
	Close func() error
}

// Supervise serves on d, on httpL and grpcL, the Server open makes until
// ctx ends or a listener fails. When DuckDB invalidates the database, it closes that
// Server (what it had accepted but not committed is answered 503; with
// --ack log what it acknowledged stays in the ingest log) and its
// database, counts a reopening, and calls open again, retrying with a
// growing pause while that fails; meanwhile the doors answer 503. closed
// is called after a Server is closed and before its database is: the
// caller stops what else uses it (the PostgreSQL endpoint's queries).
func Supervise(ctx context.Context, d *Doors, httpL, grpcL net.Listener, open func() (*Instance, error), closed func(why string)) error {
	inst, err := open()
	if err != nil {
		return err
	}
	// The doors open once the database is: until then connections wait.
	d.Open(inst.Server)
	if err := d.Start(httpL, grpcL); err != nil {
		inst.Server.Close()
		closed(err.Error())
		return errors.Join(err, inst.Close())
	}
	for first := true; ; first = false {
		if !first {
			d.Open(inst.Server)
		}
		err := inst.Server.Run(ctx, d.Failed())
		if !errors.Is(err, ingest.ErrInvalidated) {
			inst.Server.closing.Store(true)
			sctx, cancel := context.WithTimeout(context.Background(), inst.Server.cfg.ShutdownTimeout)
			d.Shutdown(sctx)
			cancel()
			inst.Server.Close()
			closed("the server is shutting down")
			return errors.Join(err, inst.Close())
		}
		why := "the database is being opened again: DuckDB invalidated it (" + source.Truncate(err.Error(), 300) + ")"
		inst.Server.closing.Store(true)
		d.Close(why)
		inst.Server.Close()
		closed(why)
		if cerr := inst.Close(); cerr != nil {
			d.cfg.Logger.Warn("closing the invalidated database", slog.String("error", source.Truncate(cerr.Error(), 1000)))
		}
		d.reopens.Inc()
		if inst = reopen(ctx, d, open); inst == nil { // stopped meanwhile
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			d.Shutdown(sctx)
			cancel()
			return nil
		}
	}
}

// reopen calls open until it succeeds, pausing 1s, 2s, ... 30s between
// tries, or until ctx ends (nil).
func reopen(ctx context.Context, d *Doors, open func() (*Instance, error)) *Instance {
	pause := time.Second
	for {
		d.cfg.Logger.Warn("opening the database again")
		inst, err := open()
		if err == nil {
			d.cfg.Logger.Info("database opened again; serving")
			return inst
		}
		d.cfg.Logger.Error("opening the database again failed; retrying", slog.String("error", source.Truncate(err.Error(), 1000)), slog.Duration("in", pause))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(pause):
		}
		pause = min(2*pause, 30*time.Second)
	}
}
