// Package sqlpolicy runs the SQL of shredduck's query endpoints (POST
// /v1/query and the PostgreSQL wire endpoint) under one policy: read-only,
// one SELECT, no host access, size rules, a timeout that interrupts, row
// and byte limits, a concurrency limit and a share of DuckDB's memory.
package sqlpolicy
