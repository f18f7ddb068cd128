package jaegerapi

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Jaeger's remote storage API (jaeger-idl proto/storage/v2: the services
// TraceReader and DependencyReader), which a Jaeger v2 query service with
// a grpc storage backend reads from. It is served by connect handlers
// without generated code: the few messages are read and written with
// protowire below, the traces as OTLP TracesData by pdata.
const (
	procGetTraces       = "/jaeger.storage.v2.TraceReader/GetTraces"
	procGetServices     = "/jaeger.storage.v2.TraceReader/GetServices"
	procGetOperations   = "/jaeger.storage.v2.TraceReader/GetOperations"
	procFindTraces      = "/jaeger.storage.v2.TraceReader/FindTraces"
	procFindTraceIDs    = "/jaeger.storage.v2.TraceReader/FindTraceIDs"
	procGetDependencies = "/jaeger.storage.v2.DependencyReader/GetDependencies"
)

var storageProcedures = []string{procGetTraces, procGetServices, procGetOperations, procFindTraces, procFindTraceIDs, procGetDependencies}

// wireMessage is a message's protobuf bytes, read or to be written.
type wireMessage struct{ data []byte }

// wireCodec hands message bytes over as they are. connect also marshals
// an error's google.rpc.Status with it.
type wireCodec struct{}

func (wireCodec) Name() string { return "proto" }

func (wireCodec) Marshal(v any) ([]byte, error) {
	switch m := v.(type) {
	case *wireMessage:
		return m.data, nil
	case proto.Message:
		return proto.Marshal(m)
	}
	return nil, fmt.Errorf("cannot marshal %T", v)
}

// Unmarshal copies data: connect reuses its buffer.
func (wireCodec) Unmarshal(data []byte, v any) error {
	m, ok := v.(*wireMessage)
	if !ok {
		return fmt.Errorf("cannot unmarshal into %T", v)
	}
	m.data = append(m.data[:0], data...)
	return nil
}

// GRPC returns the handlers of the remote storage API's procedures, by
// path, for serve's gRPC routes (both ports, behind the token).
func (h *Handler) GRPC() map[string]http.Handler {
	opts := []connect.HandlerOption{connect.WithCodec(wireCodec{}), connect.WithReadMaxBytes(1 << 20)}
	unary := func(proc string, f func(ctx context.Context, req []byte) ([]byte, error)) http.Handler {
		return connect.NewUnaryHandler(proc, func(ctx context.Context, req *connect.Request[wireMessage]) (*connect.Response[wireMessage], error) {
			out, err := f(ctx, req.Msg.data)
			if err != nil {
				return nil, grpcError(err)
			}
			return connect.NewResponse(&wireMessage{data: out}), nil
		}, opts...)
	}
	stream := func(proc string, f func(ctx context.Context, req []byte) ([]trace, error)) http.Handler {
		return connect.NewServerStreamHandler(proc, func(ctx context.Context, req *connect.Request[wireMessage], s *connect.ServerStream[wireMessage]) error {
			traces, err := f(ctx, req.Msg.data)
			if err != nil {
				return grpcError(err)
			}
			for _, t := range traces {
				b, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(t.traces)
				if err != nil {
					return grpcError(err)
				}
				if err := s.Send(&wireMessage{data: b}); err != nil {
					return err
				}
			}
			return nil
		}, opts...)
	}
	return map[string]http.Handler{
		procGetTraces:       stream(procGetTraces, h.grpcGetTraces),
		procFindTraces:      stream(procFindTraces, h.grpcFindTraces),
		procGetServices:     unary(procGetServices, h.grpcGetServices),
		procGetOperations:   unary(procGetOperations, h.grpcGetOperations),
		procFindTraceIDs:    unary(procFindTraceIDs, h.grpcFindTraceIDs),
		procGetDependencies: unary(procGetDependencies, h.grpcGetDependencies),
	}
}

// GRPCOff returns handlers of the same procedures that refuse every call
// with reason (PermissionDenied), for a server whose queries are off.
func GRPCOff(reason string) map[string]http.Handler {
	out := map[string]http.Handler{}
	for _, p := range storageProcedures {
		out[p] = connect.NewUnaryHandler(p, func(context.Context, *connect.Request[wireMessage]) (*connect.Response[wireMessage], error) {
			return nil, connect.NewError(connect.CodePermissionDenied, errors.New(reason))
		}, connect.WithCodec(wireCodec{}))
	}
	return out
}

// errBadRequest marks a request the API cannot read.
var errBadRequest = errors.New("bad request")

func grpcError(err error) error {
	code := connect.CodeInternal
	switch {
	case errors.Is(err, errBadRequest):
		code = connect.CodeInvalidArgument
	case errors.Is(err, context.Canceled):
		code = connect.CodeCanceled
	case failureStatus(err) == http.StatusServiceUnavailable:
		code = connect.CodeUnavailable
	case failureStatus(err) == http.StatusGatewayTimeout:
		code = connect.CodeDeadlineExceeded
	}
	return connect.NewError(code, err)
}

