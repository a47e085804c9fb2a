package nodeproto

import (
	"context"
	"testing"

	"google.golang.org/grpc/metadata"

	"berth.dev/platform/nodewire"
	pb "berth.dev/proto/berth/sandboxnode/v1"
	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/docker/dockertest"
	"berth.dev/sandbox/errdefs"

	"berth.dev/test/internal/stack"
)

// TestObserveBatchThroughTheNode: the node protocol's ObserveBatch over
// the real node agent and the Docker adapter (whose declaration says its
// usage ObserveBatch is unsupported: the protocol's batch is GetInfo's)
// answers each target in input order, as GetInfo would, with its own
// error; one target's engine failure fails only that target; a malformed
// or fenced call reaches no adapter.
func TestObserveBatchThroughTheNode(t *testing.T) {
	_, engine, n := startFixtureNode(t)
	cc := n.Dial(t)
	conn, proxy := n.Connect(t, cc, 5)
	ctx := context.Background()
	if proxy.ProviderOperations().Check(sandbox.OpObserveBatch) == nil {
		t.Fatal("the Docker node declares usage ObserveBatch supported; this test needs a node that does not")
	}
	one, two, missing := contracttest.NewReference(), contracttest.NewReference(), contracttest.NewReference()
	for _, r := range []sandbox.Reference{one, two} {
		if _, err := proxy.Create(ctx, contracttest.CreateRequest(r, stack.Resources)); err != nil {
			t.Fatalf("create: %v", err)
		}
	}

	engine.ResetCalls()
	refs := []sandbox.Reference{two, missing, one}
	infos, errs, err := proxy.GetInfoBatch(ctx, refs)
	if err != nil {
		t.Fatalf("batch: %v", err)
	}
	for _, i := range []int{0, 2} {
		if errs[i] != nil || infos[i].Reference != refs[i] || infos[i].State != sandbox.StateRunning || infos[i].ProviderID == "" {
			t.Fatalf("target %d: %+v, %v", i, infos[i], errs[i])
		}
	}
	if !errdefs.IsNotFound(errs[1]) || infos[1] != (sandbox.Info{}) {
		t.Fatalf("missing target: %+v, %v", infos[1], errs[1])
	}
	inspects := 0
	for _, c := range engine.Calls() {
		if c.Name == dockertest.CallContainerInspect {
			inspects++
		}
	}
	if inspects < 3 {
		t.Fatalf("%d container inspects for 3 targets", inspects)
	}

	// One target's engine failure is that target's alone.
	engine.Arm(dockertest.CallContainerInspect, dockertest.FaultServerError, nil)
	_, errs, err = proxy.GetInfoBatch(ctx, []sandbox.Reference{one, two})
	if err != nil {
		t.Fatalf("batch with one failing target: %v", err)
	}
	failed := 0
	for _, e := range errs {
		switch {
		case e == nil:
		case errdefs.IsObservationUnavailable(e):
			failed++
		default:
			t.Fatalf("target error %v", e)
		}
	}
	if failed != 1 {
		t.Fatalf("%d targets failed, want the one whose inspect failed", failed)
	}

	// Malformed or fenced calls reach no adapter.
	client := pb.NewNodeServiceClient(cc)
	wire := func(rs ...sandbox.Reference) []*pb.Reference {
		out := make([]*pb.Reference, len(rs))
		for i, r := range rs {
			out[i] = nodewire.ReferenceToWire(r)
		}
		return out
	}
	many := make([]sandbox.Reference, sandbox.MaxObservationBatch+1)
	for i := range many {
		many[i] = contracttest.NewReference()
	}
	bad := wire(one)
	bad[0].AllocationId = "not-a-uuid"
	current := metadata.NewOutgoingContext(ctx, md(pb.ProtocolVersion, conn.ConnectionID, 5, conn.Generation))
	engine.ResetCalls()
	for name, req := range map[string]*pb.ObserveBatchRequest{
		"empty":     {},
		"too many":  {References: wire(many...)},
		"duplicate": {References: wire(one, two, one)},
		"malformed": {References: bad},
	} {
		_, err := client.ObserveBatch(current, req)
		if got := wireCode(t, err); got != nodewire.CodeInvalid {
			t.Errorf("%s: code %q, want invalid", name, got)
		}
	}
	stale := metadata.NewOutgoingContext(ctx, md(pb.ProtocolVersion, conn.ConnectionID, 4, conn.Generation))
	if _, err := client.ObserveBatch(stale, &pb.ObserveBatchRequest{References: wire(one)}); wireCode(t, err) != nodewire.CodeFenced {
		t.Errorf("stale epoch: %v", err)
	}
	if calls := adapterCalls(engine); len(calls) != 0 {
		t.Fatalf("refused batches reached the adapter: %v", calls)
	}
}
