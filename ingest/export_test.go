package ingest

import "context"

// WithChunkAppender returns opt set to write through the C appender, as
// the Committer does (chunks.go), instead of INSERT ... SELECT.
func WithChunkAppender(opt Options) Options {
	opt.chunks = true
	return opt
}

// VirtualTypeSQL is the declared type of a virtual column of type t.
var VirtualTypeSQL = virtualTypeSQL

// CloseUncheckpointed closes db as a crash would leave it: whatever the
// write-ahead log holds stays there.
func CloseUncheckpointed(db *DB) error {
	if _, err := db.SQL.Exec("PRAGMA disable_checkpoint_on_shutdown"); err != nil {
		return err
	}
	return db.SQL.Close()
}

// FailPipelinedCommits makes f run before each pipelined COMMIT of a
// Loader, failing it when f returns an error, until the test ends.
func FailPipelinedCommits(t interface{ Cleanup(func()) }, f func() error) {
	pipelinedCommitFault.Store(&f)
	t.Cleanup(func() { pipelinedCommitFault.Store(nil) })
}

// BeginShared starts a load as the Committer's and the Loaders' do: beside
// other writers until it changes a schema (gate.go).
func BeginShared(ctx context.Context, d *DB) (*Tx, error) { return d.begin(ctx, 0, false) }

// ErrExclusive stops a shared load whose schema change must run alone.
var ErrExclusive = errExclusive