// fields calls f for each field of a message; f reads the value with the
// consume functions of protowire from b, and returns how many bytes it
// read, or a negative number (protowire's error codes).
func fields(b []byte, f func(num protowire.Number, typ protowire.Type, b []byte) int) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %v", errBadRequest, protowire.ParseError(n))
		}
		b = b[n:]
		m := f(num, typ, b)
		if m == 0 {
			m = protowire.ConsumeFieldValue(num, typ, b)
		}
		if m < 0 {
			return fmt.Errorf("%w: %v", errBadRequest, protowire.ParseError(m))
		}
		b = b[m:]
	}
	return nil
}

// bytesField reads a length-delimited field into *dst.
func bytesField(typ protowire.Type, b []byte, dst *[]byte) int {
	if typ != protowire.BytesType {
		return 0
	}
	v, n := protowire.ConsumeBytes(b)
	if n >= 0 {
		*dst = v
	}
	return n
}

func varintField(typ protowire.Type, b []byte, dst *uint64) int {
	if typ != protowire.VarintType {
		return 0
	}
	v, n := protowire.ConsumeVarint(b)
	if n >= 0 {
		*dst = v
	}
	return n
}

// timestamp reads a google.protobuf.Timestamp (or, the same fields, a
// Duration as the time after the epoch).
func timestamp(b []byte) (time.Time, error) {
	var sec, nanos uint64
	err := fields(b, func(num protowire.Number, typ protowire.Type, b []byte) int {
		switch num {
		case 1:
			return varintField(typ, b, &sec)
		case 2:
			return varintField(typ, b, &nanos)
		}
		return 0
	})
	return time.Unix(int64(sec), int64(int32(nanos))), err
}

func (h *Handler) grpcGetTraces(ctx context.Context, req []byte) ([]trace, error) {
	var ids []string
	err := fields(req, func(num protowire.Number, typ protowire.Type, b []byte) int {
		var params []byte
		if num != 1 {
			return 0
		}
		n := bytesField(typ, b, &params)
		if n > 0 {
			if err := fields(params, func(num protowire.Number, typ protowire.Type, b []byte) int {
				var id []byte
				if num != 1 {
					return 0
				}
				m := bytesField(typ, b, &id)
				if m > 0 && len(id) == 16 {
					ids = append(ids, pcommon.TraceID(id).String())
				}
				return m
			}); err != nil {
				return -1
			}
		}
		return n
	})
	if err != nil {
		return nil, err
	}
	return h.tracesByID(ctx, ids)
}

func (h *Handler) grpcGetServices(ctx context.Context, _ []byte) ([]byte, error) {
	svcs, err := h.serviceNames(ctx)
	var out []byte
	for _, s := range svcs {
		out = protowire.AppendTag(out, 1, protowire.BytesType)
		out = protowire.AppendString(out, s)
	}
	return out, err
}

func (h *Handler) grpcGetOperations(ctx context.Context, req []byte) ([]byte, error) {
	var service, kind []byte
	err := fields(req, func(num protowire.Number, typ protowire.Type, b []byte) int {
		switch num {
		case 1:
			return bytesField(typ, b, &service)
		case 2:
			return bytesField(typ, b, &kind)
		}
		return 0
	})
	if err != nil {
		return nil, err
	}
	ops, err := h.operationList(ctx, string(service), string(kind))
	var out []byte
	for _, o := range ops {
		var m []byte
		m = protowire.AppendTag(m, 1, protowire.BytesType)
		m = protowire.AppendString(m, o.Name)
		if o.SpanKind != "" {
			m = protowire.AppendTag(m, 2, protowire.BytesType)
			m = protowire.AppendString(m, o.SpanKind)
		}
		out = protowire.AppendTag(out, 1, protowire.BytesType)
		out = protowire.AppendBytes(out, m)
	}
	return out, err
}

