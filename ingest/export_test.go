//go:build duckdb_arrow

package ingest

import "context"

// WithChunkAppender returns opt set to write through the C appender, as
// the Committer does (chunks.go), instead of INSERT ... SELECT.
func WithChunkAppender(opt Options) Options {
	opt.chunks = true
	return opt
}

// ChunkAppenderAvailable reports whether a load on db can reach DuckDB's C
// connection, without which WithChunkAppender falls back to INSERT.
func ChunkAppenderAvailable(db *DB) bool {
	tx, err := db.Begin(context.Background(), 0)
	if err != nil {
		return false
	}
	defer tx.Rollback()
	return tx.raw.Ptr != nil
}
