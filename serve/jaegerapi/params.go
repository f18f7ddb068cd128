package jaegerapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Jaeger's defaults (cmd/query/app/default_params.go).
const (
	defaultLimit         = 100
	defaultSearchWindow  = 48 * time.Hour // start when a search gives none
	defaultDepsLookback  = 24 * time.Hour
	maxTraceIDHexDigits  = 32
	spanIDHexDigits      = 16
	traceIDHalfHexDigits = 16
)

// searchQuery is a trace search: every condition holds for one span of
// each trace found (as Jaeger's memory store matches).
type searchQuery struct {
	service, operation string
	tags               map[string]string
	startMin, startMax time.Time
	durMin, durMax     time.Duration
	limit              int
	traceIDs           []string // given: these traces, no search
	raw                bool
}

// parseTraceID reads a trace id as Jaeger does (model.TraceIDFromString:
// up to 32 hex digits, shorter ones the low end) and returns it as stored,
// 32 lower-case hex digits.
func parseTraceID(s string) (string, error) {
	var hi, lo uint64
	var err error
	switch {
	case len(s) > maxTraceIDHexDigits:
		return "", fmt.Errorf("TraceID cannot be longer than 32 hex characters: %s", s)
	case len(s) > traceIDHalfHexDigits:
		n := len(s) - traceIDHalfHexDigits
		if hi, err = strconv.ParseUint(s[:n], 16, 64); err != nil {
			return "", err
		}
		if lo, err = strconv.ParseUint(s[n:], 16, 64); err != nil {
			return "", err
		}
	default:
		if lo, err = strconv.ParseUint(s, 16, 64); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("%016x%016x", hi, lo), nil
}

func parseError(name string, err error) error {
	return fmt.Errorf("unable to parse param '%s': %w", name, err)
}

// parseTime reads a time given in units since the epoch; empty is def.
func parseTime(r *http.Request, name string, units time.Duration, def time.Time) (time.Time, error) {
	v := r.FormValue(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, parseError(name, err)
	}
	return time.Unix(0, 0).Add(time.Duration(n) * units), nil
}

func parseDuration(r *http.Request, name string, parse func(string) (time.Duration, error), def time.Duration) (time.Duration, error) {
	v := r.FormValue(name)
	if v == "" {
		return def, nil
	}
	d, err := parse(v)
	if err != nil {
		return 0, parseError(name, err)
	}
	return d, nil
}

func parseBool(r *http.Request, name string) (bool, error) {
	v := r.FormValue(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, parseError(name, err)
	}
	return b, nil
}

func millis(s string) (time.Duration, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	return time.Duration(n) * time.Millisecond, err
}

// checkTraceParams checks the optional parameters of /api/traces/{id}
// (start, end, raw); the trace is found by its id alone, as Jaeger's
// memory store finds it.
func checkTraceParams(r *http.Request) error {
	for _, name := range []string{"start", "end"} {
		if _, err := parseTime(r, name, time.Microsecond, time.Time{}); err != nil {
			return err
		}
	}
	_, err := parseBool(r, "raw")
	return err
}

// parseSearch reads /api/traces' parameters as Jaeger's queryParser does,
// with its messages. lookback is the UI's: the UI turns it into start.
func parseSearch(r *http.Request, now time.Time) (*searchQuery, error) {
	q := &searchQuery{service: r.FormValue("service"), operation: r.FormValue("operation"), limit: defaultLimit}
	var err error
	if q.startMin, err = parseTime(r, "start", time.Microsecond, now.Add(-defaultSearchWindow)); err != nil {
		return nil, err
	}
	if q.startMax, err = parseTime(r, "end", time.Microsecond, now); err != nil {
		return nil, err
	}
	if q.tags, err = parseTags(r.Form["tag"], r.Form["tags"]); err != nil {
		return nil, err
	}
	if v := r.FormValue("limit"); v != "" {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return nil, fmt.Errorf("unable to parse param 'limit': %d is not a number of traces (1 or more)", n)
		}
		q.limit = int(n)
	}
	if q.durMin, err = parseDuration(r, "minDuration", time.ParseDuration, 0); err != nil {
		return nil, err
	}
	if q.durMax, err = parseDuration(r, "maxDuration", time.ParseDuration, 0); err != nil {
		return nil, err
	}
	for _, s := range r.Form["traceID"] {
		id, err := parseTraceID(s)
		if err != nil {
			return nil, fmt.Errorf("cannot parse traceID param: %w", err)
		}
		q.traceIDs = append(q.traceIDs, id)
	}
	if q.raw, err = parseBool(r, "raw"); err != nil {
		return nil, err
	}
	if len(q.traceIDs) == 0 && q.service == "" {
		return nil, errors.New("parameter 'service' is required")
	}
	if q.durMin != 0 && q.durMax != 0 && q.durMax < q.durMin {
		return nil, errors.New("'maxDuration' should be greater than 'minDuration'")
	}
	return q, nil
}

