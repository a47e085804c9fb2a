package chaos

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/api/types/events"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/docker"
)

// TestAgentKilledDuringFork SIGKILLs the node agent during a fork of a
// running Session (issue 33), at an engine event of the source's
// allocation chosen by the seed: the Capture's copier created or started
// (mid-capture), the source paused (the copy under way), or the copier
// removed (the capture done, its record and the children's seeded Creates
// next). The agent restarts. Every child ends ACTIVE or FAILED with a code
// (I6: a Capture the kill left unknown is observed, never repeated, and a
// capture that made no snapshot fails the fork, ending its children
// fork_capture_failed), the source ends ACTIVE (a capture never costs it
// its sandbox), and after every deletion nothing is left (I2) while the
// foreign resources survive (I3).
func TestAgentKilledDuringFork(t *testing.T) {
	scenario(t, "agent SIGKILL during fork", func(t *testing.T, r *run) {
		c := newCluster(t, r, options{proxied: -1, turns: true, nodes: 1})
		source := c.mustCreate(1)
		c.waitActive(source, time.Now(), activeDeadline)
		trigger := pick(r.rng, []events.Action{events.ActionCreate, events.ActionStart, events.ActionPause, events.ActionDestroy})
		fired := c.killOnEvent([]events.Action{trigger}, func(n *node) {
			n.kill()
			r.fault(t, "SIGKILL node agent %s on container %s during a fork", n.name, trigger)
		})
		ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
		resp, err := c.sessions().ForkSession(ctx, &adminv1.ForkSessionRequest{Name: source[0], RequestId: uuid.NewString(), Count: 3})
		cancel()
		if err != nil {
			t.Fatalf("ForkSession: %v", err)
		}
		r.ops.Add(1)
		var children []string
		for _, ch := range resp.GetChildren() {
			children = append(children, ch.GetName())
		}
		victim := waitFired(t, fired, activeDeadline, "container "+string(trigger))
		repaired := time.Now()
		victim.restart()
		c.waitConnected(victim, true)
		requireOutcomes(t, c, children, outcomeDeadline)
		requireActive(t, c, source, outcomeDeadline)
		r.recovery = time.Since(repaired)
		t.Logf("recovery (agent restart to every child decided): %v", r.recovery)
		c.invariants()
	})
}

// TestAgentKilledDuringSeedImport SIGKILLs, with two node agents, the
// agent of the node that imports a fork's seed, when the engine creates
// the import's capture container (the second capture-role container of
// the source's allocation: the first is the fork's own capture, on the
// source's node, which the import must follow). The agent restarts; the
// import is made again under its operation (an incomplete one is removed
// and redone). Every child ends ACTIVE or FAILED with a code (I6), the
// source ACTIVE, and after every deletion nothing is left (I2): no seed,
// no partial import.
func TestAgentKilledDuringSeedImport(t *testing.T) {
	scenario(t, "agent SIGKILL during a fork's seed import", func(t *testing.T, r *run) {
		c := newCluster(t, r, options{proxied: -1, turns: true, nodes: 2})
		source := c.mustCreate(1)
		c.waitActive(source, time.Now(), activeDeadline)
		alloc := c.nodeOfAllocationOfSession(source[0])
		fired := make(chan *node, 1)
		captures := 0
		var once sync.Once
		stop := c.watch(func(m events.Message) {
			a := m.Actor.Attributes
			if m.Action != events.ActionCreate || a[docker.LabelAllocation] != alloc.id || a[docker.LabelSnapshotRole] != "capture" {
				return
			}
			if captures++; captures < 2 {
				return
			}
			once.Do(func() {
				for _, n := range c.nodes {
					if n != alloc.node {
						n.kill()
						r.fault(t, "SIGKILL node agent %s on its seed import's capture container", n.name)
						fired <- n
						return
					}
				}
			})
		})
		defer stop()
		ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
		resp, err := c.sessions().ForkSession(ctx, &adminv1.ForkSessionRequest{Name: source[0], RequestId: uuid.NewString(), Count: 4})
		cancel()
		if err != nil {
			t.Fatalf("ForkSession: %v", err)
		}
		r.ops.Add(1)
		var children []string
		for _, ch := range resp.GetChildren() {
			children = append(children, ch.GetName())
		}
		victim := waitFired(t, fired, activeDeadline, "the seed import's capture container")
		repaired := time.Now()
		victim.restart()
		c.waitConnected(victim, true)
		requireOutcomes(t, c, children, outcomeDeadline)
		requireActive(t, c, source, outcomeDeadline)
		r.recovery = time.Since(repaired)
		t.Logf("recovery (agent restart to every child decided): %v", r.recovery)
		c.invariants()
	})
}

// sessionAllocation is a Session's allocation id and the node that holds
// it.
type sessionAllocation struct {
	id   string
	node *node
}

// nodeOfAllocationOfSession reads session's allocation and its node.
func (c *cluster) nodeOfAllocationOfSession(session string) sessionAllocation {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
	defer cancel()
	g, err := c.sessions().GetSession(ctx, &adminv1.GetSessionRequest{Name: session})
	if err != nil {
		c.t.Fatalf("GetSession: %v", err)
	}
	id := strings.TrimPrefix(g.GetSession().GetAllocation(), "allocations/")
	n := c.nodeByName(g.GetSession().GetNode())
	if n == nil {
		c.t.Fatalf("%s is on no node of the cluster", session)
	}
	return sessionAllocation{id: id, node: n}
}
