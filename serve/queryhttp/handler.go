package queryhttp

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/shredduck/shredduck/ingest"
	"github.com/shredduck/shredduck/serve/sqlpolicy"
)

// Config configures the query endpoint.
type Config struct {
	// Timeout bounds a query from the request to its last row (default 30s).
	Timeout time.Duration
	// MaxRows is the most rows a response holds; a longer result is cut
	// and marked truncated (default 10000).
	MaxRows int
	// MaxMemory is the memory of DuckDB's operators (hash tables, sorts,
	// windows, buffers) that the running queries may hold together; past
	// it one query at a time is stopped with 503, so that commits keep
	// their memory and the others run on (default: half of DuckDB's
	// memory_limit; see sqlpolicy/memory.go).
	MaxMemory int64
	// MaxBytes is the largest response body; a longer result is cut
	// before the row that would exceed it and marked truncated, as by
	// MaxRows; a first row larger than it gets 413 (default 16 MiB).
	MaxBytes int64
	// Token, when set, is the bearer token every request must carry.
	Token string
	// MaxConcurrent is the number of queries DuckDB works on at once
	// (default 4); further requests wait for a slot until their timeout.
	// A query that outlives its timeout inside DuckDB keeps its slot
	// until DuckDB returns.
	MaxConcurrent int
	// Policy, when set, runs the queries instead of one made from the
	// fields above, so that endpoints sharing it share its slots and
	// memory share (the PostgreSQL endpoint).
	Policy *sqlpolicy.Policy
}

// Defaults of Config.
const (
	DefaultTimeout       = sqlpolicy.DefaultTimeout
	DefaultMaxRows       = sqlpolicy.DefaultMaxRows
	DefaultMaxConcurrent = sqlpolicy.DefaultMaxConcurrent
	maxQueryBytes        = 1 << 20 // request body limit
)

// LockDown closes the database to the host (sqlpolicy.LockDown).
func LockDown(db *ingest.DB) error { return sqlpolicy.LockDown(db) }

// Default locks db down and returns the handler with the default
// Config, or one that answers 500 if the lock fails. serve calls it after
// its own SETs (memory_limit), which is where LockDown belongs, and puts
// the token check in front.
func Default(db *ingest.DB) http.Handler {
	if err := LockDown(db); err != nil {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeQueryError(w, &queryError{http.StatusInternalServerError, "queries are off: " + err.Error()})
		})
	}
	return NewHandler(db, Config{})
}

// NewHandler serves POST /v1/query: one read-only SELECT, as JSON
// (the default) or CSV (?format=csv or Accept: text/csv), under the
// policy of package sqlpolicy.
//
// A query must prepare as a single statement of type SELECT (DESCRIBE,
// SHOW and SUMMARIZE count); its physical plan must not call a table
// function that changes the database's state (checkpoint(),
// enable_logging(), ...); and it runs in a READ ONLY transaction. File,
// network and settings are closed by LockDown: until it has been called on
// db, the handler answers 500.
func NewHandler(db *ingest.DB, cfg Config) http.Handler {
	p := cfg.Policy
	if p == nil {
		p = sqlpolicy.New(db, sqlpolicy.Config{Timeout: cfg.Timeout, MaxRows: cfg.MaxRows, MaxMemory: cfg.MaxMemory,
			MaxBytes: cfg.MaxBytes, MaxConcurrent: cfg.MaxConcurrent})
	}
	h := &queryHandler{policy: p}
	if cfg.Token != "" {
		sum := sha256.Sum256([]byte(cfg.Token))
		h.tokenSum = sum[:]
	}
	return h
}

type queryHandler struct {
	policy   *sqlpolicy.Policy
	tokenSum []byte // sha256 of the token; nil: no auth
}

// queryError is a failure with its HTTP status.
type queryError struct {
	status int
	msg    string
}

func (e *queryError) Error() string { return e.msg }

func badRequest(format string, a ...any) *queryError {
	return &queryError{http.StatusBadRequest, fmt.Sprintf(format, a...)}
}

// httpStatus is the answer to a query that failed with k.
var httpStatus = map[sqlpolicy.Kind]int{
	sqlpolicy.KindInvalid:     http.StatusBadRequest,
	sqlpolicy.KindRefused:     http.StatusBadRequest,
	sqlpolicy.KindTooLarge:    http.StatusRequestEntityTooLarge,
	sqlpolicy.KindBusy:        http.StatusServiceUnavailable,
	sqlpolicy.KindMemory:      http.StatusServiceUnavailable,
	sqlpolicy.KindTimeout:     http.StatusGatewayTimeout,
	sqlpolicy.KindUnavailable: http.StatusServiceUnavailable,
	sqlpolicy.KindInternal:    http.StatusInternalServerError,
}

