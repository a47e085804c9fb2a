package nodes_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	pb "berth.dev/proto/berth/sandboxnode/v1"
	"berth.dev/sandbox"
	"berth.dev/sandbox/docker"
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

// TestProxyAnswersCaptureUnsupported: the node protocol has no Capture RPC
// yet (step K1b adds it), so the proxy answers Capture with a typed
// UnsupportedError naming that, for a node that declares checkpoints and
// one that does not (then the declaration's own reason), and sends nothing.
func TestProxyAnswersCaptureUnsupported(t *testing.T) {
	ref := sandbox.Reference{TenantID: uuid.NewString(), EnvironmentID: uuid.NewString(), AllocationID: uuid.NewString()}
	resolve := func(context.Context) (*nodes.Session, error) {
		t.Fatal("Capture resolved the node's session")
		return nil, nil
	}
	p, err := nodes.NewProxy(docker.Operations(), resolve, nil)
	errdefstest.Must(t, err)
	req := sandbox.CaptureRequest{Compute: sandbox.Compute{Reference: ref, Generation: 1, Name: "n"}, OperationID: uuid.NewString()}
	_, err = p.Capture(context.Background(), req)
	if ue, ok := providercontract.AsUnsupported(err, sandbox.OpCapture); !ok || ue.Code != nodes.ReasonNodeProtocolNoCapture {
		t.Fatalf("Capture through the proxy = %v; want UnsupportedError %s", err, nodes.ReasonNodeProtocolNoCapture)
	}
	const reason providercontract.ReasonCode = "no_native_checkpoint"
	without, err := nodes.NewProxy(sandbox.WithoutCheckpoints(docker.Operations(), reason), resolve, nil)
	errdefstest.Must(t, err)
	_, err = without.Capture(context.Background(), req)
	if ue, ok := providercontract.AsUnsupported(err, sandbox.OpCapture); !ok || ue.Code != reason {
		t.Fatalf("Capture through a proxy without checkpoints = %v; want UnsupportedError %s", err, reason)
	}
}
