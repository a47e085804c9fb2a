package chaos

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/google/uuid"
	"github.com/moby/moby/api/types/events"
	"github.com/moby/moby/client"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/docker"

	"berth.dev/core/daemon"

	"berth.dev/test/internal/stack"
)

// retentionMargin extends a window of one observation period in which
// nothing may change (no recreate, no volume removed, a stopped container
// never reported available) so that a whole observation pass, started
// at any moment, lands inside it on a loaded machine.
const retentionMargin = 5 * time.Second

// observeDeadline bounds how long a Session may take to report what
// happened to its container: one observation period, plus generous margin
// for a loaded machine. Only "before the deadline" is asserted; the time
// itself is logged (and recorded as the scenario's recovery).
const observeDeadline = daemon.DefaultObservePeriod + 50*time.Second

// allocationID is the id of "allocations/{id}".
func allocationID(a *adminv1.Allocation) string {
	return strings.TrimPrefix(a.GetName(), "allocations/")
}

// allocationFilter selects the engine's resources of one allocation.
func (c *cluster) allocationFilter(id string) client.Filters {
	return stack.InstallationFilter(c.inst).Add("label", docker.LabelAllocation+"="+id)
}

// engineResources reads from the engine the containers (with whether each
// runs) and the volume count of one allocation.
func (c *cluster) engineResources(id string) (containers map[string]bool, volumes int) {
	c.t.Helper()
	ctx := context.Background()
	cs, err := c.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: c.allocationFilter(id)})
	if err != nil {
		c.t.Fatalf("ContainerList: %v", err)
	}
	containers = map[string]bool{}
	for _, ct := range cs.Items {
		containers[ct.ID] = ct.State == "running"
	}
	vs, err := c.cli.VolumeList(ctx, client.VolumeListOptions{Filters: c.allocationFilter(id)})
	if err != nil {
		c.t.Fatalf("VolumeList: %v", err)
	}
	return containers, len(vs.Items)
}

// getSession reads one Session (nil while Core does not answer).
func (c *cluster) getSession(name string) *adminv1.Session {
	ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
	defer cancel()
	resp, err := c.sessions().GetSession(ctx, &adminv1.GetSessionRequest{Name: name})
	if err != nil {
		return nil
	}
	return resp.GetSession()
}

