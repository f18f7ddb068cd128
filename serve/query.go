package serve

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql/driver"
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
	"sync/atomic"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"
	"github.com/duckdb/duckdb-go/v2/mapping"

	"github.com/shredduck/shredduck/ingest"
)

// QueryConfig configures the query endpoint.
type QueryConfig struct {
	// Timeout bounds a query from the request to its last row (default 30s).
	Timeout time.Duration
	// MaxRows is the most rows a response holds; a longer result is cut
	// and marked truncated (default 10000).
	MaxRows int
	// MaxMemory is the memory of DuckDB's operators (hash tables, sorts,
	// windows, buffers) that the running queries may hold together; past
	// it they are stopped with 503, so that commits keep their memory
	// (default: half of DuckDB's memory_limit; see query_memory.go).
	MaxMemory int64
	// MaxBytes is the largest response body; a longer result is cut
	// before the row that would exceed it and marked truncated, as by
	// MaxRows; a first row larger than it gets 413 (default 16 MiB).
	MaxBytes int64
	// Token, when set, is the bearer token every request must carry.
	Token string
	// MaxConcurrent is the number of queries DuckDB works on at once
	// (default 4); further requests wait for a slot until their timeout.
	// A query that outlives its timeout inside DuckDB (see runQuery) keeps
	// its slot until DuckDB returns.
	MaxConcurrent int
}

// Defaults of QueryConfig.
const (
	DefaultQueryTimeout  = 30 * time.Second
	DefaultQueryMaxRows  = 10000
	DefaultMaxConcurrent = 4
	maxQueryBytes        = 1 << 20 // request body limit
)

// LockDown closes the database to the host: no file, network or extension
// access (enable_external_access = false) and no more configuration
// changes (lock_configuration = true). Both are database-wide, so the
// server calls it once at startup after its own SETs (memory_limit and the
// like) and before it serves queries. Ingestion keeps working: it writes
// only the database file and scans Arrow streams from memory; but a load
// with ingest.Options.MemoryLimit fails afterwards, since that runs a SET.
// LockDown is idempotent.
func LockDown(db *ingest.DB) error {
	locked, external, err := lockState(context.Background(), db)
	if err != nil {
		return fmt.Errorf("lock down: %w", err)
	}
	if locked && external {
		return errors.New("lock down: the configuration is locked with external access enabled")
	}
	if locked {
		return nil
	}
	for _, q := range []string{"SET enable_external_access = false", "SET lock_configuration = true"} {
		if _, err := db.SQL.Exec(q); err != nil {
			return fmt.Errorf("lock down: %s: %w", q, err)
		}
	}
	if locked, external, err = lockState(context.Background(), db); err != nil || !locked || external {
		return fmt.Errorf("lock down: settings did not take (locked %v, external access %v, %v)", locked, external, err)
	}
	return nil
}

func lockState(ctx context.Context, db *ingest.DB) (locked, external bool, err error) {
	err = db.SQL.QueryRowContext(ctx, `SELECT current_setting('lock_configuration'), current_setting('enable_external_access')`).Scan(&locked, &external)
	return locked, external, err
}

func init() {
	// Server.routes calls this after New's own SETs (memory_limit), which
	// is where LockDown belongs. Server.routes puts the token check in
	// front, so the handler does not check it again.
	newQueryHandler = func(db *ingest.DB) http.Handler {
		if err := LockDown(db); err != nil {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				writeQueryError(w, &queryError{http.StatusInternalServerError, "queries are off: " + err.Error()})
			})
		}
		return NewQueryHandler(db, QueryConfig{})
	}
}

