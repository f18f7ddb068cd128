// Package pgwire serves shredduck's tables over the PostgreSQL wire
// protocol (v3): read-only queries that run in DuckDB under the same
// policy as POST /v1/query (package sqlpolicy).
package pgwire
