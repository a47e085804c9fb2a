package chaos

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/events"
	"github.com/moby/moby/client"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/testenv"
	"berth.dev/test/internal/stack"
)

// killOnEvent arms a one-shot trigger: the first container event of the
// installation whose action is one of actions SIGKILLs (or, with act,
// handles) the node agent holding that container's allocation. It returns
// a channel that yields the node once triggered.
func (c *cluster) killOnEvent(actions []events.Action, act func(*node)) <-chan *node {
	fired := make(chan *node, 1)
	var once sync.Once
	done := false
	c.watch(func(m events.Message) {
		if done || !containsAction(actions, m.Action) {
			return
		}
		n := c.nodeOfAllocation(m.Actor.Attributes[docker.LabelAllocation])
		if n == nil {
			return
		}
		once.Do(func() {
			done = true
			act(n)
			fired <- n
		})
	})
	return fired
}

func containsAction(list []events.Action, a events.Action) bool {
	for _, x := range list {
		if x == a {
			return true
		}
	}
	return false
}

// waitFired waits for a trigger, failing the test after d.
func waitFired(t *testing.T, fired <-chan *node, d time.Duration, what string) *node {
	t.Helper()
	select {
	case n := <-fired:
		return n
	case <-time.After(d):
		t.Fatalf("the fault trigger (%s) never fired", what)
		return nil
	}
}

// TestAgentKilledDuringCreate SIGKILLs a node agent while the engine
// performs a Create on it (on the container's create or start event,
// chosen by the seed). Healthy nodes keep creating (I5, their latency
// within i5Bound of before); the agent restarts; Core never replays the
// Create (I1); every Session the scenario created, the batch and the
// latency samples on the faulty node and on the healthy ones alike, ends
// ACTIVE or FAILED (I6: a Create the kill left unknown is abandoned and
// the Session gets a new allocation); after deletion nothing is left (I2)
// and foreign resources survive (I3).
func TestAgentKilledDuringCreate(t *testing.T) {
	scenario(t, "agent SIGKILL during Create", func(t *testing.T, r *run) {
		c := newCluster(t, r, options{proxied: -1, turns: true})
		before, sampled := c.healthyLatency(3, nil)
		trigger := pick(r.rng, []events.Action{events.ActionCreate, events.ActionStart})
		fired := c.killOnEvent([]events.Action{trigger}, func(n *node) {
			n.kill()
			r.fault(t, "SIGKILL node agent %s on container %s", n.name, trigger)
		})
		names := c.mustCreate(3)
		victim := waitFired(t, fired, activeDeadline, "container "+string(trigger))
		during, sampledDuring := c.healthyLatency(3, victim)
		c.reportI5(before, during)
		repaired := time.Now()
		victim.restart()
		c.waitConnected(victim, true)
		r.recovery = c.probe(repaired)
		t.Logf("recovery (agent restart to a probe Session ACTIVE): %v", r.recovery)
		requireOutcomes(t, c, slices.Concat(sampled, names, sampledDuring), outcomeDeadline)
		c.invariants()
	})
}

