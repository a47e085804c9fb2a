package nodeproto

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	adminv1 "berth.dev/proto/berth/admin/v1"

	"berth.dev/test/internal/stack"
)

// TestCoreKilledDuringReplacement SIGKILLs berth-core 0 to 12 ms after a
// ReplaceDeployment was sent (the commit itself takes a few
// milliseconds), four times. After each restart the deployment is
// either the old selection or the new one, never a mix: the current
// generation's number and specification belong together, and no other
// generation was written. The same request retried completes: the
// replacement committed once. The Sessions created on generation 1 keep
// it, and a Session created at the end gets the last generation.
func TestCoreKilledDuringReplacement(t *testing.T) {
	const base = 128 << 20
	spec := &adminv1.Specification{CpuMillis: 100, MemoryBytes: base, DiskBytes: 1 << 30, MaxActive: 4, MaxRetained: 4}
	cl := stack.OneNodeCluster(t, spec, stack.CoreOptions{}, stack.NodeOptions{})
	c, cc, ctx := cl.Core, cl.CC, cl.Ctx
	first, err := adminv1.NewSessionServiceClient(cc).CreateSession(ctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString(), Session: &adminv1.Session{}})
	if err != nil {
		t.Fatal(err)
	}
	mask := &fieldmaskpb.FieldMask{Paths: []string{"specification.memory_bytes"}}
	committed, lost := 0, 0
	// Each restart waits for the killed Core's lease to expire (seconds),
	// so four delays: before, around and after the commit's few
	// milliseconds.
	for i, delay := range []time.Duration{0, 3 * time.Millisecond, 6 * time.Millisecond, 12 * time.Millisecond} {
		gen := uint64(i + 1)
		memory := int64(base + (i+1)<<20)
		req := &adminv1.ReplaceDeploymentRequest{
			Candidate:  &adminv1.DeploymentCandidate{Specification: &adminv1.Specification{MemoryBytes: memory}},
			UpdateMask: mask, ExpectedGeneration: gen,
		}
		sent := make(chan struct{})
		go func() {
			close(sent)
			_, _ = adminv1.NewDeploymentServiceClient(cc).ReplaceDeployment(ctx, req)
		}()
		<-sent
		time.Sleep(delay)
		c.Kill()
		c = stack.StartCore(t, c.DSN, c.StateDir, true)
		cc, ctx = c.AdminClient(t)
		deployments := adminv1.NewDeploymentServiceClient(cc)

		got, err := deployments.GetDeployment(ctx, &adminv1.GetDeploymentRequest{Name: "deployment"})
		if err != nil {
			t.Fatal(err)
		}
		d := got.GetDeployment()
		switch {
		case d.GetGeneration() == gen+1 && d.GetSpecification().GetMemoryBytes() == memory:
			committed++
		case d.GetGeneration() == gen && d.GetSpecification().GetMemoryBytes() == memory-1<<20:
			lost++
		default:
			t.Fatalf("after a SIGKILL %v into the replacement of generation %d: generation %d with memory %d (want %d with %d, or %d with %d)",
				delay, gen, d.GetGeneration(), d.GetSpecification().GetMemoryBytes(), gen, memory-1<<20, gen+1, memory)
		}
		var stored int
		if err := c.Store(t).Pool().QueryRow(ctx, "SELECT count(*) FROM deployment_generations").Scan(&stored); err != nil {
			t.Fatal(err)
		}
		if uint64(stored) != d.GetGeneration() {
			t.Fatalf("%d generations stored, current %d", stored, d.GetGeneration())
		}

		// The same request again completes the replacement, once.
		r, err := deployments.ReplaceDeployment(ctx, req)
		if err != nil || r.GetDeployment().GetGeneration() != gen+1 || r.GetDeployment().GetSpecification().GetMemoryBytes() != memory ||
			r.GetChanged() != (d.GetGeneration() == gen) {
			t.Fatalf("retry after the SIGKILL: %v %v", r, err)
		}
	}
	t.Logf("%d replacements had committed before the SIGKILL, %d had not (each retry completed)", committed, lost)

	final := uint64(5)
	stack.WaitNode(t, ctx, adminv1.NewNodeServiceClient(cc), cl.NodeName, func(n *adminv1.Node) bool {
		return stack.Connected(n) && n.GetReadiness().GetReady() && n.GetReadiness().GetGeneration() == final
	})
	sessionsAPI := adminv1.NewSessionServiceClient(cc)
	last, err := sessionsAPI.CreateSession(ctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString(), Session: &adminv1.Session{}})
	if err != nil {
		n, _ := adminv1.NewNodeServiceClient(cc).GetNode(ctx, &adminv1.GetNodeRequest{Name: cl.NodeName})
		t.Fatalf("CreateSession after the replacements: %v\nnode: %v\nberth-core log:\n%s", err, n, c.Logs())
	}
	allocations := adminv1.NewAllocationServiceClient(cc)
	stack.WaitFor(t, 2*time.Minute, "both Sessions' allocations active", func() bool {
		resp, err := allocations.ListAllocations(ctx, &adminv1.ListAllocationsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]uint64{first.GetSession().GetName(): 1, last.GetSession().GetName(): final}
		active := 0
		for _, a := range resp.GetAllocations() {
			if g, ok := want[a.GetSession()]; ok && a.GetState() == adminv1.Allocation_STATE_ACTIVE {
				if a.GetGeneration() != g {
					t.Fatalf("allocation of %s on generation %d, want %d", a.GetSession(), a.GetGeneration(), g)
				}
				active++
			}
		}
		return active == 2
	})
}