// NewQueryHandler serves POST /v1/query: one read-only SELECT, as JSON
// {"columns","types","rows","truncated"} or, for Accept: text/csv or
// ?format=csv, as CSV with the same columns (truncation is then in the
// X-Shredduck-Truncated header). The body is the SQL itself (text/plain,
// application/sql) or {"sql": "..."} (application/json).
//
// Every attribute key reads as the column "key" of its table, also one
// without a stored column (overflowed, or promoted after rows were
// written): see keyview.Create.
//
// A query must prepare as a single statement of type SELECT (DESCRIBE,
// SHOW and SUMMARIZE count); its physical plan must not call a table
// function that changes the database's state (checkpoint(),
// enable_logging(), ...); and it runs in a READ ONLY transaction. File,
// network and settings are closed by LockDown: until it has been called on
// db, the handler answers 500.
func NewQueryHandler(db *ingest.DB, cfg QueryConfig) http.Handler {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultQueryTimeout
	}
	if cfg.MaxRows <= 0 {
		cfg.MaxRows = DefaultQueryMaxRows
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultQueryMaxBytes
	}
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = DefaultMaxConcurrent
	}
	h := &queryHandler{db: db, cfg: cfg, slots: make(chan struct{}, cfg.MaxConcurrent),
		guard: &memoryGuard{db: db, share: cfg.MaxMemory}}
	if cfg.Token != "" {
		sum := sha256.Sum256([]byte(cfg.Token))
		h.tokenSum = sum[:]
	}
	return h
}

