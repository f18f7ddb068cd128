//go:build duckdb_arrow

package serve

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/types/known/durationpb"
)

// OTLP/gRPC receiver: https://opentelemetry.io/docs/specs/otlp/#otlpgrpc
//
// The three Export methods are served by connect-go handlers, which speak
// gRPC (over h2c), gRPC-Web and Connect from a plain net/http handler.
// There is no generated code: a codec named "proto" hands the raw request
// bytes to the transform, which decodes them itself, and writes an empty
// Export*ServiceResponse. A codec named "json" does the same for OTLP/JSON
// payloads (application/grpc+json, Connect with application/json).

// rawMessage is an undecoded request or an empty response.
type rawMessage struct {
	data []byte
	json bool
}

// rawCodec keeps message bytes as they are.
type rawCodec struct{ json bool }

func (c rawCodec) Name() string {
	if c.json {
		return "json"
	}
	return "proto"
}

// Marshal writes a response message: its bytes when it has them (a
// partial success), otherwise an empty one: zero bytes in protobuf, {} in
// JSON.
func (c rawCodec) Marshal(v any) ([]byte, error) {
	if m, ok := v.(*rawMessage); ok && m.data != nil {
		return m.data, nil
	}
	if c.json {
		return []byte("{}"), nil
	}
	return nil, nil
}

// Unmarshal copies data: connect reuses its buffer after Unmarshal.
func (c rawCodec) Unmarshal(data []byte, v any) error {
	m, ok := v.(*rawMessage)
	if !ok {
		return fmt.Errorf("raw codec cannot unmarshal into %T", v)
	}
	m.data = append(m.data[:0], data...)
	m.json = c.json
	return nil
}

// grpcHandlers returns the connect handlers of the three Export methods,
// by path.
func (s *Server) grpcHandlers() map[string]http.Handler {
	out := make(map[string]http.Handler, len(s.signals))
	for _, sig := range s.signals {
		out[sig.procedure] = connect.NewUnaryHandler(sig.procedure,
			func(ctx context.Context, req *connect.Request[rawMessage]) (*connect.Response[rawMessage], error) {
				return s.export(ctx, sig, req)
			},
			connect.WithCodec(rawCodec{}),
			connect.WithCodec(rawCodec{json: true}),
			connect.WithReadMaxBytes(int(min(s.cfg.MaxBody, math.MaxInt))),
		)
	}
	return out
}

func (s *Server) export(ctx context.Context, sig *signal, req *connect.Request[rawMessage]) (*connect.Response[rawMessage], error) {
	f := formatProto
	if req.Msg.json {
		f = formatJSON
	}
	if aerr := s.overloaded(); aerr != nil {
		s.reject(sig.procedure, aerr, req.Peer().Addr, nil)
		return nil, s.grpcError(aerr)
	}
	_, rej, aerr := s.receive(ctx, sig, f, req.Msg.data)
	if aerr != nil {
		s.reject(sig.procedure, aerr, req.Peer().Addr, req.Msg.data)
		return nil, s.grpcError(aerr)
	}
	resp := &rawMessage{json: req.Msg.json}
	if rej != nil {
		var err error
		if resp.data, err = s.partial(sig.procedure, sig, f, rej, req.Peer().Addr, len(req.Msg.data)); err != nil {
			return nil, connect.NewError(connect.CodeInternal, err)
		}
	}
	return connect.NewResponse(resp), nil
}

// grpcError maps a refusal to a gRPC status: INVALID_ARGUMENT for bad
// data, UNAVAILABLE with a RetryInfo detail for overload, shutdown and
// commit failures (retryable per the OTLP spec).
func (s *Server) grpcError(e *apiError) error {
	err := connect.NewError(connect.Code(e.code), errors.New(e.msg))
	if e.retryAfter > 0 {
		if d, derr := connect.NewErrorDetail(&errdetails.RetryInfo{RetryDelay: durationpb.New(e.retryAfter)}); derr == nil {
			err.AddDetail(d)
		}
	}
	return err
}

// grpcStatus returns the code name of a gRPC response's grpc-status
// (a trailer, or a header in a trailers-only response), or "".
func grpcStatus(h http.Header) string {
	v := h.Get("Grpc-Status")
	if v == "" {
		v = h.Get(http.TrailerPrefix + "Grpc-Status")
	}
	if v == "" {
		return ""
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return ""
	}
	if n == 0 {
		return "ok"
	}
	return connect.Code(n).String()
}
