package pgwire

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/shredduck/shredduck/serve/sqlpolicy"
)

// errCancelRequest is the cause of a query stopped by a CancelRequest.
var errCancelRequest = errors.New("canceled by the client's cancel request")

// conn is one session.
type conn struct {
	s      *Server
	nc     net.Conn
	be     *pgproto3.Backend
	types  *pgtype.Map
	pid    uint32
	secret []byte

	stmts   map[string]*statement
	portals map[string]*portal
	inTx    bool
	skip    bool // after an error in the extended protocol: until Sync

	mu     sync.Mutex
	cancel context.CancelCauseFunc // of the running query

	idleSince atomic.Int64 // UnixNano since the session waits for a message; 0 while it works
	evicted   atomic.Bool  // ended by evictIdle for a new session
}

// statement is a parsed statement (Parse, or a simple Query).
type statement struct {
	cmd    command
	query  sqlpolicy.Query // cmdNone: what DuckDB runs, without arguments
	params []uint32        // the parameters' types
	cols   []sqlpolicy.Column
	types  []pgType
}

// portal is a bound statement (Bind) and its result once executed.
type portal struct {
	stmt    *statement
	args    []any
	formats []int16 // per result column
	res     *rowSink
	sent    int  // rows of res sent
	done    bool // res was sent whole and freed
}

func (s *Server) serveConn(ctx context.Context, nc net.Conn) {
	c := &conn{s: s, nc: nc, types: newTypeMap(), stmts: map[string]*statement{}, portals: map[string]*portal{}}
	c.be = pgproto3.NewBackend(nc, nc)
	nc.SetDeadline(time.Now().Add(s.cfg.StartupTimeout))
	ok, err := c.startup()
	if err != nil {
		if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !s.closing.Load() {
			s.log.Debug("pg startup failed", slog.String("remote", nc.RemoteAddr().String()), slog.String("error", err.Error()))
		}
		return
	}
	if !ok {
		return
	}
	defer func() { <-s.sessions }()
	s.metrics.sessions.WithLabelValues().Inc()
	defer s.metrics.sessions.WithLabelValues().Dec()
	s.register(c)
	defer s.unregister(c)
	nc.SetDeadline(time.Time{})
	c.be.SetMaxBodyLen(maxMessage)
	c.send(&pgproto3.BackendKeyData{ProcessID: c.pid, SecretKey: c.secret})
	c.send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	if err := c.flush(); err != nil {
		return
	}
	if err := c.loop(ctx); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !s.closing.Load() {
		s.log.Debug("pg session ended", slog.String("remote", nc.RemoteAddr().String()), slog.String("error", err.Error()))
	}
}

// startup reads the startup message (after SSLRequest and TLS when
// configured), authenticates and takes a session slot. It returns false
// when the client was refused (and told why) or only sent a
// CancelRequest.
func (c *conn) startup() (bool, error) {
	tlsDone := false
	for {
		msg, err := c.be.ReceiveStartupMessage()
		if err != nil {
			// A length over pgproto3's bound, an unknown code: nothing
			// is allocated for it; tell the client what was wrong.
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				c.fatal("08P01", "invalid startup packet: "+err.Error(), "")
			}
			return false, err
		}
		switch m := msg.(type) {
		case *pgproto3.SSLRequest:
			if c.s.cfg.TLS == nil || tlsDone {
				if _, err := c.nc.Write([]byte{'N'}); err != nil {
					return false, err
				}
				continue
			}
			if _, err := c.nc.Write([]byte{'S'}); err != nil {
				return false, err
			}
			tc := tls.Server(c.nc, c.s.cfg.TLS)
			if err := tc.Handshake(); err != nil {
				return false, fmt.Errorf("TLS handshake: %w", err)
			}
			c.nc = tc
			c.be = pgproto3.NewBackend(tc, tc)
			tlsDone = true
		case *pgproto3.GSSEncRequest:
			if _, err := c.nc.Write([]byte{'N'}); err != nil {
				return false, err
			}
		case *pgproto3.CancelRequest:
			c.s.cancel(m.ProcessID, m.SecretKey)
			return false, nil
		case *pgproto3.StartupMessage:
			if c.s.cfg.TLS != nil && !tlsDone {
				c.fatal("28000", "this server requires TLS: connect with sslmode=require (or verify-ca, verify-full)", "")
				return false, nil
			}
			return c.authenticate(m)
		default:
			c.fatal("08P01", fmt.Sprintf("unexpected startup message %T", msg), "")
			return false, nil
		}
	}
}

