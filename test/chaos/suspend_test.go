package chaos

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/api/types/events"
	"github.com/moby/moby/client"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/docker"

	"berth.dev/core/lifecycle"
)

// Issue 16's scenarios: faults during a suspension and a wake. Each runs
// Sessions that ran a Turn (its line in the workspace), suspends them on
// request and wakes them with Turns, with berth-core or a node agent
// SIGKILLed at the capture or the restore (on the engine's event of it),
// berth-core during the quiesce, the Runtimes' path cut during the wake,
// or a restored Runtime killed while it is parked. Besides I1-I4 (I1 now
// also: every incarnation and snapshot of an allocation is created at
// most once, so nothing is captured or restored twice), every Session
// ends with its workspace: a Turn completed before the fault still has
// its one line in the workspace of the Session's running compute
// (checkWitness), or the Session ended with a clear failure.

// suspendDeadline bounds a suspension or wake after a repair: an
// acknowledged quiesce, a capture or a restore of unknown outcome is
// settled within the worker's quiesce and restore timeouts (10 s each in
// the harness's Core, a minute at the defaults) and a pass or two.
const suspendDeadline = 2 * time.Minute

// onEvent arms a one-shot trigger: the first container event of the
// installation that match accepts runs act (in the event goroutine).
func (c *cluster) onEvent(match func(events.Message) bool, act func(events.Message)) <-chan struct{} {
	fired := make(chan struct{})
	var once sync.Once
	c.watch(func(m events.Message) {
		if match(m) {
			once.Do(func() { act(m); close(fired) })
		}
	})
	return fired
}

// isCapture matches the pause that starts a capture.
func isCapture(m events.Message) bool { return m.Action == events.ActionPause }

// isRestore matches the creation of a restored incarnation.
func isRestore(m events.Message) bool {
	return m.Action == events.ActionCreate && strings.Contains(m.Actor.Attributes["name"], "-g")
}

// suspendSessions asks for the suspension of every Session; a request
// may fail while Core is down (the scenario kills it).
func (c *cluster) suspendSessions(names []string) {
	for _, n := range names {
		ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
		_, err := c.sessions().SuspendSession(ctx, &adminv1.SuspendSessionRequest{Name: n, RequestId: uuid.NewString()})
		cancel()
		if err != nil {
			c.t.Logf("SuspendSession %s: %v", n, err)
		}
	}
}

