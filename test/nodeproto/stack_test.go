package nodeproto

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/docker/dockertest"
	"berth.dev/sandbox/testenv"

	"berth.dev/test/internal/stack"
)

// TestOperatorEnrollsAndCoreConnects walks the operator's path with the
// real binaries: berth-core serves; the admin creates an enrollment token;
// berth-nodeagent enrolls with it and serves; the admin enables the node;
// Core connects to it and reports its presence and readiness; retiring the
// node makes Core let go of it.
func TestOperatorEnrollsAndCoreConnects(t *testing.T) {
	c := stack.StartCore(t, storetestDatabase(t), stack.CoreStateDir(t), true)
	cc, ctx := c.AdminClient(t)
	instResp, err := adminv1.NewInstallationServiceClient(cc).GetInstallation(ctx, &adminv1.GetInstallationRequest{Name: "installation"})
	if err != nil {
		t.Fatal(err)
	}
	nodesAPI := adminv1.NewNodeServiceClient(cc)
	tok, err := nodesAPI.CreateEnrollmentToken(ctx, &adminv1.CreateEnrollmentTokenRequest{
		RequestId: uuid.NewString(), Ttl: durationpb.New(10 * time.Minute),
	})
	if err != nil {
		t.Fatalf("CreateEnrollmentToken: %v", err)
	}
	list, err := nodesAPI.ListEnrollmentTokens(ctx, &adminv1.ListEnrollmentTokensRequest{})
	if err != nil || len(list.GetEnrollmentTokens()) != 1 {
		t.Fatalf("ListEnrollmentTokens: %v, %v", list, err)
	}

	engine := stack.FixtureEngine(t)
	inst := &stack.Installation{ID: instResp.GetInstallation().GetId()}
	listen := stack.FreeAddr(t)
	n := stack.PrepareNode(t, inst, stack.NodeOptions{Socket: engine.Addr(), Image: stack.FixtureImage, Listen: listen})
	public := c.PublicAddr()
	out, code := stack.EnrollCmd(t, n, public, tok.GetTokenText(), listen)
	if code != 0 {
		t.Fatalf("enroll: %d %s", code, out)
	}
	nodes, err := nodesAPI.ListNodes(ctx, &adminv1.ListNodesRequest{})
	if err != nil || len(nodes.GetNodes()) != 1 {
		t.Fatalf("ListNodes: %v, %v", nodes, err)
	}
	node := nodes.GetNodes()[0]
	if node.GetState() != adminv1.Node_STATE_ENROLLED || node.GetPresence().GetConnected() {
		t.Fatalf("a freshly enrolled node: %v", node)
	}
	if node.GetAdvertiseAddress() != listen {
		t.Fatalf("advertised %q, want %q", node.GetAdvertiseAddress(), listen)
	}
	n.ID = node.GetId()
	n.Start()
	t.Cleanup(n.Stop)
	if _, err := nodesAPI.EnableNode(ctx, &adminv1.EnableNodeRequest{Name: node.GetName()}); err != nil {
		t.Fatalf("EnableNode: %v", err)
	}
	// Before the first commit the node serves nothing: connected, not ready.
	got := stack.WaitNode(t, ctx, nodesAPI, node.GetName(), func(n *adminv1.Node) bool { return n.GetPresence().GetConnected() })
	if r := got.GetReadiness(); r.GetReady() || r.GetDiagnosticCode() != "no_committed_generation" || got.GetCapacity().GetMemoryBytes() == 0 {
		t.Fatalf("connected node before the first commit: %v", got)
	}
	// The commit is published to the node, which serves it and is ready.
	stack.CommitDockerDeployment(t, ctx, cc, stack.DefaultSpecification())
	got = stack.WaitNode(t, ctx, nodesAPI, node.GetName(), func(n *adminv1.Node) bool {
		return stack.Connected(n) && n.GetReadiness().GetReady() && n.GetReadiness().GetGeneration() == 1
	})
	// Core records the presence durably, bound to its epoch and the generation.
	nodeID := uuid.MustParse(got.GetId())
	p, err := c.Store(t).GetNodePresence(context.Background(), nodeID)
	if err != nil || !p.Present || p.Generation != 1 || !p.Ready || p.OwnerEpoch != instResp.GetInstallation().GetOwnerEpoch() {
		t.Fatalf("recorded presence: %+v, %v", p, err)
	}
	if _, err := nodesAPI.RetireNode(ctx, &adminv1.RetireNodeRequest{Name: node.GetName()}); err != nil {
		t.Fatalf("RetireNode: %v", err)
	}
	// A retired node stays connected and observed (what it holds must be
	// cleaned up), though nothing is placed on it; a removed one is
	// dropped.
	stack.WaitNode(t, ctx, nodesAPI, node.GetName(), func(n *adminv1.Node) bool {
		return n.GetState() == adminv1.Node_STATE_RETIRED && n.GetPresence().GetConnected()
	})
	if _, err := nodesAPI.RemoveNode(ctx, &adminv1.RemoveNodeRequest{Name: node.GetName()}); err != nil {
		t.Fatalf("RemoveNode: %v", err)
	}
	stack.WaitNode(t, ctx, nodesAPI, node.GetName(), func(n *adminv1.Node) bool { return !n.GetPresence().GetConnected() })
}

