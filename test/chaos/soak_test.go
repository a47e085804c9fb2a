package chaos

import (
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"google.golang.org/grpc/status"

	"berth.dev/test/internal/stack"
)

// soakCheckEvery is how often the soak deletes everything and checks the
// invariants.
const soakCheckEvery = 3 * time.Minute

// TestSoak runs a mixed workload (create Sessions, run Turns in them,
// delete them) with random faults for CHAOS_SOAK_DURATION (`make soak DURATION=10m`) and prints
// the totals: operations, Turns and how they ended, faults injected,
// invariant violations (I1-I4) and leaks. It skips when the variable is not set.
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
		reasons := map[string]int{} // refusals by gRPC code and message
		refuse := func(err error) {
			refused++
			// Admin API messages are fixed texts (no ids, no native
			// text), so they can key the tally.
			msg := status.Convert(err).Message()
			if len(msg) > 60 {
				msg = msg[:60]
			}
			reasons[status.Code(err).String()+": "+msg]++
		}
		lastFault, lastCheck := time.Now(), time.Now()
		check := func() {
			checks++
			// Every Turn ends (I4) before its Session is deleted.
			c.checkTurns(turns, &tally, true)
			turns = nil
			c.deleteAll()
			live = nil
			if c.settle() >= settleDeadline {
				containers, volumes := stack.Owned(t, c.cli, c.inst)
				leaks += containers + volumes
			}
			c.checkCreates()
			c.checkForeign()
			lastCheck = time.Now()
		}
		for time.Now().Before(end) {
			switch x := r.rng.IntN(100); {
			case x < 15 && time.Since(lastFault) > 10*time.Second:
				soakFault(t, c, r)
				lastFault = time.Now()
			case x < 45 && len(live) > 0:
				if s, err := c.submitTurn(pick(r.rng, live)); err == nil {
					turns = append(turns, s)
					tally.submitted++
				} else {
					refuse(err)
				}
			case x < 70 && len(live) < 12:
				if name, err := c.createSession(); err == nil {
					live = append(live, name)
				} else {
					refuse(err)
				}
			case len(live) > 0:
				i := r.rng.IntN(len(live))
				if err := c.deleteSession(live[i]); err != nil {
					refuse(err)
				}
				live = append(live[:i], live[i+1:]...)
			}
			if time.Since(lastCheck) > soakCheckEvery {
				check()
			}
			time.Sleep(time.Duration(100+r.rng.IntN(400)) * time.Millisecond)
		}
		check()
		summary := fmt.Sprintf("soak %v (seed %d): %d operations (%d refused %v), %d Turns (%d completed with their exact output, %d ended with a clear failure), %d faults injected, %d invariant checks, %d invariant violations, %d leaked resources\n",
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

// soakFault injects one random fault and repairs it.
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
