package nodes_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"berth.dev/platform/nodewire"
	pb "berth.dev/proto/berth/sandboxnode/v1"
	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/errdefs/errdefstest"
	"berth.dev/sandbox/providercontract"

	"berth.dev/core/nodes"
)

// recordingClient is a node that records the generation each call
// carries and answers Kill.
type recordingClient struct {
	pb.NodeServiceClient
	generations []string
}

func (c *recordingClient) Kill(ctx context.Context, _ *pb.KillRequest, _ ...grpc.CallOption) (*pb.KillResponse, error) {
	md, _ := metadata.FromOutgoingContext(ctx)
	c.generations = append(c.generations, md.Get(pb.MetadataGeneration)...)
	return &pb.KillResponse{}, nil
}

// TestProxyCarriesTheAllocationsGeneration: a call about an allocation
// carries that allocation's generation, not the generation the node's
// connection was opened for, so the node's fence can refuse a mismatch;
// when the allocation's generation is unknown nothing is sent.
func TestProxyCarriesTheAllocationsGeneration(t *testing.T) {
	ref := sandbox.Reference{TenantID: uuid.NewString(), EnvironmentID: uuid.NewString(), AllocationID: uuid.NewString()}
	client := &recordingClient{}
	session := &nodes.Session{Client: client, ConnectionID: uuid.NewString(), OwnerEpoch: 1, Generation: 3}
	resolve := func(context.Context) (*nodes.Session, error) { return session, nil }
	unknown := errors.New("unknown allocation")
	var asked []sandbox.Reference
	p, err := nodes.NewProxy(docker.Operations(), resolve, func(_ context.Context, refs []sandbox.Reference) ([]uint64, []error, error) {
		gens, errs := make([]uint64, len(refs)), make([]error, len(refs))
		for i, r := range refs {
			asked = append(asked, r)
			if r != ref {
				errs[i] = unknown
				continue
			}
			gens[i] = 7
		}
		return gens, errs, nil
	})
	errdefstest.Must(t, err)

	errdefstest.Must(t, p.Kill(context.Background(), sandbox.KillRequest{Reference: ref}))
	if len(client.generations) != 1 || client.generations[0] != "7" || len(asked) != 1 || asked[0] != ref {
		t.Fatalf("sent generations %v for %v, want [7] for the allocation", client.generations, asked)
	}
	other := ref
	other.AllocationID = uuid.NewString()
	if err := p.Kill(context.Background(), sandbox.KillRequest{Reference: other}); !errors.Is(err, unknown) {
		t.Fatalf("Kill of an unknown allocation: %v", err)
	}
	if len(client.generations) != 1 {
		t.Fatalf("a call with no known generation was sent: %v", client.generations)
	}

	// Without a generation source (a harness without Core's store) calls
	// carry the session's generation.
	bare, err := nodes.NewProxy(docker.Operations(), resolve, nil)
	errdefstest.Must(t, err)
	errdefstest.Must(t, bare.Kill(context.Background(), sandbox.KillRequest{Reference: ref}))
	if len(client.generations) != 2 || client.generations[1] != "3" {
		t.Fatalf("sent generations %v, want the session's 3 last", client.generations)
	}
}

// captureClient is a node that answers Capture with err (or with a
// capture of the request's compute) and records what the call carried.
type captureClient struct {
	pb.NodeServiceClient
	err   error
	calls []*pb.CaptureRequest
	md    []metadata.MD
}

func (c *captureClient) Capture(ctx context.Context, req *pb.CaptureRequest, _ ...grpc.CallOption) (*pb.CaptureResponse, error) {
	md, _ := metadata.FromOutgoingContext(ctx)
	c.calls, c.md = append(c.calls, req), append(c.md, md)
	if c.err != nil {
		return nil, c.err
	}
	return &pb.CaptureResponse{
		Snapshot: &pb.SnapshotIdentity{Id: "snap-" + req.GetOperationId(), Provenance: "p"},
		Source:   &pb.ComputeInfo{Compute: req.GetCompute(), State: pb.ComputeState_COMPUTE_STATE_RUNNING},
	}, nil
}

