//go:build !duckdb_arrow

package ingest

// The DuckDB side of shredduck uses the driver's Arrow interface, which the
// driver compiles only with a build tag. Build and test with
//
//	go build -tags duckdb_arrow ./cmd/shredduck
//	go test -tags duckdb_arrow ./...
var _ = build_with_tags_duckdb_arrow
