package serve

import (
	"net/http"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// A record with a time TIMESTAMP_NS cannot hold (docs/SCHEMA.md,
// Timestamps) is answered with partial success naming the field; the
// request's other records are committed.
func TestOTLPHTTPTimePastTimestampNS(t *testing.T) {
	ts := startServer(t, Config{})
	req := tracesRequest("kept", "late")
	req.Traces().ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(1).SetStartTimestamp(pcommon.Timestamp(1 << 63))
	for _, ctype := range []string{"application/json", "application/x-protobuf"} {
		body, err := req.MarshalJSON()
		if ctype != "application/json" {
			body, err = req.MarshalProto()
		}
		if err != nil {
			t.Fatal(err)
		}
		before := ts.count("otel_traces")
		r := ts.post("/v1/traces", ctype, "", body)
		resp := ptraceotlp.NewExportResponse()
		if ctype == "application/json" {
			err = resp.UnmarshalJSON(r.body)
		} else {
			err = resp.UnmarshalProto(r.body)
		}
		if r.status != http.StatusOK || err != nil {
			t.Fatalf("%s: status %d, %q, %v", ctype, r.status, r.body, err)
		}
		if ps := resp.PartialSuccess(); ps.RejectedSpans() != 1 || !contains(ps.ErrorMessage(), "span 2 of the request: field startTimeUnixNano: 9223372036854775808 ns") {
			t.Errorf("%s: partial_success %d, %q", ctype, ps.RejectedSpans(), ps.ErrorMessage())
		}
		if got := ts.count("otel_traces") - before; got != 1 {
			t.Errorf("%s: %d spans committed, want 1", ctype, got)
		}
	}

	md := pmetric.NewMetrics()
	pts := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty().SetEmptyGauge().DataPoints()
	pts.AppendEmpty().SetIntValue(1)
	late := pts.AppendEmpty()
	late.SetIntValue(2)
	late.Exemplars().AppendEmpty().SetTimestamp(pcommon.Timestamp(1<<64 - 1))
	pts.AppendEmpty().SetIntValue(3)
	body, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	r := ts.post("/v1/metrics", "application/json", "", body)
	mresp := pmetricotlp.NewExportResponse()
	if r.status != http.StatusOK || mresp.UnmarshalJSON(r.body) != nil {
		t.Fatalf("metrics: status %d, body %q", r.status, r.body)
	}
	if ps := mresp.PartialSuccess(); ps.RejectedDataPoints() != 1 || !contains(ps.ErrorMessage(), "data point 2 of the request: field exemplars.timeUnixNano") {
		t.Errorf("metrics partial_success: %d, %q", ps.RejectedDataPoints(), ps.ErrorMessage())
	}
	if got := ts.count("otel_metrics"); got != 2 {
		t.Errorf("%d data points committed, want 2", got)
	}
	ts.good()
}
