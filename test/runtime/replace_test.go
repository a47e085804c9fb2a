package runtime

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/client"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/docker"

	"berth.dev/test/internal/stack"
)

// TestReplaceDeploymentAcrossTwoNodes is the operator's replacement with
// the real binaries and engine: two nodes, ten Sessions running Turns on
// generation 1; ReplaceDeployment changes only the memory limit. The ten
// keep running with their old limit (the engine's HostConfig.Memory) and
// Turns still work in each; new Sessions get the new limit; both nodes
// keep their identities and serve both generations (decided: a same-kind
// replacement needs no new enrollment), reach the serving pin, and stop
// serving generation 1 once its last allocation is released; deleting
// every Session leaves nothing in the engine.
func TestReplaceDeploymentAcrossTwoNodes(t *testing.T) {
	const (
		oldMemory = 128 << 20
		newMemory = 192 << 20
		sessions  = 10
	)
	spec := &adminv1.Specification{CpuMillis: 100, MemoryBytes: oldMemory, DiskBytes: 1 << 30, MaxActive: 10, MaxRetained: 10}
	e := newEnvNodes(t, spec, 2)
	deployments := adminv1.NewDeploymentServiceClient(e.cc)
	nodesAPI := adminv1.NewNodeServiceClient(e.cc)

	var old []string
	for range sessions {
		resp, err := e.sessions.CreateSession(e.ctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString(), Session: &adminv1.Session{}})
		if err != nil {
			t.Fatalf("CreateSession: %v", err)
		}
		old = append(old, resp.GetSession().GetName())
	}
	for _, s := range old {
		e.waitAdmitted(s)
		if r := e.run(s, shell("echo before")); r.turn.GetState() != adminv1.Turn_STATE_COMPLETED || string(r.stdout) != "before\n" {
			t.Fatalf("Turn before the replacement in %s: %v", s, r)
		}
	}
	if got := e.memoryLimits(old); !allEqual(got, oldMemory) {
		t.Fatalf("memory limits before the replacement: %v", got)
	}

	// Preview, then replace only the memory limit.
	mask := &fieldmaskpb.FieldMask{Paths: []string{"specification.memory_bytes"}}
	partial := &adminv1.DeploymentCandidate{Specification: &adminv1.Specification{MemoryBytes: newMemory}}
	pv, err := deployments.PreviewDeployment(e.ctx, &adminv1.PreviewDeploymentRequest{Candidate: partial, UpdateMask: mask})
	if err != nil || !pv.GetChanged() || pv.GetExpectedGeneration() != 1 || pv.GetDeployment().GetSpecification().GetMaxActive() != 10 {
		t.Fatalf("preview: %v %v", pv, err)
	}
	start := time.Now()
	r, err := deployments.ReplaceDeployment(e.ctx, &adminv1.ReplaceDeploymentRequest{Candidate: partial, UpdateMask: mask, ExpectedGeneration: pv.GetExpectedGeneration()})
	if err != nil {
		t.Fatalf("ReplaceDeployment: %v", err)
	}
	replaced := time.Since(start)
	if d := r.GetDeployment(); !r.GetChanged() || d.GetGeneration() != 2 || d.GetSpecification().GetMemoryBytes() != newMemory ||
		d.GetSpecification().GetCpuMillis() != 100 || len(r.GetRetiredNodes()) != 0 {
		t.Fatalf("replacement: %v", r)
	}
	var d *adminv1.Deployment
	stack.WaitFor(t, time.Minute, "generation 2 served by both nodes", func() bool {
		g, err := deployments.GetDeployment(e.ctx, &adminv1.GetDeploymentRequest{Name: "deployment"})
		if err != nil {
			t.Fatal(err)
		}
		d = g.GetDeployment()
		return d.GetServingGeneration() == 2 && len(d.GetNodes()) == 2 &&
			servedReady(d.GetNodes()[0], 1, 2) && servedReady(d.GetNodes()[1], 1, 2)
	})
	served := time.Since(start)
	t.Logf("replacement with %d running Sessions: ReplaceDeployment answered in %v (admission paused %v in the commit), "+
		"both nodes ready for generation 2 and the serving pin after %v", sessions, replaced.Round(time.Millisecond),
		r.GetAdmissionPause().AsDuration(), served.Round(time.Millisecond))
	if rg := d.GetRetainedGenerations(); len(rg) != 1 || rg[0].GetGeneration() != 1 || rg[0].GetAllocations() != sessions {
		t.Fatalf("retained generations %v, want generation 1 with %d allocations", rg, sessions)
	}
	for _, n := range d.GetNodes() {
		got, err := nodesAPI.GetNode(e.ctx, &adminv1.GetNodeRequest{Name: n.GetNode()})
		if err != nil || got.GetNode().GetState() != adminv1.Node_STATE_ENABLED {
			t.Fatalf("node after a same-kind replacement: %v %v", got, err)
		}
	}

	// The ten keep their generation and limit, and Turns still work.
	for _, s := range old {
		if r := e.run(s, shell("echo after")); r.turn.GetState() != adminv1.Turn_STATE_COMPLETED || string(r.stdout) != "after\n" {
			t.Fatalf("Turn after the replacement in %s: %v", s, r)
		}
	}
	if got := e.memoryLimits(old); !allEqual(got, oldMemory) {
		t.Fatalf("memory limits of the old Sessions after the replacement: %v", got)
	}
	// New Sessions get generation 2's limit.
	var fresh []string
	for range 2 {
		s := e.createSession()
		if r := e.run(s, shell("echo new")); r.turn.GetState() != adminv1.Turn_STATE_COMPLETED || string(r.stdout) != "new\n" {
			t.Fatalf("Turn in a new Session: %v", r)
		}
		fresh = append(fresh, s)
	}
	if got := e.memoryLimits(fresh); !allEqual(got, newMemory) {
		t.Fatalf("memory limits of the new Sessions: %v", got)
	}
	for _, a := range e.allocations(fresh) {
		if a.GetGeneration() != 2 {
			t.Fatalf("a new Session's allocation of generation %d", a.GetGeneration())
		}
	}

	// The old Sessions deleted: generation 1 is released everywhere and
	// the nodes stop serving it; then nothing is left.
	for _, s := range old {
		if _, err := e.sessions.DeleteSession(e.ctx, &adminv1.DeleteSessionRequest{Name: s}); err != nil {
			t.Fatalf("DeleteSession: %v", err)
		}
	}
	stack.WaitFor(t, 2*time.Minute, "generation 1 released and no longer served", func() bool {
		g, err := deployments.GetDeployment(e.ctx, &adminv1.GetDeploymentRequest{Name: "deployment"})
		if err != nil {
			t.Fatal(err)
		}
		d = g.GetDeployment()
		rg := d.GetRetainedGenerations()
		return len(rg) == 1 && rg[0].GetGeneration() == 2 && len(d.GetNodes()) == 2 &&
			servedReady(d.GetNodes()[0], 2) && servedReady(d.GetNodes()[1], 2)
	})
	if got := e.memoryLimits(fresh); len(got) != len(fresh) {
		t.Fatalf("the new Sessions' containers after the old ones' deletion: %v", got)
	}
	for _, s := range fresh {
		if _, err := e.sessions.DeleteSession(e.ctx, &adminv1.DeleteSessionRequest{Name: s}); err != nil {
			t.Fatalf("DeleteSession: %v", err)
		}
	}
	stack.WaitFor(t, 2*time.Minute, "the engine empty", func() bool {
		containers, volumes := stack.Owned(t, e.docker, e.installationID)
		return containers+volumes == 0
	})
}

