//go:build duckdb_arrow

package serve

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"net/http"

	"github.com/shredduck/shredduck/internal/keyview"
)

// withKeyViews runs f with the temporary views that make the attribute
// keys query names read as columns (keyview) on conn, and drops them
// before conn goes back to the pool, also when f failed or ctx ended. A
// connection whose views cannot be dropped is discarded. Making the views
// parses query and reads the catalog, nothing more: no constant of the
// query is folded before the size rules have passed it.
func withKeyViews(ctx context.Context, conn *sql.Conn, query string, f func() error) error {
	views, err := keyview.Create(ctx, conn, query)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &queryError{http.StatusInternalServerError, err.Error()}
	}
	defer func() {
		if derr := views.Drop(context.WithoutCancel(ctx)); derr != nil && !errors.Is(derr, sql.ErrConnDone) {
			conn.Raw(func(any) error { return driver.ErrBadConn }) // the pool drops it
		}
	}()
	return f()
}