// TestRetiredNodeAgentKilledDuringDeletion retires a node that holds
// Sessions, then deletes every Session and SIGKILLs the retired node's
// agent on one of its containers' kill, die or destroy events (by the
// seed), restarting it after a seeded pause. Core keeps the retired
// node's connection and lifecycle worker: every allocation ends RELEASED
// with nothing left on the engine (counted from the engine), no Session
// is placed on the retired node (checked at creation and from the
// database), the Session created during the fault runs on the other node
// (I6: ACTIVE with a running container on the engine) before it is
// deleted too, and RemoveNode then succeeds (issue 12).
func TestRetiredNodeAgentKilledDuringDeletion(t *testing.T) {
	scenario(t, "retired node, agent SIGKILL during deletion", func(t *testing.T, r *run) {
		c := newCluster(t, r, options{proxied: -1, nodes: 2})
		before := c.mustCreate(4)
		if got := c.waitActive(before, time.Now(), activeDeadline); len(got) != len(before) {
			t.Fatalf("only %d of %d Sessions ACTIVE before the fault", len(got), len(before))
		}
		held := map[string]int{}
		for _, a := range c.allocations() {
			held[a.GetNode()]++
		}
		var holding []*node
		for _, n := range c.nodes {
			if held[n.name] > 0 {
				holding = append(holding, n)
			}
		}
		victim := pick(r.rng, holding)
		if _, err := c.nodesAPI().RetireNode(c.ctx, &adminv1.RetireNodeRequest{Name: victim.name}); err != nil {
			t.Fatalf("RetireNode: %v", err)
		}
		t.Logf("retired %s holding %d of %d Sessions", victim.name, held[victim.name], len(before))
		placedOnRetired := func(names []string) {
			m := bySession(c.allocations())
			for _, n := range names {
				if m[n].GetNode() == victim.name {
					c.violation("placement", "Session %s was placed on the retired node %s", n, victim.name)
				}
			}
		}
		after := c.mustCreate(2)
		placedOnRetired(after)

		trigger := pick(r.rng, []events.Action{events.ActionKill, events.ActionDie, events.ActionDestroy})
		var once sync.Once
		fired := make(chan struct{})
		kill := func(why string) {
			once.Do(func() {
				victim.kill()
				r.fault(t, "SIGKILL the retired node's agent %s (%s)", victim.name, why)
				close(fired)
			})
		}
		c.watch(func(m events.Message) {
			if m.Action == trigger && c.nodeOfAllocation(m.Actor.Attributes[docker.LabelAllocation]) == victim {
				kill("on a container " + string(trigger) + " of its deletion")
			}
		})
		for _, n := range append(before, after...) {
			if err := c.deleteSession(n); err != nil {
				t.Fatalf("DeleteSession: %v", err)
			}
		}
		select {
		case <-fired:
		case <-time.After(20 * time.Second):
			kill("no container " + string(trigger) + " on it within 20 s")
		}
		during := c.mustCreate(1)
		placedOnRetired(during)
		time.Sleep(time.Duration(r.rng.IntN(2000)) * time.Millisecond)
		pending := 0
		for _, a := range c.allocations() {
			if a.GetNode() == victim.name {
				pending++
			}
		}
		t.Logf("%d allocation(s) on the retired node not released while its agent is down", pending)
		repaired := time.Now()
		victim.restart()
		c.waitConnected(victim, true)
		// The Session created mid-fault, on the node that is not retired,
		// runs (I6) before it is deleted too.
		requireActive(t, c, during, activeDeadline)
		if err := c.deleteSession(during[0]); err != nil {
			t.Fatalf("DeleteSession: %v", err)
		}
		c.settle()
		r.recovery = time.Since(repaired)
		t.Logf("recovery (agent restart to every allocation released, nothing on the engine): %v", r.recovery)

		// From the database: the retired node holds only what it held
		// before it was retired.
		ids := map[string]bool{}
		for _, n := range before {
			ids[strings.TrimPrefix(n, "sessions/")] = true
		}
		for _, a := range c.allAllocations(c.db()) {
			if "nodes/"+a.NodeID.String() == victim.name && !ids[a.SessionID.String()] {
				c.violation("placement", "allocation %s of Session %s was placed on the retired node", a.ID, a.SessionID)
			}
		}
		if resp, err := c.nodesAPI().RemoveNode(c.ctx, &adminv1.RemoveNodeRequest{Name: victim.name}); err != nil {
			t.Errorf("RemoveNode of the emptied retired node: %v", err)
		} else if st := resp.GetNode().GetState(); st != adminv1.Node_STATE_REMOVED {
			t.Errorf("RemoveNode returned the node in state %v", st)
		} else {
			t.Logf("RemoveNode %s succeeded", victim.name)
		}
		c.invariants()
	})
}

