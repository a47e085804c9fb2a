package chaos

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/api/types/events"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/docker"

	"berth.dev/test/internal/stack"
)

// TestConnectionCutMidCall puts a TCP proxy between Core and one node
// agent and cuts every connection through it while the engine performs a
// Create for that node (its first container create event; without one
// within 20 s the cut happens anyway, and the log says so). Healthy nodes
// keep serving (I5, their latency within i5Bound of before); after a
// seeded 1-4 s the path is restored, the node is connected again, every
// Session the scenario created (the batch and the latency samples, on the
// cut node or not) ends ACTIVE or FAILED with a code (I6), and nothing was
// created twice (I1) or left (I2).
func TestConnectionCutMidCall(t *testing.T) {
	scenario(t, "Core-node connection cut mid-call", func(t *testing.T, r *run) {
		c := newCluster(t, r, options{proxied: 0, turns: true})
		victim := c.nodes[0]
		before, sampled := c.healthyLatency(3, victim)
		var once sync.Once
		fired := make(chan struct{})
		cut := func(why string) {
			once.Do(func() {
				victim.proxy.Cut()
				r.fault(t, "cut the Core-node path of %s (%s)", victim.name, why)
				close(fired)
			})
		}
		c.watch(func(m events.Message) {
			if m.Action == events.ActionCreate && c.nodeOfAllocation(m.Actor.Attributes[docker.LabelAllocation]) == victim {
				cut("on a container create for it")
			}
		})
		names := c.mustCreate(6)
		select {
		case <-fired:
		case <-time.After(20 * time.Second):
			cut("no Create reached it within 20 s")
		}
		during, sampledDuring := c.healthyLatency(3, victim)
		c.reportI5(before, during)
		time.Sleep(time.Duration(1000+r.rng.IntN(3000)) * time.Millisecond)
		repaired := time.Now()
		victim.proxy.Restore()
		c.waitConnected(victim, true)
		r.recovery = time.Since(repaired)
		t.Logf("recovery (path restored to the node connected): %v", r.recovery)
		requireOutcomes(t, c, slices.Concat(sampled, names, sampledDuring), outcomeDeadline)
		c.invariants()
	})
}

// TestForeignCollidingNames freezes every node agent, creates a Session,
// and before its Create reaches the engine creates a foreign container and
// volumes with exactly the names Berth derives for that allocation (but
// another installation's labels). The agents thaw: Berth never uses,
// relabels or removes them (I3), the Session runs on a new allocation
// (I6), and after deletion nothing of its own is left (I2, also read from
// the engine's event log: the foreign resources hold the first
// allocation's derived names, and only they may remain under them).
func TestForeignCollidingNames(t *testing.T) {
	scenario(t, "foreign container and volume with colliding names", func(t *testing.T, r *run) {
		c := newCluster(t, r, options{proxied: -1, turns: true})
		thaw := c.freeze()
		names := c.mustCreate(1)
		a := bySession(c.allocations())[names[0]]
		id, err := uuid.Parse(strings.TrimPrefix(a.GetName(), "allocations/"))
		if err != nil {
			t.Fatal(err)
		}
		alloc, err := c.db().GetAllocation(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		name := docker.ResourceName(c.inst, alloc.Reference())
		f := c.addForeign(name)
		r.fault(t, "foreign container %s and volumes %v take allocation %s's names", name, f.volumes, id)
		thaw()
		// The Create refused before any mutation (its absence receipt),
		// Kill had nothing of the allocation's to clean up, and the Session
		// got a new allocation with fresh names: ACTIVE (I6).
		requireOutcomes(t, c, names, activeDeadline)
		if a := bySession(c.allocations())[names[0]]; a.GetName() == "allocations/"+id.String() {
			c.violation("I6", "the Session still runs on allocation %s, whose names are foreign-held", id)
		}
		c.checkForeign()
		c.invariants()
	})
}

// TestDeleteRacesCreate deletes Sessions a seeded 0-400 ms after creating
// them, racing their Create: each allocation is created at most once (I1)
// and cleanup leaves nothing (I2). No fault hides a Create's outcome here,
// so every allocation must end RELEASED with its creation settled: one
// left in cleanup would hold its node's max_active slot for ever
// (issue 12).
func TestDeleteRacesCreate(t *testing.T) {
	scenario(t, "Session deletion racing Create", func(t *testing.T, r *run) {
		c := newCluster(t, r, options{proxied: -1})
		var wg sync.WaitGroup
		for range 6 {
			name, err := c.createSession()
			if err != nil {
				t.Fatal(err)
			}
			delay := time.Duration(r.rng.IntN(400)) * time.Millisecond
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(delay)
				if err := c.deleteSession(name); err != nil {
					t.Errorf("DeleteSession: %v", err)
				}
			}()
			r.fault(t, "delete %s %v after creating it", name, delay)
		}
		wg.Wait()
		start := time.Now()
		c.settle()
		r.recovery = time.Since(start)
		c.invariants()
	})
}

