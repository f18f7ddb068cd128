// Package ingest loads shredded batches into DuckDB: tables, schema
// evolution, the catalog, transactions, and the file-reading pipeline. Besides
// it only the query side imports the DuckDB driver (serve's renderer,
// serve/sqlpolicy, serve/pgwire: the types of results) and bench/; .ci/run
// checks that.
package ingest