// TestExternalContainerRemoval removes a running Session's container from
// outside through the Engine API (Go client), at a seeded moment of the
// observation cycle. The Session must report compute_available false
// with compute_reason compute_missing before observeDeadline (the time it
// took is logged and recorded as the recovery, so the table's median
// recovery is the median time from removal to compute_available false);
// the other Session stays available, Core neither recreates the container
// nor removes the volumes until the Session is deleted (polled over one
// full observation period after the report, plus retentionMargin), and
// deletion then
// leaves nothing (I2). Core runs with its default lifecycle and node
// intervals here, so the figure is the one of a default installation
// (the observation period is fixed at daemon.DefaultObservePeriod).
func TestExternalContainerRemoval(t *testing.T) {
	scenario(t, "container removed from outside", func(t *testing.T, r *run) {
		c := newCluster(t, r, options{proxied: -1, nodes: 1, coreArgs: []string{
			"--lifecycle-interval", daemon.DefaultLifecycleInterval.String(),
			"--node-interval", daemon.DefaultNodeInterval.String(),
		}})
		names := c.mustCreate(2)
		if got := c.waitActive(names, time.Now(), activeDeadline); len(got) != len(names) {
			t.Fatalf("only %d of %d Sessions ACTIVE before the fault", len(got), len(names))
		}
		i := r.rng.IntN(len(names))
		victim, other := names[i], names[1-i]
		id := allocationID(bySession(c.allocations())[victim])
		containers, volumes := c.engineResources(id)
		if len(containers) != 1 || volumes != 2 {
			t.Fatalf("allocation %s: %d containers and %d volumes on the engine, want 1 and 2", id, len(containers), volumes)
		}
		time.Sleep(time.Duration(r.rng.IntN(int(daemon.DefaultObservePeriod/time.Millisecond))) * time.Millisecond)
		removed := time.Now()
		for ct := range containers {
			if _, err := c.cli.ContainerRemove(context.Background(), ct, client.ContainerRemoveOptions{Force: true}); err != nil {
				t.Fatalf("ContainerRemove: %v", err)
			}
		}
		r.fault(t, "removed %s's container %s through the Engine API", victim, id)
		var s *adminv1.Session
		end := removed.Add(observeDeadline)
		for {
			if s = c.getSession(victim); s != nil && !s.GetEnvironment().GetComputeAvailable() {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("%s still reports compute available %v after its container was removed", victim, observeDeadline)
			}
			time.Sleep(50 * time.Millisecond)
		}
		r.recovery = time.Since(removed)
		t.Logf("external removal to compute_available false: %v (compute_reason %q)", r.recovery.Round(time.Millisecond), s.GetEnvironment().GetComputeReason())
		// A forced removal kills the container before it removes it: an
		// observation in between finds it stopped (compute_stopped, true
		// then), and the next one, within an observation period, missing.
		switch got := s.GetEnvironment().GetComputeReason(); got {
		case "compute_missing":
		case "compute_stopped":
			for s.GetEnvironment().GetComputeReason() != "compute_missing" && time.Now().Before(end.Add(daemon.DefaultObservePeriod)) {
				time.Sleep(50 * time.Millisecond)
				s = c.getSession(victim)
			}
			if got := s.GetEnvironment().GetComputeReason(); got != "compute_missing" {
				t.Errorf("compute_reason %q after a first compute_stopped, want compute_missing within an observation period", got)
			}
		default:
			t.Errorf("compute_reason %q, want compute_missing (or compute_stopped first)", got)
		}
		if s.GetState() != adminv1.Session_STATE_ACTIVE {
			t.Errorf("Session state %v after the removal, want ACTIVE (an observation moves no state)", s.GetState())
		}
		if o := c.getSession(other); !o.GetEnvironment().GetComputeAvailable() {
			t.Errorf("the untouched Session %s reports compute unavailable (%q)", other, o.GetEnvironment().GetComputeReason())
		}
		// The untouched Session runs on by the engine's account too (I6).
		requireActive(t, c, []string{other}, activeDeadline)
		// Kept until deletion: no recreate, the volumes stay, and the
		// Session goes on reporting the compute missing, on every poll of a
		// window of one full observation period after the compute_missing
		// report plus retentionMargin, so the next observation of the
		// missing container lands inside it.
		window := time.Now().Add(daemon.DefaultObservePeriod + retentionMargin)
		polls, reads := 0, 0
		for ok := true; ok && time.Now().Before(window); polls++ {
			containers, volumes = c.engineResources(id)
			if len(containers) != 0 || volumes != 2 {
				c.violation("retention", "before deletion allocation %s has %d containers and %d volumes on the engine, want 0 and 2", id, len(containers), volumes)
				ok = false
			}
			if s := c.getSession(victim); s != nil {
				reads++
				if s.GetEnvironment().GetComputeAvailable() || s.GetEnvironment().GetComputeReason() != "compute_missing" {
					t.Errorf("later %s reports available=%v %q", victim, s.GetEnvironment().GetComputeAvailable(), s.GetEnvironment().GetComputeReason())
					ok = false
				}
			}
			time.Sleep(250 * time.Millisecond)
		}
		if reads == 0 {
			t.Fatalf("GetSession %s failed on every poll of the retention window", victim)
		}
		t.Logf("retention window: %d polls (%d Session reads) over %v after the compute_missing report", polls, reads, daemon.DefaultObservePeriod+retentionMargin)
		c.deleteAll()
		c.settle()
		// Core had settled this Session's creation long before (it saw
		// the started container), so its deletion needs no creation
		// receipt: the engine holds nothing of the allocation any more,
		// no tombstone either (issue 26, item 11).
		if containers, volumes := c.engineResources(id); len(containers) != 0 || volumes != 0 {
			c.violation("I2", "after deletion allocation %s has %d containers and %d volumes on the engine (a tombstone for a settled creation?), want none", id, len(containers), volumes)
		}
		c.invariants()
	})
}

