package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/shredduck/shredduck/ingest"
)

// buildCommit is the commit when the build did not record one (the
// Makefile sets it with -ldflags; -buildvcs=false builds record none).
var buildCommit string

// runVersion prints the module version, the commit it was built from
// (when the build recorded it) and the Go and DuckDB versions.
func runVersion(ctx context.Context, stdout io.Writer) int {
	version, commit := "(devel)", "unknown"
	if buildCommit != "" {
		commit = buildCommit
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		var modified bool
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if modified {
			commit += " (modified)"
		}
	}
	duck := "unknown"
	if d, err := ingest.Open(""); err == nil {
		duck = d.Version(ctx)
		d.SQL.Close()
	}
	fmt.Fprintf(stdout, "shredduck %s\ncommit %s\n%s\nDuckDB %s\n", version, commit, runtime.Version(), duck)
	fmt.Fprintf(stdout, "new files: storage %s, read by DuckDB %s and later\n", ingest.StorageVersion, ingest.StorageReaders(ingest.StorageVersion))
	return exitOK
}
