package chaos

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/client"
	"google.golang.org/protobuf/types/known/timestamppb"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/docker"

	"berth.dev/test/internal/stack"
)

// TestNodeBackOnAnotherBackend restarts a node agent, which holds two
// running Sessions on a private engine A, with its socket pointing at
// another private engine B (another backend fingerprint than the one Core
// bound the node to). Core reports the node not ready
// (backend_fingerprint_mismatch) and sends it nothing more: a Session
// deleted meanwhile keeps its allocation (CLEANING_UP, its container still
// on A), engine B never sees anything of the installation (no tombstone),
// and the running Session's compute_reason names the mismatch. When the
// agent comes back on A, the deleted Session's cleanup completes (its
// container gone from A, its allocation released) and the other Session
// runs again. I1-I3 hold at the end.
func TestNodeBackOnAnotherBackend(t *testing.T) {
	scenario(t, "node agent restarted on another backend", func(t *testing.T, r *run) {
		engineA := startDockerdSlot(t, 0, 0)
		engineB := startDockerdSlot(t, 1, 0)
		c := newCluster(t, r, options{nodes: 1, proxied: -1, engine: engineA.Host, image: engineA.Image})
		cliB, err := docker.NewClient(engineB.Host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stack.RemoveOwned(t, cliB, c.inst); _ = cliB.Close() })
		n := c.nodes[0]
		names := c.mustCreate(2)
		deleted, running := names[0], names[1]
		if got := c.waitActive(names, time.Now(), activeDeadline); len(got) != len(names) {
			t.Fatalf("only %d of %d Sessions became ACTIVE", len(got), len(names))
		}
		allocs := bySession(c.allocations())
		deletedAlloc, runningAlloc := allocs[deleted].GetName(), allocs[running].GetName()
		if cs, _ := stack.Owned(t, c.cli, c.inst); cs != 2 {
			t.Fatalf("engine A holds %d containers of the installation, want 2", cs)
		}

		// The same node, restarted against engine B.
		n.Stop()
		n.EditConfig(func(cfg map[string]any) { cfg["node"].(map[string]any)["socket"] = socketPath(engineB.Host) })
		n.Start()
		r.fault(t, "node agent restarted on another engine (socket %s)", engineB.Host)
		stack.WaitNode(t, c.ctx, c.nodesAPI(), n.name, func(nd *adminv1.Node) bool {
			return stack.Connected(nd) && nd.GetReadiness().GetDiagnosticCode() == "backend_fingerprint_mismatch"
		})
		st := c.db()
		var mismatchAt time.Time
		if err := st.Pool().QueryRow(context.Background(), "SELECT now()").Scan(&mismatchAt); err != nil {
			t.Fatal(err)
		}
		if err := c.deleteSession(deleted); err != nil {
			t.Fatal(err)
		}
		// The running Session is observed again after the mismatch (by the
		// database clock): the worker passed over the node at least once
		// since both the mismatch and the deletion, its allocation scan
		// (the deleted Session's cleanup) before its observation scan.
		runningID := uuid.MustParse(strings.TrimPrefix(runningAlloc, "allocations/"))
		var observed string
		stack.WaitFor(t, 2*time.Minute, "the running Session observed after the mismatch", func() bool {
			a, err := st.GetAllocation(context.Background(), runningID)
			if err != nil {
				t.Fatal(err)
			}
			observed = a.Observation.Reason
			return a.Observation.At != nil && a.Observation.At.After(mismatchAt)
		})
		if observed != "backend_fingerprint_mismatch" {
			c.violation("observation", "the running Session on a node back on another backend was observed %q, want backend_fingerprint_mismatch", observed)
		}
		resp, err := c.sessions().GetSession(c.ctx, &adminv1.GetSessionRequest{Name: running})
		if err != nil {
			t.Fatal(err)
		}
		if reason := resp.GetSession().GetEnvironment().GetComputeReason(); reason != "backend_fingerprint_mismatch" {
			c.violation("observation", "GetSession reports compute_reason %q, want backend_fingerprint_mismatch", reason)
		}
		if a := bySession(c.allocations())[deleted]; a == nil {
			c.violation("retention", "the deleted Session's allocation %s was released while its container still runs on engine A, want CLEANING_UP", deletedAlloc)
		} else if a.GetState() != adminv1.Allocation_STATE_CLEANING_UP {
			c.violation("retention", "the deleted Session's allocation %s is %v, want CLEANING_UP", deletedAlloc, a.GetState())
		}
		if cs, _ := stack.Owned(t, c.cli, c.inst); cs != 2 {
			c.violation("retention", "engine A holds %d containers of the installation, want 2 (nothing was sent to the node)", cs)
		}
		if cs, vs := installationResources(t, cliB, c.inst); cs+vs > 0 {
			c.violation("retention", "engine B holds %d containers and %d volumes of the installation (a call reached the node on the wrong backend)", cs, vs)
		}

		// Back on engine A: the deletion's cleanup completes.
		n.Stop()
		n.EditConfig(func(cfg map[string]any) { cfg["node"].(map[string]any)["socket"] = socketPath(engineA.Host) })
		n.Start()
		repaired := time.Now()
		stack.WaitNode(t, c.ctx, c.nodesAPI(), n.name, func(nd *adminv1.Node) bool {
			return stack.Connected(nd) && nd.GetReadiness().GetReady()
		})
		stack.WaitFor(t, settleDeadline, "the deleted Session's allocation released", func() bool {
			_, owned := bySession(c.allocations())[deleted]
			return !owned
		})
		r.recovery = time.Since(repaired)
		if cs, _ := stack.Owned(t, c.cli, c.inst); cs != 1 {
			c.violation("I2", "engine A holds %d containers of the installation after the deletion's cleanup, want 1", cs)
		}
		stack.WaitFor(t, 2*time.Minute, "the running Session available again", func() bool {
			resp, err := c.sessions().GetSession(c.ctx, &adminv1.GetSessionRequest{Name: running})
			return err == nil && resp.GetSession().GetEnvironment().GetComputeAvailable()
		})
		// And by engine A's account: its container runs (I6).
		requireActive(t, c, []string{running}, activeDeadline)

		// The host really moved: the operator abandons what the node held.
		abandonMovedNode(t, r, c, n, engineA, engineB, cliB, running)
		c.invariants()
		if cs, vs := installationResources(t, cliB, c.inst); cs+vs > 0 {
			c.violation("I2", "engine B holds %d containers and %d volumes of the installation", cs, vs)
		}
	})
}

