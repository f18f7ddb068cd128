// Package retention deletes the OTLP tables' expired rows in the
// background (docs/RETENTION.md) and, with an export directory, writes
// each finished hour to Parquet first (--export-dir).
package retention
