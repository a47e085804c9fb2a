package chaos

import (
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/test/internal/stack"
)

// soakCheckEvery is how often the soak deletes everything and checks the
// invariants.
const soakCheckEvery = 3 * time.Minute

// TestSoak runs a mixed workload (create Sessions, run Turns in them,
// delete them) with random faults for CHAOS_SOAK_DURATION (`make soak DURATION=10m`) and prints
// the totals: operations, Turns and how they ended, faults injected,
// invariant violations (I1-I4; I6 at its end) and leaks, and every refusal by its
// explanation (explainRefusal): one the cluster's state does not explain
// is a violation. It skips when the variable is not set.
func TestSoak(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv("CHAOS_SOAK_DURATION"))
	if err != nil || d <= 0 {
		t.Skip("set CHAOS_SOAK_DURATION (make soak DURATION=10m) to run the soak")
	}
	scenario(t, "soak", func(t *testing.T, r *run) {
		c := newCluster(t, r, options{proxied: 0, maxActive: 40, turns: true})
		start := time.Now()
		end := start.Add(d)
		var live []string
		var turns []submitted
		var tally turnTally
		refused, leaks, checks := 0, 0, 0
		reasons := map[string]int{} // refusals by explanation
		var lastFault, lastRepair time.Time
		var lastFaultKind string
		refuse := func(op string, err error) {
			refused++
			why, ok := c.explainRefusal(err, lastFaultKind, time.Since(lastRepair))
			reasons[why]++
			if !ok {
				c.violation("refusal", "%s refused without an explanation (%s): %v; nodes: %s", op, why, status.Code(err), c.nodeLoad())
			}
		}
		lastCheck := time.Now()
		check := func() {
			checks++
			// Every Turn ends (I4) before its Session is deleted.
			c.checkTurns(turns, &tally, true)
			c.checkWitness(turns)
			turns = nil
			c.deleteAll()
			live = nil
			if c.settle() >= settleDeadline {
				containers, volumes := stack.Owned(t, c.cli, c.inst)
				leaks += containers + volumes
			}
			c.checkCreates()
			c.checkEngineLeaks()
			c.checkForeign()
			lastCheck = time.Now()
		}
		for time.Now().Before(end) {
			switch x := r.rng.IntN(100); {
			case x < 15 && time.Since(lastFault) > 10*time.Second:
				lastFault = time.Now()
				lastFaultKind = soakFault(t, c, r)
				lastRepair = time.Now()
			case x < 45 && len(live) > 0:
				if s, err := c.submitTurn(pick(r.rng, live)); err == nil {
					turns = append(turns, s)
					tally.submitted++
				} else {
					refuse("SubmitTurn", err)
				}
			case x < 70 && len(live) < 12:
				if name, err := c.createSession(); err == nil {
					live = append(live, name)
				} else {
					refuse("CreateSession", err)
				}
			case len(live) > 0:
				i := r.rng.IntN(len(live))
				if err := c.deleteSession(live[i]); err != nil {
					refuse("DeleteSession", err)
				}
				live = append(live[:i], live[i+1:]...)
			}
			if time.Since(lastCheck) > soakCheckEvery {
				check()
			}
			time.Sleep(time.Duration(100+r.rng.IntN(400)) * time.Millisecond)
		}
		// I6 at the end: every Session still present (created since the
		// last check and not deleted, or whose creation's answer or
		// deletion a fault cut) ends ACTIVE, its container running on the
		// engine and its Runtime connected, or FAILED with a code.
		requireOutcomes(t, c, c.withPresent(live), outcomeDeadline)
		check()
		summary := fmt.Sprintf("soak %v (seed %d): %d operations (%d refused, by explanation %v), %d Turns (%d completed with their exact output, %d ended with a clear failure), %d faults injected, %d invariant checks, %d invariant violations, %d leaked resources\n",
			time.Since(start).Round(time.Second), r.seed, r.ops.Load(), refused, reasons, tally.submitted, tally.completed, tally.failed,
			r.faults.Load(), checks, r.violations.Load(), leaks)
		t.Log(summary)
		var out io.Writer = os.Stdout
		if path := os.Getenv("CHAOS_REPORT"); path != "" {
			if f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
				defer f.Close()
				out = io.MultiWriter(os.Stdout, f)
			}
		}
		fmt.Fprint(out, summary)
		if leaks > 0 {
			t.Errorf("%d resources leaked", leaks)
		}
	})
}

