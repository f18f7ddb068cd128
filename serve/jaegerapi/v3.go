package jaegerapi

import (
	"encoding/json"
	"net/http"
	"strings"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// The /api/v3 endpoints answer as Jaeger's HTTP gateway does: the
// messages of its api_v3 protos as JSON, traces as OTLP JSON inside
// {"result": ...}, errors as {"error": {"httpCode": ..., "message": ...}}.

func writeV3Error(w http.ResponseWriter, status int, msg string) {
	body, _ := json.Marshal(map[string]any{"error": map[string]any{"httpCode": status, "message": msg}})
	http.Error(w, string(body), status)
}

func (h *Handler) v3Services(w http.ResponseWriter, r *http.Request) {
	svcs, err := h.serviceNames(r.Context())
	if err != nil {
		failed(w, err, writeV3Error)
		return
	}
	out := map[string]any{}
	if len(svcs) > 0 {
		out["services"] = svcs // protobuf's JSON leaves an empty list out
	}
	writeJSON(w, r, out)
}

func (h *Handler) v3Operations(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	ops, err := h.operationList(r.Context(), q.Get("service"), q.Get("span_kind"))
	if err != nil {
		failed(w, err, writeV3Error)
		return
	}
	type v3op struct {
		Name     string `json:"name,omitempty"`
		SpanKind string `json:"spanKind,omitempty"`
	}
	out := map[string]any{}
	if len(ops) > 0 {
		l := make([]v3op, len(ops))
		for i, o := range ops {
			l[i] = v3op(o)
		}
		out["operations"] = l
	}
	writeJSON(w, r, out)
}

func (h *Handler) v3Trace(w http.ResponseWriter, r *http.Request) {
	id, err := parseTraceID(r.PathValue("traceID"))
	if err != nil {
		writeV3Error(w, http.StatusBadRequest, "malformed parameter trace_id: "+err.Error())
		return
	}
	raw := false
	if s := r.URL.Query().Get("raw_traces"); s != "" {
		raw = s == "true" || s == "1" || strings.EqualFold(s, "t")
	}
	traces, err := h.tracesByID(r.Context(), []string{id})
	if err != nil {
		failed(w, err, writeV3Error)
		return
	}
	writeV3Traces(w, traces, raw)
}

func (h *Handler) v3Search(w http.ResponseWriter, r *http.Request) {
	q, err := parseV3Search(r)
	if err != nil {
		writeV3Error(w, http.StatusBadRequest, err.Error())
		return
	}
	traces, err := h.findTraces(r.Context(), q)
	if err != nil {
		failed(w, err, writeV3Error)
		return
	}
	writeV3Traces(w, traces, q.raw)
}

// writeV3Traces answers the traces as one OTLP TracesData (pdata's JSON),
// each adjusted as Jaeger's v2 query service adjusts them unless raw, or
// 404 when there are none.
func writeV3Traces(w http.ResponseWriter, traces []trace, raw bool) {
	if len(traces) == 0 {
		writeV3Error(w, http.StatusNotFound, "No traces found")
		return
	}
	all := ptrace.NewTraces()
	for _, t := range traces {
		if !raw {
			adjustOTLP(t.traces)
		}
		if t.cut && t.traces.SpanCount() > 0 {
			addWarning(t.traces.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0), cutWarning)
		}
		t.traces.ResourceSpans().MoveAndAppendTo(all.ResourceSpans())
	}
	body, err := (&ptrace.JSONMarshaler{}).MarshalTraces(all)
	if err != nil {
		writeV3Error(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte(`{"result":`))
	w.Write(body)
	w.Write([]byte("}"))
}
