package enrollmentgrpc_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"berth.dev/platform/errgrpc/errgrpctest"
	enrollmentv1 "berth.dev/proto/berth/enrollment/v1"

	"berth.dev/core/enrollmentgrpc"
)

// TestMalformedEnrollRequestIsInvalidArgument: a body that does not decode
// is enrollment's INVALID_ARGUMENT naming "request", never grpc-go's
// INTERNAL and parser text, and reaches no handler (the service here has
// no logic to reach).
func TestMalformedEnrollRequestIsInvalidArgument(t *testing.T) {
	enroll := enrollmentgrpc.New(nil)
	srv := grpc.NewServer(enroll.ServerOptions()...)
	enroll.Register(srv)
	cc := errgrpctest.Serve(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for name, body := range errgrpctest.Malformed {
		err := errgrpctest.Invoke(ctx, cc, "/berth.enrollment.v1.EnrollmentService/Enroll", body)
		s, info := status.Convert(err), errgrpctest.Info(err)
		if s.Code() != codes.InvalidArgument || info.GetDomain() != enrollmentv1.ErrorDomain ||
			info.GetReason() != "invalid" || info.GetMetadata()["field"] != "request" {
			t.Fatalf("%s: %v %q %v", name, s.Code(), s.Message(), info)
		}
	}
}