func (h *queryHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeQueryError(w, &queryError{http.StatusMethodNotAllowed, "use POST"})
		return
	}
	if !h.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="shredduck"`)
		writeQueryError(w, &queryError{http.StatusUnauthorized, "missing or wrong bearer token"})
		return
	}
	if err := h.policy.CheckLocked(r.Context()); err != nil {
		writeQueryError(w, &queryError{http.StatusInternalServerError, err.Error()})
		return
	}
	asCSV, qerr := wantsCSV(r)
	if qerr != nil {
		writeQueryError(w, qerr)
		return
	}
	query, qerr := readQuery(w, r)
	if qerr != nil {
		writeQueryError(w, qerr)
		return
	}
	sink := &bodySink{max: int(min(h.policy.Config().MaxBytes, math.MaxInt32)), asCSV: asCSV}
	res, err := h.policy.Run(r.Context(), sqlpolicy.Query{SQL: query}, sink)
	if err != nil {
		if r.Context().Err() != nil {
			return // the client left
		}
		var pe *sqlpolicy.Error
		if !errors.As(err, &pe) {
			pe = &sqlpolicy.Error{Kind: sqlpolicy.KindInternal, Msg: err.Error()}
		}
		if pe.Kind == sqlpolicy.KindBusy || pe.Kind == sqlpolicy.KindMemory {
			w.Header().Set("Retry-After", "1")
		}
		writeQueryError(w, &queryError{httpStatus[pe.Kind], pe.Msg})
		return
	}
	writeQueryOutput(w, sink.output(res))
}

// bodySink renders a result as a /v1/query response body.
type bodySink struct {
	max   int
	asCSV bool
	body  *resultBody
	row   []any
	cols  []sqlpolicy.Column
}

func (s *bodySink) Columns(cols []sqlpolicy.Column) error {
	names := make([]string, len(cols))
	types := make([]string, len(cols))
	for i, c := range cols {
		names[i], types[i] = c.Name, c.Type
	}
	s.cols = cols
	s.row = make([]any, len(cols))
	s.body = newResultBody(names, types, s.max, s.asCSV)
	return nil
}

func (s *bodySink) Row(vals []any) (bool, error) {
	for i, v := range vals {
		if s.cols[i].Cast != sqlpolicy.CastNone {
			s.row[i] = rawJSONValue(v, s.cols[i].Cast)
		} else {
			s.row[i] = jsonValue(v, s.cols[i].Info)
		}
	}
	return s.body.add(s.row)
}

func (s *bodySink) output(res sqlpolicy.Result) *queryOutput {
	s.body.truncated = res.Truncated
	return &queryOutput{body: s.body.finish(), asCSV: s.asCSV, rows: res.Rows, truncated: res.Truncated}
}

// Local runs one SELECT on db and renders its result exactly as
// /v1/query does (its JSON body), every attribute key reading as its
// column as there (keyview), without the endpoint's limits, size
// rules and denied functions (sqlpolicy.RunLocal): shredduck query --db
// prints it as it prints a server's answer, so that both show every value
// alike.
func Local(ctx context.Context, db *ingest.DB, query string) ([]byte, error) {
	sink := &bodySink{max: math.MaxInt32, asCSV: false}
	res, err := sqlpolicy.RunLocal(ctx, db, query, sink)
	if err != nil {
		return nil, err
	}
	return sink.output(res).body, nil
}

// ErrNotOneSelect is Local's answer to a statement that is not one
// SELECT (or does not prepare): the caller runs it otherwise.
var ErrNotOneSelect = sqlpolicy.ErrNotOneSelect

func (h *queryHandler) authorized(r *http.Request) bool {
	if h.tokenSum == nil {
		return true
	}
	auth := r.Header.Get("Authorization")
	const prefix = "bearer "
	if len(auth) < len(prefix) || !strings.EqualFold(auth[:len(prefix)], prefix) {
		return false
	}
	// Hashing first makes the comparison independent of the token's length.
	sum := sha256.Sum256([]byte(strings.TrimSpace(auth[len(prefix):])))
	return subtle.ConstantTimeCompare(sum[:], h.tokenSum) == 1
}

// wantsCSV reads the response format from ?format= or else Accept.
func wantsCSV(r *http.Request) (bool, *queryError) {
	switch f := r.URL.Query().Get("format"); f {
	case "csv":
		return true, nil
	case "json":
		return false, nil
	case "":
	default:
		return false, &queryError{http.StatusBadRequest, fmt.Sprintf("unknown format %q (want json or csv)", f)}
	}
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mt {
		case "text/csv":
			return true, nil
		case "application/json":
			return false, nil
		}
	}
	return false, nil
}

// readQuery reads the SQL from the body: raw text, or JSON {"sql": ...}.
func readQuery(w http.ResponseWriter, r *http.Request) (string, *queryError) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxQueryBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return "", &queryError{http.StatusRequestEntityTooLarge, fmt.Sprintf("query is longer than %d bytes", maxQueryBytes)}
		}
		return "", badRequest("cannot read the request: %v", err)
	}
	mt := ""
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err = mime.ParseMediaType(ct); err != nil {
			return "", badRequest("bad Content-Type: %v", err)
		}
	}
	var query string
	switch mt {
	case "application/json":
		var req struct {
			SQL *string `json:"sql"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			return "", badRequest("bad JSON body: %v", err)
		}
		if req.SQL == nil {
			return "", badRequest(`JSON body needs "sql"`)
		}
		query = *req.SQL
	// curl -d sends application/x-www-form-urlencoded; its body is the
	// text as typed.
	case "", "text/plain", "application/sql", "application/x-www-form-urlencoded":
		query = string(body)
	default:
		return "", &queryError{http.StatusUnsupportedMediaType, fmt.Sprintf("unsupported Content-Type %q (send text/plain, application/sql or application/json)", mt)}
	}
	if strings.TrimSpace(query) == "" {
		return "", badRequest("empty query")
	}
	return query, nil
}

