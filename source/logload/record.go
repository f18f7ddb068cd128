package logload

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/shredduck/shredduck/source"
)

// SourceName is the ingest log's key in shredduck_sources.
const SourceName = "ingest_log"

// A logged request: a header, then the body as it was decoded (after
// decompression).
//
//	version   byte     1
//	kind      byte     1 OTLP, 2 NDJSON
//	format    byte     OTLP: the format constant (JSON 0, protobuf 1)
//	arrived   int64    little-endian Unix nanoseconds of the append
//	table     uvarint length, bytes
//	transform uvarint length, bytes ("" for NDJSON of any transform)
//	body      the rest
const (
	recordVersion = 1
	KindOTLP      = 1
	KindNDJSON    = 2
)

// Body is what a request's rows were decoded from, for the log.
type Body struct {
	Kind   byte
	Format source.Format
	Fixed  string // the transform the body was decoded with; "" for NDJSON auto
	Data   []byte
}

// AppendRecord appends the logged record of a request for table to dst.
func AppendRecord(dst []byte, table string, body Body, arrived time.Time) []byte {
	dst = append(dst, recordVersion, body.Kind, byte(body.Format))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(arrived.UnixNano()))
	dst = binary.AppendUvarint(dst, uint64(len(table)))
	dst = append(dst, table...)
	dst = binary.AppendUvarint(dst, uint64(len(body.Fixed)))
	dst = append(dst, body.Fixed...)
	return append(dst, body.Data...)
}

type logRecord struct {
	table   string
	body    Body
	arrived time.Time
}

func decodeRecord(b []byte) (logRecord, error) {
	var r logRecord
	if len(b) < 11 {
		return r, fmt.Errorf("a logged request of %d bytes is too short", len(b))
	}
	if b[0] != recordVersion {
		return r, fmt.Errorf("a logged request of version %d; this shredduck reads version %d", b[0], recordVersion)
	}
	r.body.Kind, r.body.Format = b[1], source.Format(b[2])
	r.arrived = time.Unix(0, int64(binary.LittleEndian.Uint64(b[3:11])))
	b = b[11:]
	str := func() (string, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return "", false
		}
		s := string(b[k : k+int(n)])
		b = b[k+int(n):]
		return s, true
	}
	var ok1, ok2 bool
	r.table, ok1 = str()
	r.body.Fixed, ok2 = str()
	if !ok1 || !ok2 || (r.body.Kind != KindOTLP && r.body.Kind != KindNDJSON) {
		return r, errors.New("a logged request with a bad header")
	}
	r.body.Data = b
	return r, nil
}
