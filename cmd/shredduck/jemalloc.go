package main

// DuckDB's jemalloc gives pages idle for a second back to the kernel
// (dirty and muzzy decay), and DuckDB purges them at its memory limit; its
// appends and commits then fault the same pages in again: under streaming
// load a sixth of the server's CPU went to page faults. Without the decay
// (and, in serve, the purges) idle pages stay for reuse: the process keeps
// what DuckDB held at its peak, which --memory-limit bounds (docs/SERVE.md,
// Memory).
const allocatorDecayMs = -1
