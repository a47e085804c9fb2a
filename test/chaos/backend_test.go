package chaos

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/client"

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
		c.invariants()
		if cs, vs := installationResources(t, cliB, c.inst); cs+vs > 0 {
			c.violation("I2", "engine B holds %d containers and %d volumes of the installation", cs, vs)
		}
	})
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
