package serve

import (
	"log/slog"
	"net/http"
)

// mustAnswer wraps an ingest handler so that it never acknowledges by
// omission: net/http answers 200 for a handler that returns without
// writing, which to an OTLP client means its data is stored. Such a
// return is a bug; the connection (or HTTP/2 stream) is aborted instead,
// and the client, seeing no answer, sends again.
func (s *Server) mustAnswer(endpoint string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		// A gRPC error may be trailers-only: headers that net/http
		// sends after the handler, grpc-status among them.
		if rec.status != 0 || grpcStatus(w.Header()) != "" {
			return
		}
		s.metrics.rejectedRequests.WithLabelValues(endpoint, reasonNoAnswer).Inc()
		s.limited.Log(slog.LevelError, endpoint+" "+reasonNoAnswer, "handler wrote no answer; connection aborted",
			slog.String("endpoint", endpoint), slog.String("remote", r.RemoteAddr))
		panic(http.ErrAbortHandler)
	})
}
