package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/shredduck/shredduck/serve/internal/httpbody"
	"github.com/shredduck/shredduck/source"
	"github.com/shredduck/shredduck/source/logload"
	"github.com/shredduck/shredduck/transforms"
)

// NDJSON bulk endpoint: POST /v1/ndjson/{table}?transform=auto|otlp-traces|...
//
// The body holds one OTLP/JSON export request per line (or concatenated,
// pretty-printed requests, as `shredduck ingest` reads files), optionally
// compressed. It is shredded as `shredduck ingest` does and committed as
// one submission: all of it or nothing. The answer is a JSON summary, or
// 400 naming the first bad line.

const ndjsonPrefix = "/v1/ndjson/"

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
	defer httpbody.Put(buf)
	data := buf.Bytes()
	d, err := source.Decode(s.batches, source.Request{NDJSON: true, Tr: fixed, Data: data}, s.limits(r.Context()))
	if err != nil {
		if aerr := s.limitError(r.Context(), err); aerr != nil {
			refuse(aerr, nil)
			return
		}
		var le *source.LineError
		snip := data
		if errors.As(err, &le) {
			snip = le.Snippet
		}
		refuse(badData(fmt.Sprintf("nothing was committed: %v", err)), snip)
		return
	}
	sum := ndjsonSummary{Tables: []ndjsonTable{}}
	if tr, b, n := d.Tr, d.Batch, d.Records; b != nil {
		// Not ended with the request: a half-closed client still reads (submit).
		if table, aerr = s.tableFor(context.WithoutCancel(r.Context()), table, tr); aerr != nil {
			d.Release()
			refuse(aerr, nil)
			return
		}
		fixedName := ""
		if fixed != nil {
			fixedName = fixed.Name()
		}
		if aerr := s.submit(r.Context(), table, tr, b, queueBytes(b, len(data)), logload.Body{Kind: logload.KindNDJSON, Fixed: fixedName, Data: data}); aerr != nil {
			aerr.records = n
			refuse(aerr, nil)
			return
		}
		sum.Rows = n
		sum.Tables = append(sum.Tables, ndjsonTable{Table: table, Transform: tr.Name(), Rows: n})
	}
	out, _ := json.Marshal(sum)
	out = append(out, '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(http.StatusOK)
	w.Write(out)
}
