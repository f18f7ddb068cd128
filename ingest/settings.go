package ingest

import (
	"context"
	"fmt"
	"runtime"

	"github.com/shredduck/shredduck/shred"
)

// Settings are the DuckDB settings a server applies once to its database
// (serve.Config's fields of the same names); Configure fills in the
// defaults of those left zero.
type Settings struct {
	// MemoryLimit, when set, is DuckDB's memory_limit (e.g. "256MB").
	MemoryLimit string
	// CheckpointThreshold is the WAL size at which the committer
	// checkpoints (default "128MB", in DuckDB's syntax).
	CheckpointThreshold string
	// Threads is DuckDB's thread count (default: one fewer than the
	// cores, at least 1).
	Threads int
}

// Configure applies cfg to d and returns the committer's checkpoint
// threshold in bytes.
func (d *DB) Configure(cfg *Settings) (checkpointBytes int64, err error) {
	if cfg.MemoryLimit != "" {
		if _, err := d.SQL.Exec("SET memory_limit = " + shred.QuoteString(cfg.MemoryLimit)); err != nil {
			return 0, fmt.Errorf("memory limit %q: %w", cfg.MemoryLimit, err)
		}
	}
	// Wide NDJSON tables need a higher limit than --memory-limit may give;
	// the query endpoint locks the configuration below, so the limit is
	// sized now for the tables that exist.
	if err := d.FitMemoryLimit(context.Background()); err != nil {
		return 0, fmt.Errorf("memory limit for wide tables: %w", err)
	}
	// Group commits append a few thousand rows each. With DuckDB's
	// defaults a COMMIT checkpoints every 16 MiB of WAL (some 30k spans),
	// each checkpoint leaves a small row group, and the checkpoint's
	// vacuum then merges those, rewriting rows already written: the
	// streaming benchmark's commits stalled for up to 1.9 s and throughput
	// fell by a third once the table held a few hundred thousand spans.
	// A larger threshold writes full row groups; the vacuum has nothing
	// to merge and is turned off. Retention's DELETEs empty whole row
	// groups (records come in about time order), which a checkpoint frees
	// without it (docs/RETENTION.md).
	//
	// The committer, not DuckDB's COMMIT, runs these checkpoints (after a
	// group's COMMIT), so that the checkpoint can use the core DuckDB's thread
	// setting leaves to receiving (DB.Checkpoint): DuckDB's own
	// threshold, read back in bytes, becomes the committer's, and DuckDB's
	// is raised to four times it, a safety net should the committer's
	// checkpoints fail.
	if cfg.CheckpointThreshold == "" {
		cfg.CheckpointThreshold = "128MB"
	}
	if _, err := d.SQL.Exec("SET checkpoint_threshold = " + shred.QuoteString(cfg.CheckpointThreshold)); err != nil {
		return 0, fmt.Errorf("checkpoint threshold %q: %w", cfg.CheckpointThreshold, err)
	}
	checkpointBytes, err = d.SizeSetting(context.Background(), "checkpoint_threshold")
	if err != nil {
		return 0, fmt.Errorf("checkpoint threshold %q: %w", cfg.CheckpointThreshold, err)
	}
	if _, err := d.SQL.Exec(fmt.Sprintf("SET checkpoint_threshold = '%dB'", 4*checkpointBytes)); err != nil {
		return 0, fmt.Errorf("checkpoint threshold %q: %w", cfg.CheckpointThreshold, err)
	}
	if _, err := d.SQL.Exec("SET max_vacuum_tasks = 0"); err != nil {
		return 0, err
	}
	// DuckDB weighs every string segment it writes (at a COMMIT of a row
	// group, at a checkpoint) for dictionary and FSST compression alone
	// as well as for DICT_FSST, which does both and was the one chosen for
	// every string segment of streamed spans. Without the two the server
	// used 3-19% less CPU per span (four pairs), for a file of the same
	// size (docs/SERVE.md).
	if _, err := d.SQL.Exec("SET disabled_compression_methods = 'dictionary,fsst'"); err != nil {
		return 0, err
	}
	// DuckDB's worker threads run its parallel work: queries (group
	// commits append on the committer's own thread, and checkpoints
	// borrow the other cores, DB.Checkpoint). The
	// server leaves one core to receiving and decoding: on 2 cores the
	// streaming benchmark used 19% less server CPU per span with one
	// DuckDB thread than with two, and sent 4% more spans/s (docs/SERVE.md).
	// /v1/query runs on these threads too: --threads raises it on a
	// machine that mostly queries.
	if cfg.Threads <= 0 {
		cfg.Threads = max(1, runtime.NumCPU()-1)
	}
	if _, err := d.SQL.Exec(fmt.Sprintf("SET threads = %d", cfg.Threads)); err != nil {
		return 0, fmt.Errorf("threads %d: %w", cfg.Threads, err)
	}
	return checkpointBytes, nil
}