func (c *conn) authenticate(m *pgproto3.StartupMessage) (bool, error) {
	user := m.Parameters["user"]
	// Protocol 3.2 (and _pq_ options) are declined, as the protocol asks:
	// the session goes on in 3.0.
	var options []string
	for k := range m.Parameters {
		if strings.HasPrefix(k, "_pq_.") {
			options = append(options, k)
		}
	}
	if m.ProtocolVersion != pgproto3.ProtocolVersion30 || len(options) > 0 {
		sort.Strings(options)
		c.send(&pgproto3.NegotiateProtocolVersion{NewestMinorProtocol: 0, UnrecognizedOptions: options})
	}
	if c.s.cfg.Off != "" {
		c.fatal("28000", c.s.cfg.Off, "")
		return false, nil
	}
	if c.s.tokenSum != nil {
		c.send(&pgproto3.AuthenticationCleartextPassword{})
		if err := c.flush(); err != nil {
			return false, err
		}
		c.be.SetAuthType(pgproto3.AuthTypeCleartextPassword)
		c.be.SetMaxBodyLen(64 << 10)
		msg, err := c.be.Receive()
		if err != nil {
			return false, err
		}
		pw, ok := msg.(*pgproto3.PasswordMessage)
		if !ok {
			c.fatal("08P01", fmt.Sprintf("expected a password message, got %T", msg), "")
			return false, nil
		}
		if !c.s.checkPassword(pw.Password) {
			c.fatal("28P01", fmt.Sprintf("password authentication failed for user %q", user),
				"the password is the server's token (--token-file or $SHREDDUCK_TOKEN); any user name is accepted")
			return false, nil
		}
	}
	if !c.takeSlot() {
		c.fatal("53300", fmt.Sprintf("sorry, too many clients already: all %d sessions (--pg-max-conns) are running queries or were idle for less than %v", c.s.cfg.MaxConns, c.s.cfg.IdleEvict),
			"retry in a moment, or raise --pg-max-conns")
		return false, nil
	}
	c.send(&pgproto3.AuthenticationOk{})
	for _, p := range reported {
		c.send(&pgproto3.ParameterStatus{Name: p[0], Value: p[1]})
	}
	if app := m.Parameters["application_name"]; app != "" {
		c.send(&pgproto3.ParameterStatus{Name: "application_name", Value: app})
	}
	c.send(&pgproto3.ParameterStatus{Name: "session_authorization", Value: user})
	return true, nil
}

// takeSlot takes a session slot, ending the session idle longest when
// none is free (evictIdle) and waiting a moment for its slot.
func (c *conn) takeSlot() bool {
	select {
	case c.s.sessions <- struct{}{}:
		return true
	default:
	}
	if !c.s.evictIdle() {
		return false
	}
	t := time.NewTimer(2 * time.Second)
	defer t.Stop()
	select {
	case c.s.sessions <- struct{}{}:
		return true
	case <-t.C:
		return false
	}
}

func (c *conn) send(msg pgproto3.BackendMessage) { c.be.Send(msg) }

func (c *conn) flush() error {
	c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
	return c.be.Flush()
}

// fatal tells the client why its session ends.
func (c *conn) fatal(code, msg, hint string) {
	c.s.metrics.refused.WithLabelValues(code).Inc()
	c.send(&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: code, Message: msg, Hint: hint})
	c.flush()
}

func (c *conn) txStatus() byte {
	if c.inTx {
		return 'T'
	}
	return 'I'
}