// waitPhases waits until every Session reports want, or fails the
// scenario after deadline.
func (c *cluster) waitPhases(names []string, want adminv1.ComputePhase, deadline time.Duration) {
	c.t.Helper()
	end := time.Now().Add(deadline)
	for {
		var left []string
		for _, n := range names {
			ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
			g, err := c.sessions().GetSession(ctx, &adminv1.GetSessionRequest{Name: n})
			cancel()
			if err != nil || g.GetSession().GetEnvironment().GetComputePhase() != want {
				left = append(left, n)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(end) {
			c.violation("I6", "%d Sessions not %v within %v: %v", len(left), want, deadline, left)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// turnsOn submits one Turn to each Session and adds them to all.
func (c *cluster) turnsOn(names []string, all *[]submitted, tally *turnTally) []submitted {
	c.t.Helper()
	var list []submitted
	for _, n := range names {
		sub, err := c.submitTurn(n)
		if err != nil {
			c.t.Fatalf("SubmitTurn: %v", err)
		}
		list = append(list, sub)
		*all = append(*all, sub)
		tally.submitted++
	}
	return list
}

// suspensionScenario runs the shared shape: two Sessions run a Turn; the
// fault is armed and the Sessions suspended (capture faults) or suspended
// first and then woken by Turns (restore faults); repair restarts what the
// fault killed; then every Session runs a Turn that must complete (it
// wakes a suspended Session), the witnesses and workspaces are checked,
// and cleanup leaves nothing.
func suspensionScenario(t *testing.T, r *run, o options, fault func(c *cluster, names []string, all *[]submitted, tally *turnTally) (repair func())) {
	o.turns, o.suspend, o.proxied = true, true, -1
	if o.nodes == 0 {
		o.nodes = 2
	}
	c := newCluster(t, r, o)
	// A restore the fault left unknown is abandoned after the worker's
	// restore timeout and done again: the Turns wait longer than that.
	c.queueTimeout = suspendDeadline
	names := c.mustCreate(2)
	if got := c.waitActive(names, time.Now(), activeDeadline); len(got) != len(names) {
		t.Fatalf("only %d of %d Sessions became ACTIVE", len(got), len(names))
	}
	var all []submitted
	var tally turnTally
	c.requireCompleted(c.turnsOn(names, &all, &tally), &tally, "before the fault")

	repair := fault(c, names, &all, &tally)
	repaired := time.Now()
	repair()
	// Every Session comes back: a Turn completes in each (waking the
	// suspended ones), with the workspace of before.
	after := c.turnsOn(names, &all, &tally)
	var one turnTally
	c.checkTurns(after, &one, true)
	if one.completed != len(names) {
		c.violation("I4", "%d of %d Turns after the repair completed", one.completed, len(names))
	}
	r.recovery = time.Since(repaired)
	t.Logf("recovery (repair to a Turn completed in every Session): %v", r.recovery)
	// Every Turn of the scenario, once more: each ended with its output or
	// a clear failure, and the completed ones ran once, in their
	// workspaces too.
	var final turnTally
	c.checkTurns(all, &final, true)
	t.Logf("turns: %d submitted, %d completed, %d ended with a clear failure", len(all), final.completed, final.failed)
	// No Session is deleted yet, so every completed Turn's line is in its
	// Session's current workspace (running, or a snapshot's: a suspension
	// requested before the fault may legitimately be carried out after
	// the repair's Turns, and the idle policy suspends after a minute).
	host, workspace := c.checkWitness(all)
	if host < final.completed {
		c.violation("I4", "the host-side witness saw %d Turns, fewer than the %d completed", host, final.completed)
	}
	if workspace < final.completed {
		c.violation("I4", "%d of the %d completed Turns have their line in their Session's workspace, want all", workspace, final.completed)
	}
	c.invariants()
}

// TestCoreKilledDuringQuiesce SIGKILLs berth-core a seeded 0-40 ms after
// the suspensions were requested: while the Runtimes quiesce (or just
// after). The restarted Core settles every armed suspension (captured,
// or aborted when no acknowledgement arrives), and the Sessions run on.
func TestCoreKilledDuringQuiesce(t *testing.T) {
	scenario(t, "Core SIGKILL during quiesce", func(t *testing.T, r *run) {
		suspensionScenario(t, r, options{}, func(c *cluster, names []string, _ *[]submitted, _ *turnTally) func() {
			c.suspendSessions(names)
			time.Sleep(time.Duration(r.rng.IntN(40)) * time.Millisecond)
			c.core.Kill()
			r.fault(t, "SIGKILL berth-core during the quiesce of %d Sessions", len(names))
			return func() { c.startCore() }
		})
	})
}

// TestCoreKilledDuringCapture SIGKILLs berth-core when the engine pauses
// a Session's container for its capture. The restarted Core only observes
// the capture (ObserveOnly): it completes as a suspension or the source
// runs on; it is never repeated.
func TestCoreKilledDuringCapture(t *testing.T) {
	scenario(t, "Core SIGKILL during capture", func(t *testing.T, r *run) {
		suspensionScenario(t, r, options{}, func(c *cluster, names []string, _ *[]submitted, _ *turnTally) func() {
			core := c.core
			fired := c.onEvent(isCapture, func(events.Message) { core.Kill() })
			c.suspendSessions(names)
			waitEvent(t, fired, "capture")
			r.fault(t, "SIGKILL berth-core on a capture's pause")
			return func() { c.startCore() }
		})
	})
}

// TestAgentKilledDuringCapture SIGKILLs the node agent whose engine pauses
// a Session's container for its capture.
func TestAgentKilledDuringCapture(t *testing.T) {
	scenario(t, "agent SIGKILL during capture", func(t *testing.T, r *run) {
		suspensionScenario(t, r, options{}, func(c *cluster, names []string, _ *[]submitted, _ *turnTally) func() {
			victim := make(chan *node, 1)
			fired := c.onEvent(isCapture, func(m events.Message) {
				n := c.nodeOfAllocation(m.Actor.Attributes[docker.LabelAllocation])
				if n != nil {
					n.kill()
				}
				victim <- n
			})
			c.suspendSessions(names)
			waitEvent(t, fired, "capture")
			n := <-victim
			if n == nil {
				t.Fatal("the capture's node is unknown")
			}
			r.fault(t, "SIGKILL node agent %s on a capture's pause", n.name)
			return func() { n.restart(); c.waitConnected(n, true) }
		})
	})
}

// restoreFault suspends the Sessions, arms act on the first restored
// incarnation's create, and submits a Turn to each Session (the wake).
func restoreFault(t *testing.T, c *cluster, names []string, all *[]submitted, tally *turnTally, act func(events.Message)) {
	c.suspendSessions(names)
	c.waitPhases(names, adminv1.ComputePhase_COMPUTE_PHASE_SUSPENDED, suspendDeadline)
	fired := c.onEvent(isRestore, act)
	c.turnsOn(names, all, tally)
	waitEvent(t, fired, "restore")
}

// TestCoreKilledDuringRestore SIGKILLs berth-core when the engine creates
// a restored incarnation. The restarted Core observes the restore
// (ObserveOnly) and records it, or abandons it after the restore timeout
// and restores into a later incarnation; the Turns that woke the Sessions
// end with their output or a clear failure.
func TestCoreKilledDuringRestore(t *testing.T) {
	scenario(t, "Core SIGKILL during restore", func(t *testing.T, r *run) {
		suspensionScenario(t, r, options{}, func(c *cluster, names []string, all *[]submitted, tally *turnTally) func() {
			core := c.core
			restoreFault(t, c, names, all, tally, func(events.Message) { core.Kill() })
			r.fault(t, "SIGKILL berth-core on a restore's container create")
			return func() { c.startCore() }
		})
	})
}

// TestAgentKilledDuringRestore SIGKILLs the node agent whose engine
// creates a restored incarnation.
func TestAgentKilledDuringRestore(t *testing.T) {
	scenario(t, "agent SIGKILL during restore", func(t *testing.T, r *run) {
		suspensionScenario(t, r, options{}, func(c *cluster, names []string, all *[]submitted, tally *turnTally) func() {
			victim := make(chan *node, 1)
			restoreFault(t, c, names, all, tally, func(m events.Message) {
				n := c.nodeOfAllocation(m.Actor.Attributes[docker.LabelAllocation])
				if n != nil {
					n.kill()
				}
				victim <- n
			})
			n := <-victim
			if n == nil {
				t.Fatal("the restore's node is unknown")
			}
			r.fault(t, "SIGKILL node agent %s on a restore's container create", n.name)
			return func() { n.restart(); c.waitConnected(n, true) }
		})
	})
}

// TestRuntimePathCutDuringWake black-holes the Runtimes' path to Core
// when the engine starts a restored incarnation, for a seeded 2-6 s: the
// woken Runtime cannot connect until the path heals, then connects and
// runs the Turn (or the Turn ends with a clear failure).
func TestRuntimePathCutDuringWake(t *testing.T) {
	scenario(t, "Runtime path cut during wake", func(t *testing.T, r *run) {
		suspensionScenario(t, r, options{runtimeProxied: true}, func(c *cluster, names []string, all *[]submitted, tally *turnTally) func() {
			cut := time.Duration(2+r.rng.IntN(5)) * time.Second
			restoreFault(t, c, names, all, tally, func(events.Message) { c.runtimeProxy.BlackHole() })
			r.fault(t, "Runtimes' path black-holed for %v on a restore", cut)
			time.Sleep(cut)
			return func() { c.runtimeProxy.Restore() }
		})
	})
}

// TestRuntimeKilledWhileParked kills the restored Runtime while it waits
// for its wake (the container's main process, so the incarnation
// stops): the Turn that woke it is never picked up and fails at its queue
// deadline with runtime_not_ready (core/store's ExpireQueuedTurns: the
// Session is still active), the Session reports compute_available false
// with compute_stopped (the restored incarnation is on the engine, not
// running: Core never starts it again), the Turn completed before the
// suspension keeps its workspace line, and deletion leaves nothing.
func TestRuntimeKilledWhileParked(t *testing.T) {
	scenario(t, "Runtime killed while parked", func(t *testing.T, r *run) {
		c := newCluster(t, r, options{turns: true, suspend: true, proxied: -1, nodes: 1})
		// The Turn that wakes a Runtime killed while parked waits in the
		// queue until its timeout: a short one.
		c.queueTimeout = 15 * time.Second
		names := c.mustCreate(1)
		if got := c.waitActive(names, time.Now(), activeDeadline); len(got) != 1 {
			t.Fatal("the Session did not become ACTIVE")
		}
		var all []submitted
		var tally turnTally
		c.requireCompleted(c.turnsOn(names, &all, &tally), &tally, "before the suspension")
		c.suspendSessions(names)
		c.waitPhases(names, adminv1.ComputePhase_COMPUTE_PHASE_SUSPENDED, suspendDeadline)
		fired := c.onEvent(func(m events.Message) bool {
			return m.Action == events.ActionStart && strings.Contains(m.Actor.Attributes["name"], "-g")
		}, func(m events.Message) {
			_, _ = c.cli.ContainerKill(context.Background(), m.Actor.ID, client.ContainerKillOptions{Signal: "KILL"})
		})
		wake := c.turnsOn(names, &all, &tally)
		waitEvent(t, fired, "restored start")
		r.fault(t, "SIGKILL the restored Runtime on its container's start (parked, before the wake)")
		var one turnTally
		c.checkTurns(wake, &one, true)
		if one.completed+one.failed != 1 {
			c.violation("I4", "the waking Turn did not end")
		}
		t.Logf("the waking Turn: %d completed, %d failed", one.completed, one.failed)
		if got, err := c.turns().GetTurn(c.ctx, &adminv1.GetTurnRequest{Name: wake[0].name}); err != nil {
			t.Fatalf("GetTurn: %v", err)
		} else if turn := got.GetTurn(); turn.GetState() != adminv1.Turn_STATE_FAILED || turn.GetFailureCode() != "runtime_not_ready" {
			c.violation("I4", "the Turn that woke the killed Runtime ended %v %q, want FAILED runtime_not_ready (never picked up, failed at its queue deadline)", turn.GetState(), turn.GetFailureCode())
		}
		c.requireComputeStopped(names[0], observeDeadline)
		var final turnTally
		c.checkTurns(all, &final, true)
		if _, workspace := c.checkWitness(all); workspace < final.completed {
			c.violation("I4", "%d of the %d completed Turns have their line in the stopped incarnation's workspace, want all", workspace, final.completed)
		}
		c.invariants()
	})
}

// requireComputeStopped requires the Session name, whose running
// incarnation was stopped outside Core, to report exactly that within
// deadline: compute_available false with compute_reason compute_stopped
// (lifecycle.ReasonStopped), the Session still ACTIVE (an observation
// moves no state), and, read from the engine, its allocation's containers
// present and none running. A violation otherwise names what was last
// seen.
func (c *cluster) requireComputeStopped(name string, deadline time.Duration) {
	c.t.Helper()
	end := time.Now().Add(deadline)
	for {
		var seen string
		s := c.getSession(name)
		if a := bySession(c.allocations())[name]; a != nil && s != nil {
			containers, _ := c.engineResources(allocationID(a))
			running := 0
			for _, r := range containers {
				if r {
					running++
				}
			}
			env := s.GetEnvironment()
			seen = fmt.Sprintf("Session %v, compute_available %v %q, phase %v; allocation %s %v: %d containers on the engine, %d running",
				s.GetState(), env.GetComputeAvailable(), env.GetComputeReason(), env.GetComputePhase(), allocationID(a), a.GetState(), len(containers), running)
			if s.GetState() == adminv1.Session_STATE_ACTIVE && !env.GetComputeAvailable() && env.GetComputeReason() == lifecycle.ReasonStopped &&
				len(containers) > 0 && running == 0 {
				c.t.Logf("%s reports its stopped compute: %s", name, seen)
				return
			}
		} else {
			seen = fmt.Sprintf("Session %v, allocation %v", s, a)
		}
		if time.Now().After(end) {
			c.violation("observation", "%s does not report its stopped compute (%s) within %v: %s", name, lifecycle.ReasonStopped, deadline, seen)
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// requireCompleted waits for every Turn of list to end and requires each
// to have completed (exit code 0 and its exact output, checkTurns): the
// Turns a scenario runs before its fault, whose workspace lines the
// witness then requires to survive the suspension. One that ended
// otherwise would leave that check nothing to check, so it is a
// violation (I4), named with when the Turns ran.
func (c *cluster) requireCompleted(list []submitted, tally *turnTally, when string) {
	c.t.Helper()
	var one turnTally
	c.checkTurns(list, &one, true)
	tally.completed += one.completed
	tally.failed += one.failed
	if one.completed != len(list) {
		c.violation("I4", "%d of %d Turns submitted %s completed (exit 0, exact output), want all: the workspace check after the fault would check nothing of theirs", one.completed, len(list), when)
	}
}

// waitEvent waits for a trigger, failing the scenario after suspendDeadline.
func waitEvent(t *testing.T, fired <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-fired:
	case <-time.After(suspendDeadline):
		t.Fatalf("the fault trigger (%s) never fired", what)
	}
}