type queryHandler struct {
	db       *ingest.DB
	cfg      QueryConfig
	tokenSum []byte // sha256 of the token; nil: no auth
	slots    chan struct{}
	guard    *memoryGuard
	locked   atomic.Bool // LockDown seen (a locked configuration stays locked)
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
	if !h.locked.Load() {
		// Without LockDown a query could read and write the host's files.
		if locked, external, err := lockState(r.Context(), h.db); err != nil || !locked || external {
			writeQueryError(w, &queryError{http.StatusInternalServerError, "queries are off: the server did not lock the database down (serve.LockDown)"})
			return
		}
		h.locked.Store(true)
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

	if err := h.guard.admit(); err != nil {
		writeQueryError(w, &queryError{http.StatusServiceUnavailable, err.Error() + "; DuckDB's memory is given back to ingest first"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	select {
	case h.slots <- struct{}{}:
	case <-ctx.Done():
		if r.Context().Err() != nil {
			return // the client left
		}
		w.Header().Set("Retry-After", "1")
		writeQueryError(w, &queryError{http.StatusServiceUnavailable, "too many queries are running; retry later"})
		return
	}
	// DuckDB checks for interrupts between chunks and between optimizer
	// passes, not while it evaluates one expression (constant folding
	// happens while it prepares; the size rules bound it), so the query
	// runs apart and the response does not wait past the timeout. The slot
	// is held until DuckDB is really done.
	qctx, qcancel := context.WithCancelCause(ctx)
	defer qcancel(nil)
	type outcome struct {
		out *queryOutput
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		leave := h.guard.enter(qcancel)
		defer func() { leave(); <-h.slots }()
		defer func() {
			if p := recover(); p != nil {
				done <- outcome{err: fmt.Errorf("query failed: %v", p)}
			}
		}()
		out, err := h.run(qctx, query, asCSV)
		done <- outcome{out, err}
	}()
	var o outcome
	select {
	case o = <-done:
	case <-qctx.Done():
		o.err = qctx.Err()
	}
	if o.err != nil {
		if r.Context().Err() != nil {
			return // the client left
		}
		if ctx.Err() == context.DeadlineExceeded {
			writeQueryError(w, &queryError{http.StatusGatewayTimeout, fmt.Sprintf("query timed out after %v", h.cfg.Timeout)})
			return
		}
		if cause := context.Cause(qctx); errors.Is(cause, errQueryMemory) {
			w.Header().Set("Retry-After", "1")
			writeQueryError(w, &queryError{http.StatusServiceUnavailable, "query stopped: " + cause.Error() + "; the rest of DuckDB's memory is kept for ingest (retry later, or raise --memory-limit)"})
			return
		}
		var qe *queryError
		if !errors.As(o.err, &qe) {
			qe = &queryError{http.StatusInternalServerError, o.err.Error()}
		}
		writeQueryError(w, qe)
		return
	}
	writeQueryOutput(w, o.out)
}

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

// run executes query on a connection of its own.
func (h *queryHandler) run(ctx context.Context, query string, asCSV bool) (*queryOutput, error) {
	return runOnConn(ctx, h.db, query, queryLimits{rows: h.cfg.MaxRows, bytes: h.cfg.MaxBytes}, asCSV)
}

// runOnConn runs query with runQuery on a connection of its own, in the
// read-only transaction with the key views that inQueryTx makes.
func runOnConn(ctx context.Context, db *ingest.DB, query string, lim queryLimits, asCSV bool) (*queryOutput, error) {
	conn, err := db.SQL.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	var res *queryOutput
	err = inQueryTx(ctx, conn, query, func() error {
		return conn.Raw(func(dc any) error {
			c, ok := dc.(*duckdb.Conn)
			if !ok {
				return fmt.Errorf("unexpected driver connection %T", dc)
			}
			var err error
			res, err = runQuery(ctx, c, query, lim, asCSV)
			return err
		})
	})
	if errors.Is(err, driver.ErrBadConn) && res != nil {
		err = nil // ROLLBACK failed after a good result: the pool drops the connection
	}
	return res, err
}

// castKind says how a column is selected around the user's query.
type castKind int

const (
	castNone    castKind = iota
	castRawJSON          // JSON: as text, sent verbatim (the driver would parse it into float64s)
	castVariant          // VARIANT: the driver cannot scan it; as JSON text
	castText             // TIME_NS, GEOMETRY: the driver cannot scan them; as text
)

type column struct {
	name     string
	typeName string // set for cast columns
	info     duckdb.TypeInfo
	cast     castKind
}

// queryLimits bound a result.
type queryLimits struct {
	rows  int
	bytes int64
	// local: shredduck query --db (QueryLocal), on the user's own
	// read-only file: no size rules or denied functions.
	local bool
}

// ErrNotOneSelect is QueryLocal's answer to a statement that is not one
// SELECT (or does not prepare): the caller runs it otherwise.
var ErrNotOneSelect = errors.New("not one SELECT statement")

// QueryLocal runs one SELECT on db and renders its result exactly as
// /v1/query does (its JSON body), every attribute key reading as its
// column as there (keyview), without the endpoint's limits, size
// rules and denied functions: shredduck query --db prints it as it prints
// a server's answer, so that both show every value alike.
func QueryLocal(ctx context.Context, db *ingest.DB, query string) ([]byte, error) {
	out, err := runOnConn(ctx, db, query, queryLimits{rows: math.MaxInt32, bytes: math.MaxInt64 / 2, local: true}, false)
	if err != nil {
		return nil, err
	}
	return out.body, nil
}

// runQuery checks and runs one query on c and renders its result, in the
// READ ONLY transaction that inQueryTx began on c. It never hands the raw text to the driver's QueryContext or PrepareContext,
// which execute every statement before the last; Prepare refuses more than
// one statement. Nothing is prepared before the size rules
// (query_rules.go) have passed the text: preparing folds constants.
func runQuery(ctx context.Context, c *duckdb.Conn, query string, lim queryLimits, asCSV bool) (*queryOutput, error) {
	if !lim.local {
		rules := &sqlRules{serialize: func(sql string) (string, error) { return serializeSQL(ctx, c, sql) }}
		if err := rules.check(query); err != nil {
			var re *ruleError
			if errors.As(err, &re) {
				return nil, badRequest("%s", re.msg)
			}
			return nil, err
		}
	}
	cols, err := checkStatement(c, query)
	if err != nil {
		if lim.local {
			return nil, fmt.Errorf("%w: %v", ErrNotOneSelect, err)
		}
		return nil, err
	}

	// The limits go into the query, so that DuckDB (whose results the
	// driver materializes) stops at them; the wrapper also casts the
	// columns the driver cannot scan or would scan lossily. The column
	// names come from the query itself (the subquery renames duplicates).
	wrapped := wrapQuery(query, cols, lim.rows+1, lim.bytes)
	// Preparing is not interrupted (the driver's Prepare takes no
	// context): the context is checked before each one instead.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st, err := prepareOne(c, wrapped)
	if err != nil && lim.local {
		return nil, fmt.Errorf("%w: %v", ErrNotOneSelect, err)
	}
	if err != nil {
		return nil, badRequest("this query cannot run as a subquery (PRAGMA statements cannot; use SELECT * FROM pragma_...() instead): %v", err)
	}
	defer st.Close()
	if t, _ := st.StatementType(); t != duckdb.STATEMENT_TYPE_SELECT {
		return nil, fmt.Errorf("wrapped query is a %s statement", stmtTypeName(t))
	}
	if !lim.local { // locally every function works, as in the user's own DuckDB
		if err := checkPlan(ctx, c, wrapped); err != nil {
			return nil, err
		}
	}
	rows, err := st.QueryContext(ctx, nil)
	if err != nil {
		return nil, sqlError(ctx, err)
	}
	defer rows.Close()

	names := make([]string, len(cols))
	types := make([]string, len(cols))
	dbt, _ := rows.(driver.RowsColumnTypeDatabaseTypeName)
	for i, col := range cols {
		names[i] = col.name
		types[i] = col.typeName
		if types[i] == "" && dbt != nil {
			types[i] = dbt.ColumnTypeDatabaseTypeName(i)
		}
	}
	body := newResultBody(names, types, int(min(lim.bytes, math.MaxInt32)), asCSV)
	dest := make([]driver.Value, len(cols)+1) // and shredduck_over
	row := make([]any, len(cols))
	for {
		if err := rows.Next(dest); err == io.EOF {
			break
		} else if err != nil {
			return nil, sqlError(ctx, err)
		}
		if over, _ := dest[len(cols)].(bool); over {
			body.truncated = true
			break
		}
		if body.rows == lim.rows {
			body.truncated = true
			break
		}
		for i, v := range dest[:len(cols)] {
			if cols[i].cast != castNone {
				row[i] = rawJSONValue(v, cols[i].cast)
			} else {
				row[i] = jsonValue(v, cols[i].info)
			}
		}
		if ok, err := body.add(row); err != nil {
			return nil, err
		} else if !ok {
			break
		}
		if body.rows%1024 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	if body.truncated && body.rows == 0 && lim.rows > 0 {
		return nil, &queryError{http.StatusRequestEntityTooLarge,
			fmt.Sprintf("the first row of the result is larger than the response limit of %d bytes", lim.bytes)}
	}
	return &queryOutput{body: body.finish(), asCSV: asCSV, rows: body.rows, truncated: body.truncated}, nil
}

// serializeSQL returns json_serialize_sql(sql) as JSON text. It parses sql
// and nothing more: sql is a bound value, not a statement.
func serializeSQL(ctx context.Context, c *duckdb.Conn, sql string) (string, error) {
	rows, err := c.QueryContext(ctx, "SELECT CAST(json_serialize_sql(CAST($1 AS VARCHAR)) AS VARCHAR)", []driver.NamedValue{{Ordinal: 1, Value: sql}})
	if err != nil {
		return "", sqlError(ctx, err)
	}
	defer rows.Close()
	dest := make([]driver.Value, 1)
	if err := rows.Next(dest); err != nil {
		return "", sqlError(ctx, err)
	}
	text, ok := dest[0].(string)
	if !ok {
		return "", fmt.Errorf("json_serialize_sql returned %T", dest[0])
	}
	return text, nil
}

// prepareOne prepares exactly one statement without executing anything.
func prepareOne(c *duckdb.Conn, query string) (*duckdb.Stmt, error) {
	st, err := c.Prepare(query)
	if err != nil {
		return nil, err
	}
	s, ok := st.(*duckdb.Stmt)
	if !ok {
		st.Close()
		return nil, fmt.Errorf("unexpected driver statement %T", st)
	}
	return s, nil
}

// checkStatement prepares the user's text alone and accepts it only as one
// SELECT statement; it returns the result's columns.
func checkStatement(c *duckdb.Conn, query string) ([]column, error) {
	st, err := prepareOne(c, query)
	if err != nil {
		if strings.Contains(err.Error(), "multi-statement") {
			return nil, badRequest("only one statement is allowed")
		}
		return nil, badRequest("%v%s", err, timeHint(err))
	}
	defer st.Close()
	t, err := st.StatementType()
	if err != nil {
		return nil, err
	}
	if t != duckdb.STATEMENT_TYPE_SELECT {
		return nil, badRequest("only SELECT statements are allowed (got %s)", stmtTypeName(t))
	}
	n, err := st.ColumnCount()
	if err != nil {
		return nil, err
	}
	cols := make([]column, n)
	for i := range cols {
		if cols[i].name, err = st.ColumnName(i); err != nil {
			return nil, err
		}
		switch t, _ := st.ColumnType(i); t {
		case duckdb.TYPE_VARIANT:
			cols[i].cast, cols[i].typeName = castVariant, "VARIANT"
		case mapping.TypeTimeNS: // the driver has no TYPE_TIME_NS yet
			cols[i].cast, cols[i].typeName = castText, "TIME_NS"
		case duckdb.TYPE_GEOMETRY:
			cols[i].cast, cols[i].typeName = castText, "GEOMETRY"
		default:
			// A type the driver does not know leaves info nil; scanning
			// then reports it.
			cols[i].info, _ = st.ColumnTypeInfo(i)
			if cols[i].info != nil && cols[i].info.Alias() == "JSON" {
				cols[i].cast, cols[i].typeName = castRawJSON, "JSON"
			}
		}
	}
	return cols, nil
}

// deniedFunctions are table functions that change the database's or the
// process's state. lock_configuration does not stop them:
// enable_logging(storage_path=...) makes every later query fail, for one.
var deniedFunctions = map[string]bool{
	"checkpoint": true, "force_checkpoint": true,
	"truncate_duckdb_logs":        true,
	"add_parquet_key":             true,
	"copy_database":               true,
	"import_database":             true,
	"json_execute_serialized_sql": true, // runs a plan we did not check
	"arrow_scan":                  true, "arrow_scan_dumb": true,
	"check_peg_parser": true,
}

// deniedPrefixes cover enable_logging, disable_profiling, verify_external
// and their kin.
var deniedPrefixes = []string{"enable_", "disable_", "verify_", "truncate_"}

func deniedFunction(name string) bool {
	name = strings.ToLower(name)
	if deniedFunctions[name] {
		return true
	}
	for _, p := range deniedPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// checkPlan explains query and rejects it if its physical plan calls a
// denied table function, also through query() or a view. It fails closed:
// a plan it cannot read is an error.
func checkPlan(ctx context.Context, c *duckdb.Conn, query string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	st, err := prepareOne(c, "EXPLAIN (FORMAT json) "+query)
	if err != nil {
		return badRequest("%v", err)
	}
	defer st.Close()
	if t, _ := st.StatementType(); t != duckdb.STATEMENT_TYPE_EXPLAIN {
		return fmt.Errorf("plan check: EXPLAIN is a %s statement", stmtTypeName(t))
	}
	rows, err := st.QueryContext(ctx, nil)
	if err != nil {
		return sqlError(ctx, err)
	}
	defer rows.Close()
	dest := make([]driver.Value, len(rows.Columns()))
	plans := 0
	for {
		if err := rows.Next(dest); err == io.EOF {
			break
		} else if err != nil {
			return sqlError(ctx, err)
		}
		if len(dest) != 2 {
			return fmt.Errorf("plan check: EXPLAIN returned %d columns", len(dest))
		}
		text, ok := dest[1].(string)
		if !ok {
			return fmt.Errorf("plan check: EXPLAIN returned %T", dest[1])
		}
		var plan any
		if err := json.Unmarshal([]byte(text), &plan); err != nil {
			return fmt.Errorf("plan check: %w", err)
		}
		if name := findDenied(plan); name != "" {
			return badRequest("%s() is not allowed in queries", strings.ToLower(name))
		}
		plans++
	}
	if plans == 0 {
		return errors.New("plan check: EXPLAIN returned no plan")
	}
	return nil
}

// findDenied returns the first operator or function in a JSON plan whose
// name is denied.
func findDenied(node any) string {
	switch n := node.(type) {
	case []any:
		for _, c := range n {
			if d := findDenied(c); d != "" {
				return d
			}
		}
	case map[string]any:
		for k, v := range n {
			if s, ok := v.(string); ok && (k == "name" || k == "Function") && deniedFunction(s) {
				return s
			}
			if d := findDenied(v); d != "" {
				return d
			}
		}
	}
	return ""
}

// timeHint says what to do about DuckDB's refusal to compare a time
// column (TIMESTAMP_NS, UTC) with a TIMESTAMPTZ value.
func timeHint(err error) string {
	if m := err.Error(); strings.Contains(m, "TIMESTAMP_NS") && strings.Contains(m, "TIMESTAMP WITH TIME ZONE") {
		return "\n(the time columns are UTC TIMESTAMP_NS: now() and current_timestamp compare with them as they are; write another TIMESTAMPTZ value x as x AT TIME ZONE 'UTC', or as a string literal)"
	}
	return ""
}

// sqlError makes a DuckDB error a 400, and running out of memory a 503
// (the memory is shared with ingest and other queries); a timeout stays a
// context error.
func sqlError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var de *duckdb.Error
	if errors.As(err, &de) {
		if de.Type == duckdb.ErrorTypeOutOfMemory {
			return &queryError{http.StatusServiceUnavailable, de.Msg}
		}
		return badRequest("%s", de.Msg)
	}
	return badRequest("%v", err)
}

var stmtTypeNames = map[duckdb.StmtType]string{
	duckdb.STATEMENT_TYPE_INVALID:      "INVALID",
	duckdb.STATEMENT_TYPE_SELECT:       "SELECT",
	duckdb.STATEMENT_TYPE_INSERT:       "INSERT",
	duckdb.STATEMENT_TYPE_UPDATE:       "UPDATE",
	duckdb.STATEMENT_TYPE_EXPLAIN:      "EXPLAIN",
	duckdb.STATEMENT_TYPE_DELETE:       "DELETE",
	duckdb.STATEMENT_TYPE_PREPARE:      "PREPARE",
	duckdb.STATEMENT_TYPE_CREATE:       "CREATE",
	duckdb.STATEMENT_TYPE_EXECUTE:      "EXECUTE",
	duckdb.STATEMENT_TYPE_ALTER:        "ALTER",
	duckdb.STATEMENT_TYPE_TRANSACTION:  "TRANSACTION",
	duckdb.STATEMENT_TYPE_COPY:         "COPY",
	duckdb.STATEMENT_TYPE_ANALYZE:      "ANALYZE",
	duckdb.STATEMENT_TYPE_VARIABLE_SET: "SET VARIABLE",
	duckdb.STATEMENT_TYPE_CREATE_FUNC:  "CREATE FUNCTION",
	duckdb.STATEMENT_TYPE_DROP:         "DROP",
	duckdb.STATEMENT_TYPE_EXPORT:       "EXPORT",
	duckdb.STATEMENT_TYPE_PRAGMA:       "PRAGMA",
	duckdb.STATEMENT_TYPE_VACUUM:       "VACUUM",
	duckdb.STATEMENT_TYPE_CALL:         "CALL",
	duckdb.STATEMENT_TYPE_SET:          "SET",
	duckdb.STATEMENT_TYPE_LOAD:         "LOAD",
	duckdb.STATEMENT_TYPE_RELATION:     "RELATION",
	duckdb.STATEMENT_TYPE_EXTENSION:    "EXTENSION",
	duckdb.STATEMENT_TYPE_LOGICAL_PLAN: "LOGICAL PLAN",
	duckdb.STATEMENT_TYPE_ATTACH:       "ATTACH",
	duckdb.STATEMENT_TYPE_DETACH:       "DETACH",
	duckdb.STATEMENT_TYPE_MULTI:        "MULTI",
}

func stmtTypeName(t duckdb.StmtType) string {
	if s, ok := stmtTypeNames[t]; ok {
		return s
	}
	return fmt.Sprintf("statement type %d", t)
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
func rawJSONValue(v any, kind castKind) any {
	s, ok := v.(string)
	if !ok {
		return jsonValue(v, nil)
	}
	if kind == castText || !json.Valid([]byte(s)) {
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
	case duckdb.OrderedMap:
		var kt, vt duckdb.TypeInfo
		if d, ok := detailsOf(info).(*duckdb.MapDetails); ok {
			kt, vt = d.Key, d.Value
		}
		keys, vals := x.Keys(), x.Values()
		o := &object{keys: make([]string, len(keys)), vals: make([]any, len(vals))}
		for i := range keys {
			o.keys[i] = keyString(jsonValue(keys[i], kt))
			o.vals[i] = jsonValue(vals[i], vt)
		}
		return o
	case duckdb.Map:
		var kt, vt duckdb.TypeInfo
		if d, ok := detailsOf(info).(*duckdb.MapDetails); ok {
			kt, vt = d.Key, d.Value
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[keyString(jsonValue(k, kt))] = jsonValue(e, vt)
		}
		return out
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

// QueryOff is the /v1/query handler of a server that must not answer
// queries: every request gets 403 with reason (what to change).
func QueryOff(reason string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeQueryError(w, &queryError{http.StatusForbidden, reason})
	})
}