// loop answers messages until the client terminates or the connection
// fails.
func (c *conn) loop(ctx context.Context) error {
	for {
		if c.evicted.Load() { // taken while it received its last message
			c.fatal("57P01", "terminating connection: the server took this idle session's place for a new session", "reconnect; connection pools do so by themselves")
			return nil
		}
		idle := time.Now()
		c.idleSince.Store(idle.UnixNano())
		c.nc.SetReadDeadline(idle.Add(c.s.cfg.IdleTimeout))
		msg, err := c.be.Receive()
		c.idleSince.Store(0)
		c.nc.SetReadDeadline(time.Time{})
		if err != nil {
			var tooLong *pgproto3.ExceededMaxBodyLenErr
			var ne net.Error
			if c.evicted.Load() {
				c.fatal("57P01", fmt.Sprintf("terminating connection: this session was idle for %v and the server took its place for a new session (--pg-max-conns %d)", time.Since(idle).Round(time.Second), c.s.cfg.MaxConns),
					"reconnect; connection pools do so by themselves")
				return nil
			} else if errors.As(err, &ne) && ne.Timeout() {
				c.fatal("57P05", fmt.Sprintf("terminating connection due to idle-session timeout: nothing was sent for %v (--pg-idle-timeout)", c.s.cfg.IdleTimeout), "reconnect")
				return nil
			} else if errors.As(err, &tooLong) {
				c.fatal("54000", fmt.Sprintf("a message of %d bytes is longer than the %d this server reads", tooLong.ActualBodyLen, maxMessage), "send queries of at most 1 MiB")
			} else if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, net.ErrClosed) {
				c.fatal("08P01", "invalid message: "+err.Error(), "")
			}
			return err
		}
		if _, ok := msg.(*pgproto3.Terminate); ok {
			return nil
		}
		if c.skip {
			if _, ok := msg.(*pgproto3.Sync); !ok {
				continue
			}
		}
		switch m := msg.(type) {
		case *pgproto3.Query:
			c.simpleQuery(ctx, m.String)
			c.send(&pgproto3.ReadyForQuery{TxStatus: c.txStatus()})
		case *pgproto3.Parse:
			c.extended(c.parse(ctx, m))
		case *pgproto3.Bind:
			c.extended(c.bind(m))
		case *pgproto3.Describe:
			c.extended(c.describe(m))
		case *pgproto3.Execute:
			c.extended(c.execute(ctx, m))
		case *pgproto3.Close:
			if m.ObjectType == 'S' {
				delete(c.stmts, m.Name)
			} else {
				delete(c.portals, m.Name)
			}
			c.send(&pgproto3.CloseComplete{})
		case *pgproto3.Sync:
			c.skip = false
			delete(c.portals, "")
			c.send(&pgproto3.ReadyForQuery{TxStatus: c.txStatus()})
		case *pgproto3.Flush:
		case *pgproto3.FunctionCall: // answered like a simple query
			c.sendError(&pgError{code: "0A000", msg: "the function call protocol is not supported", hint: "call the function in a SELECT"})
			c.send(&pgproto3.ReadyForQuery{TxStatus: c.txStatus()})
		default:
			c.sendError(&pgError{code: "08P01", msg: fmt.Sprintf("unexpected message %T", msg)})
			c.skip = true
		}
		switch msg.(type) {
		case *pgproto3.Query, *pgproto3.Sync, *pgproto3.Flush, *pgproto3.FunctionCall:
			if err := c.flush(); err != nil {
				return err
			}
		}
	}
}

// extended sends the error of an extended-protocol message, after which
// the messages up to Sync are skipped.
func (c *conn) extended(err *pgError) {
	if err != nil {
		c.sendError(err)
		c.skip = true
	}
}

// pgError is an ErrorResponse.
type pgError struct {
	code, msg, detail, hint string
}

func (c *conn) sendError(e *pgError) {
	c.s.metrics.queries.WithLabelValues(e.code).Inc()
	c.send(&pgproto3.ErrorResponse{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: e.code, Message: e.msg, Detail: e.detail, Hint: e.hint})
}