// Values.

// maxExactInt is the largest integer a float64 (a JavaScript number) holds
// exactly; larger integers are sent as strings.
const maxExactInt = 1 << 53

// object is a JSON object that keeps its keys' order (STRUCT, MAP).
type object struct {
	keys []string
	vals []any
}

func (o *object) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, err := marshalJSON(k)
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteByte(':')
		vb, err := marshalJSON(o.vals[i])
		if err != nil {
			return nil, err
		}
		b.Write(vb)
	}
	b.WriteByte('}')
	return []byte(b.String()), nil
}

// marshalJSON is json.Marshal without HTML escaping.
func marshalJSON(v any) ([]byte, error) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return []byte(strings.TrimSuffix(b.String(), "\n")), nil
}

// rawJSONValue renders a column cast to text: JSON text is sent verbatim.
func rawJSONValue(v any, kind sqlpolicy.CastKind) any {
	s, ok := v.(string)
	if !ok {
		return jsonValue(v, nil)
	}
	if kind == sqlpolicy.CastText || !json.Valid([]byte(s)) {
		return s
	}
	return json.RawMessage(s)
}

// jsonValue renders a value scanned by the driver for encoding/json: times
// as RFC 3339 strings, BLOB as base64, UUID as text, LIST/ARRAY as arrays,
// STRUCT/MAP as objects, integers beyond 2^53 and decimals beyond 15
// digits as strings, NaN and infinities as strings. info (nil if unknown)
// is the value's DuckDB type.
func jsonValue(v any, info duckdb.TypeInfo) any {
	t := duckdb.TYPE_INVALID
	if info != nil {
		t = info.InternalType()
	}
	switch x := v.(type) {
	case nil, bool, string, int8, int16, int32, uint8, uint16, uint32:
		return x
	case int64:
		if x > -maxExactInt && x < maxExactInt {
			return x
		}
		return strconv.FormatInt(x, 10)
	case uint64:
		if x < maxExactInt {
			return x
		}
		return strconv.FormatUint(x, 10)
	case int:
		return jsonValue(int64(x), info)
	case *big.Int:
		if x.IsInt64() {
			return jsonValue(x.Int64(), info)
		}
		return x.String()
	case float32:
		return floatValue(float64(x), x)
	case float64:
		return floatValue(x, x)
	case duckdb.Decimal:
		s := x.String()
		if significantDigits(s) <= 15 {
			return json.Number(s)
		}
		return s
	case []byte:
		if t == duckdb.TYPE_UUID && len(x) == 16 {
			return uuidString(x)
		}
		return base64.StdEncoding.EncodeToString(x)
	case duckdb.UUID:
		return uuidString(x[:])
	case *duckdb.UUID:
		return uuidString(x[:])
	case time.Time:
		switch t {
		case duckdb.TYPE_DATE:
			return x.Format("2006-01-02")
		case duckdb.TYPE_TIME:
			return x.Format("15:04:05.999999999")
		case duckdb.TYPE_TIME_TZ:
			return x.Format("15:04:05.999999999Z07:00")
		}
		return x.UTC().Format(time.RFC3339Nano)
	case duckdb.Interval:
		return &object{keys: []string{"months", "days", "micros"}, vals: []any{x.Months, x.Days, x.Micros}}
	case []any:
		var child duckdb.TypeInfo
		switch d := detailsOf(info).(type) {
		case *duckdb.ListDetails:
			child = d.Child
		case *duckdb.ArrayDetails:
			child = d.Child
		}
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonValue(e, child)
		}
		return out
	case map[string]any:
		o := &object{}
		if d, ok := detailsOf(info).(*duckdb.StructDetails); ok && len(d.Entries) == len(x) {
			for _, e := range d.Entries {
				o.keys = append(o.keys, e.Name())
				o.vals = append(o.vals, jsonValue(x[e.Name()], e.Info()))
			}
			return o
		}
		// A JSON value nested in a LIST or STRUCT, parsed by the driver.
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = jsonValue(e, nil)
		}
		return out
	case duckdb.OrderedMap, duckdb.Map:
		return mapValue(x, info)
	case duckdb.Union:
		var mt duckdb.TypeInfo
		if d, ok := detailsOf(info).(*duckdb.UnionDetails); ok {
			for _, m := range d.Members {
				if m.Name == x.Tag {
					mt = m.Type
				}
			}
		}
		return jsonValue(x.Value, mt)
	case duckdb.Bit:
		return x.String()
	case fmt.Stringer:
		return x.String()
	}
	return fmt.Sprint(v)
}

