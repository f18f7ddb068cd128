package sqlpolicy

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"

	"github.com/shredduck/shredduck/internal/keyview"
	"github.com/shredduck/shredduck/shred"
)

// inQueryTx runs f, which runs query on conn (runQuery), in a READ ONLY
// transaction, with the temporary views that make the attribute keys
// query names read as columns (keyview). The catalog is read and the
// views are made inside the transaction, so that they match the tables
// the query sees even while ingest promotes a key (DuckDB keeps a
// transaction's view of the catalog; a promotion committed after BEGIN is
// not in it). ROLLBACK drops the views with the transaction; they are
// dropped again after it, so that conn goes back to the pool with none,
// also when f failed or ctx ended. A connection whose transaction or
// views cannot be ended is discarded. Making the views parses query and
// reads the catalog, nothing more: no constant of the query is folded
// before the size rules have passed it.
//
// temps are made inside the transaction too, and dropped with the views.
//
// keys, when not nil, keeps the catalog's keys between queries while the
// catalog stays as it was (keyview.Cache): its generation is read here,
// before BEGIN.
func inQueryTx(ctx context.Context, conn *sql.Conn, keys *keyview.Cache, query string, temps []Temp, f func() error) error {
	var gen int64
	if keys != nil {
		gen = keys.Gen()
	}
	if _, err := conn.ExecContext(ctx, "BEGIN TRANSACTION READ ONLY"); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// A connection left in a failed transaction must not serve the
		// next query either.
		discard(conn)
		return failure(KindUnavailable, "", err, "cannot begin the query's transaction: "+err.Error())
	}
	var views *keyview.Views
	var made []Temp
	defer func() {
		bg := context.WithoutCancel(ctx)
		_, rerr := conn.ExecContext(bg, "ROLLBACK")
		derr := views.Drop(bg)
		for _, m := range made {
			if _, err := conn.ExecContext(bg, "DROP "+m.Kind+" IF EXISTS temp.main."+shred.QuoteIdent(m.Name)); err != nil {
				derr = errors.Join(derr, err)
			}
		}
		if err := errors.Join(rerr, derr); err != nil && !errors.Is(err, sql.ErrConnDone) {
			discard(conn)
		}
	}()
	views, err := keyview.CreateCached(ctx, conn, query, keys, gen)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return failure(KindInternal, "", err, err.Error())
	}
	for _, m := range temps {
		made = append(made, m)
		if _, err := conn.ExecContext(ctx, "CREATE OR REPLACE TEMP "+m.Kind+" "+shred.QuoteIdent(m.Name)+m.Def); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return failure(KindInternal, "", err, fmt.Sprintf("cannot make the temporary %s %s: %v", strings.ToLower(m.Kind), m.Name, err))
		}
	}
	return f()
}

// discard makes the pool drop conn when it is closed.
func discard(conn *sql.Conn) {
	conn.Raw(func(any) error { return driver.ErrBadConn })
}
