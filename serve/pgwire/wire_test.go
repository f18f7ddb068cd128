package pgwire

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/shredduck/shredduck/internal/testcert"
	"github.com/shredduck/shredduck/serve/sqlpolicy"
)

// With TLS configured a session must begin with SSLRequest; without it
// the server answers 'N' and clients that prefer TLS go on in plain text.
func TestPGTLS(t *testing.T) {
	cert := testcert.New(t)
	p := startPG(t, Config{TLS: cert.TLS, Token: "tok"}, sqlpolicy.Config{})
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(strings.Replace(p.url("tok", ""), "sslmode=disable", "sslmode=verify-full", 1))
	if err != nil {
		t.Fatal(err)
	}
	cfg.TLSConfig.RootCAs = cert.Pool
	cfg.TLSConfig.ServerName = "127.0.0.1"
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("TLS session: %v", err)
	}
	var n int32
	if err := c.QueryRow(ctx, "SELECT 42").Scan(&n); err != nil || n != 42 {
		t.Errorf("%d %v", n, err)
	}
	c.Close(ctx)
	// Cancel requests come in plain text (libpq before 17 sends them so).
	_, err = pgx.Connect(ctx, p.url("tok", ""))
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "28000" || !strings.Contains(pe.Message, "requires TLS") {
		t.Errorf("plain text: %v", err)
	}

	plain := startPG(t, Config{}, sqlpolicy.Config{})
	c, err = pgx.Connect(ctx, strings.Replace(plain.url("", ""), "sslmode=disable", "sslmode=prefer", 1))
	if err != nil {
		t.Fatalf("sslmode=prefer without TLS: %v", err)
	}
	c.Close(ctx)
	_, err = pgx.Connect(ctx, strings.Replace(plain.url("", ""), "sslmode=disable", "sslmode=require", 1))
	if err == nil || !strings.Contains(err.Error(), "server refused TLS") {
		t.Errorf("sslmode=require without TLS: %v", err)
	}
}

// rawSession connects and starts a session by hand, for what pgx does
// not send.
func rawSession(t *testing.T, addr string) (*pgproto3.Frontend, net.Conn) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	fe := pgproto3.NewFrontend(nc, nc)
	fe.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30, Parameters: map[string]string{"user": "raw"}})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	for {
		msg, err := fe.Receive()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := msg.(*pgproto3.ReadyForQuery); ok {
			return fe, nc
		}
	}
}

// receiveUntilReady returns the type names of the messages up to
// ReadyForQuery.
func receiveUntilReady(t *testing.T, fe *pgproto3.Frontend) []string {
	t.Helper()
	var names []string
	for {
		msg, err := fe.Receive()
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(reflect.TypeOf(msg).String(), "*pgproto3.")
		if e, ok := msg.(*pgproto3.ErrorResponse); ok {
			name += ":" + e.Code
		}
		names = append(names, name)
		if _, ok := msg.(*pgproto3.ReadyForQuery); ok {
			return names
		}
	}
}