// TestEnrollmentTokenReplay: a used enrollment token is refused when
// replayed by another node, and one fresh token presented by two nodes at
// once enrolls exactly one of them.
func TestEnrollmentTokenReplay(t *testing.T) {
	scenario(t, "enrollment token replay", func(t *testing.T, r *run) {
		c := newCluster(t, r, options{proxied: -1, nodes: 1})
		before := len(c.listNodes())
		prepare := func() *stack.Node {
			return stack.PrepareNode(t, &stack.Installation{ID: c.inst}, stack.NodeOptions{Socket: socketPath(os.Getenv("BERTH_TEST_DOCKER_HOST")), Image: c.image, Specification: c.spec})
		}
		token := stack.CreateEnrollmentToken(t, c.ctx, c.cc)
		addSecret(token)
		first := prepare()
		if out, code := stack.EnrollCmd(t, first, c.core.PublicAddr(), token, stack.FreeAddr(t)); code != 0 {
			t.Fatalf("first enrollment: %s", out)
		}
		replay := prepare()
		out, code := stack.EnrollCmd(t, replay, c.core.PublicAddr(), token, stack.FreeAddr(t))
		c.outputs = append(c.outputs, out)
		r.fault(t, "replayed a used enrollment token")
		if code == 0 || !strings.Contains(out, "rejected the token") {
			t.Errorf("a replayed token: exit %d, %q", code, out)
		}
		if _, err := os.Stat(filepath.Join(replay.Dir, "state", "identity.json")); err == nil {
			t.Error("a replayed token stored an identity")
		}

		fresh := stack.CreateEnrollmentToken(t, c.ctx, c.cc)
		addSecret(fresh)
		codes := make([]int, 2)
		var wg sync.WaitGroup
		for i := range codes {
			n := prepare()
			wg.Add(1)
			go func() {
				defer wg.Done()
				var o string
				o, codes[i] = stack.EnrollCmd(t, n, c.core.PublicAddr(), fresh, stack.FreeAddr(t))
				c.mu.Lock()
				c.outputs = append(c.outputs, o)
				c.mu.Unlock()
			}()
		}
		wg.Wait()
		r.fault(t, "two nodes raced one fresh token: exit codes %v", codes)
		if (codes[0] == 0) == (codes[1] == 0) {
			t.Errorf("one token enrolled %v (exit codes): want exactly one success", codes)
		}
		if got := len(c.listNodes()); got != before+2 {
			t.Errorf("nodes: %d, want %d (the first enrollment and one of the racers)", got, before+2)
		}
	})
}

// listNodes lists every node.
func (c *cluster) listNodes() []*adminv1.Node {
	c.t.Helper()
	resp, err := c.nodesAPI().ListNodes(c.ctx, &adminv1.ListNodesRequest{PageSize: 100})
	if err != nil {
		c.t.Fatalf("ListNodes: %v", err)
	}
	return resp.GetNodes()
}

// TestNodePresentingAnotherNodesCertificate restarts node B with node A's
// identity (key and certificate): Core, dialling B's address and expecting
// B, never counts it connected and places nothing on it, while A keeps
// serving: the Sessions created meanwhile end ACTIVE with a running
// container on the engine and their Runtimes connected (I6). B is reached through a proxy that counts Core's dials, so the
// check runs only once Core has dialled the impostor and, dialling again,
// has finished that attempt, not after a fixed wait that Core's reconnect
// backoff may outlast.
func TestNodePresentingAnotherNodesCertificate(t *testing.T) {
	scenario(t, "node presenting another node's certificate", func(t *testing.T, r *run) {
		c := newCluster(t, r, options{proxied: 1, nodes: 2, turns: true})
		a, b := c.nodes[0], c.nodes[1]
		b.Stop()
		c.waitConnected(b, false)
		identity, err := os.ReadFile(filepath.Join(a.Dir, "state", "identity.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(b.Dir, "state", "identity.json"), identity, 0o600); err != nil {
			t.Fatal(err)
		}
		b.Start()
		dials := b.proxy.Accepted()
		r.fault(t, "node %s serves with node %s's certificate", b.name, a.name)
		// A node's dials are serial: a second dial means the first one to
		// the impostor has ended.
		stack.WaitFor(t, 2*nodeDeadline, "Core dialling the impostor twice", func() bool { return b.proxy.Accepted() >= dials+2 })
		resp, err := c.nodesAPI().GetNode(c.ctx, &adminv1.GetNodeRequest{Name: b.name})
		if err != nil || stack.Connected(resp.GetNode()) {
			t.Errorf("the impostor: %v %v; want it not connected", resp.GetNode().GetPresence(), err)
		}
		c.waitConnected(a, true)
		names := c.mustCreate(3)
		requireActive(t, c, names, activeDeadline)
		for _, n := range names {
			if al := bySession(c.allocations())[n]; al.GetNode() == b.name {
				t.Errorf("Session %s placed on the impostor", n)
			}
		}
		c.invariants()
	})
}
