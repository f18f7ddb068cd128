package source

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/shredduck/shredduck/shred"
	"github.com/shredduck/shredduck/transforms"
	"github.com/shredduck/shredduck/transforms/jsonsplit"
)

// GenericJSON is the transform that auto uses for JSON objects that are
// not OTLP requests, as `shredduck ingest` does: "none", when transforms
// has it (nil otherwise).
var GenericJSON, _ = transforms.Lookup("none")

// LineError is an NDJSON line that could not be decoded.
type LineError struct {
	Line    int // 1-based
	Snippet []byte
	Err     error
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// DecodeNDJSON appends every export request of an NDJSON body to one
// batch, made by get for the body's transform. fixed is the transform, or
// nil for auto: then each line's transform is detected (an OTLP signal,
// or GenericJSON for other objects), and all must be the same (one body
// goes to one table). Empty lines and empty requests
// ({}) are skipped. It returns the transform and the batch (both nil when
// the body holds no request), the number of records, and on a bad request
// a *LineError; the caller owns the returned batch in every case. It does
// not retain data.
func DecodeNDJSON(fixed transforms.Transform, data []byte, get func(transforms.Transform) *shred.Batch) (tr transforms.Transform, b *shred.Batch, records int, err error) {
	tr = fixed
	request := func(line int, doc []byte) error {
		doc = bytes.TrimSpace(doc)
		if len(doc) == 0 {
			return nil
		}
		use := fixed
		if use == nil {
			detected, err := transforms.DetectJSON(doc)
			if errors.Is(err, transforms.ErrNotOTLP) && GenericJSON != nil {
				detected, err = GenericJSON, nil // as ingest's auto does
			}
			if err != nil {
				return &LineError{Line: line, Snippet: doc, Err: err}
			}
			if detected == nil {
				return nil // an empty request
			}
			if tr != nil && detected.Name() != tr.Name() {
				return &LineError{Line: line, Snippet: doc, Err: fmt.Errorf("%w: an %s request after %s ones; one body goes to one table", transforms.ErrWrongSignal, detected.Name(), tr.Name())}
			}
			tr, use = detected, detected
		}
		if b == nil {
			b = get(use)
		}
		n, err := use.AppendJSON(b, doc)
		if err != nil {
			return &LineError{Line: line, Snippet: doc, Err: err}
		}
		records += n
		return nil
	}
	if !jsonsplit.FirstLineComplete(data) && len(bytes.TrimSpace(data)) > 0 {
		var sp jsonsplit.Splitter
		sp.Reset(data)
		for {
			doc, line, ok := sp.Next()
			if !ok {
				break
			}
			if err := request(line+1, doc); err != nil {
				return tr, b, 0, err
			}
		}
		if err := sp.Err(); err != nil {
			return tr, b, 0, &LineError{Line: sp.Line() + 1, Snippet: sp.Rest(), Err: err}
		}
	} else {
		line := 0
		for len(data) > 0 {
			line++
			var l []byte
			if i := bytes.IndexByte(data, '\n'); i >= 0 {
				l, data = data[:i], data[i+1:]
			} else {
				l, data = data, nil
			}
			if err := request(line, l); err != nil {
				return tr, b, 0, err
			}
		}
	}
	if b == nil {
		tr = nil
	}
	return tr, b, records, nil
}
