package jaegerapi

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestParseTraceID(t *testing.T) {
	f := func(in, want, wantErr string) {
		t.Helper()
		got, err := parseTraceID(in)
		if wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), wantErr) {
				t.Errorf("parseTraceID(%q) = %q, %v; want an error with %q", in, got, err, wantErr)
			}
			return
		}
		if err != nil || got != want {
			t.Errorf("parseTraceID(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	f("5b8efff798038103d269b633813fc60c", "5b8efff798038103d269b633813fc60c", "")
	f("5B8EFFF798038103D269B633813FC60C", "5b8efff798038103d269b633813fc60c", "")
	f("abc", "00000000000000000000000000000abc", "") // the low end, as Jaeger reads it
	f("1234567890abcdef1", "0000000000000001234567890abcdef1", "")
	f(strings.Repeat("a", 33), "", "cannot be longer than 32 hex characters")
	f("xyz", "", "invalid syntax")
	f("", "", "invalid syntax")
}

func TestParseSearch(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	f := func(query string, check func(q *searchQuery) bool, wantErr string) {
		t.Helper()
		r := httptest.NewRequest("GET", "/api/traces?"+query, nil)
		q, err := parseSearch(r, now)
		if wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), wantErr) {
				t.Errorf("%s: %v; want an error with %q", query, err, wantErr)
			}
			return
		}
		if err != nil || !check(q) {
			t.Errorf("%s: %+v, %v", query, q, err)
		}
	}
	f("service=a", func(q *searchQuery) bool {
		return q.limit == 100 && q.startMin.Equal(now.Add(-48*time.Hour)) && q.startMax.Equal(now)
	}, "")
	f("service=a&start=1000000&end=2000000&limit=5&minDuration=1ms&maxDuration=1s", func(q *searchQuery) bool {
		return q.startMin.Equal(time.Unix(1, 0)) && q.startMax.Equal(time.Unix(2, 0)) && q.limit == 5 && q.durMin == time.Millisecond && q.durMax == time.Second
	}, "")
	f(`service=a&tag=k:v:w&tags={"x":"1"}`, func(q *searchQuery) bool { return q.tags["k"] == "v:w" && q.tags["x"] == "1" }, "")
	f("traceID=abc", func(q *searchQuery) bool { return len(q.traceIDs) == 1 }, "")
	f("", nil, "parameter 'service' is required")
	f("service=a&minDuration=2s&maxDuration=1s", nil, "'maxDuration' should be greater than 'minDuration'")
	f("service=a&limit=x", nil, `parsing "x": invalid syntax`)
	f("service=a&limit=0", nil, "1 or more")
	f("service=a&start=x", nil, "unable to parse param 'start'")
	f("service=a&tag=k", nil, "malformed 'tag' parameter")
	f("service=a&tags=[", nil, "malformed 'tags' parameter")
	f("service=a&raw=maybe", nil, "unable to parse param 'raw'")
}
