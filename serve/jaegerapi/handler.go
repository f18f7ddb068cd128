package jaegerapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/shredduck/shredduck/serve/sqlpolicy"
)

// Runner runs the API's queries: *sqlpolicy.Policy, shared with POST
// /v1/query and the PostgreSQL endpoint, so that trace lookups take their
// slots and memory from the same budget. The API's statements are built
// here from constants and the catalog's names, every value of a request
// bound as a parameter, so they run by RunBuilt, without the checks of a
// client's SQL and their fixed cost.
type Runner interface {
	RunBuilt(ctx context.Context, q sqlpolicy.Query, sink sqlpolicy.Sink) (sqlpolicy.Result, error)
	// KeysGen is the key catalog's generation (ingest.DB.KeysGen): the
	// same even value before and after a query says that the catalog
	// stayed as it was.
	KeysGen() int64
}

// Config configures a Handler. The zero value of a field means its default.
type Config struct {
	// Table is the traces table (otel_traces).
	Table string
	// Now is the clock of the default search window (time.Now).
	Now func() time.Time
}

// DefaultTable is the table a Handler reads without Config.Table.
const DefaultTable = "otel_traces"

// Handler serves the API's endpoints under /api/.
type Handler struct {
	run   Runner
	cfg   Config
	mux   *http.ServeMux
	cache schemaCache // the schema read last (fetchSpans)
}