// prepare classifies sql and, for DuckDB's SQL, checks and describes it
// (unless !describe: a simple query is described by its run).
func (c *conn) prepare(ctx context.Context, sql string, oids []uint32, describe bool) (*statement, *pgError) {
	st := &statement{cmd: classify(sql)}
	switch st.cmd.kind {
	case cmdRefuse:
		return nil, refusedSet(st.cmd)
	case cmdRefuseCopy:
		return nil, &pgError{code: "0A000", msg: st.cmd.name}
	case cmdShow:
		st.types = []pgType{typeText}
		st.cols = []sqlpolicy.Column{{Name: st.cmd.name}}
		return st, nil
	case cmdCopy:
		sql = st.cmd.copySQL
	case cmdNone:
	default:
		return st, nil
	}
	q := sqlpolicy.Query{SQL: rewrite(sql), NestedJSON: true}
	q.Temps = dialectTemps(q.SQL, func() map[string]string { return c.s.duckdbSettings(context.WithoutCancel(ctx)) })
	st.query = q
	if !describe {
		return st, nil
	}
	d, perr := c.describeQuery(ctx, q)
	if perr != nil {
		return nil, perr
	}
	// A parameter whose type DuckDB cannot infer (SELECT $1) leaves the
	// result undescribed: one column "unknown". PostgreSQL takes such a
	// parameter as text, or as the type the client declared: cast it so.
	explicit := paramCasts(q.SQL)
	casts := map[int]string{}
	for i, t := range d.Params {
		if t == duckdb.TYPE_INVALID {
			casts[i+1] = "VARCHAR"
			if i < len(oids) {
				if name, ok := castNames[oids[i]]; ok {
					casts[i+1] = name
				}
			}
		}
	}
	if len(casts) > 0 {
		typed := q
		typed.SQL = castParams(q.SQL, casts)
		if d2, perr := c.describeQuery(ctx, typed); perr == nil {
			q, d = typed, d2
			st.query = q
		}
	}
	st.cols = d.Columns
	st.types = make([]pgType, len(d.Columns))
	for i, col := range d.Columns {
		st.types[i] = columnType(col)
	}
	n := max(len(oids), len(d.Params))
	st.params = make([]uint32, n)
	for i := range st.params {
		if i < len(oids) && oids[i] != 0 {
			st.params[i] = oids[i]
		} else if i < len(d.Params) {
			st.params[i] = paramType(d.Params[i])
			// DuckDB leaves $1 in $1::INTEGER untyped; PostgreSQL, and
			// so clients encoding by the announced type, take INTEGER.
			if oid, ok := castOIDs[strings.ToUpper(explicit[i+1])]; ok && d.Params[i] == duckdb.TYPE_INVALID {
				st.params[i] = oid
			}
		} else {
			st.params[i] = pgtype.TextOID
		}
	}
	return st, nil
}

func (c *conn) describeQuery(ctx context.Context, q sqlpolicy.Query) (sqlpolicy.Description, *pgError) {
	qctx, done := c.startQuery(ctx)
	defer done()
	d, err := c.s.run.Describe(qctx, q)
	if err != nil {
		return d, c.queryError(qctx, err)
	}
	return d, nil
}

// startQuery makes the context of a query, which a CancelRequest cancels.
func (c *conn) startQuery(ctx context.Context) (context.Context, func()) {
	qctx, cancel := context.WithCancelCause(ctx)
	c.mu.Lock()
	c.cancel = cancel
	c.mu.Unlock()
	return qctx, func() {
		c.mu.Lock()
		c.cancel = nil
		c.mu.Unlock()
		cancel(nil)
	}
}

func (c *conn) cancelQuery() {
	c.mu.Lock()
	if c.cancel != nil {
		c.cancel(errCancelRequest)
	}
	c.mu.Unlock()
}

// queryError is the ErrorResponse of a failed query.
func (c *conn) queryError(qctx context.Context, err error) *pgError {
	if errors.Is(context.Cause(qctx), errCancelRequest) {
		return &pgError{code: "57014", msg: "canceling statement due to user request"}
	}
	var pe *sqlpolicy.Error
	if !errors.As(err, &pe) {
		if qctx.Err() != nil {
			return &pgError{code: "57P01", msg: "terminating connection: the server is shutting down"}
		}
		return &pgError{code: "XX000", msg: err.Error()}
	}
	e := &pgError{code: pe.Code, msg: pe.Msg}
	switch pe.Kind {
	case sqlpolicy.KindRefused:
		e.code = sqlpolicy.CodeRefused
		if pe.Code == sqlpolicy.CodeLimits {
			e.code = pe.Code
		}
		e.hint = "shredduck's PostgreSQL endpoint is read-only: one SELECT per query, without file, network or settings access"
	case sqlpolicy.KindTooLarge:
		e.code = sqlpolicy.CodeLimits
		e.hint = "select fewer or smaller columns, or raise --query-max-bytes"
	case sqlpolicy.KindBusy:
		e.code = "53000"
		e.hint = "retry later, or raise --query-concurrency"
	case sqlpolicy.KindMemory:
		e.code = sqlpolicy.CodeMemory
		e.hint = "retry later, or raise --memory-limit or --query-max-memory"
	case sqlpolicy.KindTimeout:
		e.code, e.msg, e.detail = "57014", "canceling statement due to statement timeout", pe.Msg
		e.hint = "the server's --query-timeout bounds every query"
	case sqlpolicy.KindUnavailable:
		e.code = "53000"
	case sqlpolicy.KindInternal:
		e.code = "XX000"
	default:
		if e.code == "" {
			e.code = "42000"
		}
	}
	return e
}