// TestProxyForwardsCapture: the proxy forwards Capture like Suspend (the
// request's fields and the fencing metadata reach the node, the answer
// comes back); a node agent without the Capture RPC (gRPC's own
// UNIMPLEMENTED, either server form) gives a typed UnsupportedError
// node_protocol_no_capture and not an unknown outcome, while the
// protocol's own unsupported answer keeps the node's reason and any other
// UNIMPLEMENTED stays Capture's unknown outcome; a declaration without
// checkpoints refuses Capture with its own reason and sends nothing.
func TestProxyForwardsCapture(t *testing.T) {
	ref := sandbox.Reference{TenantID: uuid.NewString(), EnvironmentID: uuid.NewString(), AllocationID: uuid.NewString()}
	client := &captureClient{}
	session := &nodes.Session{Client: client, ConnectionID: uuid.NewString(), OwnerEpoch: 4, Generation: 3}
	resolve := func(context.Context) (*nodes.Session, error) { return session, nil }
	p, err := nodes.NewProxy(docker.Operations(), resolve, nil)
	errdefstest.Must(t, err)
	compute := sandbox.Compute{Reference: ref, Generation: 1, Name: "n", ID: "c1"}
	req := sandbox.CaptureRequest{Compute: compute, OperationID: uuid.NewString(), ObserveOnly: true}
	got, err := p.Capture(context.Background(), req)
	errdefstest.Must(t, err)
	if got.Snapshot.ID != "snap-"+req.OperationID || got.Source.Compute != compute || got.Source.State != sandbox.ComputeRunning {
		t.Fatalf("Capture = %+v", got)
	}
	if len(client.calls) != 1 || client.calls[0].GetOperationId() != req.OperationID || !client.calls[0].GetObserveOnly() ||
		client.calls[0].GetCompute().GetName() != "n" {
		t.Fatalf("sent %v", client.calls)
	}
	md := client.md[0]
	if md.Get(pb.MetadataProtocolVersion)[0] != pb.ProtocolVersion || md.Get(pb.MetadataConnectionID)[0] != session.ConnectionID ||
		md.Get(pb.MetadataOwnerEpoch)[0] != "4" || md.Get(pb.MetadataGeneration)[0] != "3" {
		t.Fatalf("fencing metadata %v", md)
	}

	for _, old := range []error{
		status.Error(codes.Unimplemented, "unknown method Capture for service berth.sandboxnode.v1.NodeService"),
		status.Error(codes.Unimplemented, "method Capture not implemented"),
	} {
		client.err = old
		_, err = p.Capture(context.Background(), req)
		if ue, ok := providercontract.AsUnsupported(err, sandbox.OpCapture); !ok || ue.Code != nodes.ReasonNodeProtocolNoCapture || errdefs.IsComputeUnconfirmed(err) {
			t.Fatalf("Capture on an agent without the RPC (%v) = %v; want UnsupportedError %s", old, err, nodes.ReasonNodeProtocolNoCapture)
		}
	}
	client.err = nodewire.ToStatusFor(sandbox.OpCapture, &providercontract.UnsupportedError{Operation: sandbox.OpCapture, Code: "no_native_checkpoint"})
	if ue, ok := providercontract.AsUnsupported(func() error { _, err := p.Capture(context.Background(), req); return err }(), sandbox.OpCapture); !ok || ue.Code != "no_native_checkpoint" {
		t.Fatalf("the node's own unsupported answer lost its reason: %v", ue)
	}
	for _, other := range []error{
		status.Error(codes.Unimplemented, "grpc: Decompressor is not installed for grpc-encoding \"x\""),
		status.Error(codes.Unimplemented, "unknown method Suspend for service berth.sandboxnode.v1.NodeService"),
		status.Error(codes.Unavailable, "connection reset"),
	} {
		client.err = other
		_, err = p.Capture(context.Background(), req)
		if !errdefs.IsComputeUnconfirmed(err) || errdefs.IsUnsupported(err) {
			t.Fatalf("Capture answered %v = %v; want its unknown outcome", other, err)
		}
	}

	const reason providercontract.ReasonCode = "no_native_checkpoint"
	sent := len(client.calls)
	without, err := nodes.NewProxy(sandbox.WithoutCheckpoints(docker.Operations(), reason), resolve, nil)
	errdefstest.Must(t, err)
	_, err = without.Capture(context.Background(), req)
	if ue, ok := providercontract.AsUnsupported(err, sandbox.OpCapture); !ok || ue.Code != reason || len(client.calls) != sent {
		t.Fatalf("Capture through a proxy without checkpoints = %v (%d sent); want UnsupportedError %s, nothing sent", err, len(client.calls)-sent, reason)
	}
}

