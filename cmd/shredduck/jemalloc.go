package main

// DuckDB's jemalloc gives pages idle for a second back to the kernel
// (dirty and muzzy decay), and its appends and commits fault the same
// pages in again: under streaming load a sixth of the server's CPU went to
// page faults. Without the decay, idle pages stay for reuse; what DuckDB
// holds stays bounded by --memory-limit, and DuckDB still purges a
// thread's arena after a task that allocated more than
// allocator_flush_threshold (128 MiB), so a large query's memory is still
// returned (docs/SERVE.md, Memory).
const allocatorDecayMs = -1