// simpleQuery answers a Query message.
func (c *conn) simpleQuery(ctx context.Context, sql string) {
	st, perr := c.prepare(ctx, sql, nil, false)
	if perr != nil {
		c.sendError(perr)
		return
	}
	p := &portal{stmt: st}
	if perr := c.run(ctx, p, 0, true); perr != nil {
		c.sendError(perr)
	}
}

func (c *conn) parse(ctx context.Context, m *pgproto3.Parse) *pgError {
	if _, ok := c.stmts[m.Name]; ok && m.Name != "" {
		return &pgError{code: "42P05", msg: fmt.Sprintf("prepared statement %q already exists", m.Name)}
	}
	if len(c.stmts) >= maxPrepared {
		return &pgError{code: "54000", msg: fmt.Sprintf("this session holds %d prepared statements, the most it may", maxPrepared), hint: "close (DEALLOCATE) statements no longer used"}
	}
	st, perr := c.prepare(ctx, m.Query, m.ParameterOIDs, true)
	if perr != nil {
		return perr
	}
	c.stmts[m.Name] = st
	c.send(&pgproto3.ParseComplete{})
	return nil
}

func (c *conn) bind(m *pgproto3.Bind) *pgError {
	st, ok := c.stmts[m.PreparedStatement]
	if !ok {
		return &pgError{code: "26000", msg: fmt.Sprintf("prepared statement %q does not exist", m.PreparedStatement)}
	}
	if len(m.Parameters) != len(st.params) {
		return &pgError{code: "08P01", msg: fmt.Sprintf("bind message supplies %d parameters, but the statement requires %d", len(m.Parameters), len(st.params))}
	}
	args := make([]any, len(m.Parameters))
	for i, v := range m.Parameters {
		f, err := formatOf(m.ParameterFormatCodes, i)
		if err != nil {
			return err
		}
		if args[i], ok = nil, true; v != nil {
			a, derr := paramValue(c.types, st.params[i], f, v)
			if derr != nil {
				return &pgError{code: "22P03", msg: fmt.Sprintf("parameter $%d: %v", i+1, derr)}
			}
			args[i] = a
		}
	}
	formats := make([]int16, len(st.types))
	for i := range formats {
		f, err := formatOf(m.ResultFormatCodes, i)
		if err != nil {
			return err
		}
		if f == pgtype.BinaryFormatCode && !binaryOK(c.types, st.types[i]) {
			return &pgError{code: "0A000", msg: fmt.Sprintf("column %q (type OID %d) cannot be sent in binary format", st.cols[i].Name, st.types[i].oid), hint: "request the text format for it"}
		}
		formats[i] = f
	}
	if m.DestinationPortal != "" {
		if _, ok := c.portals[m.DestinationPortal]; ok {
			return &pgError{code: "42P03", msg: fmt.Sprintf("portal %q already exists", m.DestinationPortal)}
		}
		if len(c.portals) >= maxPrepared {
			return &pgError{code: "54000", msg: fmt.Sprintf("this session holds %d portals, the most it may", maxPrepared), hint: "close portals no longer used"}
		}
	}
	c.portals[m.DestinationPortal] = &portal{stmt: st, args: args, formats: formats}
	c.send(&pgproto3.BindComplete{})
	return nil
}

