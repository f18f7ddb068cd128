package serve

import (
	"fmt"

	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/shredduck/shredduck/transforms"
)

// partialSuccess encodes, in the request's encoding, the
// Export*ServiceResponse of a request whose other records were stored:
// partial_success with the count of rejected records and why (OTLP: the
// client must not retry them).
func partialSuccess(sig *signal, f format, rej *transforms.RejectedError) ([]byte, error) {
	type response interface {
		MarshalProto() ([]byte, error)
		MarshalJSON() ([]byte, error)
	}
	var r response
	switch sig.tr.Name() {
	case transforms.OTLPTraces:
		tr := ptraceotlp.NewExportResponse()
		tr.PartialSuccess().SetRejectedSpans(int64(rej.Records))
		tr.PartialSuccess().SetErrorMessage(rej.Error())
		r = tr
	case transforms.OTLPLogs:
		lr := plogotlp.NewExportResponse()
		lr.PartialSuccess().SetRejectedLogRecords(int64(rej.Records))
		lr.PartialSuccess().SetErrorMessage(rej.Error())
		r = lr
	case transforms.OTLPMetrics:
		mr := pmetricotlp.NewExportResponse()
		mr.PartialSuccess().SetRejectedDataPoints(int64(rej.Records))
		mr.PartialSuccess().SetErrorMessage(rej.Error())
		r = mr
	default:
		return nil, fmt.Errorf("no OTLP response for transform %s", sig.tr.Name())
	}
	if f == formatJSON {
		return r.MarshalJSON()
	}
	return r.MarshalProto()
}