// parseTags reads tag=key:value and tags={"key":"value"} parameters.
func parseTags(simple, jsonTags []string) (map[string]string, error) {
	out := map[string]string{}
	for _, t := range simple {
		k, v, ok := strings.Cut(t, ":")
		if !ok {
			return nil, fmt.Errorf("malformed 'tag' parameter, expecting key:value, received: %s", t)
		}
		out[k] = v
	}
	for _, t := range jsonTags {
		var m map[string]string
		if err := json.Unmarshal([]byte(t), &m); err != nil {
			return nil, fmt.Errorf("malformed 'tags' parameter, cannot unmarshal JSON: %w", err)
		}
		maps.Copy(out, m)
	}
	return out, nil
}

// dependencyParams reads /api/dependencies' endTs (ms since the epoch,
// default now) and lookback (ms, default a day).
func dependencyParams(r *http.Request, now time.Time) (end time.Time, lookback time.Duration, err error) {
	if end, err = parseTime(r, "endTs", time.Millisecond, now); err != nil {
		return end, 0, err
	}
	lookback, err = parseDuration(r, "lookback", millis, defaultDepsLookback)
	return end, lookback, err
}

// parseV3Search reads /api/v3/traces' query.* parameters as Jaeger's HTTP
// gateway does: RFC 3339 times (both required), Go durations.
func parseV3Search(r *http.Request) (*searchQuery, error) {
	v := r.URL.Query()
	q := &searchQuery{service: v.Get("query.service_name"), operation: v.Get("query.operation_name"), limit: defaultLimit}
	tmin, tmax := v.Get("query.start_time_min"), v.Get("query.start_time_max")
	if tmin == "" || tmax == "" {
		return nil, errors.New("query.start_time_min and query.start_time_max are required")
	}
	var err error
	if q.startMin, err = time.Parse(time.RFC3339Nano, tmin); err != nil {
		return nil, fmt.Errorf("malformed parameter query.start_time_min: %w", err)
	}
	if q.startMax, err = time.Parse(time.RFC3339Nano, tmax); err != nil {
		return nil, fmt.Errorf("malformed parameter query.start_time_max: %w", err)
	}
	if n := v.Get("query.num_traces"); n != "" {
		if q.limit, err = strconv.Atoi(n); err != nil {
			return nil, fmt.Errorf("malformed parameter query.num_traces: %w", err)
		}
		if q.limit <= 0 {
			return nil, fmt.Errorf("malformed parameter query.num_traces: %d is not a number of traces (1 or more)", q.limit)
		}
	}
	for name, d := range map[string]*time.Duration{"query.duration_min": &q.durMin, "query.duration_max": &q.durMax} {
		if s := v.Get(name); s != "" {
			if *d, err = time.ParseDuration(s); err != nil {
				return nil, fmt.Errorf("malformed parameter %s: %w", name, err)
			}
		}
	}
	if s := v.Get("query.raw_traces"); s != "" {
		if q.raw, err = strconv.ParseBool(s); err != nil {
			return nil, fmt.Errorf("malformed parameter query.raw_traces: %w", err)
		}
	}
	return q, nil
}
