package ingest

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/duckdb/duckdb-go/v2"
	"github.com/duckdb/duckdb-go/v2/mapping"

	"github.com/shredduck/shredduck/shred"
)

// DuckDB's arrow scan exists only as a view, and DuckDB 2.0 cannot write a
// view over it to a write-ahead log ("Cannot serialize a table function
// with process-local bind input"), even one dropped before the COMMIT. So
// each bulk INSERT's view lives in an in-memory database of its own,
// attached for that INSERT and created in autocommit on a side connection:
// nothing about it is ever logged, and a load's transaction writes only to
// the file. A database of its own, because a transaction sees a database's
// catalog as of its first read of it: a view created later in a database
// the load already read would be invisible to it.

// viewSeq numbers the databases of the views.
var viewSeq atomic.Int64

// viewHost is the side connection on which scan views are created.
type viewHost struct {
	mu   sync.Mutex // serialises the connection's statements
	conn *sql.Conn
	raw  mapping.Connection
	home string // the connection's default database, USEd again after each view
}

// scanView is one registered stream: its view is name, in database db.
type scanView struct {
	host    *viewHost
	db      string
	name    string // qualified: db.main.rows
	release func()
}

// viewHost returns the database's side connection, opening it the first
// time.
func (d *DB) viewHost(ctx context.Context) (*viewHost, error) {
	d.viewsMu.Lock()
	defer d.viewsMu.Unlock()
	if d.views != nil {
		return d.views, nil
	}
	conn, err := d.SQL.Conn(ctx)
	if err != nil {
		return nil, err
	}
	h := &viewHost{conn: conn}
	err = conn.Raw(func(dc any) error {
		var err error
		h.raw, err = RawConn(dc.(*duckdb.Conn))
		return err
	})
	if err == nil {
		err = conn.QueryRowContext(ctx, "SELECT current_database()").Scan(&h.home)
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	d.views = h
	return h, nil
}

// closeViews closes the side connection, if it was opened.
func (d *DB) closeViews() {
	d.viewsMu.Lock()
	defer d.viewsMu.Unlock()
	if d.views != nil {
		d.views.conn.Close()
		d.views = nil
	}
}

// register attaches a new in-memory database and has DuckDB scan reader as
// its view "rows". The caller drops it (scanView.drop) once the statements
// reading it have returned.
func (h *viewHost) register(ctx context.Context, reader array.RecordReader) (*scanView, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	db := fmt.Sprintf("shredduck_incoming_%d", viewSeq.Add(1))
	q := shred.QuoteIdent(db)
	if _, err := h.conn.ExecContext(ctx, "ATTACH ':memory:' AS "+q); err != nil {
		return nil, fmt.Errorf("cannot attach a database for the arrow stream: %w", err)
	}
	v := &scanView{host: h, db: db, name: q + ".main.rows"}
	_, err := h.conn.ExecContext(ctx, "USE "+q)
	if err == nil {
		v.release, err = registerView(h.raw, reader, "rows")
		if _, uerr := h.conn.ExecContext(context.WithoutCancel(ctx), "USE "+shred.QuoteIdent(h.home)); err == nil {
			err = uerr
		}
	}
	if err != nil {
		if v.release != nil {
			v.release()
			v.release = nil
		}
		h.detach(db)
		return nil, err
	}
	return v, nil
}

// drop releases the stream and detaches its database.
func (v *scanView) drop() error {
	v.release()
	v.host.mu.Lock()
	defer v.host.mu.Unlock()
	return v.host.detach(v.db)
}

func (h *viewHost) detach(db string) error {
	_, err := h.conn.ExecContext(context.Background(), "DETACH "+shred.QuoteIdent(db))
	return err
}
