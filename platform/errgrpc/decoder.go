package errgrpc

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
)

// Decoder is a server's wire codec (grpc.ForceServerCodecV2) with its two
// interceptors. It marshals as grpc-go's proto codec does and unmarshals
// with a recursion limit; it exists so that a body that does not decode
// (truncated wire data, invalid UTF-8 in a string, nesting past the limit)
// is refused with the boundary's own status instead of grpc-go's INTERNAL
// and the parser's text.
//
// grpc-go turns a codec's Unmarshal error into INTERNAL carrying the
// error's text, and for a unary method it does so before any interceptor
// runs. So Unmarshal never fails: it resets the message, records it as
// malformed and returns nil; the interceptors, which must come first in
// both chains, find the record by the message's pointer (a unary request,
// or a stream's RecvMsg argument) and answer the boundary's refusal before
// any handler sees the message. Each record is removed by the check that
// reads it, and every decoded message passes that check, so the set holds
// only messages being decoded right now.
type Decoder struct {
	marshal  encoding.CodecV2
	depth    int
	refuse   func() error
	rejected sync.Map // the malformed messages' pointers
}

// NewDecoder returns a Decoder that decodes at most maxDepth levels of
// message nesting (protobuf-go's default when 0) and answers a malformed
// body with refuse(), an error already in the boundary's status form.
func NewDecoder(maxDepth int, refuse func() error) *Decoder {
	return &Decoder{marshal: encoding.GetCodecV2(gproto.Name), depth: maxDepth, refuse: refuse}
}

// ServerOptions are the options that install d on a server: the codec and
// the two interceptors, which come first in their chains when these
// options come before any other interceptor option.
func (d *Decoder) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ForceServerCodecV2(d),
		grpc.ChainUnaryInterceptor(d.UnaryServerInterceptor),
		grpc.ChainStreamInterceptor(d.StreamServerInterceptor),
	}
}

// Name is grpc-go's proto codec name, so the content type is unchanged.
func (d *Decoder) Name() string { return gproto.Name }

// Marshal encodes a reply as grpc-go's proto codec does.
func (d *Decoder) Marshal(v any) (mem.BufferSlice, error) { return d.marshal.Marshal(v) }

// Unmarshal decodes a request into v; a body that does not decode leaves
// v empty and recorded as malformed (see Decoder).
func (d *Decoder) Unmarshal(data mem.BufferSlice, v any) error {
	var m proto.Message
	switch v := v.(type) {
	case proto.Message:
		m = v
	case protoadapt.MessageV1:
		m = protoadapt.MessageV2Of(v)
	}
	if m == nil {
		// Every method's request is a protobuf message: a bug, not input.
		return errors.New("errgrpc: request is not a protobuf message")
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	// A zero limit is protobuf-go's default.
	if err := (proto.UnmarshalOptions{RecursionLimit: d.depth}).Unmarshal(buf.ReadOnlyData(), m); err != nil {
		proto.Reset(m)
		d.rejected.Store(v, struct{}{})
	}
	return nil
}

// malformed reports whether v was recorded as malformed, and forgets it.
func (d *Decoder) malformed(v any) bool {
	_, bad := d.rejected.LoadAndDelete(v)
	return bad
}

// UnaryServerInterceptor refuses a call whose request did not decode.
func (d *Decoder) UnaryServerInterceptor(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if d.malformed(req) {
		return nil, d.refuse()
	}
	return handler(ctx, req)
}

// StreamServerInterceptor checks every message a stream's handler
// receives.
func (d *Decoder) StreamServerInterceptor(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, checkedStream{ServerStream: ss, d: d})
}

// checkedStream is a server stream whose RecvMsg refuses a message that
// did not decode.
type checkedStream struct {
	grpc.ServerStream
	d *Decoder
}

func (s checkedStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if s.d.malformed(m) && err == nil {
		return s.d.refuse()
	}
	return err
}
