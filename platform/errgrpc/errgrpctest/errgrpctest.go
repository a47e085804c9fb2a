package errgrpctest

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// Raw is a message in wire form.
type Raw []byte

// Codec sends a Raw body unchanged and discards replies: the client of a
// peer that writes whatever bytes it likes.
type Codec struct{}

// Marshal returns the Raw body v as is.
func (Codec) Marshal(v any) ([]byte, error) { return v.(Raw), nil }

// Unmarshal discards a reply.
func (Codec) Unmarshal([]byte, any) error { return nil }

// Name is the proto codec's name, so the content type is the real one.
func (Codec) Name() string { return "proto" }

// Malformed are bodies that do not decode as any request whose field 1 is
// a string or a message: wire data cut short, and invalid UTF-8 in field 1.
var Malformed = map[string][]byte{
	"truncated":     {0x0a, 0x7f, 'x'},
	"invalid UTF-8": {0x0a, 0x02, 0xff, 0xfe},
}

// Serve serves srv on a loopback port until the test ends (a failure to
// serve fails the test) and returns a plaintext client connection to it.
func Serve(t testing.TB, srv *grpc.Server) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-done; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			t.Errorf("serve: %v", err)
		}
	})
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// Invoke calls the unary method with body in wire form.
func Invoke(ctx context.Context, cc *grpc.ClientConn, method string, body []byte) error {
	var reply Raw
	return cc.Invoke(ctx, method, Raw(body), &reply, grpc.ForceCodec(Codec{}))
}

// Info is the ErrorInfo err's status carries; nil without one.
func Info(err error) *errdetails.ErrorInfo {
	for _, d := range status.Convert(err).Details() {
		if i, ok := d.(*errdetails.ErrorInfo); ok {
			return i
		}
	}
	return nil
}

// ServerStream opens a server stream to method with body in wire form,
// reads it to its end and returns the error that ends it (nil when it
// ends cleanly).
func ServerStream(ctx context.Context, cc *grpc.ClientConn, method string, body []byte) error {
	cs, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, method, grpc.ForceCodec(Codec{}))
	if err != nil {
		return err
	}
	if err := cs.SendMsg(Raw(body)); err != nil {
		return err
	}
	if err := cs.CloseSend(); err != nil {
		return err
	}
	for {
		var reply Raw
		if err := cs.RecvMsg(&reply); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
	}
}
