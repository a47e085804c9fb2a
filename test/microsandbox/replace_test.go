package microsandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/docker/dockertest"
	"berth.dev/sandbox/testenv"

	"berth.dev/core/store/storetest"
	"berth.dev/test/internal/stack"
)

// TestReplaceDockerWithMicrosandbox: a fleet serving a Docker deployment
// (a node agent on the Docker API fixture) is replaced with a
// microsandbox one by ReplaceDeployment naming provider_kind and turning
// suspension off (the Docker deployment inherited Docker's suspension
// defaults, which microsandbox, without checkpoints, refuses). The
// Docker node is retired in the same commit and serves no new generation;
// a microsandbox node (the real msb) enrolled and enabled afterwards serves
// the new generation: connected, bound to its msb home, and not ready
// with the host's diagnostic (hardware_virtualization_unavailable here).
func TestReplaceDockerWithMicrosandbox(t *testing.T) {
	msb := testenv.MSB(t)
	want := expectedDiagnostic(t)
	f := startDockerFleet(t)
	core, cc, ctx, installation, dockerNode := f.core, f.cc, f.ctx, f.installation, f.dockerNode
	nodes := adminv1.NewNodeServiceClient(cc)
	deployments := adminv1.NewDeploymentServiceClient(cc)
	f.replaceWithMicrosandbox(t)

	startNode(t, core, ctx, cc, installation, msb)
	msbNode := f.enableSecondNode(t)
	n := stack.WaitNode(t, ctx, nodes, msbNode, func(n *adminv1.Node) bool {
		return stack.Connected(n) && n.GetReadiness().GetGeneration() == 2 && n.GetReadiness().GetDiagnosticCode() != ""
	})
	if n.GetReadiness().GetReady() || n.GetReadiness().GetDiagnosticCode() != want {
		t.Fatalf("the microsandbox node on generation 2: ready %v, diagnostic %q, want %q",
			n.GetReadiness().GetReady(), n.GetReadiness().GetDiagnosticCode(), want)
	}

	// The Docker node stays retired and is never ready for generation 2:
	// a Docker adapter cannot serve it (Core's binding check).
	got, err := nodes.GetNode(ctx, &adminv1.GetNodeRequest{Name: dockerNode})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetNode().GetState() != adminv1.Node_STATE_RETIRED || got.GetNode().GetReadiness().GetReady() {
		t.Fatalf("the Docker node after the microsandbox node came: state %v, readiness %v",
			got.GetNode().GetState(), got.GetNode().GetReadiness())
	}
	dep, err := deployments.GetDeployment(ctx, &adminv1.GetDeploymentRequest{Name: "deployment"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("GetDeployment after the replacement: %v", dep.GetDeployment())
	served := map[string][]string{}
	for _, n := range dep.GetDeployment().GetNodes() {
		for _, g := range n.GetGenerations() {
			served[n.GetNode()] = append(served[n.GetNode()], fmt.Sprintf("%d:%s", g.GetGeneration(), g.GetDiagnosticCode()))
		}
	}
	if len(served[dockerNode]) != 0 || fmt.Sprint(served[msbNode]) != fmt.Sprintf("[2:%s]", want) {
		t.Fatalf("GetDeployment: the Docker node serves %v (want nothing), the microsandbox node %v (want [2:%s])",
			served[dockerNode], served[msbNode], want)
	}
}

// dockerFleet is a real Core serving a committed Docker deployment
// (generation 1, stack.DefaultSpecification) on one node agent over the
// Docker API fixture, enabled and ready.
type dockerFleet struct {
	core         *stack.Core
	cc           *grpc.ClientConn
	ctx          context.Context
	installation string
	engine       *dockertest.Server
	dockerNode   string
}

func startDockerFleet(t *testing.T) *dockerFleet {
	t.Helper()
	f := &dockerFleet{core: stack.StartCoreWith(t, storetest.NewDatabase(t), stack.CoreStateDir(t), true, stack.CoreOptions{})}
	f.cc, f.ctx = f.core.AdminClient(t)
	f.installation = stack.InstallationID(t, f.ctx, f.cc)
	logOnFailure(t, f.core)
	f.engine = stack.FixtureEngine(t)
	stack.EnrollAndStart(t, f.core, f.ctx, f.cc, f.installation, stack.NodeOptions{
		Socket: f.engine.Addr(), Image: stack.FixtureImage, HealthInterval: "500ms",
	}, "")
	f.dockerNode = stack.EnableAll(t, f.ctx, f.cc)[0]
	stack.CommitDockerDeployment(t, f.ctx, f.cc, stack.DefaultSpecification())
	stack.WaitNode(t, f.ctx, adminv1.NewNodeServiceClient(f.cc), f.dockerNode, func(n *adminv1.Node) bool {
		return stack.Connected(n) && n.GetReadiness().GetReady() && n.GetReadiness().GetGeneration() == 1
	})
	return f
}

// replaceWithMicrosandbox replaces the Docker deployment with a
// microsandbox one (generation 2) by ReplaceDeployment naming
// provider_kind and turning suspension off (the Docker deployment
// inherited Docker's suspension defaults, which microsandbox, without
// checkpoints, refuses), and checks the Docker node was retired in the
// same commit.
func (f *dockerFleet) replaceWithMicrosandbox(t *testing.T) {
	t.Helper()
	resp, err := adminv1.NewDeploymentServiceClient(f.cc).ReplaceDeployment(f.ctx, &adminv1.ReplaceDeploymentRequest{
		Candidate: &adminv1.DeploymentCandidate{ProviderKind: "microsandbox", Specification: &adminv1.Specification{
			Suspension: &adminv1.SuspensionPolicy{Disabled: true},
		}},
		UpdateMask:         &fieldmaskpb.FieldMask{Paths: []string{"provider_kind", "specification.suspension"}},
		ExpectedGeneration: 1,
	})
	if err != nil {
		t.Fatalf("ReplaceDeployment to microsandbox: %v", err)
	}
	d := resp.GetDeployment()
	if d.GetGeneration() != 2 || d.GetProviderKind() != "microsandbox" || !resp.GetChanged() ||
		d.GetSpecification().GetMemoryBytes() != stack.DefaultSpecification().GetMemoryBytes() {
		t.Fatalf("ReplaceDeployment: generation %d, kind %q, changed %v, specification %v",
			d.GetGeneration(), d.GetProviderKind(), resp.GetChanged(), d.GetSpecification())
	}
	got, err := adminv1.NewNodeServiceClient(f.cc).GetNode(f.ctx, &adminv1.GetNodeRequest{Name: f.dockerNode})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetNode().GetState() != adminv1.Node_STATE_RETIRED {
		t.Fatalf("the Docker node after the replacement: %v, want retired", got.GetNode().GetState())
	}
}

// enableSecondNode enables the node enrolled after the Docker node and
// returns its name.
func (f *dockerFleet) enableSecondNode(t *testing.T) string {
	t.Helper()
	nodes := adminv1.NewNodeServiceClient(f.cc)
	list, err := nodes.ListNodes(f.ctx, &adminv1.ListNodesRequest{PageSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	var name string
	for _, n := range list.GetNodes() {
		if n.GetState() == adminv1.Node_STATE_ENROLLED {
			name = n.GetName()
		}
	}
	if name == "" || len(list.GetNodes()) != 2 {
		t.Fatalf("nodes after enrolling the microsandbox node: %v", list.GetNodes())
	}
	if _, err := nodes.EnableNode(f.ctx, &adminv1.EnableNodeRequest{Name: name}); err != nil {
		t.Fatalf("EnableNode: %v", err)
	}
	return name
}

// TestReplaceDockerWithAReadyMicrosandboxNode: a Session created on the
// Docker deployment (generation 1, the Docker fixture node) stays on that
// node with its generation through ReplaceDeployment to microsandbox; a
// microsandbox node on a fake virtualizing host, enrolled afterwards, is
// ready for generation 2, and a new Session is placed on it and created on
// fakemsb: a running sandbox carrying exactly its allocation's io.berth.*
// labels (read from the fixture and the database), with its host
// directories on the node; a fork of it is refused fork_unsupported (no
// checkpoints). Deleting both Sessions leaves nothing of
// either in the Docker fixture, in the fake msb or in those directories.
func TestReplaceDockerWithAReadyMicrosandboxNode(t *testing.T) {
	f := startDockerFleet(t)
	nodes := adminv1.NewNodeServiceClient(f.cc)
	sessions := adminv1.NewSessionServiceClient(f.cc)

	before := f.createSession(t)
	oldAlloc := f.waitActive(t, before)
	if oldAlloc.GetNode() != f.dockerNode || oldAlloc.GetGeneration() != 1 {
		t.Fatalf("the Session before the replacement: node %s, generation %d; want %s, 1", oldAlloc.GetNode(), oldAlloc.GetGeneration(), f.dockerNode)
	}
	oldID := strings.TrimPrefix(oldAlloc.GetName(), "allocations/")
	if n := f.containersOf(oldID); n != 1 {
		t.Fatalf("the Docker fixture holds %d containers of the first allocation, want 1", n)
	}

	f.replaceWithMicrosandbox(t)
	host := newFakeHost(t, f.installation, true)
	msbAgent := startFakeNode(t, f.core, f.ctx, f.cc, f.installation, host)
	msbNode := f.enableSecondNode(t)
	stack.WaitNode(t, f.ctx, nodes, msbNode, func(n *adminv1.Node) bool {
		return stack.Connected(n) && n.GetReadiness().GetReady() && n.GetReadiness().GetGeneration() == 2
	})

	// The Session of generation 1 stays where it was, as it was.
	if a := f.allocation(t, oldAlloc.GetName()); a.GetNode() != f.dockerNode || a.GetGeneration() != 1 || a.GetState() != adminv1.Allocation_STATE_ACTIVE {
		t.Fatalf("the first Session's allocation after the replacement: %v; want ACTIVE on %s, generation 1", a, f.dockerNode)
	}
	if n := f.containersOf(oldID); n != 1 {
		t.Fatalf("the Docker fixture holds %d containers of the first allocation after the replacement, want 1", n)
	}

	after := f.createSession(t)
	newAlloc := f.waitActive(t, after)
	if newAlloc.GetNode() != msbNode || newAlloc.GetGeneration() != 2 {
		t.Fatalf("the Session after the replacement: node %s, generation %d; want %s, 2", newAlloc.GetNode(), newAlloc.GetGeneration(), msbNode)
	}
	newID := strings.TrimPrefix(newAlloc.GetName(), "allocations/")
	// A microsandbox deployment has no checkpoints: a fork is refused
	// before anything is written (the one sandbox below is the Session's).
	if _, err := sessions.ForkSession(f.ctx, &adminv1.ForkSessionRequest{Name: after, RequestId: uuid.NewString(), Count: 2}); stack.AdminReason(err) != "fork_unsupported" {
		t.Fatalf("ForkSession under a microsandbox deployment = %v; want FAILED_PRECONDITION fork_unsupported", err)
	}
	var environment, tenant string
	if err := f.core.Store(t).Pool().QueryRow(f.ctx,
		"SELECT environment_id::text, tenant_id::text FROM allocations WHERE id = $1", newID).Scan(&environment, &tenant); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"io.berth.installation": f.installation, "io.berth.tenant": tenant,
		"io.berth.environment": environment, "io.berth.allocation": newID,
	}
	sandboxes := host.MSB.Sandboxes()
	if len(sandboxes) != 1 {
		t.Fatalf("fakemsb holds %d sandboxes, want the new Session's one: %v", len(sandboxes), sandboxes)
	}
	var dirs []string
	for name, sb := range sandboxes {
		t.Logf("fakemsb: sandbox %s, %s, labels %v", name, sb.Status, sb.Labels)
		if sb.Status != "Running" || !maps.Equal(sb.Labels, want) {
			t.Fatalf("fakemsb: sandbox %s %s with labels %v; want Running with %v", name, sb.Status, sb.Labels, want)
		}
		for _, m := range sb.Mounts {
			dir, _, _ := strings.Cut(m, ":")
			if !strings.HasPrefix(dir, msbAgent.Dir+"/") {
				t.Errorf("mount %q is not in the node's state directory %s", m, msbAgent.Dir)
			}
			if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
				t.Errorf("the sandbox's host directory %s: %v", dir, err)
			}
			dirs = append(dirs, dir)
		}
	}
	if len(dirs) == 0 {
		t.Fatal("the sandbox mounts no host directory (its workspace)")
	}
	if n := len(f.engine.Containers()); n != 1 {
		t.Fatalf("the Docker fixture holds %d containers after the second Session, want the first Session's only", n)
	}

	for _, name := range []string{before, after} {
		if _, err := sessions.DeleteSession(f.ctx, &adminv1.DeleteSessionRequest{Name: name}); err != nil {
			t.Fatalf("DeleteSession %s: %v", name, err)
		}
	}
	stack.WaitFor(t, 2*time.Minute, "both Sessions deleted", func() bool {
		for _, name := range []string{before, after} {
			s, err := sessions.GetSession(f.ctx, &adminv1.GetSessionRequest{Name: name})
			if err != nil {
				t.Fatal(err)
			}
			if s.GetSession().GetState() != adminv1.Session_STATE_DELETED {
				return false
			}
		}
		return true
	})
	stack.WaitFor(t, time.Minute, "nothing of either Session in the fixtures", func() bool {
		return len(f.engine.Containers()) == 0 && len(f.engine.Volumes()) == 0 && len(host.MSB.Sandboxes()) == 0
	})
	for _, dir := range dirs {
		if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the deleted Session's host directory %s: %v, want it gone", dir, err)
		}
	}
	for _, a := range []string{oldAlloc.GetName(), newAlloc.GetName()} {
		if got := f.allocation(t, a); got.GetState() != adminv1.Allocation_STATE_RELEASED {
			t.Errorf("allocation %s after deletion: %v, want RELEASED", a, got.GetState())
		}
	}
}

// createSession creates a Session through the admin API and returns its
// name.
func (f *dockerFleet) createSession(t *testing.T) string {
	t.Helper()
	resp, err := adminv1.NewSessionServiceClient(f.cc).CreateSession(f.ctx, &adminv1.CreateSessionRequest{
		RequestId: uuid.NewString(), Session: &adminv1.Session{},
	})
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	return resp.GetSession().GetName()
}

// waitActive waits (up to 2 min) for session's allocation to be ACTIVE and
// settled, and returns it.
func (f *dockerFleet) waitActive(t *testing.T, session string) *adminv1.Allocation {
	t.Helper()
	var a *adminv1.Allocation
	stack.WaitFor(t, 2*time.Minute, session+"'s allocation active", func() bool {
		s, err := adminv1.NewSessionServiceClient(f.cc).GetSession(f.ctx, &adminv1.GetSessionRequest{Name: session})
		if err != nil {
			t.Fatal(err)
		}
		if s.GetSession().GetAllocation() == "" {
			return false
		}
		a = f.allocation(t, s.GetSession().GetAllocation())
		return a.GetState() == adminv1.Allocation_STATE_ACTIVE && a.GetCreateSettled()
	})
	return a
}

func (f *dockerFleet) allocation(t *testing.T, name string) *adminv1.Allocation {
	t.Helper()
	resp, err := adminv1.NewAllocationServiceClient(f.cc).GetAllocation(f.ctx, &adminv1.GetAllocationRequest{Name: name})
	if err != nil {
		t.Fatalf("GetAllocation %s: %v", name, err)
	}
	return resp.GetAllocation()
}

// containersOf counts the Docker fixture's containers labelled with the
// allocation.
func (f *dockerFleet) containersOf(allocation string) int {
	n := 0
	for _, c := range f.engine.Containers() {
		if c.Labels["io.berth.allocation"] == allocation {
			n++
		}
	}
	return n
}
