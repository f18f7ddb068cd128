// Package shred holds shredduck's columnar batches, its type lattice and the
// rules that map attribute keys to DuckDB column names; it is pure Go.
package shred