// mapValue renders a MAP: an object in key order for an OrderedMap, a Go
// map (keys sorted by encoding/json) for a plain one.
func mapValue(v any, info duckdb.TypeInfo) any {
	var kt, vt duckdb.TypeInfo
	if d, ok := detailsOf(info).(*duckdb.MapDetails); ok {
		kt, vt = d.Key, d.Value
	}
	if x, ok := v.(duckdb.OrderedMap); ok {
		keys, vals := x.Keys(), x.Values()
		o := &object{keys: make([]string, len(keys)), vals: make([]any, len(vals))}
		for i := range keys {
			o.keys[i] = keyString(jsonValue(keys[i], kt))
			o.vals[i] = jsonValue(vals[i], vt)
		}
		return o
	}
	x := v.(duckdb.Map)
	out := make(map[string]any, len(x))
	for k, e := range x {
		out[keyString(jsonValue(k, kt))] = jsonValue(e, vt)
	}
	return out
}

func detailsOf(info duckdb.TypeInfo) duckdb.TypeDetails {
	if info == nil {
		return nil
	}
	return info.Details()
}

// floatValue keeps finite floats as numbers (v is the float32 or float64,
// so that encoding/json prints it at its own precision).
func floatValue(f float64, v any) any {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return v
}

// significantDigits counts the digits of a decimal string from its first
// non-zero digit.
func significantDigits(s string) int {
	n, started := 0, false
	for _, r := range s {
		if r < '0' || r > '9' {
			continue
		}
		if r != '0' {
			started = true
		}
		if started {
			n++
		}
	}
	return n
}

func uuidString(b []byte) string {
	var buf [36]byte
	hex.Encode(buf[0:8], b[0:4])
	buf[8] = '-'
	hex.Encode(buf[9:13], b[4:6])
	buf[13] = '-'
	hex.Encode(buf[14:18], b[6:8])
	buf[18] = '-'
	hex.Encode(buf[19:23], b[8:10])
	buf[23] = '-'
	hex.Encode(buf[24:], b[10:16])
	return string(buf[:])
}

// keyString makes a rendered MAP key an object key.
func keyString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := marshalJSON(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// cellText is a rendered value as one CSV field: strings as they are, NULL
// empty, everything else as its JSON text.
func cellText(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case json.RawMessage:
		return string(x)
	case json.Number:
		return string(x)
	}
	b, err := marshalJSON(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func writeQueryError(w http.ResponseWriter, e *queryError) {
	if e.status == http.StatusServiceUnavailable && w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", "1")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	body, _ := marshalJSON(map[string]string{"error": e.msg})
	w.Write(append(body, '\n'))
}

// WriteError answers a query request with status and msg, as the
// handler answers its failures (a JSON {"error": msg}).
func WriteError(w http.ResponseWriter, status int, msg string) {
	writeQueryError(w, &queryError{status, msg})
}

// Off is the /v1/query handler of a server that must not answer
// queries: every request gets 403 with reason (what to change).
func Off(reason string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeQueryError(w, &queryError{http.StatusForbidden, reason})
	})
}
