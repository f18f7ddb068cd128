// Package ingestlog is shredduck's durable ingest log: an append-only
// sequence of records in checksummed segment files, appended with
// group-committed fsyncs, read back from a position, and removed a segment
// at a time once loaded (issue #16). It knows nothing of DuckDB or OTLP.
//
// # Format (version 1)
//
// A log is a directory of segment files named by the position of their
// first record, 20 decimal digits and ".seg" (made as ".seg.tmp" and
// renamed once its header is synced). A segment starts with a
// 16-byte header:
//
//	magic   [6]byte  "SDLOG\x00"
//	version uint16   little-endian, 1
//	base    uint64   little-endian, the position of its first record
//
// followed by records, each
//
//	length  uint32   little-endian, the payload's bytes
//	crc     uint32   little-endian, CRC-32C (Castagnoli) of length and payload
//	payload [length]byte
//
// A record's position is its byte offset in the log as if its segments'
// records were concatenated without headers: the first record of a new
// log is at the position Open was given, and each next one at the
// previous position plus 8 plus its length. Positions only grow, across
// segments and restarts, so a position recorded elsewhere (in the
// database, in the transaction that loaded the record) names one record
// for good.
package ingestlog
