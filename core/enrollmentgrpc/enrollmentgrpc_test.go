package enrollmentgrpc_test

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	enrollmentv1 "berth.dev/proto/berth/enrollment/v1"

	"berth.dev/core/enrollmentgrpc"
)

type rawBytes []byte

// rawCodec sends a body unchanged: the client of a caller who writes
// whatever bytes it likes.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return v.(rawBytes), nil }
func (rawCodec) Unmarshal([]byte, any) error   { return nil }
func (rawCodec) Name() string                  { return "proto" }

// TestMalformedEnrollRequestIsInvalidArgument: a body that does not decode
// is enrollment's INVALID_ARGUMENT naming "request", never grpc-go's
// INTERNAL and parser text, and reaches no handler (the service here has
// no logic to reach).
func TestMalformedEnrollRequestIsInvalidArgument(t *testing.T) {
	srv := grpc.NewServer(enrollmentgrpc.ServerOptions()...)
	enrollmentv1.RegisterEnrollmentServiceServer(srv, enrollmentgrpc.NewServer(nil))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for name, body := range map[string][]byte{
		"truncated":     {0x0a, 0x7f, 'x'},
		"invalid UTF-8": {0x0a, 0x02, 0xff, 0xfe},
	} {
		var reply rawBytes
		err := cc.Invoke(ctx, "/berth.enrollment.v1.EnrollmentService/Enroll", rawBytes(body), &reply, grpc.ForceCodec(rawCodec{}))
		s := status.Convert(err)
		var info *errdetails.ErrorInfo
		for _, d := range s.Details() {
			if i, ok := d.(*errdetails.ErrorInfo); ok {
				info = i
			}
		}
		if s.Code() != codes.InvalidArgument || info.GetDomain() != enrollmentv1.ErrorDomain ||
			info.GetReason() != "invalid" || info.GetMetadata()["field"] != "request" {
			t.Fatalf("%s: %v %q %v", name, s.Code(), s.Message(), info)
		}
	}
}
