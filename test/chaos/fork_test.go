package chaos

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/api/types/events"

	adminv1 "berth.dev/proto/berth/admin/v1"
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
