package nodeproto

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/nodeagent"
	adminv1 "berth.dev/proto/berth/admin/v1"

	"berth.dev/test/internal/stack"
)

// TestStalledHealthReportsEndPlacement: a node agent whose health loop
// stalls while its connection to Core stays up (the agent's fault hook,
// nodeagent.FaultStallHealthEnv: each Connect stream sends one report
// and then none) is present and ready at first. Once GetNode reports it
// not connected (its last report is 45 s old), placement does not choose
// it either: CreateSession is refused with no_ready_node_with_capacity
// (it is the only node), and the database's presence of the node says
// absent. The connection itself never ended meanwhile (Core logged no
// end of it): presence follows the reports, not the transport.
func TestStalledHealthReportsEndPlacement(t *testing.T) {
	c := stack.StartCore(t, storetestDatabase(t), stack.CoreStateDir(t), true)
	cc, ctx := c.AdminClient(t)
	installationID := stack.InstallationID(t, ctx, cc)
	stack.EnrollAndStart(t, c, ctx, cc, installationID, stack.NodeOptions{
		Socket: stack.FixtureEngine(t).Addr(), Image: stack.FixtureImage,
		Env: []string{nodeagent.FaultStallHealthEnv + "=1"},
	}, "")
	name := stack.EnableAll(t, ctx, cc)[0]
	stack.CommitDockerDeployment(t, ctx, cc, stack.DefaultSpecification())
	nodesAPI := adminv1.NewNodeServiceClient(cc)
	got := stack.WaitNode(t, ctx, nodesAPI, name, func(n *adminv1.Node) bool {
		return stack.Connected(n) && n.GetReadiness().GetReady()
	})
	nodeID := uuid.MustParse(got.GetId())

	// The one report ages: GetNode stops calling the node connected once
	// it is 45 s old (bounded wait, not a timed assertion).
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, err := nodesAPI.GetNode(ctx, &adminv1.GetNodeRequest{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		if !stack.Connected(resp.GetNode()) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GetNode still reports the stalled node connected: %v", resp.GetNode())
		}
		time.Sleep(time.Second)
	}
	if strings.Contains(c.Logs(), "node connection ended") {
		t.Fatalf("Core's connection to the node ended; the test needs it alive:\n%s", c.Logs())
	}

	sessions := adminv1.NewSessionServiceClient(cc)
	resp, err := sessions.CreateSession(ctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString(), Session: &adminv1.Session{}})
	if err == nil {
		t.Fatalf("a Session was placed (%s) on the only node, which GetNode reports not connected", resp.GetSession().GetName())
	}
	if reason := stack.AdminReason(err); reason != "no_ready_node_with_capacity" {
		t.Fatalf("CreateSession refused with %v (reason %q), want no_ready_node_with_capacity", err, reason)
	}
	p, err := c.Store(t).GetNodePresence(context.Background(), nodeID)
	if err != nil {
		t.Fatal(err)
	}
	if p.Present {
		t.Fatalf("the database counts the stalled node present: %+v", p)
	}
}