// Execute with a row count sends that many rows and PortalSuspended, the
// next Execute the rest (and then none, as PostgreSQL); after an error the messages up to Sync are
// skipped; Describe of a statement gives DuckDB's parameter types.
func TestPGExtendedProtocol(t *testing.T) {
	p := startPG(t, Config{}, sqlpolicy.Config{}, `CREATE TABLE t AS SELECT i FROM range(5) r(i)`)
	fe, _ := rawSession(t, p.addr)

	fe.Send(&pgproto3.Parse{Name: "s", Query: "SELECT i FROM t WHERE i >= $1 ORDER BY i"})
	fe.Send(&pgproto3.Describe{ObjectType: 'S', Name: "s"})
	fe.Send(&pgproto3.Bind{PreparedStatement: "s", Parameters: [][]byte{[]byte("1")}})
	fe.Send(&pgproto3.Execute{MaxRows: 2})
	fe.Send(&pgproto3.Execute{MaxRows: 2})
	fe.Send(&pgproto3.Execute{})
	fe.Send(&pgproto3.Sync{})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	var got []string
	var params []uint32
	for {
		msg, err := fe.Receive()
		if err != nil {
			t.Fatal(err)
		}
		switch m := msg.(type) {
		case *pgproto3.ParameterDescription:
			params = append([]uint32(nil), m.ParameterOIDs...)
			got = append(got, "params")
		case *pgproto3.RowDescription:
			got = append(got, "rowdesc")
		case *pgproto3.DataRow:
			got = append(got, string(m.Values[0]))
		case *pgproto3.PortalSuspended:
			got = append(got, "suspended")
		case *pgproto3.CommandComplete:
			got = append(got, string(m.CommandTag))
		case *pgproto3.ParseComplete, *pgproto3.BindComplete:
		case *pgproto3.ErrorResponse:
			t.Fatalf("error: %s", m.Message)
		}
		if _, ok := msg.(*pgproto3.ReadyForQuery); ok {
			break
		}
	}
	if want := "params rowdesc 1 2 suspended 3 4 SELECT 4 SELECT 0"; strings.Join(got, " ") != want {
		t.Errorf("got  %s\nwant %s", strings.Join(got, " "), want)
	}
	if len(params) != 1 || params[0] != pgtype.Int8OID {
		t.Errorf("parameter types %v", params)
	}

	// An error skips to Sync; the session goes on.
	fe.Send(&pgproto3.Parse{Query: "DROP TABLE t"})
	fe.Send(&pgproto3.Bind{})
	fe.Send(&pgproto3.Execute{})
	fe.Send(&pgproto3.Sync{})
	fe.Send(&pgproto3.Query{String: "SELECT count(*) FROM t"})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(receiveUntilReady(t, fe), " "); got != "ErrorResponse:42501 ReadyForQuery" {
		t.Errorf("after an error: %s", got)
	}
	if got := strings.Join(receiveUntilReady(t, fe), " "); got != "RowDescription DataRow CommandComplete ReadyForQuery" {
		t.Errorf("then: %s", got)
	}
	// What psql 16's \bind sends (libpq's PQsendQueryParams): an unnamed
	// Parse without parameter types, Bind of text parameters, Describe of
	// the portal, Execute, Sync. (Debian 12's psql 15 has no \bind.)
	fe.Send(&pgproto3.Parse{Query: "SELECT $1::INTEGER + 1 AS n, $2 AS s, count(*) AS c FROM t WHERE i < $1::INTEGER"})
	fe.Send(&pgproto3.Bind{Parameters: [][]byte{[]byte("3"), []byte("x'; DROP TABLE t; --")}})
	fe.Send(&pgproto3.Describe{ObjectType: 'P'})
	fe.Send(&pgproto3.Execute{})
	fe.Send(&pgproto3.Sync{})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	var bound []string
	for {
		msg, err := fe.Receive()
		if err != nil {
			t.Fatal(err)
		}
		switch m := msg.(type) {
		case *pgproto3.RowDescription:
			for _, f := range m.Fields {
				bound = append(bound, string(f.Name))
			}
		case *pgproto3.DataRow:
			for _, v := range m.Values {
				bound = append(bound, string(v))
			}
		case *pgproto3.ErrorResponse:
			t.Fatalf("\\bind's messages: %s", m.Message)
		}
		if _, ok := msg.(*pgproto3.ReadyForQuery); ok {
			break
		}
	}
	if want := "n s c 4 x'; DROP TABLE t; -- 3"; strings.Join(bound, " ") != want {
		t.Errorf("\\bind: got %q, want %q", strings.Join(bound, " "), want)
	}

	// A binary result of a type without a binary form here is refused at
	// Bind, with what to do.
	fe.Send(&pgproto3.Parse{Query: "SELECT TIMETZ '01:02:03+04'"})
	fe.Send(&pgproto3.Bind{ResultFormatCodes: []int16{1}})
	fe.Send(&pgproto3.Sync{})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(receiveUntilReady(t, fe), " "); got != "ParseComplete ErrorResponse:0A000 ReadyForQuery" {
		t.Errorf("binary timetz: %s", got)
	}
}

