package serve

import (
	"net/http"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/serve/queryhttp"
)

// The query endpoint is package serve/queryhttp; these names stay for the
// packages and tests that build a server's query handler beside it
// (serve/jaegerapi's).

// QueryConfig configures the query endpoint (queryhttp.Config).
type QueryConfig = queryhttp.Config

// NewQueryHandler is queryhttp.NewHandler.
func NewQueryHandler(db *ingest.DB, cfg QueryConfig) http.Handler {
	return queryhttp.NewHandler(db, cfg)
}

// LockDown closes the database to the host (queryhttp.LockDown).
func LockDown(db *ingest.DB) error { return queryhttp.LockDown(db) }