// TestDeploymentThroughCore: the admin previews and commits the initial
// provider selection through berth-core; a stale commit is refused, and so
// is a changed selection at the current generation (CommitDeployment
// commits only the first; ReplaceDeployment replaces); the same candidate
// again changes nothing.
func TestDeploymentThroughCore(t *testing.T) {
	c := stack.StartCore(t, storetestDatabase(t), stack.CoreStateDir(t), true)
	cc, ctx := c.AdminClient(t)
	api := adminv1.NewDeploymentServiceClient(cc)
	candidate := &adminv1.DeploymentCandidate{
		ProviderKind: "docker",
		Specification: &adminv1.Specification{
			CpuMillis: 1000, MemoryBytes: 1 << 30, DiskBytes: 10 << 30, MaxActive: 4, MaxRetained: 8,
		},
	}
	preview, err := api.PreviewDeployment(ctx, &adminv1.PreviewDeploymentRequest{Candidate: candidate})
	if err != nil || !preview.GetChanged() {
		t.Fatalf("PreviewDeployment: %v, %v", preview, err)
	}
	committed, err := api.CommitDeployment(ctx, &adminv1.CommitDeploymentRequest{Candidate: candidate, ExpectedGeneration: preview.GetExpectedGeneration()})
	if err != nil {
		t.Fatalf("CommitDeployment: %v", err)
	}
	if committed.GetDeployment().GetGeneration() != 1 || committed.GetDeployment().GetProviderKind() != "docker" {
		t.Fatalf("committed %v", committed)
	}
	bigger := proto.Clone(candidate).(*adminv1.DeploymentCandidate)
	bigger.Specification.MaxActive = 8
	if _, err := api.CommitDeployment(ctx, &adminv1.CommitDeploymentRequest{Candidate: bigger, ExpectedGeneration: preview.GetExpectedGeneration()}); status.Code(err) != codes.FailedPrecondition || stack.AdminReason(err) != "deployment_generation_moved" {
		t.Fatalf("stale commit: %v", err)
	}
	if _, err := api.CommitDeployment(ctx, &adminv1.CommitDeploymentRequest{Candidate: bigger, ExpectedGeneration: 1}); status.Code(err) != codes.FailedPrecondition || stack.AdminReason(err) != "deployment_committed" {
		t.Fatalf("changed selection: %v", err)
	}
	if again, err := api.CommitDeployment(ctx, &adminv1.CommitDeploymentRequest{Candidate: candidate, ExpectedGeneration: 1}); err != nil || again.GetDeployment().GetGeneration() != 1 {
		t.Fatalf("the same candidate again: %v, %v", again, err)
	}
	got, err := api.GetDeployment(ctx, &adminv1.GetDeploymentRequest{Name: "deployment"})
	if err != nil || got.GetDeployment().GetGeneration() != 1 {
		t.Fatalf("GetDeployment: %v, %v", got, err)
	}
}

