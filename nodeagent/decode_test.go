package nodeagent

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

	pb "berth.dev/proto/berth/sandboxnode/v1"
)

type rawBytes []byte

// rawCodec sends a body unchanged: the client of a peer that writes
// whatever bytes it likes.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return v.(rawBytes), nil }
func (rawCodec) Unmarshal([]byte, any) error   { return nil }
func (rawCodec) Name() string                  { return "proto" }

// TestMalformedBodiesAreInvalid: a body that does not decode is the node
// protocol's invalid code, never grpc-go's INTERNAL and parser text, and
// reaches neither the metadata check nor a handler (the server here has
// no agent to reach).
func TestMalformedBodiesAreInvalid(t *testing.T) {
	s := &Server{}
	gs := grpc.NewServer(s.Options()...)
	s.Register(gs)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
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
		err := cc.Invoke(ctx, "/berth.sandboxnode.v1.NodeService/GetInfo", rawBytes(body), &reply, grpc.ForceCodec(rawCodec{}))
		st := status.Convert(err)
		var info *errdetails.ErrorInfo
		for _, d := range st.Details() {
			if i, ok := d.(*errdetails.ErrorInfo); ok {
				info = i
			}
		}
		if st.Code() != codes.InvalidArgument || info.GetDomain() != pb.ErrorDomain || info.GetReason() != "invalid" {
			t.Fatalf("%s: %v %q %v", name, st.Code(), st.Message(), info)
		}
	}
}
