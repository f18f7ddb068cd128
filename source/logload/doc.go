// Package logload moves the ingest log (ingestlog) into the database: an
// ingest.Source over the log's records, the handoff of the doors' decoded
// batches, and the ingest.Loader that stores them with the log position.
// The record format the doors append is here too (AppendRecord).
package logload