// servedReady reports whether n serves exactly gens, each ready.
func servedReady(n *adminv1.NodeGenerations, gens ...uint64) bool {
	var got []uint64
	for _, g := range n.GetGenerations() {
		if !g.GetReady() {
			return false
		}
		got = append(got, g.GetGeneration())
	}
	return n.GetConnected() && slices.Equal(got, gens)
}

func allEqual(m map[string]int64, want int64) bool {
	if len(m) == 0 {
		return false
	}
	for _, v := range m {
		if v != want {
			return false
		}
	}
	return true
}

// allocations returns the allocation of each Session in names.
func (e *env) allocations(names []string) map[string]*adminv1.Allocation {
	e.t.Helper()
	resp, err := adminv1.NewAllocationServiceClient(e.cc).ListAllocations(e.ctx, &adminv1.ListAllocationsRequest{PageSize: 100})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]*adminv1.Allocation{}
	for _, a := range resp.GetAllocations() {
		if slices.Contains(names, a.GetSession()) {
			out[a.GetSession()] = a
		}
	}
	if len(out) != len(names) {
		e.t.Fatalf("%d allocations for %d Sessions", len(out), len(names))
	}
	return out
}

// memoryLimits reads, from the engine, the memory limit of each running
// container of the Sessions in names, by Session.
func (e *env) memoryLimits(names []string) map[string]int64 {
	e.t.Helper()
	ctx := context.Background()
	out := map[string]int64{}
	for s, a := range e.allocations(names) {
		id := strings.TrimPrefix(a.GetName(), "allocations/")
		list, err := e.docker.ContainerList(ctx, client.ContainerListOptions{
			Filters: stack.InstallationFilter(e.installationID).Add("label", fmt.Sprintf("%s=%s", docker.LabelAllocation, id)),
		})
		if err != nil {
			e.t.Fatal(err)
		}
		for _, c := range list.Items {
			ins, err := e.docker.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
			if err != nil {
				e.t.Fatal(err)
			}
			out[s] = ins.Container.HostConfig.Memory
		}
	}
	return out
}