// formatOf is the format code of item i: none means text, one means all.
func formatOf(codes []int16, i int) (int16, *pgError) {
	var f int16
	switch {
	case len(codes) == 1:
		f = codes[0]
	case i < len(codes):
		f = codes[i]
	case len(codes) > 1:
		return 0, &pgError{code: "08P01", msg: "too few format codes"}
	}
	if f != pgtype.TextFormatCode && f != pgtype.BinaryFormatCode {
		return 0, &pgError{code: "08P01", msg: fmt.Sprintf("unknown format code %d", f)}
	}
	return f, nil
}

func (c *conn) describe(m *pgproto3.Describe) *pgError {
	if m.ObjectType == 'S' {
		st, ok := c.stmts[m.Name]
		if !ok {
			return &pgError{code: "26000", msg: fmt.Sprintf("prepared statement %q does not exist", m.Name)}
		}
		c.send(&pgproto3.ParameterDescription{ParameterOIDs: st.params})
		c.sendRowDescription(st, nil)
		return nil
	}
	p, ok := c.portals[m.Name]
	if !ok {
		return &pgError{code: "34000", msg: fmt.Sprintf("portal %q does not exist", m.Name)}
	}
	c.sendRowDescription(p.stmt, p.formats)
	return nil
}

func (c *conn) sendRowDescription(st *statement, formats []int16) {
	if len(st.types) == 0 || st.cmd.kind == cmdCopy {
		c.send(&pgproto3.NoData{})
		return
	}
	fields := make([]pgproto3.FieldDescription, len(st.types))
	for i, t := range st.types {
		fields[i] = pgproto3.FieldDescription{Name: []byte(st.cols[i].Name), DataTypeOID: t.oid, DataTypeSize: t.size, TypeModifier: -1}
		if formats != nil {
			fields[i].Format = formats[i]
		}
	}
	c.send(&pgproto3.RowDescription{Fields: fields})
}

func (c *conn) execute(ctx context.Context, m *pgproto3.Execute) *pgError {
	p, ok := c.portals[m.Portal]
	if !ok {
		return &pgError{code: "34000", msg: fmt.Sprintf("portal %q does not exist", m.Portal)}
	}
	return c.run(ctx, p, int(m.MaxRows), false)
}

// run executes a portal, or sends the next maxRows (0: all) of its
// result; simple sends the RowDescription first (the simple protocol).
func (c *conn) run(ctx context.Context, p *portal, maxRows int, simple bool) *pgError {
	st := p.stmt
	switch st.cmd.kind {
	case cmdEmpty:
		c.send(&pgproto3.EmptyQueryResponse{})
		return nil
	case cmdShow:
		if simple {
			c.sendRowDescription(st, nil)
		}
		v, _ := setting(st.cmd.name)
		c.send(&pgproto3.DataRow{Values: [][]byte{[]byte(v)}})
		c.send(&pgproto3.CommandComplete{CommandTag: []byte("SHOW")})
		return nil
	case cmdBegin:
		c.inTx = true
	case cmdCommit, cmdRollback:
		c.inTx = false
	case cmdDeallocate:
		delete(c.stmts, st.cmd.name)
	}
	if st.cmd.kind != cmdNone && st.cmd.kind != cmdCopy {
		c.send(&pgproto3.CommandComplete{CommandTag: []byte(st.cmd.tag)})
		return nil
	}
	if p.done {
		c.send(&pgproto3.CommandComplete{CommandTag: []byte("SELECT 0")})
		return nil
	}
	if p.res == nil {
		// Suspended portals keep their results: a session holds at most
		// twice --query-max-bytes of them.
		held := 0
		for _, other := range c.portals {
			if other.res != nil {
				held += len(other.res.buf)
			}
		}
		if int64(held) > c.s.run.Config().MaxBytes {
			return &pgError{code: "54000", msg: fmt.Sprintf("this session's suspended portals hold %d bytes of results", held),
				hint: "fetch them to the end or close them"}
		}
		sink := &rowSink{types: st.types, formats: p.formats, m: c.types, max: int(min(c.s.run.Config().MaxBytes, 1<<31-1))}
		if st.cmd.kind == cmdCopy {
			sink.copy = &st.cmd.copy
		}
		qctx, done := c.startQuery(ctx)
		res, err := c.s.run.Run(qctx, sqlpolicy.Query{SQL: st.query.SQL, Args: p.args, Temps: st.query.Temps, NestedJSON: true}, sink)
		done()
		if err != nil {
			return c.queryError(qctx, err)
		}
		sink.res = res
		p.res = sink
		if simple {
			st.cols, st.types = sink.cols, sink.types
			c.sendRowDescription(st, nil)
		}
	}
	if st.cmd.kind == cmdCopy {
		return c.sendCopy(p)
	}
	r := p.res
	end := len(r.ends)
	if maxRows > 0 {
		end = min(end, p.sent+maxRows)
	}
	if end > p.sent {
		from := 0
		if p.sent > 0 {
			from = r.ends[p.sent-1]
		}
		if err := c.flush(); err != nil {
			return nil // the connection failed: the loop ends on its next read
		}
		if _, err := c.nc.Write(r.buf[from:r.ends[end-1]]); err != nil { // under flush's write deadline
			return nil
		}
		p.sent = end
	}
	if p.sent < len(r.ends) {
		c.send(&pgproto3.PortalSuspended{})
		return nil
	}
	if r.res.Truncated {
		lim := c.s.run.Config()
		c.send(&pgproto3.NoticeResponse{Severity: "WARNING", SeverityUnlocalized: "WARNING", Code: "01000",
			Message: fmt.Sprintf("the result is cut after %d rows: the server sends at most %d rows and %d bytes per query", r.res.Rows, lim.MaxRows, lim.MaxBytes),
			Hint:    "add a LIMIT or filter, or raise --query-max-rows and --query-max-bytes"})
	}
	c.send(&pgproto3.CommandComplete{CommandTag: []byte("SELECT " + strconv.Itoa(r.res.Rows))})
	c.s.metrics.queries.WithLabelValues("00000").Inc()
	p.res, p.done = nil, true
	return nil
}