// New returns a Handler that runs its SQL on r.
func New(r Runner, cfg Config) *Handler {
	if cfg.Table == "" {
		cfg.Table = DefaultTable
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	h := &Handler{run: r, cfg: cfg, mux: http.NewServeMux()}
	h.mux.HandleFunc("GET /api/services", h.services)
	h.mux.HandleFunc("GET /api/services/{service}/operations", h.operationsLegacy)
	h.mux.HandleFunc("GET /api/operations", h.operations)
	h.mux.HandleFunc("GET /api/traces", h.search)
	h.mux.HandleFunc("GET /api/traces/{traceID}", h.trace)
	h.mux.HandleFunc("GET /api/dependencies", h.dependencies)
	h.mux.HandleFunc("GET /api/v3/services", h.v3Services)
	h.mux.HandleFunc("GET /api/v3/operations", h.v3Operations)
	h.mux.HandleFunc("GET /api/v3/traces", h.v3Search)
	h.mux.HandleFunc("GET /api/v3/traces/{traceID}", h.v3Trace)
	return h
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// response is the envelope of every /api/ answer (Jaeger's
// structuredResponse).
type response struct {
	Data   any        `json:"data"`
	Total  int        `json:"total"`
	Limit  int        `json:"limit"`
	Offset int        `json:"offset"`
	Errors []apiError `json:"errors"`
}

type apiError struct {
	Code    int    `json:"code,omitempty"`
	Msg     string `json:"msg"`
	TraceID string `json:"traceID,omitempty"`
}

func writeJSON(w http.ResponseWriter, r *http.Request, v any) {
	var body []byte
	var err error
	if p := r.FormValue("prettyPrint"); p != "" && p != "false" {
		body, err = json.MarshalIndent(v, "", "    ")
	} else {
		body, err = json.Marshal(v)
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, "failed writing HTTP response: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}

// writeError answers as Jaeger's handleError does: the envelope with one
// error, sent with http.Error (text/plain, a trailing newline).
func writeError(w http.ResponseWriter, status int, msg string) {
	body, _ := json.Marshal(response{Errors: []apiError{{Code: status, Msg: msg}}})
	http.Error(w, string(body), status)
}

// failed answers a failed query with its failureStatus.
func failed(w http.ResponseWriter, err error, write func(http.ResponseWriter, int, string)) {
	status := failureStatus(err)
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	write(w, status, err.Error())
}

// failureStatus is the HTTP status of a failed query: the policy's
// retryable refusals 503, a timeout 504, anything else 500.
func failureStatus(err error) int {
	var pe *sqlpolicy.Error
	switch {
	case errors.Is(err, context.Canceled):
		return 499 // the client is gone; nobody reads this
	case errors.As(err, &pe) && slices.Contains([]sqlpolicy.Kind{sqlpolicy.KindBusy, sqlpolicy.KindMemory, sqlpolicy.KindUnavailable}, pe.Kind):
		return http.StatusServiceUnavailable
	case errors.As(err, &pe) && pe.Kind == sqlpolicy.KindTimeout:
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

func (h *Handler) services(w http.ResponseWriter, r *http.Request) {
	svcs, err := h.serviceNames(r.Context())
	if err != nil {
		failed(w, err, writeError)
		return
	}
	writeJSON(w, r, response{Data: svcs, Total: len(svcs)})
}

func (h *Handler) operationsLegacy(w http.ResponseWriter, r *http.Request) {
	ops, err := h.operationList(r.Context(), r.PathValue("service"), "")
	if err != nil {
		failed(w, err, writeError)
		return
	}
	var names []string
	for _, o := range ops {
		if !slices.Contains(names, o.Name) {
			names = append(names, o.Name)
		}
	}
	writeJSON(w, r, response{Data: names, Total: len(names)})
}

func (h *Handler) operations(w http.ResponseWriter, r *http.Request) {
	service := r.FormValue("service")
	if service == "" {
		writeError(w, http.StatusBadRequest, "parameter 'service' is required")
		return
	}
	ops, err := h.operationList(r.Context(), service, r.FormValue("spanKind"))
	if err != nil {
		failed(w, err, writeError)
		return
	}
	data := make([]operation, 0, len(ops))
	data = append(data, ops...)
	writeJSON(w, r, response{Data: data, Total: len(ops)})
}

func (h *Handler) dependencies(w http.ResponseWriter, r *http.Request) {
	end, lookback, err := dependencyParams(r, h.cfg.Now())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	links, err := h.dependencyLinks(r.Context(), end.Add(-lookback), end)
	if err != nil {
		failed(w, err, writeError)
		return
	}
	if service := r.FormValue("service"); service != "" {
		links = slices.DeleteFunc(links, func(l dependencyLink) bool { return l.Parent != service && l.Child != service })
	}
	writeJSON(w, r, response{Data: links})
}

func (h *Handler) trace(w http.ResponseWriter, r *http.Request) {
	id, err := parseTraceID(r.PathValue("traceID"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if err := checkTraceParams(r); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	traces, err := h.tracesByID(r.Context(), []string{id})
	if err != nil {
		failed(w, err, writeError)
		return
	}
	if len(traces) == 0 {
		writeError(w, http.StatusNotFound, "trace not found")
		return
	}
	writeJSON(w, r, response{Data: uiTraces(traces, r.FormValue("raw") == "true")})
}

func (h *Handler) search(w http.ResponseWriter, r *http.Request) {
	q, err := parseSearch(r, h.cfg.Now())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	var traces []trace
	var missing []apiError
	if len(q.traceIDs) > 0 {
		traces, err = h.tracesByID(r.Context(), q.traceIDs)
	} else {
		traces, err = h.findTraces(r.Context(), q)
	}
	if err != nil {
		failed(w, err, writeError)
		return
	}
	if len(q.traceIDs) > 0 {
		found := map[string]bool{}
		for _, t := range traces {
			found[t.id] = true
		}
		for _, id := range q.traceIDs {
			if !found[id] {
				missing = append(missing, apiError{Msg: "trace not found", TraceID: jaegerTraceID(id)})
			}
		}
	}
	writeJSON(w, r, response{Data: uiTraces(traces, q.raw), Errors: missing})
}

// jaegerTraceID is a stored trace id as Jaeger prints it: 16 hex digits
// when its high half is zero.
func jaegerTraceID(id string) string {
	if strings.HasPrefix(id, "0000000000000000") {
		return id[16:]
	}
	return id
}