// Hostile sizes are refused before anything is allocated for them: a
// startup packet over 10,000 bytes, a message over maxMessage.
func TestPGMessageSizes(t *testing.T) {
	p := startPG(t, Config{}, sqlpolicy.Config{})
	expectError := func(nc net.Conn, code string) {
		t.Helper()
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		fe := pgproto3.NewFrontend(nc, nc)
		for {
			msg, err := fe.Receive()
			if err != nil {
				t.Fatalf("want ErrorResponse %s, got %v", code, err)
			}
			if e, ok := msg.(*pgproto3.ErrorResponse); ok {
				if e.Code != code {
					t.Errorf("got %s %s, want %s", e.Code, e.Message, code)
				}
				if _, err := io.ReadAll(nc); err != nil {
					t.Errorf("after the error: %v", err)
				}
				return
			}
		}
	}
	nc, err := net.Dial("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.Write(binary.BigEndian.AppendUint32(nil, 0x7fffffff))
	expectError(nc, "08P01")

	_, nc2 := rawSession(t, p.addr)
	nc2.Write(append([]byte{'Q'}, binary.BigEndian.AppendUint32(nil, 0x7ffffff0)...))
	expectError(nc2, "54000")
}

// fakeRunner answers every query with one text row, or with err.
type fakeRunner struct{ err error }

func (f fakeRunner) Run(ctx context.Context, q sqlpolicy.Query, sink sqlpolicy.Sink) (sqlpolicy.Result, error) {
	if f.err != nil {
		return sqlpolicy.Result{}, f.err
	}
	if err := sink.Columns([]sqlpolicy.Column{{Name: "x", Cast: sqlpolicy.CastText}}); err != nil {
		return sqlpolicy.Result{}, err
	}
	ok, err := sink.Row([]any{q.SQL})
	if err != nil || !ok {
		return sqlpolicy.Result{Truncated: true}, err
	}
	return sqlpolicy.Result{Rows: 1}, nil
}

func (f fakeRunner) Describe(ctx context.Context, q sqlpolicy.Query) (sqlpolicy.Description, error) {
	return sqlpolicy.Description{Columns: []sqlpolicy.Column{{Name: "x", Cast: sqlpolicy.CastText}}, Params: []sqlpolicy.ParamType{0}}, f.err
}

func (fakeRunner) Config() sqlpolicy.Config { return sqlpolicy.Config{MaxBytes: 1 << 20, MaxRows: 10} }

// Any bytes a client sends end in an error or a closed connection, never
// a panic or a hang.
func FuzzPGConn(f *testing.F) {
	startup := func(msgs ...pgproto3.FrontendMessage) []byte {
		buf, _ := (&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30, Parameters: map[string]string{"user": "f"}}).Encode(nil)
		for _, m := range msgs {
			buf, _ = m.Encode(buf)
		}
		return buf
	}
	f.Add(startup(&pgproto3.Query{String: "SELECT 1"}))
	f.Add(startup(&pgproto3.Parse{Query: "SELECT $1"}, &pgproto3.Bind{Parameters: [][]byte{{1}}, ParameterFormatCodes: []int16{1}}, &pgproto3.Describe{ObjectType: 'P'}, &pgproto3.Execute{MaxRows: 1}, &pgproto3.Sync{}))
	f.Add(startup(&pgproto3.Bind{PreparedStatement: "nope"}, &pgproto3.Sync{}, &pgproto3.Query{String: "SET x = 1; SELECT 2"}))
	f.Add(binary.BigEndian.AppendUint32(nil, 8))
	f.Add([]byte{0, 0, 0, 8, 4, 210, 22, 47})
	f.Add([]byte{0, 0, 0, 16, 4, 210, 22, 46, 0, 0, 0, 1, 0, 0, 0, 2})
	srv := New(fakeRunner{}, Config{StartupTimeout: time.Second})
	f.Fuzz(func(t *testing.T, data []byte) {
		client, server := net.Pipe()
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer server.Close()
			srv.serveConn(context.Background(), server)
		}()
		go io.Copy(io.Discard, client)
		client.SetWriteDeadline(time.Now().Add(2 * time.Second))
		client.Write(data)
		client.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("the session did not end")
		}
	})
}

// A client asking for protocol 3.2 is told 3.0 (NegotiateProtocolVersion)
// and goes on.
func TestPGProtocolVersion(t *testing.T) {
	p := startPG(t, Config{}, sqlpolicy.Config{})
	nc, err := net.Dial("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	fe := pgproto3.NewFrontend(nc, nc)
	fe.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion32, Parameters: map[string]string{"user": "x", "_pq_.future": "1"}})
	fe.Send(&pgproto3.Query{String: "SELECT 1"})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	msg, err := fe.Receive()
	n, ok := msg.(*pgproto3.NegotiateProtocolVersion)
	if err != nil || !ok || n.NewestMinorProtocol != 0 || len(n.UnrecognizedOptions) != 1 || n.UnrecognizedOptions[0] != "_pq_.future" {
		t.Fatalf("%#v %v", msg, err)
	}
	got := receiveUntilReady(t, fe) // the session's start
	if got[0] != "AuthenticationOk" {
		t.Errorf("%v", got)
	}
	if got := strings.Join(receiveUntilReady(t, fe), " "); got != "RowDescription DataRow CommandComplete ReadyForQuery" {
		t.Errorf("query: %s", got)
	}
}

// The statement classifier takes any text.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{"SET x = 1", "select 1; -- x", "/* /* */ */ SHOW TimeZone", "SELECT $1, $$a;b$$", "E'\\\\'';'", `"a""b"; SELECT`, "DEALLOCATE PREPARE \"s\"", "BEGIN;", "SELECT 'a' COLLATE pg_catalog.default, $1::pg_catalog.regtype /* x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c := classify(s)
		if c.kind == cmdEmpty && strings.TrimSpace(strings.Trim(s, ";")) != "" {
			clean, _ := scanSQL(s)
			if trimStatement(clean) != "" {
				t.Errorf("%q: empty, but %q remains", s, clean)
			}
		}
		rewrite(s)
		// lexSQL cuts the whole text: nothing is lost or repeated.
		if got := mapCode(s, func(code string) string { return code }); got != s {
			t.Errorf("%q: mapCode made %q", s, got)
		}
	})
}