// requireOutcomes is I6: every Session a fault touched ends, within
// deadline of now, either ACTIVE (its allocation ACTIVE with its Create
// settled, a running container of that allocation on the engine, read
// from the Engine API, and, in a cluster that serves the Runtime gateway,
// its Runtime connected to Core) or FAILED with a recorded
// failure code; anything else (still CREATING, unsettled, no allocation,
// no Runtime) is a violation. The final states are logged either way.
func requireOutcomes(t *testing.T, c *cluster, names []string, deadline time.Duration) {
	t.Helper()
	end := time.Now().Add(deadline)
	for {
		list := outcomes(c, names)
		pending := undecided(list)
		if len(pending) == 0 || time.Now().After(end) {
			t.Logf("outcomes of the faulted batch: %s", parts(list))
			for _, p := range pending {
				c.violation("I6", "not ACTIVE nor FAILED with a code %v after the repair: %s", deadline, p)
			}
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// withPresent returns names and every other Session Core lists that is
// not being deleted. A CreateSession that answered an error during a fault
// may still have committed its Session (the fault cut the answer, not the
// commit); such a Session is as present as any other, and I6 holds for it
// too, so a scenario whose creations may fail checks these as well.
func (c *cluster) withPresent(names []string) []string {
	c.t.Helper()
	out := slices.Clone(names)
	token := ""
	for {
		ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
		resp, err := c.sessions().ListSessions(ctx, &adminv1.ListSessionsRequest{PageSize: 100, PageToken: token})
		cancel()
		if err != nil {
			c.t.Fatalf("ListSessions: %v", err)
		}
		for _, s := range resp.GetSessions() {
			if st := s.GetState(); st != adminv1.Session_STATE_DELETING && st != adminv1.Session_STATE_DELETED && !slices.Contains(out, s.GetName()) {
				c.t.Logf("I6 also for %s (%v): Core lists it beyond the given names (a probe, or a creation whose answer a fault cut)", s.GetName(), st)
				out = append(out, s.GetName())
			}
		}
		if token = resp.GetNextPageToken(); token == "" {
			return out
		}
	}
}

// requireActive is requireOutcomes for Sessions that no fault may fail
// (a healthy node's, or one whose node was only absent or stuck for a
// while and then back): each must end ACTIVE by the same reading (its
// allocation ACTIVE and settled, a running container on the engine, its
// Runtime connected where the cluster serves the gateway) within deadline;
// FAILED, whatever its code, is a violation too.
func requireActive(t *testing.T, c *cluster, names []string, deadline time.Duration) {
	t.Helper()
	end := time.Now().Add(deadline)
	for {
		list := outcomes(c, names)
		pending := undecided(list)
		var failed []string
		for _, o := range list {
			if o.failed {
				failed = append(failed, o.name+": "+o.part)
			}
		}
		if len(pending)+len(failed) == 0 || len(failed) > 0 || time.Now().After(end) {
			t.Logf("outcomes (all required ACTIVE): %s", parts(list))
			for _, f := range failed {
				c.violation("I6", "FAILED where nothing may fail it, want ACTIVE: %s", f)
			}
			for _, p := range pending {
				c.violation("I6", "not ACTIVE %v after the repair: %s", deadline, p)
			}
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// runningOnEngine lists, from the Engine API, the allocations (by id)
// that have a running container of the installation.
func (c *cluster) runningOnEngine() map[string]bool {
	c.t.Helper()
	list, err := c.cli.ContainerList(context.Background(), client.ContainerListOptions{Filters: stack.InstallationFilter(c.inst)})
	if err != nil {
		c.t.Fatalf("list containers: %v", err)
	}
	out := map[string]bool{}
	for _, ct := range list.Items {
		if ct.State == container.StateRunning && ct.Labels[docker.LabelTombstone] == "" {
			out[ct.Labels[docker.LabelAllocation]] = true
		}
	}
	return out
}

// outcome is one Session's reading by outcomes: ACTIVE (active), FAILED
// with a failure code (failed), or neither, with what was seen (detail).
// part is the short form for the log.
type outcome struct {
	name           string
	active, failed bool
	part, detail   string
}

// outcomes reads each Session's outcome: ACTIVE with a running container
// on the engine (and a connected Runtime where the cluster serves the
// gateway), FAILED with a failure code, or neither.
func outcomes(c *cluster, names []string) []outcome {
	m := bySession(c.allocations())
	running := c.runningOnEngine()
	out := make([]outcome, 0, len(names))
	for _, n := range names {
		s, err := c.sessions().GetSession(c.ctx, &adminv1.GetSessionRequest{Name: n})
		env := s.GetSession().GetEnvironment()
		switch a, ok := m[n]; {
		case err == nil && ok && active(a) && (env.GetRuntimeConnected() || !c.runsTurns()) &&
			running[strings.TrimPrefix(a.GetName(), "allocations/")]:
			out = append(out, outcome{name: n, active: true, part: "ACTIVE"})
			continue
		case err == nil && s.GetSession().GetState() == adminv1.Session_STATE_FAILED && env.GetFailureCode() != "":
			out = append(out, outcome{name: n, failed: true, part: "FAILED " + env.GetFailureCode()})
			continue
		}
		state := "no allocation"
		if a, ok := m[n]; ok {
			state = strings.TrimPrefix(a.GetState().String(), "STATE_") + settledMark(a)
			if !running[strings.TrimPrefix(a.GetName(), "allocations/")] {
				state += " (no running container on the engine)"
			}
		}
		out = append(out, outcome{name: n, part: state, detail: fmt.Sprintf("%s: %s (Session %v, Runtime connected %v, %v)",
			n, state, s.GetSession().GetState(), env.GetRuntimeConnected(), err)})
	}
	return out
}

// undecided is what outcomes saw of the Sessions neither ACTIVE nor FAILED
// with a code.
func undecided(list []outcome) []string {
	var out []string
	for _, o := range list {
		if !o.active && !o.failed {
			out = append(out, o.detail)
		}
	}
	return out
}

// parts is the log's short form of outcomes' reading.
func parts(list []outcome) string {
	out := make([]string, len(list))
	for i, o := range list {
		out[i] = o.part
	}
	return strings.Join(out, ", ")
}

func settledMark(a *adminv1.Allocation) string {
	if a.GetCreateSettled() {
		return "(settled)"
	}
	return "(unsettled)"
}

// TestAgentKilledDuringKill SIGKILLs a node agent while the engine removes
// one of its containers (on the kill, die or destroy event, by the seed),
// restarts it after a seeded pause, and checks cleanup finishes without
// leaks (I2) or duplicate creates (I1).
func TestAgentKilledDuringKill(t *testing.T) {
	scenario(t, "agent SIGKILL during Kill", func(t *testing.T, r *run) {
		c := newCluster(t, r, options{proxied: -1})
		names := c.mustCreate(4)
		if got := c.waitActive(names, time.Now(), activeDeadline); len(got) != len(names) {
			t.Fatalf("only %d of %d Sessions became ACTIVE", len(got), len(names))
		}
		trigger := pick(r.rng, []events.Action{events.ActionKill, events.ActionDie, events.ActionDestroy})
		fired := c.killOnEvent([]events.Action{trigger}, func(n *node) {
			n.kill()
			r.fault(t, "SIGKILL node agent %s on container %s", n.name, trigger)
		})
		for _, n := range names {
			if err := c.deleteSession(n); err != nil {
				t.Fatal(err)
			}
		}
		victim := waitFired(t, fired, activeDeadline, "container "+string(trigger))
		time.Sleep(time.Duration(r.rng.IntN(2000)) * time.Millisecond)
		repaired := time.Now()
		victim.restart()
		c.waitConnected(victim, true)
		c.settle()
		r.recovery = time.Since(repaired)
		t.Logf("recovery (agent restart to cleanup settled): %v", r.recovery)
		c.invariants()
	})
}

// TestStuckNodeDoesNotStallOthers freezes a node agent (SIGSTOP) while
// Sessions are created: those placed on healthy nodes still become ACTIVE
// within the deadline and their latency stays within i5Bound of before
// (I5); the frozen node thaws and every Session the scenario created, on
// the frozen node or not, ends ACTIVE: a running container on the engine,
// its Runtime connected (I6, requireActive: a node that was only stuck
// fails no Session).
func TestStuckNodeDoesNotStallOthers(t *testing.T) {
	scenario(t, "stuck node (SIGSTOP)", func(t *testing.T, r *run) {
		c := newCluster(t, r, options{proxied: -1, turns: true})
		before, sampled := c.healthyLatency(3, nil)
		victim := pick(r.rng, c.nodes)
		victim.pause()
		r.fault(t, "SIGSTOP node agent %s", victim.name)
		during, sampledDuring := c.healthyLatency(6, victim)
		c.reportI5(before, during)
		repaired := time.Now()
		victim.resume()
		r.recovery = c.probe(repaired)
		t.Logf("recovery (SIGCONT to a probe Session ACTIVE): %v", r.recovery)
		requireActive(t, c, slices.Concat(sampled, sampledDuring), outcomeDeadline)
		c.invariants()
	})
}

// TestNodeAbsentThenBack kills a node agent and waits until Core reports
// it absent: new Sessions are placed only on the other nodes, which keep
// serving (I5, their latency within i5Bound of before). The node comes
// back and is connected again, and every Session the scenario created,
// those the absent node held included, ends ACTIVE: a running container
// on the engine, its Runtime connected (I6, requireActive: an absent
// node's containers run on, and it fails no Session).
func TestNodeAbsentThenBack(t *testing.T) {
	scenario(t, "node absent, then back", func(t *testing.T, r *run) {
		c := newCluster(t, r, options{proxied: -1, turns: true})
		before, sampled := c.healthyLatency(3, nil)
		victim := pick(r.rng, c.nodes)
		victim.kill()
		r.fault(t, "SIGKILL node agent %s and keep it down", victim.name)
		absent := c.waitConnected(victim, false)
		t.Logf("Core reported the node absent after %v", absent)
		// One at a time, like healthyLatency, but none may land on the
		// absent node.
		var during []time.Duration
		for range 4 {
			start := time.Now()
			name := c.mustCreate(1)[0]
			sampled = append(sampled, name)
			if node := bySession(c.allocations())[name].GetNode(); node == victim.name {
				c.violation("I5", "Session %s was placed on the absent node %s", name, victim.name)
				continue
			}
			if d, ok := c.waitActive([]string{name}, start, activeDeadline)[name]; ok {
				during = append(during, d)
			} else {
				c.violation("I5", "Session %s on a healthy node not ACTIVE within %v", name, activeDeadline)
			}
		}
		c.reportI5(before, during)
		time.Sleep(time.Duration(r.rng.IntN(3000)) * time.Millisecond)
		repaired := time.Now()
		victim.restart()
		back := c.waitConnected(victim, true)
		r.recovery = time.Since(repaired)
		t.Logf("recovery (agent restart to connected): %v (connected after %v)", r.recovery, back)
		requireActive(t, c, sampled, outcomeDeadline)
		c.invariants()
	})
}

// TestReadOnlyNodeStateDirectory makes one node agent's state directory
// read-only (a read-only bind mount over it, which root cannot write
// through) and restarts berth-core, so the agent must persist Core's new
// owner epoch before it admits the connection. It cannot: it refuses
// Core (checked once Core's log shows the refused connection), which
// keeps it not connected and places new Sessions on the other nodes (I5,
// I6), and Core sends it nothing. Once the directory is
// writable again the agent admits Core, every Session ends ACTIVE or
// FAILED (I6) and cleanup leaves nothing (I1-I3).
func TestReadOnlyNodeStateDirectory(t *testing.T) {
	scenario(t, "node agent state directory read-only", func(t *testing.T, r *run) {
		c := newCluster(t, r, options{proxied: -1})
		names := c.mustCreate(3)
		requireOutcomes(t, c, names, activeDeadline)
		victim := pick(r.rng, c.nodes)
		state := filepath.Join(victim.Dir, "state")
		readOnly(t, state)
		r.fault(t, "state directory of node agent %s read-only, berth-core restarted (a new owner epoch to persist)", victim.name)
		c.restartCore(true)
		// Evidence that the new Core tried the node and was refused (its
		// "node not reachable" line for it), not a wait that its dial
		// backoff may outlast; only then is "not connected" a result.
		refusedLine := c.waitCoreLog(nodeDeadline, "the new Core's failed connection to "+victim.name, func(l string) bool {
			return strings.Contains(l, `"node not reachable"`) && strings.Contains(l, victim.ID)
		})
		t.Logf("Core's connection refused: %s", refusedLine)
		// The node says "not now" and why, to Core (never an unknown
		// compute outcome: nothing of a sandbox was touched) and to its
		// operator in its own log.
		if !strings.Contains(refusedLine, "observation unavailable") {
			c.violation("refusal", "the node refused Core's Connect with another class than unavailable-for-now: %s", refusedLine)
		}
		if !strings.Contains(victim.Logs(), "the owner epoch cannot be persisted in the state directory") {
			c.violation("refusal", "node agent %s refused Core without saying in its log that its state directory cannot take the owner epoch", victim.name)
		}
		if resp, err := c.nodesAPI().GetNode(c.ctx, &adminv1.GetNodeRequest{Name: victim.name}); err != nil || stack.Connected(resp.GetNode()) {
			c.violation("fence", "node %s is connected although it could not persist the owner epoch (%v)", victim.name, err)
		}
		// The new Core dials every node at once; the healthy ones may
		// connect after the victim's refusal is logged, and until they do
		// CreateSession is rightly refused for want of a ready node.
		for _, n := range c.nodes {
			if n != victim {
				c.waitConnected(n, true)
			}
		}
		during := c.mustCreate(3)
		for name, a := range bySession(c.allocations()) {
			if slices.Contains(during, name) && a.GetNode() == victim.name {
				c.violation("placement", "Session %s was placed on node %s, which refuses Core", name, victim.name)
			}
		}
		requireOutcomes(t, c, during, activeDeadline)

		writable(t, state)
		repaired := time.Now()
		c.waitConnected(victim, true)
		r.recovery = time.Since(repaired)
		t.Logf("recovery (state directory writable to the node connected): %v", r.recovery)
		requireOutcomes(t, c, append(names, during...), outcomeDeadline)
		c.invariants()
	})
}

// waitCoreLog waits up to within for a line of the current Core's log
// that match accepts and returns it; none fails the test (what names the
// awaited evidence).
func (c *cluster) waitCoreLog(within time.Duration, what string, match func(line string) bool) string {
	c.t.Helper()
	var found string
	stack.WaitFor(c.t, within, what, func() bool {
		for _, l := range strings.Split(c.core.Logs(), "\n") {
			if match(l) {
				found = l
				return true
			}
		}
		return false
	})
	return found
}

// readOnly bind-mounts dir read-only over itself until writable or the
// test's end.
func readOnly(t *testing.T, dir string) {
	t.Helper()
	for i, args := range [][]string{{"--bind", dir, dir}, {"-o", "remount,bind,ro", dir}} {
		if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
			msg := fmt.Sprintf("a read-only bind mount needs root and mount(8): %v %s", err, out)
			testenv.Unavailable(t, msg)
		}
		if i == 0 {
			t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
		}
	}
}

// writable removes readOnly's mount.
func writable(t *testing.T, dir string) {
	t.Helper()
	if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
		t.Fatalf("umount %s: %v %s", dir, err, out)
	}
}
