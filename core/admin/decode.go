package admin

import (
	"context"
	"errors"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	gproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"

	"berth.dev/sandbox/errdefs"
)

// errMalformed answers a request body that is not a well-formed message of
// the method's request type (truncated wire data, invalid UTF-8 in a
// string, nesting past MaxMessageDepth). Its field is the whole request.
var errMalformed = errdefs.Invalid("request", "not a well-formed protobuf message of the method's request type")

// decoder is the admin server's wire codec (grpc.ForceServerCodecV2). It
// marshals as grpc-go's proto codec does and unmarshals with a recursion
// limit of MaxMessageDepth; it exists so that a malformed body is refused
// with the admin API's status (INVALID_ARGUMENT, reason invalid, field
// "request") instead of grpc-go's INTERNAL and parser text.
//
// grpc-go turns a codec's Unmarshal error into INTERNAL with the error's
// text, and for a unary method it does so before any interceptor runs. So
// Unmarshal never fails: it resets the message, records it as malformed
// and returns nil; the decoder's interceptors, first in both chains, find
// the record by the message's pointer (a unary request, or a stream's
// RecvMsg argument) and refuse the call before any handler sees it. Each
// record is removed by the check that reads it, and every decoded message
// passes that check, so the set holds only calls being decoded right now.
type decoder struct {
	marshal  encoding.CodecV2
	rejected sync.Map // proto.Message -> struct{}
}

func newDecoder() *decoder { return &decoder{marshal: encoding.GetCodecV2(gproto.Name)} }

// Name is grpc-go's proto codec name, so the content type is unchanged.
func (d *decoder) Name() string { return gproto.Name }

// Marshal encodes a reply as grpc-go's proto codec does.
func (d *decoder) Marshal(v any) (mem.BufferSlice, error) { return d.marshal.Marshal(v) }

// Unmarshal decodes a request into v; a body that does not decode leaves
// v empty and recorded as malformed (see decoder).
func (d *decoder) Unmarshal(data mem.BufferSlice, v any) error {
	var m proto.Message
	switch v := v.(type) {
	case proto.Message:
		m = v
	case protoadapt.MessageV1:
		m = protoadapt.MessageV2Of(v)
	}
	if m == nil {
		// Every method's request is a protobuf message: a bug, not input.
		return errors.New("admin: request is not a protobuf message")
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	if err := (proto.UnmarshalOptions{RecursionLimit: MaxMessageDepth}).Unmarshal(buf.ReadOnlyData(), m); err != nil {
		proto.Reset(m)
		d.rejected.Store(v, struct{}{})
	}
	return nil
}

// malformed reports whether v was recorded as malformed, and forgets it.
func (d *decoder) malformed(v any) bool {
	_, bad := d.rejected.LoadAndDelete(v)
	return bad
}

// unary refuses a call whose request did not decode.
func (d *decoder) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if d.malformed(req) {
		return nil, ToStatus(errMalformed)
	}
	return handler(ctx, req)
}

// stream checks every message a stream's handler receives.
func (d *decoder) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, checkedStream{ServerStream: ss, d: d})
}

// checkedStream is a server stream whose RecvMsg refuses a message that
// did not decode.
type checkedStream struct {
	grpc.ServerStream
	d *decoder
}

func (s checkedStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if s.d.malformed(m) && err == nil {
		return ToStatus(errMalformed)
	}
	return err
}
