package serve

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/shredduck/shredduck/serve/internal/httpbody"
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
// JSON. connect also marshals an error's google.rpc.Status with the
// "proto" codec, for the grpc-status-details-bin trailer: without it the
// RetryInfo of a refusal never reached the client.
func (c rawCodec) Marshal(v any) ([]byte, error) {
	if m, ok := v.(*rawMessage); ok && m.data != nil {
		return m.data, nil
	}
	if m, ok := v.(proto.Message); ok {
		if c.json {
			return protojson.Marshal(m)
		}
		return proto.Marshal(m)
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
			connect.WithCompression("gzip", func() connect.Decompressor { return new(gzipPassthrough) },
				func() connect.Compressor { return gzip.NewWriter(nil) }),
			// Compressed messages reach export compressed: the wire limit
			// is readBody's for compressed bodies, and export checks the
			// limit on the decoded size.
			connect.WithReadMaxBytes(int(min(httpbody.RawLimit(s.cfg.MaxBody), math.MaxInt))),
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
	data, done, aerr := s.grpcMessage(ctx, req.Msg)
	if aerr != nil {
		s.reject(sig.procedure, aerr, req.Peer().Addr, nil)
		return nil, s.grpcError(aerr)
	}
	defer done()
	_, rej, aerr := s.receive(ctx, sig, f, data)
	if aerr != nil {
		s.reject(sig.procedure, aerr, req.Peer().Addr, data)
		return nil, s.grpcError(aerr)
	}
	resp := &rawMessage{json: req.Msg.json}
	if rej != nil {
		var err error
		if resp.data, err = s.partial(sig.procedure, sig, f, rej, req.Peer().Addr, len(data)); err != nil {
			return nil, connect.NewError(connect.CodeInternal, err)
		}
	}
	return connect.NewResponse(resp), nil
}

// gzipPassthrough is the "gzip" Decompressor given to connect. It checks
// the gzip header and hands the compressed message through as it is:
// connect would inflate a message into a buffer of its own, up to the
// size limit, before any check of ours, and a Decompressor cannot reach
// the request (its budget account). grpcMessage inflates it instead, as
// readBody does a body. An uncompressed message cannot start with gzip's
// magic bytes (no protobuf field has wire type 7; no JSON value starts
// with 0x1f), so grpcMessage tells the two apart by them.
type gzipPassthrough struct {
	r    io.Reader
	head []byte // the magic bytes, read by Reset, not yet read from Read
}

var gzipMagic = []byte{0x1f, 0x8b}

func (g *gzipPassthrough) Reset(r io.Reader) error {
	var head [2]byte
	g.r, g.head = r, nil
	if _, err := io.ReadFull(r, head[:]); err != nil || !bytes.Equal(head[:], gzipMagic) {
		return errors.New("gzip: invalid header")
	}
	g.head = gzipMagic
	return nil
}

func (g *gzipPassthrough) Read(p []byte) (int, error) {
	if len(g.head) > 0 {
		n := copy(p, g.head)
		g.head = g.head[n:]
		return n, nil
	}
	if g.r == nil {
		return 0, io.EOF
	}
	return g.r.Read(p)
}

func (g *gzipPassthrough) Close() error { return nil }

// grpcMessage returns the decoded bytes of an Export message, inflating a
// compressed one into a buffer charged to the request's account; done
// gives the buffer back.
func (s *Server) grpcMessage(ctx context.Context, m *rawMessage) (data []byte, done func(), aerr *apiError) {
	if !bytes.HasPrefix(m.data, gzipMagic) {
		if int64(len(m.data)) > s.cfg.MaxBody {
			return nil, nil, tooLargeError(s.cfg.MaxBody)
		}
		return m.data, func() {}, nil
	}
	buf, aerr := inflate(accountOf(ctx), "gzip", m.data, s.cfg.MaxBody)
	if aerr != nil {
		return nil, nil, aerr
	}
	m.data = nil // the compressed copy is not needed any more
	return buf.Bytes(), func() { httpbody.Put(buf) }, nil
}

// grpcError maps a refusal to a gRPC status: INVALID_ARGUMENT for bad
// data, UNAVAILABLE with a RetryInfo detail for overload, shutdown and
// commit failures (retryable per the OTLP spec).
func (s *Server) grpcError(e *apiError) error { return grpcErrorOf(e) }

// grpcErrorOf is a refusal as a gRPC error, with RetryInfo when it says
// when to retry.
func grpcErrorOf(e *apiError) error {
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
