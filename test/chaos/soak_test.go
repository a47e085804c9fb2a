package chaos

import (
	"context"
	"errors"
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

// soakShort is the soak's length when CHAOS_SOAK_DURATION is unset: the
// form `make test` runs. Two minutes are about 300 operations, over a
// hundred Turns and ten or so faults (in most runs every kind soakFault
// injects) before the final invariant check. The chaos scenarios run one
// after the other (none calls t.Parallel), so the soak adds its length
// plus its setup and final check (123 s measured, twice) to the
// package's wall time, which keeps a warm `make test` within its
// 15-minute budget.
const soakShort = 2 * time.Minute

// soakDuration is CHAOS_SOAK_DURATION (`make soak DURATION=30m`), or
// soakShort when it is unset. A value that does not parse, or is not
// positive, fails the test: a typo must not run the short form silently.
func soakDuration(t *testing.T) time.Duration {
	v := os.Getenv("CHAOS_SOAK_DURATION")
	if v == "" {
		return soakShort
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("CHAOS_SOAK_DURATION=%q: want a positive duration such as 30m", v)
	}
	return d
}

// TestSoak runs a mixed workload (create Sessions, run Turns in them,
// delete them) with random faults for soakDuration (soakShort in `make
// test`, CHAOS_SOAK_DURATION with `make soak DURATION=30m`) and prints
// the totals: operations, Turns and how they ended, faults injected,
// invariant violations (I1-I4; I6 at its end) and leaks, and every
// refusal by its explanation (explainRefusal): one the cluster's state at
// that moment does not explain is a violation.
func TestSoak(t *testing.T) {
	d := soakDuration(t)
	scenario(t, "soak", func(t *testing.T, r *run) {
		c := newCluster(t, r, options{proxied: 0, maxActive: 40, turns: true})
		start := time.Now()
		end := start.Add(d)
		var live []string
		var turns []submitted
		var tally turnTally
		refused, leaks, checks := 0, 0, 0
		reasons := map[string]int{} // refusals by explanation
		var lastFault time.Time
		refuse := func(op string, err error, before capacity) {
			refused++
			reasons[c.refusal(op, err, before)]++
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
				soakFault(t, c, r)
			case x < 45 && len(live) > 0:
				if s, err := c.submitTurn(pick(r.rng, live)); err == nil {
					turns = append(turns, s)
					tally.submitted++
				} else {
					refuse("SubmitTurn", err, unread)
				}
			case x < 70 && len(live) < 12:
				// Placement refuses only a creation: the state it is
				// judged by is read on both sides of the call.
				before := c.capacity()
				if name, err := c.createSession(); err == nil {
					live = append(live, name)
				} else {
					refuse("CreateSession", err, before)
				}
			case len(live) > 0:
				i := r.rng.IntN(len(live))
				if err := c.deleteSession(live[i]); err != nil {
					refuse("DeleteSession", err, unread)
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

// capacity is what the admin API says about placement at one moment:
// how many of the cluster's nodes take placement (enabled, connected,
// ready for the committed generation) and how many of those have no room
// left for one more Session of the cluster's specification, by their
// reported figures. err is set when it could not be read: nothing is then
// known about that moment.
type capacity struct {
	nodes, ready, full int
	desc               string // each node's figures, for a violation's message
	err                error
}

// unread is the capacity of a moment nobody read (before a call that is
// never refused for capacity): it explains nothing.
var unread = capacity{err: errNotRead}

var errNotRead = errors.New("not read")

// room says whether one more Session would fit on a node that takes
// placement.
func (p capacity) room() bool { return p.err == nil && p.full < p.ready }

func (p capacity) String() string {
	switch {
	case errors.Is(p.err, errNotRead):
		return "<not read>"
	case p.err != nil:
		return fmt.Sprintf("<unreadable: %v>", status.Code(p.err))
	}
	return fmt.Sprintf("%d of %d nodes take placement, %d of them full (%s)", p.ready, p.nodes, p.full, p.desc)
}

// capacity reads the cluster's placement state from the admin API right
// now (GetDeployment for the committed generation, ListNodes for each
// node). A node takes placement as ChoosePlacementNode requires: enabled,
// connected (the presence predicate placement reads too), ready for the
// committed generation. It is full when what it holds (active) reaches
// the least of max_active and its reported CPU, memory and free disk
// divided by the specification's needs, computed here from the raw
// figures rather than taken from Core's no_room_reason (which the
// description shows beside them).
func (c *cluster) capacity() capacity {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
	defer cancel()
	dep, err := adminv1.NewDeploymentServiceClient(c.cc).GetDeployment(ctx, &adminv1.GetDeploymentRequest{Name: "deployment"})
	if err != nil {
		return capacity{err: err}
	}
	resp, err := c.nodesAPI().ListNodes(ctx, &adminv1.ListNodesRequest{PageSize: 100})
	if err != nil {
		return capacity{err: err}
	}
	generation := dep.GetDeployment().GetGeneration()
	p := capacity{nodes: len(resp.GetNodes())}
	var parts []string
	for _, n := range resp.GetNodes() {
		cp, rd := n.GetCapacity(), n.GetReadiness()
		takes := n.GetState() == adminv1.Node_STATE_ENABLED && stack.Connected(n) && rd.GetReady() && rd.GetGeneration() == generation
		parts = append(parts, fmt.Sprintf("%s %v connected %v ready %v (generation %d of %d) active %d/%d no_room_reason %q",
			n.GetName(), n.GetState(), stack.Connected(n), rd.GetReady(), rd.GetGeneration(), generation, cp.GetActive(), cp.GetMaxActive(), cp.GetNoRoomReason()))
		if !takes {
			continue
		}
		p.ready++
		room := int64(cp.GetMaxActive())
		for _, fit := range []struct{ have, need int64 }{
			{cp.GetCpuMillis(), int64(c.spec.GetCpuMillis())},
			{cp.GetMemoryBytes(), c.spec.GetMemoryBytes()},
			{cp.GetDiskFreeBytes(), c.spec.GetDiskBytes()},
		} {
			if fit.need > 0 {
				room = min(room, fit.have/fit.need)
			}
		}
		if int64(cp.GetActive()) >= room {
			p.full++
		}
	}
	p.desc = strings.Join(parts, "; ")
	return p
}

// refusal judges a refusal of the soak's workload (explainRefusal, by the
// capacity read just before the call and the one read now, just after
// it): an unexplained one is a violation. It returns the explanation the
// soak tallies.
func (c *cluster) refusal(op string, err error, before capacity) string {
	c.t.Helper()
	after := c.capacity()
	why, ok := c.explainRefusal(err, before, after)
	c.t.Logf("%s refused (%v %s): %s; capacity before the call: %v; after it: %v", op, status.Code(err), stack.AdminReason(err), why, before, after)
	if !ok {
		c.violation("refusal", "%s refused without an explanation (%s): %v %s; capacity before the call: %v; after it: %v",
			op, why, status.Code(err), stack.AdminReason(err), before, after)
	}
	return why
}

// explainRefusal classifies a refusal of the soak's workload: why names
// it, and ok says whether the cluster's state explains it. Only
// FAILED_PRECONDITION no_ready_node_with_capacity can be explained, and
// only by the state of the moment it was decided, which lies between the
// read before the call (before) and the one after it (after): some node
// not taking placement or every one that does full, in either read. The
// read after must succeed: a refusal whose aftermath cannot be read is
// unexplained, whatever before said. A fault's repair is no explanation
// by itself (the soak's faults are repaired before the next operation,
// and a node that is still reconnecting shows as not connected or not
// ready). Anything else is unexplained: UNAVAILABLE included, since
// restartCore returns only once the new Core serves, so no operation is
// ever sent while Core is down.
func (c *cluster) explainRefusal(err error, before, after capacity) (why string, ok bool) {
	code, reason := status.Code(err), stack.AdminReason(err)
	if code != codes.FailedPrecondition || reason != "no_ready_node_with_capacity" {
		return strings.TrimSpace(fmt.Sprintf("%v %s", code, reason)), false
	}
	if after.err != nil {
		return "no capacity, and ListNodes failed right after", false
	}
	for _, p := range []capacity{before, after} {
		switch {
		case p.err != nil:
		case p.ready < p.nodes:
			return "no capacity: a node not connected or not ready", true
		case !p.room():
			return "no capacity: every node full", true
		}
	}
	return "no capacity with every node ready and room left", false
}

// soakFault injects one random fault and repairs it before it returns:
// an agent SIGKILLed or SIGSTOPped, the Core-node path cut, or Core
// SIGKILLed or SIGTERMed (restartCore returns once the new Core serves).
func soakFault(t *testing.T, c *cluster, r *run) {
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
	case 4:
		r.fault(t, "SIGTERM berth-core")
		c.restartCore(false)
	}
}