// workspaceMarker is the file the engine restart scenario writes into each
// Session's workspace.
const workspaceMarker = "chaos-marker"

// writeWorkspace puts content into /workspace/chaos-marker of container ct
// through the Engine API.
func (c *cluster) writeWorkspace(ct, content string) {
	c.t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: workspaceMarker, Mode: 0o644, Size: int64(len(content))}); err != nil {
		c.t.Fatal(err)
	}
	_, _ = tw.Write([]byte(content))
	_ = tw.Close()
	if _, err := c.cli.CopyToContainer(context.Background(), ct, client.CopyToContainerOptions{DestinationPath: docker.WorkspacePath, Content: &buf}); err != nil {
		c.t.Fatalf("writing the workspace marker: %v", err)
	}
}

// readWorkspace reads /workspace/chaos-marker of container ct (running or
// not) through the Engine API. The engine's NotFound (no such container
// or file) comes back as an error; any other failure to read fails the
// test: a failed observation is never a lost workspace.
func (c *cluster) readWorkspace(ct string) (string, error) {
	c.t.Helper()
	path := docker.WorkspacePath + "/" + workspaceMarker
	res, err := c.cli.CopyFromContainer(context.Background(), ct, client.CopyFromContainerOptions{SourcePath: path})
	switch {
	case cerrdefs.IsNotFound(err):
		return "", err
	case err != nil:
		c.t.Fatalf("reading %s of container %s: %v", path, ct, err)
	}
	defer res.Content.Close()
	b, err := readTarFile(res.Content)
	if err != nil {
		c.t.Fatalf("reading %s of container %s: %v", path, ct, err)
	}
	return string(b), nil
}

