// Package ingest loads shredded batches into DuckDB: tables, schema
// evolution, the catalog, transactions, and the file-reading pipeline. It is
// the only package that imports the DuckDB driver.
package ingest