// TestNodeIsReadyOnlyForTheCommittedGeneration: a node serves what Core
// publishes, never a specification of its own. Before the first commit it
// is connected but not ready (no_committed_generation, recorded in its
// presence) and CreateSession is refused while it is the only node; the
// commit is published to it at once and it becomes ready for generation
// 1, with the committed specification's digest.
func TestNodeIsReadyOnlyForTheCommittedGeneration(t *testing.T) {
	c := stack.StartCore(t, storetestDatabase(t), stack.CoreStateDir(t), true)
	cc, ctx := c.AdminClient(t)
	installationID := stack.InstallationID(t, ctx, cc)
	stack.EnrollAndStart(t, c, ctx, cc, installationID, stack.NodeOptions{
		Socket: stack.FixtureEngine(t).Addr(), Image: stack.FixtureImage,
	}, "")
	name := stack.EnableAll(t, ctx, cc)[0]
	nodesAPI := adminv1.NewNodeServiceClient(cc)
	got := stack.WaitNode(t, ctx, nodesAPI, name, func(n *adminv1.Node) bool {
		return stack.Connected(n) && n.GetReadiness().GetDiagnosticCode() == "no_committed_generation"
	})
	if got.GetReadiness().GetReady() {
		t.Fatalf("a node before the first commit: %v", got)
	}
	nodeID := uuid.MustParse(got.GetId())
	st := c.Store(t)
	stack.WaitFor(t, 15*time.Second, "the node recorded not ready before the commit", func() bool {
		p, err := st.GetNodePresence(context.Background(), nodeID)
		return err == nil && p.Present && !p.Ready && p.Generation == 0 && p.DiagnosticCode == "no_committed_generation"
	})
	_, err := adminv1.NewSessionServiceClient(cc).CreateSession(ctx, &adminv1.CreateSessionRequest{
		RequestId: uuid.NewString(), Session: &adminv1.Session{DisplayName: "nowhere"},
	})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("CreateSession before the first commit: %v", err)
	}

	committed := proto.Clone(stack.DefaultSpecification()).(*adminv1.Specification)
	committed.MemoryBytes *= 2
	stack.CommitDockerDeployment(t, ctx, cc, committed)
	stack.WaitNode(t, ctx, nodesAPI, name, func(n *adminv1.Node) bool {
		return stack.Connected(n) && n.GetReadiness().GetReady() && n.GetReadiness().GetGeneration() == 1
	})
	stack.WaitFor(t, 15*time.Second, "the node recorded ready for generation 1", func() bool {
		p, err := st.GetNodePresence(context.Background(), nodeID)
		return err == nil && p.Present && p.Ready && p.Generation == 1
	})
}

// TestNodeOnAnotherBackendIsNotReady: a node is bound to the engine it
// served the committed generation on; restarted against another engine
// (another backend fingerprint) it stays connected but is not ready with
// backend_fingerprint_mismatch, and the database keeps the first binding.
func TestNodeOnAnotherBackendIsNotReady(t *testing.T) {
	other := strings.TrimPrefix(testenv.DockerHost(t), "unix://")
	c := stack.StartCore(t, storetestDatabase(t), stack.CoreStateDir(t), true)
	cc, ctx := c.AdminClient(t)
	installationID := stack.InstallationID(t, ctx, cc)
	n := stack.EnrollAndStart(t, c, ctx, cc, installationID, stack.NodeOptions{
		Socket: stack.FixtureEngine(t).Addr(), Image: stack.FixtureImage,
	}, "")
	name := stack.EnableAll(t, ctx, cc)[0]
	stack.CommitDockerDeployment(t, ctx, cc, stack.DefaultSpecification())
	nodesAPI := adminv1.NewNodeServiceClient(cc)
	got := stack.WaitNode(t, ctx, nodesAPI, name, func(n *adminv1.Node) bool {
		return stack.Connected(n) && n.GetReadiness().GetReady()
	})
	st := c.Store(t)
	// bound reads the node's backend binding ("" before there is one).
	bound := func() string {
		var fp string
		_ = st.Pool().QueryRow(context.Background(),
			"SELECT backend_fingerprint FROM node_backends WHERE node_id = $1", uuid.MustParse(got.GetId())).Scan(&fp)
		return fp
	}
	const fixture = "docker:" + dockertest.EngineID
	stack.WaitFor(t, 15*time.Second, "the node bound to the fixture engine", func() bool { return bound() == fixture })

	// The same node, restarted against another engine.
	n.Stop()
	n.EditConfig(func(cfg map[string]any) { cfg["node"].(map[string]any)["socket"] = other })
	n.Start()
	got = stack.WaitNode(t, ctx, nodesAPI, name, func(n *adminv1.Node) bool {
		return stack.Connected(n) && n.GetReadiness().GetDiagnosticCode() == "backend_fingerprint_mismatch"
	})
	if got.GetReadiness().GetReady() {
		t.Fatalf("a node on another backend: %v", got)
	}
	stack.WaitFor(t, 15*time.Second, "the mismatch recorded in the node's presence", func() bool {
		p, err := st.GetNodePresence(context.Background(), uuid.MustParse(got.GetId()))
		return err == nil && p.Present && !p.Ready && p.DiagnosticCode == "backend_fingerprint_mismatch"
	})
	if fp := bound(); fp != fixture {
		t.Fatalf("the binding moved to %q", fp)
	}
}
