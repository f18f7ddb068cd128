// Package serve receives telemetry over the network (OTLP/HTTP, OTLP/gRPC
// and NDJSON) and commits it to DuckDB through ingest's group committer,
// answering a request only once its rows are committed.
package serve
