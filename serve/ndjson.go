package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/shredduck/shredduck/shred"
	"github.com/shredduck/shredduck/transforms"
	"github.com/shredduck/shredduck/transforms/jsonsplit"
)

// NDJSON bulk endpoint: POST /v1/ndjson/{table}?transform=auto|otlp-traces|...
//
// The body holds one OTLP/JSON export request per line (or concatenated,
// pretty-printed requests, as `shredduck ingest` reads files), optionally
// compressed. It is shredded as `shredduck ingest` does and committed as
// one submission: all of it or nothing. The answer is a JSON summary, or
// 400 naming the first bad line.

const ndjsonPrefix = "/v1/ndjson/"

// genericJSON is the transform that auto uses for JSON objects that are
// not OTLP requests, as `shredduck ingest` does: "none", when transforms
// has it (nil otherwise).
var genericJSON, _ = transforms.Lookup("none")

// lineError is an NDJSON line that could not be decoded.
type lineError struct {
	line    int // 1-based
	snippet []byte
	err     error
}

func (e *lineError) Error() string { return fmt.Sprintf("line %d: %v", e.line, e.err) }
func (e *lineError) Unwrap() error { return e.err }

// decodeNDJSON appends every export request of an NDJSON body to one
// batch, made by get for the body's transform. fixed is the transform, or
// nil for auto: then each line's transform is detected (an OTLP signal,
// or genericJSON for other objects), and all must be the same (one body
// goes to one table). Empty lines and empty requests
// ({}) are skipped. It returns the transform and the batch (both nil when
// the body holds no request), the number of records, and on a bad request
// a *lineError; the caller owns the returned batch in every case. It does
// not retain data.
func decodeNDJSON(fixed transforms.Transform, data []byte, get func(transforms.Transform) *shred.Batch) (tr transforms.Transform, b *shred.Batch, records int, err error) {
	tr = fixed
	request := func(line int, doc []byte) error {
		doc = bytes.TrimSpace(doc)
		if len(doc) == 0 {
			return nil
		}
		use := fixed
		if use == nil {
			detected, err := transforms.DetectJSON(doc)
			if errors.Is(err, transforms.ErrNotOTLP) && genericJSON != nil {
				detected, err = genericJSON, nil // as ingest's auto does
			}
			if err != nil {
				return &lineError{line: line, snippet: doc, err: err}
			}
			if detected == nil {
				return nil // an empty request
			}
			if tr != nil && detected.Name() != tr.Name() {
				return &lineError{line: line, snippet: doc, err: fmt.Errorf("%w: an %s request after %s ones; one body goes to one table", transforms.ErrWrongSignal, detected.Name(), tr.Name())}
			}
			tr, use = detected, detected
		}
		if b == nil {
			b = get(use)
		}
		n, err := use.AppendJSON(b, doc)
		if err != nil {
			return &lineError{line: line, snippet: doc, err: err}
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
			return tr, b, 0, &lineError{line: sp.Line() + 1, snippet: sp.Rest(), err: err}
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

// ndjsonSummary is the answer to a committed NDJSON body.
type ndjsonSummary struct {
	Rows   int           `json:"rows"`
	Tables []ndjsonTable `json:"tables"`
	Errors int           `json:"errors"`
}

type ndjsonTable struct {
	Table     string `json:"table"`
	Transform string `json:"transform"`
	Rows      int    `json:"rows"`
}

func (s *Server) handleNDJSON(w http.ResponseWriter, r *http.Request) {
	const endpoint = "/v1/ndjson"
	refuse := func(e *apiError, body []byte) { s.refuse(w, r, endpoint, formatJSON, body, e) }
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		refuse(&apiError{status: http.StatusMethodNotAllowed, code: codeUnimplemented, reason: reasonMethod,
			msg: fmt.Sprintf("method %s not allowed: the NDJSON endpoint takes POST", r.Method)}, nil)
		return
	}
	table := strings.TrimPrefix(r.URL.Path, ndjsonPrefix)
	if err := checkTableName(table); err != nil {
		refuse(&apiError{status: http.StatusBadRequest, code: codeInvalidArgument, reason: reasonBadTable, msg: err.Error()}, nil)
		return
	}
	var fixed transforms.Transform
	if name := r.URL.Query().Get("transform"); name != "" && name != transforms.Auto {
		var err error
		if fixed, err = transforms.Lookup(name); err != nil {
			refuse(badData(err.Error()), nil)
			return
		}
	}
	if aerr := s.overloaded(); aerr != nil {
		refuse(aerr, nil)
		return
	}
	buf, aerr := readBody(w, r, s.cfg.MaxBody)
	if aerr != nil {
		refuse(aerr, nil)
		return
	}
	defer putBuffer(buf)
	data := buf.Bytes()
	tr, b, n, err := decodeNDJSON(fixed, data, s.batchFor(r.Context()))
	if err != nil {
		if b != nil {
			s.batches.put(tr, b)
		}
		if aerr := s.limitError(r.Context(), err); aerr != nil {
			refuse(aerr, nil)
			return
		}
		var le *lineError
		snip := data
		if errors.As(err, &le) {
			snip = le.snippet
		}
		refuse(badData(fmt.Sprintf("nothing was committed: %v", err)), snip)
		return
	}
	sum := ndjsonSummary{Tables: []ndjsonTable{}}
	if n > 0 {
		// Not ended with the request: a half-closed client still reads (submit).
		if table, aerr = s.tableFor(context.WithoutCancel(r.Context()), table, tr); aerr != nil {
			s.batches.put(tr, b)
			refuse(aerr, nil)
			return
		}
		fixedName := ""
		if fixed != nil {
			fixedName = fixed.Name()
		}
		if aerr := s.submit(r.Context(), table, tr, b, queueBytes(b, len(data)), logBody{kind: kindNDJSON, fixed: fixedName, data: data}); aerr != nil {
			aerr.records = n
			refuse(aerr, nil)
			return
		}
		sum.Rows = n
		sum.Tables = append(sum.Tables, ndjsonTable{Table: table, Transform: tr.Name(), Rows: n})
	} else if b != nil {
		s.batches.put(tr, b)
	}
	out, _ := json.Marshal(sum)
	out = append(out, '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(http.StatusOK)
	w.Write(out)
}
