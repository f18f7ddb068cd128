package pgwire

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/serve/sqlpolicy"
)

// testPG is a Server on 127.0.0.1:0 over a database in a temporary
// directory, set up by SQL run before LockDown.
type testPG struct {
	t    *testing.T
	addr string
	db   *ingest.DB
	srv  *Server
}

func startPG(t *testing.T, cfg Config, pcfg sqlpolicy.Config, setup ...string) *testPG {
	t.Helper()
	db, err := ingest.Open(filepath.Join(t.TempDir(), "pg.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range setup {
		if _, err := db.SQL.Exec(q); err != nil {
			db.Close()
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := sqlpolicy.LockDown(db); err != nil {
		db.Close()
		t.Fatal(err)
	}
	return servePG(t, db, sqlpolicy.New(db, pcfg), cfg)
}

// servePG serves r on a new listener until the test ends; then it closes
// db (if not nil).
func servePG(t *testing.T, db *ingest.DB, r Runner, cfg Config) *testPG {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := New(r, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("Serve did not return")
		}
		if db != nil {
			db.Close()
		}
	})
	return &testPG{t: t, addr: l.Addr().String(), db: db, srv: srv}
}

// url is a connection string for the server; extra adds parameters.
func (p *testPG) url(password, extra string) string {
	host, port, _ := net.SplitHostPort(p.addr)
	u := fmt.Sprintf("postgres://tester:%s@%s:%s/shredduck?sslmode=disable", password, host, port)
	if extra != "" {
		u += "&" + extra
	}
	return u
}

func (p *testPG) connect(password, extra string) *pgx.Conn {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, p.url(password, extra))
	if err != nil {
		p.t.Fatalf("connect: %v", err)
	}
	p.t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// queryRunning reports whether a session runs a query.
func (s *Server) queryRunning() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.mu.Lock()
		running := c.cancel != nil
		c.mu.Unlock()
		if running {
			return true
		}
	}
	return false
}