// faultRecovery is how long after a fault's repair a refusal it explains
// may still come: a restarted node agent or Core reconnects with backoff,
// and a node is placed on again once its health report is in.
const faultRecovery = 30 * time.Second

// explainRefusal classifies a refusal of the soak's workload: why names
// it, and ok says whether the cluster's state explains it. Explained:
// UNAVAILABLE while a restarted Core comes back (kind "core", within
// faultRecovery of its restart); FAILED_PRECONDITION
// no_ready_node_with_capacity while a node is not connected or not ready,
// or within faultRecovery of a fault's repair, or when every ready node is
// full by the admin API's own capacity figures. Anything else is
// unexplained: the soak fails on it.
func (c *cluster) explainRefusal(err error, kind string, sinceRepair time.Duration) (why string, ok bool) {
	c.t.Helper()
	recent := sinceRepair < faultRecovery
	switch code, reason := status.Code(err), stack.AdminReason(err); {
	case code == codes.Unavailable && kind == "core" && recent:
		return "core restarting", true
	case code == codes.FailedPrecondition && reason == "no_ready_node_with_capacity":
		ready, full := c.readiness()
		switch {
		case ready < len(c.nodes):
			return "no capacity: a node down or not ready", true
		case recent:
			return "no capacity: nodes reconnecting after a fault", true
		case full == len(c.nodes):
			return "no capacity: every node full", true
		}
		return "no capacity with every node ready and room left", false
	default:
		return fmt.Sprintf("%v %s", code, reason), false
	}
}

// readiness counts the cluster's nodes that are connected and ready for
// the current generation, and those of them with no room left by the
// admin API's capacity (active against max_active and against CPU and
// memory for the cluster's specification).
func (c *cluster) readiness() (ready, full int) {
	c.t.Helper()
	resp, err := c.nodesAPI().ListNodes(c.ctx, &adminv1.ListNodesRequest{PageSize: 100})
	if err != nil {
		return 0, 0
	}
	for _, n := range resp.GetNodes() {
		if !n.GetPresence().GetConnected() || !n.GetReadiness().GetReady() {
			continue
		}
		ready++
		cp := n.GetCapacity()
		room := min(int64(cp.GetMaxActive()), cp.GetCpuMillis()/c.spec.GetCpuMillis(), cp.GetMemoryBytes()/c.spec.GetMemoryBytes())
		if int64(cp.GetActive()) >= room {
			full++
		}
	}
	return ready, full
}

// nodeLoad describes each node's presence, readiness and load for a
// violation's message.
func (c *cluster) nodeLoad() string {
	c.t.Helper()
	resp, err := c.nodesAPI().ListNodes(c.ctx, &adminv1.ListNodesRequest{PageSize: 100})
	if err != nil {
		return fmt.Sprintf("<ListNodes: %v>", status.Code(err))
	}
	var parts []string
	for _, n := range resp.GetNodes() {
		cp := n.GetCapacity()
		parts = append(parts, fmt.Sprintf("%s connected %v ready %v active %d/%d",
			n.GetName(), n.GetPresence().GetConnected(), n.GetReadiness().GetReady(), cp.GetActive(), cp.GetMaxActive()))
	}
	return strings.Join(parts, "; ")
}

// soakFault injects one random fault, repairs it and returns its kind:
// "node" (an agent or its path) or "core".
func soakFault(t *testing.T, c *cluster, r *run) string {
	t.Helper()
	n := pick(r.rng, c.nodes)
	hold := time.Duration(500+r.rng.IntN(2500)) * time.Millisecond
	switch r.rng.IntN(5) {
	case 0:
		r.fault(t, "SIGKILL node agent %s for %v", n.name, hold)
		n.kill()
		time.Sleep(hold)
		n.restart()
	case 1:
		r.fault(t, "SIGSTOP node agent %s for %v", n.name, hold)
		n.pause()
		time.Sleep(hold)
		n.resume()
	case 2:
		p := c.nodes[0]
		r.fault(t, "cut the Core-node path of %s for %v", p.name, hold)
		p.proxy.Cut()
		time.Sleep(hold)
		p.proxy.Restore()
	case 3:
		r.fault(t, "SIGKILL berth-core")
		c.restartCore(true)
		return "core"
	case 4:
		r.fault(t, "SIGTERM berth-core")
		c.restartCore(false)
		return "core"
	}
	return "node"
}