func columnTypes(cols []sqlpolicy.Column) []pgType {
	out := make([]pgType, len(cols))
	for i, col := range cols {
		out[i] = columnType(col)
	}
	return out
}

// sendCopy sends a COPY TO STDOUT's result: CopyOutResponse, the header
// and every row as CopyData, CopyDone.
func (c *conn) sendCopy(p *portal) *pgError {
	r := p.res
	c.send(&pgproto3.CopyOutResponse{OverallFormat: 0, ColumnFormatCodes: make([]uint16, len(r.cols))})
	if r.copyHeader != nil {
		c.send(&pgproto3.CopyData{Data: r.copyHeader})
	}
	if err := c.flush(); err != nil {
		return nil
	}
	if _, err := c.nc.Write(r.buf); err != nil { // under flush's write deadline
		return nil
	}
	c.send(&pgproto3.CopyDone{})
	if r.res.Truncated {
		lim := c.s.run.Config()
		c.send(&pgproto3.NoticeResponse{Severity: "WARNING", SeverityUnlocalized: "WARNING", Code: "01000",
			Message: fmt.Sprintf("the copy is cut after %d rows: the server sends at most %d rows and %d bytes per query", r.res.Rows, lim.MaxRows, lim.MaxBytes),
			Hint:    "copy less at a time (a WHERE on time), or raise --query-max-rows and --query-max-bytes"})
	}
	c.send(&pgproto3.CommandComplete{CommandTag: []byte("COPY " + strconv.Itoa(r.res.Rows))})
	c.s.metrics.queries.WithLabelValues("00000").Inc()
	p.res, p.done = nil, true
	return nil
}

// refusedSet is the error of a SET or RESET the endpoint does not take.
func refusedSet(c command) *pgError {
	if c.value != "" || c.tag == "SET" && clientSettings[c.name] != nil {
		return &pgError{code: sqlpolicy.CodeRefused, msg: fmt.Sprintf("SET %s = '%s' is not supported: this endpoint keeps %s as the server has it", c.name, c.value, c.name),
			hint: "results are UTF-8, times UTC (TIMESTAMP_NS), sessions read-only, and the server's --query-timeout bounds every query; SHOW shows the values"}
	}
	return &pgError{code: sqlpolicy.CodeRefused, msg: fmt.Sprintf("%s %s is not allowed: DuckDB's settings are the server's", c.tag, c.name),
		hint: "the limits are the server's --query-* flags; client settings (client_encoding, DateStyle, TimeZone, search_path, application_name, ...) are accepted at the values the endpoint uses"}
}
