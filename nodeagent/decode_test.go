package nodeagent

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"berth.dev/platform/errgrpc/errgrpctest"
	pb "berth.dev/proto/berth/sandboxnode/v1"
)

// TestMalformedBodiesAreInvalid: a body that does not decode is the node
// protocol's invalid code, never grpc-go's INTERNAL and parser text, and
// reaches neither the metadata check nor a handler (the server here has
// no agent to reach).
func TestMalformedBodiesAreInvalid(t *testing.T) {
	s := &Server{}
	gs := grpc.NewServer(s.Options()...)
	s.Register(gs)
	cc := errgrpctest.Serve(t, gs)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for name, body := range errgrpctest.Malformed {
		err := errgrpctest.Invoke(ctx, cc, "/berth.sandboxnode.v1.NodeService/GetInfo", body)
		st, info := status.Convert(err), errgrpctest.Info(err)
		if st.Code() != codes.InvalidArgument || info.GetDomain() != pb.ErrorDomain || info.GetReason() != "invalid" {
			t.Fatalf("%s: %v %q %v", name, st.Code(), st.Message(), info)
		}
	}
}