// abandonMovedNode: a node whose agent is back on another engine (B) while
// its Sessions' containers run on the one it is bound to (A) is removed
// only through the explicit abandon: RemoveNode with abandon refuses it
// while it is enabled, and while, retired, it still runs on A
// (node_backend_not_mismatched); on B it refuses it without abandon (it
// holds allocations) and with abandon naming another backend than its
// binding (GetNode's backend_fingerprint, A's);
// with abandon naming A it is removed, its Sessions end FAILED with
// node_abandoned, their allocations RELEASED and marked abandoned, the
// response and the database's record name exactly the abandoned
// allocations (the record with the native ids of their containers, which
// are still on A: Core touched nothing there, nor anything on B), and a
// retry returns the same. The operator then removes what A holds.
func abandonMovedNode(t *testing.T, r *run, c *cluster, n *node, engineA, engineB *dockerd, cliB *client.Client, running string) {
	t.Helper()
	ctx := context.Background()
	second := c.mustCreate(1)[0]
	if got := c.waitActive([]string{second}, time.Now(), activeDeadline); len(got) != 1 {
		t.Fatalf("the second Session never became ACTIVE")
	}
	held := map[string]string{} // allocation name -> session name
	for _, name := range []string{running, second} {
		held[bySession(c.allocations())[name].GetName()] = name
	}
	infoA, err := c.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		t.Fatal(err)
	}
	infoB, err := cliB.Info(ctx, client.InfoOptions{})
	if err != nil {
		t.Fatal(err)
	}
	boundFP, otherFP := "docker:"+infoA.Info.ID, "docker:"+infoB.Info.ID
	got, err := c.nodesAPI().GetNode(c.ctx, &adminv1.GetNodeRequest{Name: n.name})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetNode().GetBackendFingerprint() != boundFP {
		t.Fatalf("GetNode backend_fingerprint %q, want engine A's %q", got.GetNode().GetBackendFingerprint(), boundFP)
	}
	remove := func(abandon *adminv1.NodeAbandon) (*adminv1.RemoveNodeResponse, error) {
		return c.nodesAPI().RemoveNode(c.ctx, &adminv1.RemoveNodeRequest{Name: n.name, Abandon: abandon})
	}
	refused := func(what string, abandon *adminv1.NodeAbandon, reason string) {
		t.Helper()
		if _, err := remove(abandon); stack.AdminReason(err) != reason {
			t.Fatalf("RemoveNode %s: %v (reason %q), want %s", what, err, stack.AdminReason(err), reason)
		}
	}
	refused("of the enabled node with abandon", &adminv1.NodeAbandon{BackendFingerprint: boundFP}, "node_enabled")
	if _, err := c.nodesAPI().RetireNode(c.ctx, &adminv1.RetireNodeRequest{Name: n.name}); err != nil {
		t.Fatal(err)
	}
	// Retired, but on its own engine: merely offline or healthy, a node
	// keeps what it holds.
	refused("of a node on its bound backend", &adminv1.NodeAbandon{BackendFingerprint: boundFP}, "node_backend_not_mismatched")

	n.Stop()
	n.EditConfig(func(cfg map[string]any) { cfg["node"].(map[string]any)["socket"] = socketPath(engineB.Host) })
	n.Start()
	r.fault(t, "node agent moved to another engine for good (socket %s)", engineB.Host)
	stack.WaitNode(t, c.ctx, c.nodesAPI(), n.name, func(nd *adminv1.Node) bool {
		return stack.Connected(nd) && nd.GetReadiness().GetDiagnosticCode() == "backend_fingerprint_mismatch"
	})
	refused("without abandon", nil, "node_holds_allocations")
	refused("abandoning the backend it runs on now", &adminv1.NodeAbandon{BackendFingerprint: otherFP}, "abandon_backend_not_bound")

	resp, err := remove(&adminv1.NodeAbandon{BackendFingerprint: boundFP})
	if err != nil {
		t.Fatalf("RemoveNode with abandon: %v", err)
	}
	ab := resp.GetAbandonment()
	if resp.GetNode().GetState() != adminv1.Node_STATE_REMOVED || ab.GetBackendFingerprint() != boundFP || ab.GetAbandonTime() == nil {
		t.Fatalf("RemoveNode with abandon answered %v", resp)
	}
	named := map[string]string{}
	for _, a := range ab.GetAllocations() {
		named[a.GetAllocation()] = a.GetSession()
	}
	if len(named) != len(held) || len(ab.GetReservations()) != 0 {
		t.Fatalf("the abandonment names %v and reservations %v, want exactly %v", named, ab.GetReservations(), held)
	}
	for alloc, session := range held {
		if named[alloc] != session {
			t.Fatalf("the abandonment names %v, want %v", named, held)
		}
	}
	again, err := remove(&adminv1.NodeAbandon{BackendFingerprint: boundFP})
	if err != nil || again.GetNode().GetState() != adminv1.Node_STATE_REMOVED || len(again.GetAbandonment().GetAllocations()) != len(held) ||
		!again.GetAbandonment().GetAbandonTime().AsTime().Equal(ab.GetAbandonTime().AsTime()) {
		t.Fatalf("RemoveNode retried: %v, %v", again, err)
	}
	// The retirement and the one abandonment (not its retry) are the
	// administrator's decisions in the trail.
	trail, err := adminv1.NewAuditServiceClient(c.cc).ListAuditEvents(c.ctx, &adminv1.ListAuditEventsRequest{
		ActionPrefix: "node.", Resource: n.name, EndTime: timestamppb.New(time.Now().Add(time.Hour)),
	})
	if err != nil {
		t.Fatal(err)
	}
	var decided []string
	for _, e := range trail.GetAuditEvents() {
		if e.GetKind() != adminv1.AuditEvent_KIND_DECISION || e.GetActor() != "admin" {
			t.Fatalf("node decision %v", e)
		}
		decided = append(decided, e.GetAction())
	}
	if len(decided) < 2 || decided[len(decided)-2] != "node.retire" || decided[len(decided)-1] != "node.abandon" {
		t.Fatalf("node decisions %v, want the retirement then one abandonment last", decided)
	}

	allocs := adminv1.NewAllocationServiceClient(c.cc)
	for alloc, session := range held {
		a, err := allocs.GetAllocation(c.ctx, &adminv1.GetAllocationRequest{Name: alloc})
		if err != nil {
			t.Fatal(err)
		}
		if a.GetAllocation().GetState() != adminv1.Allocation_STATE_RELEASED || !a.GetAllocation().GetAbandoned() {
			t.Fatalf("abandoned allocation %v, want RELEASED and abandoned", a.GetAllocation())
		}
		s, err := c.sessions().GetSession(c.ctx, &adminv1.GetSessionRequest{Name: session})
		if err != nil {
			t.Fatal(err)
		}
		if s.GetSession().GetState() != adminv1.Session_STATE_FAILED || s.GetSession().GetEnvironment().GetFailureCode() != "node_abandoned" {
			t.Fatalf("Session of an abandoned allocation: %v", s.GetSession())
		}
	}

	// The durable record: the action, the backend and each allocation
	// with the native id of its container, which is still on engine A.
	st := c.db()
	var action, backend string
	if err := st.Pool().QueryRow(ctx, "SELECT action, backend_fingerprint FROM node_abandonments WHERE node_id = $1",
		uuid.MustParse(n.ID)).Scan(&action, &backend); err != nil {
		t.Fatalf("no abandonment recorded: %v", err)
	}
	if action != "remove_node_abandon" || backend != boundFP {
		t.Fatalf("abandonment recorded as %q of %q", action, backend)
	}
	rows, err := st.Pool().Query(ctx, "SELECT identity, coalesce(native_id, '') FROM node_abandoned_resources WHERE node_id = $1 AND kind = 'allocation'",
		uuid.MustParse(n.ID))
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[string]string{}
	for rows.Next() {
		var id, native string
		if err := rows.Scan(&id, &native); err != nil {
			t.Fatal(err)
		}
		recorded["allocations/"+id] = native
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(recorded) != len(held) {
		t.Fatalf("the record names allocations %v, want %v", recorded, held)
	}
	for alloc, native := range recorded {
		if _, ok := held[alloc]; !ok || native == "" {
			t.Fatalf("the record names %s with native id %q", alloc, native)
		}
		ct, err := c.cli.ContainerInspect(ctx, native, client.ContainerInspectOptions{})
		if err != nil || ct.Container.Config.Labels[docker.LabelAllocation] != strings.TrimPrefix(alloc, "allocations/") {
			c.violation("abandon", "the recorded container %s of %s is not on engine A as it was: %v", native, alloc, err)
		}
	}
	if cs, _ := stack.Owned(t, c.cli, c.inst); cs != len(held) {
		c.violation("abandon", "engine A holds %d containers of the installation after the abandon, want the %d abandoned ones untouched", cs, len(held))
	}
	if cs, vs := installationResources(t, cliB, c.inst); cs+vs > 0 {
		c.violation("abandon", "engine B holds %d containers and %d volumes of the installation", cs, vs)
	}
	// The operator removes what the abandoned allocations left on A.
	stack.RemoveOwned(t, c.cli, c.inst)
}

// installationResources counts the containers and volumes on cli labelled
// with installation, tombstones included.
func installationResources(t *testing.T, cli *client.Client, installation string) (containers, volumes int) {
	t.Helper()
	ctx := context.Background()
	f := stack.InstallationFilter(installation)
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	vs, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	return len(cs.Items), len(vs.Items)
}
