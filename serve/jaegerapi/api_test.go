package jaegerapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/shredduck/shredduck/serve"
)

// TestSmoke: the official OTLP example, looked up by id and by service,
// behind the token.
func TestSmoke(t *testing.T) {
	s := startServer(t, serve.AckLog, "secret")
	postTraces(t, s.url, s.token, readOTLP(t, "otel-proto-examples-trace.json"))
	waitFor(t, "the example span", func() bool {
		return spanCount(t, s.url, s.token, "service=my.service&start=0") == 1
	})
	for _, p := range []string{"/api/services", "/api/services/my.service/operations", "/api/operations?service=my.service",
		"/api/traces/5b8efff798038103d269b633813fc60c", "/api/dependencies?endTs=1700000000000&lookback=100000000000",
		"/api/v3/services", "/api/v3/operations?service=my.service", "/api/v3/traces/5b8efff798038103d269b633813fc60c",
		"/api/v3/traces?query.start_time_min=2000-01-01T00:00:00Z&query.start_time_max=2100-01-01T00:00:00Z"} {
		code, body := get(t, s.url, s.token, p)
		t.Logf("%s: %d %s", p, code, body)
		if code != http.StatusOK {
			t.Errorf("%s: %d %s", p, code, body)
		}
	}
	if code, body := get(t, s.url, "", "/api/services"); code != http.StatusUnauthorized {
		t.Errorf("without the token: %d %s", code, body)
	}
	if code, body := get(t, s.url, s.token, "/api/traces/xyz"); code != http.StatusBadRequest || !strings.Contains(string(body), "invalid syntax") {
		t.Errorf("bad id: %d %s", code, body)
	}
}