// TestEngineRestartUnderRunningSessions restarts the node's private Docker
// Engine (SIGKILL or SIGTERM of dockerd, by the seed; down for a seeded
// 1-3 s) under running Sessions whose workspaces hold a marker file. The
// rule (core/lifecycle's package doc): a Session's container has no
// restart policy, Core never starts it again, so each Session is reported
// compute_available false with compute_stopped, or, if its container
// runs again, available; never available while its container is stopped
// for longer than one observation period after the engine is back
// (checked on every poll, from the engine's own state, until every
// Session reports and then over one more full observation period). Its
// volumes and workspace are kept; deleting cleans up (every allocation
// RELEASED, nothing left, I2).
func TestEngineRestartUnderRunningSessions(t *testing.T) {
	scenario(t, "Docker Engine restarted under running Sessions", func(t *testing.T, r *run) {
		engine := startDockerd(t)
		c := newCluster(t, r, options{proxied: -1, nodes: 1, engine: engine.Host, image: engine.Image})
		names := c.mustCreate(2)
		if got := c.waitActive(names, time.Now(), activeDeadline); len(got) != len(names) {
			t.Fatalf("only %d of %d Sessions ACTIVE before the fault", len(got), len(names))
		}
		type held struct {
			id, container, marker string
		}
		sessions := map[string]*held{}
		allocs := bySession(c.allocations())
		for _, n := range names {
			h := &held{id: allocationID(allocs[n]), marker: uuid.NewString()}
			containers, volumes := c.engineResources(h.id)
			if len(containers) != 1 || volumes != 2 {
				t.Fatalf("allocation %s: %d containers and %d volumes, want 1 and 2", h.id, len(containers), volumes)
			}
			for ct := range containers {
				h.container = ct
			}
			c.writeWorkspace(h.container, h.marker)
			sessions[n] = h
		}

		down := time.Duration(1000+r.rng.IntN(2000)) * time.Millisecond
		how := pick(r.rng, []string{"SIGKILL", "SIGTERM"})
		if how == "SIGKILL" {
			engine.crash()
		} else {
			engine.stop()
		}
		r.fault(t, "%s dockerd under %d running Sessions, down for %v", how, len(names), down)
		time.Sleep(down)
		engine.start()
		back := time.Now()

		// Poll the Sessions and the engine together until every Session
		// reports what its container is; a Session reported available
		// while the engine shows its container stopped, later than one
		// observation period after the engine is back (plus 5 s for the
		// node's reconnection, a pass and a poll on a loaded machine), is
		// a violation. Before that an available report is the last
		// observation from before the restart, which the rule allows.
		stale := back.Add(daemon.DefaultObservePeriod + 5*time.Second)
		reported := map[string]time.Duration{}
		last := map[string]string{} // what each Session last reported, logged on change
		end := back.Add(observeDeadline)
		for len(reported) < len(names) {
			if time.Now().After(end) {
				t.Fatalf("after %v only %d of %d Sessions report their stopped or running compute", observeDeadline, len(reported), len(names))
			}
			for _, n := range names {
				h := sessions[n]
				containers, _ := c.engineResources(h.id)
				s := c.getSession(n)
				if s == nil {
					continue
				}
				running, ok := containers[h.container]
				env := s.GetEnvironment()
				if now := fmt.Sprintf("available=%v %q (container running=%v)", env.GetComputeAvailable(), env.GetComputeReason(), running); now != last[n] {
					last[n] = now
					t.Logf("%s: %s %v after the engine came back", n, now, time.Since(back).Round(time.Millisecond))
				}
				switch {
				case !ok:
					c.violation("retention", "%s's container %s is gone after the engine restart", n, h.container)
					reported[n] = time.Since(back)
				case env.GetComputeAvailable() && !running && time.Now().After(stale):
					c.violation("observation", "%s reported available %v after the engine came back while its container is stopped", n, time.Since(back).Round(time.Millisecond))
				case !env.GetComputeAvailable() && !running && env.GetComputeReason() == "compute_stopped",
					env.GetComputeAvailable() && running:
					if _, seen := reported[n]; !seen {
						reported[n] = time.Since(back)
					}
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		for _, d := range reported {
			r.recovery = max(r.recovery, d)
		}
		t.Logf("recovery (engine back to every Session reporting its compute): %v", r.recovery.Round(time.Millisecond))

		// Polls over one full observation period (plus retentionMargin):
		// a stopped container is never reported available again, and the
		// volumes and workspace are kept.
		for window := time.Now().Add(daemon.DefaultObservePeriod + retentionMargin); time.Now().Before(window); {
			for _, n := range names {
				h := sessions[n]
				containers, volumes := c.engineResources(h.id)
				if s := c.getSession(n); s != nil && s.GetEnvironment().GetComputeAvailable() && !containers[h.container] {
					c.violation("observation", "%s reported available while its container is stopped", n)
				}
				if volumes != 2 {
					c.violation("retention", "%s: %d volumes after the engine restart, want 2", n, volumes)
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
		for _, n := range names {
			h := sessions[n]
			got, err := c.readWorkspace(h.container)
			if err != nil || got != h.marker {
				c.violation("retention", "%s's workspace after the engine restart: %q %v, want the marker written before", n, got, err)
			}
		}
		c.deleteAll()
		c.settle()
		c.invariants()
	})
}
