package source

import (
	"errors"
	"fmt"

	"github.com/shredduck/shredduck/shred"
	"github.com/shredduck/shredduck/transforms"
)

// Format is the encoding of an OTLP request (and so of its response).
type Format uint8

const (
	FormatJSON Format = iota
	FormatProto
)

// ContentType is the media type of f.
func (f Format) ContentType() string {
	if f == FormatProto {
		return "application/x-protobuf"
	}
	return "application/json"
}

func (f Format) String() string {
	if f == FormatProto {
		return "protobuf"
	}
	return "json"
}

// Request is one request's body as it came in (after decompression).
type Request struct {
	// NDJSON: the body holds OTLP/JSON export requests or other JSON
	// objects, one a line (DecodeNDJSON); else it is one OTLP export
	// request encoded as Format.
	NDJSON bool
	Format Format
	// Tr is the transform: the OTLP signal's, or for NDJSON the fixed
	// one, nil for auto (each line's detected).
	Tr   transforms.Transform
	Data []byte
}

// Decoded is a request decoded into a pooled batch.
type Decoded struct {
	Tr      transforms.Transform
	Batch   *shred.Batch // nil when the request holds no record to store
	Records int
	// Rejected, when the decoder left records out (partial success),
	// says which; the others are in Batch.
	Rejected *transforms.RejectedError
	pool     *BatchPool
}

// Release gives d's batch back to its pool, once nothing refers to its
// memory; d is empty after it.
func (d *Decoded) Release() {
	if d.Batch != nil {
		d.pool.Put(d.Tr, d.Batch)
		d.Batch = nil
	}
}

// Decode decodes req into a batch taken from pool under lim (rows, keys,
// memory: shred.Limits), the one way every door and source decodes a
// request. On an error (a limit, errors.Is ErrTooManyRows, ErrTooManyKeys
// or ErrMemory, IsLimit; a body of another signal, ErrWrongSignal; bad
// data, for NDJSON a *LineError, which a rejected record is too) nothing is returned and the batch is back
// in the pool. A request without records to store returns no batch (and
// may carry Rejected). Otherwise the caller owns Batch and gives it back
// with Release. Decode does not retain req.Data.
func Decode(pool *BatchPool, req Request, lim shred.Limits) (Decoded, error) {
	d := Decoded{Tr: req.Tr, pool: pool}
	get := func(tr transforms.Transform) *shred.Batch {
		b := pool.Get(tr)
		b.SetLimits(lim)
		return b
	}
	var err error
	if req.NDJSON {
		d.Tr, d.Batch, d.Records, err = DecodeNDJSON(req.Tr, req.Data, get)
	} else if len(req.Data) > 0 {
		d.Batch = get(req.Tr)
		d.Records, err = AppendOTLP(req.Tr, req.Format, req.Data, d.Batch)
	}
	// An NDJSON body is stored whole or not at all: a record a line's
	// decoder rejects fails it.
	if err != nil && (req.NDJSON || !errors.As(err, &d.Rejected)) {
		d.Rejected = nil
		d.Release()
		return Decoded{}, err
	}
	if d.Records == 0 {
		d.Release()
	}
	return d, nil
}

// AppendOTLP appends the rows of one OTLP export request, encoded as f, to
// b with transform tr and returns how many it appended. On error it
// appends nothing (but the records a *transforms.RejectedError leaves
// out). It does not retain data. A body of another signal than tr's fails
// with an error wrapping transforms.ErrWrongSignal.
func AppendOTLP(tr transforms.Transform, f Format, data []byte, b *shred.Batch) (int, error) {
	var n int
	var err error
	if f == FormatJSON {
		n, err = tr.AppendJSON(b, data)
	} else {
		n, err = tr.AppendProto(b, data)
	}
	var rej *transforms.RejectedError
	if err == nil || errors.As(err, &rej) || IsLimit(err) {
		return n, err
	}
	var other transforms.Transform
	if f == FormatJSON {
		other, _ = transforms.DetectJSON(data)
	} else {
		other = DetectProto(data)
	}
	if other != nil && other.Name() != tr.Name() {
		return 0, fmt.Errorf("%w: the body is an %s request, not %s", transforms.ErrWrongSignal, other.Name(), tr.Name())
	}
	return 0, err
}

// IsLimit reports whether decoding ended at a batch limit.
func IsLimit(err error) bool {
	return errors.Is(err, shred.ErrTooManyRows) || errors.Is(err, shred.ErrTooManyKeys) || errors.Is(err, shred.ErrMemory)
}

// detectMaxBytes bounds what DetectProto's trial decodes may allocate.
const detectMaxBytes = 8 << 20

// DetectProto names the signal of a protobuf request that the endpoint's
// decoder refused, for the error message: the first transform that
// decodes a record of it. transforms.DetectProto asks pdata, which decodes
// the whole request into objects of its own (hundreds of bytes per
// two-byte empty span); here each trial stops after its first records and
// a few MiB.
func DetectProto(data []byte) transforms.Transform {
	for _, tr := range transforms.All() {
		var used int64
		b := shred.NewBatch(tr.Core())
		b.SetLimits(shred.Limits{MaxRows: 1, Charge: func(n int64) bool {
			used += n
			return used <= detectMaxBytes
		}})
		n, err := tr.AppendProto(b, data)
		var rej *transforms.RejectedError
		if (err == nil || errors.As(err, &rej)) && n > 0 || errors.Is(err, shred.ErrTooManyRows) {
			return tr
		}
	}
	return nil
}