// TestProxyRefusesCaptureOnAnAgentWithoutTheRPC is the old agent over real
// gRPC: a server whose NodeService has neither Capture nor CreateSeeded
// (an agent built before them), and one whose methods are the generated
// Unimplemented server's, both give UnsupportedError
// node_protocol_no_capture for Capture and node_protocol_no_seed for
// CreateSeeded (no settlement evidence: nothing ran) and
// node_protocol_no_seed_transfer for ExportSnapshot and ImportSnapshot,
// while another RPC of the same server still gets through.
func TestProxyRefusesCaptureOnAnAgentWithoutTheRPC(t *testing.T) {
	old := pb.NodeService_ServiceDesc
	old.Methods = nil
	for _, m := range pb.NodeService_ServiceDesc.Methods {
		if m.MethodName != "Capture" && m.MethodName != "CreateSeeded" {
			old.Methods = append(old.Methods, m)
		}
	}
	old.Streams = nil
	for _, st := range pb.NodeService_ServiceDesc.Streams {
		if st.StreamName == "Connect" {
			old.Streams = append(old.Streams, st)
		}
	}
	for name, desc := range map[string]*grpc.ServiceDesc{"without the method": &old, "unimplemented": &pb.NodeService_ServiceDesc} {
		t.Run(name, func(t *testing.T) {
			lis := bufconn.Listen(1 << 20)
			srv := grpc.NewServer()
			srv.RegisterService(desc, killServer{})
			go func() { _ = srv.Serve(lis) }()
			t.Cleanup(srv.Stop)
			conn, err := grpc.NewClient("passthrough:///bufnet",
				grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
				grpc.WithTransportCredentials(insecure.NewCredentials()))
			errdefstest.Must(t, err)
			t.Cleanup(func() { _ = conn.Close() })
			session := &nodes.Session{Client: pb.NewNodeServiceClient(conn), ConnectionID: uuid.NewString(), OwnerEpoch: 1, Generation: 1}
			p, err := nodes.NewProxy(docker.Operations(), func(context.Context) (*nodes.Session, error) { return session, nil }, nil)
			errdefstest.Must(t, err)
			ref := sandbox.Reference{TenantID: uuid.NewString(), EnvironmentID: uuid.NewString(), AllocationID: uuid.NewString()}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err = p.Capture(ctx, sandbox.CaptureRequest{Compute: sandbox.Compute{Reference: ref, Generation: 1, Name: "n"}, OperationID: uuid.NewString()})
			if ue, ok := providercontract.AsUnsupported(err, sandbox.OpCapture); !ok || ue.Code != nodes.ReasonNodeProtocolNoCapture {
				t.Fatalf("Capture on an agent without the RPC = %v; want UnsupportedError %s", err, nodes.ReasonNodeProtocolNoCapture)
			}
			owner := sandbox.Reference{TenantID: ref.TenantID, EnvironmentID: uuid.NewString(), AllocationID: uuid.NewString()}
			info, err := p.CreateSeeded(ctx, sandbox.SeededCreateRequest{Create: contracttest.CreateRequest(ref, sandbox.Resources{}), Owner: owner,
				Snapshot: sandbox.SnapshotIdentity{ID: "s", Provenance: "p"}})
			if ue, ok := providercontract.AsUnsupported(err, sandbox.OpCreateSeeded); !ok || ue.Code != nodes.ReasonNodeProtocolNoSeed || info != (sandbox.Info{}) {
				t.Fatalf("CreateSeeded on an agent without the RPC = %+v, %v; want UnsupportedError %s and no evidence", info, err, nodes.ReasonNodeProtocolNoSeed)
			}
			snap := sandbox.SnapshotIdentity{ID: "s", Provenance: "p"}
			if err := p.ExportSnapshot(ctx, owner, snap, io.Discard); !isNoSeedTransfer(err, sandbox.OpExportSnapshot) {
				t.Fatalf("ExportSnapshot on an agent without the RPC = %v; want UnsupportedError %s", err, nodes.ReasonNodeProtocolNoSeedTransfer)
			}
			if _, err := p.ImportSnapshot(ctx, sandbox.ImportRequest{Owner: owner, OperationID: uuid.NewString()}, strings.NewReader("x")); !isNoSeedTransfer(err, sandbox.OpImportSnapshot) {
				t.Fatalf("ImportSnapshot on an agent without the RPC = %v; want UnsupportedError %s", err, nodes.ReasonNodeProtocolNoSeedTransfer)
			}
			errdefstest.Must(t, p.Kill(ctx, sandbox.KillRequest{Reference: ref}))
		})
	}
}

// isNoSeedTransfer reports whether err is op's UnsupportedError
// node_protocol_no_seed_transfer.
func isNoSeedTransfer(err error, op providercontract.Operation) bool {
	ue, ok := providercontract.AsUnsupported(err, op)
	return ok && ue.Code == nodes.ReasonNodeProtocolNoSeedTransfer
}

// killServer answers Kill; every other RPC is gRPC's own Unimplemented.
type killServer struct {
	pb.UnimplementedNodeServiceServer
}

func (killServer) Kill(context.Context, *pb.KillRequest) (*pb.KillResponse, error) {
	return &pb.KillResponse{}, nil
}