// traceQuery reads the TraceQueryParameters of a FindTracesRequest (or
// FindTraceIDsRequest, the same shape). A search depth of 0 (the v3
// gateway sends it when none is given) is Jaeger's default of 100.
func traceQuery(req []byte) (*searchQuery, error) {
	var params []byte
	err := fields(req, func(num protowire.Number, typ protowire.Type, b []byte) int {
		if num == 1 {
			return bytesField(typ, b, &params)
		}
		return 0
	})
	if err != nil {
		return nil, err
	}
	q := &searchQuery{tags: map[string]string{}, limit: defaultLimit}
	var perr error
	setTime := func(b []byte, dst *time.Time) {
		if t, err := timestamp(b); err != nil {
			perr = err
		} else if !t.Equal(time.Unix(0, 0)) {
			*dst = t
		}
	}
	setDuration := func(b []byte, dst *time.Duration) {
		if t, err := timestamp(b); err != nil {
			perr = err
		} else {
			*dst = t.Sub(time.Unix(0, 0))
		}
	}
	err = fields(params, func(num protowire.Number, typ protowire.Type, b []byte) int {
		var v []byte
		var u uint64
		switch num {
		case 1, 2, 3, 4, 5, 6, 7:
			n := bytesField(typ, b, &v)
			if n <= 0 {
				return n
			}
			switch num {
			case 1:
				q.service = string(v)
			case 2:
				q.operation = string(v)
			case 3:
				k, val, err := keyValue(v)
				if err != nil {
					perr = err
				}
				q.tags[k] = val
			case 4:
				setTime(v, &q.startMin)
			case 5:
				setTime(v, &q.startMax)
			case 6:
				setDuration(v, &q.durMin)
			case 7:
				setDuration(v, &q.durMax)
			}
			return n
		case 8:
			n := varintField(typ, b, &u)
			if d := int(int32(u)); n > 0 && d > 0 {
				q.limit = d
			}
			return n
		}
		return 0
	})
	if err == nil {
		err = perr
	}
	return q, err
}

// keyValue reads a KeyValue as the key and its value's text (pdata's
// AsString), as the v1 API's tags are compared.
func keyValue(b []byte) (string, string, error) {
	var key, val []byte
	if err := fields(b, func(num protowire.Number, typ protowire.Type, b []byte) int {
		switch num {
		case 1:
			return bytesField(typ, b, &key)
		case 2:
			return bytesField(typ, b, &val)
		}
		return 0
	}); err != nil {
		return "", "", err
	}
	v := pcommon.NewValueEmpty()
	err := fields(val, func(num protowire.Number, typ protowire.Type, b []byte) int {
		var s []byte
		var u uint64
		switch num {
		case 1, 7:
			n := bytesField(typ, b, &s)
			if num == 1 {
				v.SetStr(string(s))
			} else {
				v.SetEmptyBytes().FromRaw(s)
			}
			return n
		case 2, 3:
			n := varintField(typ, b, &u)
			if num == 2 {
				v.SetBool(u != 0)
			} else {
				v.SetInt(int64(u))
			}
			return n
		case 4:
			if typ != protowire.Fixed64Type {
				return 0
			}
			f, n := protowire.ConsumeFixed64(b)
			v.SetDouble(math.Float64frombits(f))
			return n
		}
		return 0
	})
	return string(key), v.AsString(), err
}

func (h *Handler) grpcFindTraces(ctx context.Context, req []byte) ([]trace, error) {
	q, err := traceQuery(req)
	if err != nil {
		return nil, err
	}
	return h.findTraces(ctx, q)
}

func (h *Handler) grpcFindTraceIDs(ctx context.Context, req []byte) ([]byte, error) {
	q, err := traceQuery(req)
	if err != nil {
		return nil, err
	}
	s, err := h.schema(ctx)
	if err != nil {
		return nil, err
	}
	ids, err := h.findTraceIDs(ctx, s, q)
	var out []byte
	for _, id := range ids {
		raw, derr := hex.DecodeString(id)
		if derr != nil || len(raw) != 16 {
			continue
		}
		var m []byte
		m = protowire.AppendTag(m, 1, protowire.BytesType)
		m = protowire.AppendBytes(m, raw)
		out = protowire.AppendTag(out, 1, protowire.BytesType)
		out = protowire.AppendBytes(out, m)
	}
	return out, err
}

func (h *Handler) grpcGetDependencies(ctx context.Context, req []byte) ([]byte, error) {
	var from, to time.Time
	var perr error
	err := fields(req, func(num protowire.Number, typ protowire.Type, b []byte) int {
		var v []byte
		if num != 1 && num != 2 {
			return 0
		}
		n := bytesField(typ, b, &v)
		if n > 0 {
			t, err := timestamp(v)
			if err != nil {
				perr = err
			}
			if num == 1 {
				from = t
			} else {
				to = t
			}
		}
		return n
	})
	if err == nil {
		err = perr
	}
	if err != nil {
		return nil, err
	}
	if to.IsZero() || to.Equal(time.Unix(0, 0)) {
		to = time.Unix(0, math.MaxInt64)
	}
	links, err := h.dependencyLinks(ctx, from, to)
	var out []byte
	for _, l := range links {
		var m []byte
		m = protowire.AppendTag(m, 1, protowire.BytesType)
		m = protowire.AppendString(m, l.Parent)
		m = protowire.AppendTag(m, 2, protowire.BytesType)
		m = protowire.AppendString(m, l.Child)
		m = protowire.AppendTag(m, 3, protowire.VarintType)
		m = protowire.AppendVarint(m, l.CallCount)
		out = protowire.AppendTag(out, 1, protowire.BytesType)
		out = protowire.AppendBytes(out, m)
	}
	return out, err
}
