package errgrpc

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

var errRefused = errors.New("refused")

// TestDecoderRefusesMalformedAndForgets: a body that does not decode
// reaches no handler, unary or streamed; a good one does; the record of a
// malformed message lasts until its one check, so nothing accumulates.
func TestDecoderRefusesMalformedAndForgets(t *testing.T) {
	d := NewDecoder(0, func() error { return errRefused })
	good, bad := new(wrapperspb.StringValue), new(wrapperspb.StringValue)
	body, err := proto.Marshal(wrapperspb.String("ok"))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Unmarshal(mem.BufferSlice{mem.SliceBuffer(body)}, good); err != nil {
		t.Fatal(err)
	}
	badUTF8 := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "\xff")
	if err := d.Unmarshal(mem.BufferSlice{mem.SliceBuffer(badUTF8)}, bad); err != nil {
		t.Fatal(err)
	}
	if good.GetValue() != "ok" || bad.GetValue() != "" {
		t.Fatalf("decoded %q and %q", good.GetValue(), bad.GetValue())
	}
	served := 0
	handler := func(context.Context, any) (any, error) { served++; return "served", nil }
	if _, err := d.UnaryServerInterceptor(context.Background(), good, nil, handler); err != nil {
		t.Fatal(err)
	}
	if _, err := d.UnaryServerInterceptor(context.Background(), bad, nil, handler); !errors.Is(err, errRefused) {
		t.Fatalf("malformed unary request: %v", err)
	}
	if served != 1 {
		t.Fatalf("handler ran %d times, want 1", served)
	}

	// A stream: RecvMsg of a malformed message is refused.
	in := new(wrapperspb.StringValue)
	ss := fakeStream{recv: func(m any) error { return d.Unmarshal(mem.BufferSlice{mem.SliceBuffer([]byte{0x0a, 0x7f})}, m) }}
	err = d.StreamServerInterceptor(nil, ss, &grpc.StreamServerInfo{}, func(_ any, s grpc.ServerStream) error { return s.RecvMsg(in) })
	if !errors.Is(err, errRefused) {
		t.Fatalf("malformed streamed message: %v", err)
	}

	n := 0
	d.rejected.Range(func(any, any) bool { n++; return true })
	if n != 0 {
		t.Fatalf("%d records left after their checks", n)
	}
	if err := d.Unmarshal(nil, "not a message"); err == nil {
		t.Fatal("decoded into a non-message")
	}
}

// TestDecoderRecursionLimit: nesting past the limit is malformed.
func TestDecoderRecursionLimit(t *testing.T) {
	nested := structpb.NewStringValue("leaf")
	for range 20 {
		nested = structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{nested}})
	}
	body, err := proto.Marshal(nested)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		depth int
		bad   bool
	}{{10, true}, {100, false}, {0, false}} {
		d := NewDecoder(tc.depth, func() error { return errRefused })
		v := new(structpb.Value)
		if err := d.Unmarshal(mem.BufferSlice{mem.SliceBuffer(body)}, v); err != nil {
			t.Fatal(err)
		}
		if got := d.malformed(v); got != tc.bad {
			t.Errorf("limit %d: malformed %v, want %v", tc.depth, got, tc.bad)
		}
	}
}

type fakeStream struct {
	grpc.ServerStream
	recv func(m any) error
}

func (s fakeStream) RecvMsg(m any) error      { return s.recv(m) }
func (s fakeStream) Context() context.Context { return context.Background() }
