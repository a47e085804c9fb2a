package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/durationpb"

	adminv1 "berth.dev/proto/berth/admin/v1"
)

// The bounds of the workload's Turns. A Turn must be terminal by its
// submission plus turnQueueTimeout, turnTimeout and turnGrace (the
// gateway's backstop for a Runtime that never reports is twice 30 s);
// later it violates I4.
const (
	turnQueueTimeout = 60 * time.Second
	turnTimeout      = 30 * time.Second
	turnGrace        = 90 * time.Second
)

// submitted is a Turn the workload submitted and expects an end of.
type submitted struct {
	name, nonce string
	at          time.Time
	// queueTimeout is the Turn's queue timeout.
	queueTimeout time.Duration
	// completed is set by checkTurns when Core reports the Turn COMPLETED
	// (checkWitness then requires both witnesses to have seen it once).
	completed *bool
}

func (s submitted) deadline() time.Time { return s.at.Add(s.queueTimeout + turnTimeout + turnGrace) }

// turnTally counts the Turns' ends.
type turnTally struct {
	submitted, completed, failed int
}

func (c *cluster) turns() adminv1.TurnServiceClient { return adminv1.NewTurnServiceClient(c.cc) }

// submitTurn submits a Turn that prints a fresh nonce to session; in a
// cluster with a witness it first records its execution there
// (witness.script).
func (c *cluster) submitTurn(session string) (submitted, error) {
	return c.submitTurnSleeping(session, 0)
}

// submitTurnSleeping is submitTurn with a Turn that sleeps for sleep
// (whole seconds) after recording its execution and before its output;
// sleep needs a cluster with a witness.
func (c *cluster) submitTurnSleeping(session string, sleep time.Duration) (submitted, error) {
	nonce := uuid.NewString()
	args := []string{"printf", nonce}
	if c.witness != nil {
		args = c.witness.script(nonce, sleep)
	}
	queue := turnQueueTimeout
	if c.queueTimeout > 0 {
		queue = c.queueTimeout
	}
	ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
	defer cancel()
	resp, err := c.turns().SubmitTurn(ctx, &adminv1.SubmitTurnRequest{
		Parent: session, RequestId: uuid.NewString(),
		Turn: &adminv1.Turn{
			Command:      &adminv1.Command{Program: &adminv1.Command_Argv{Argv: &adminv1.Argv{Args: args}}},
			Timeout:      durationpb.New(turnTimeout),
			QueueTimeout: durationpb.New(queue),
		},
	})
	if err != nil {
		return submitted{}, err
	}
	c.run.ops.Add(1)
	return submitted{name: resp.GetTurn().GetName(), nonce: nonce, at: time.Now(), queueTimeout: queue, completed: new(bool)}, nil
}

// checkTurns checks I4 for list: a terminal Turn either completed with its
// exact output and exit code 0 or reports a clear failure (failed with a
// failure code, cancelled, timed out, or unconfirmed); a Turn still
// queued or running past its deadline is a violation. With wait it waits
// for every Turn to end (or pass its deadline); otherwise it returns the
// ones still in progress.
func (c *cluster) checkTurns(list []submitted, tally *turnTally, wait bool) []submitted {
	c.t.Helper()
	for {
		var pending []submitted
		for _, s := range list {
			ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
			resp, err := c.turns().GetTurn(ctx, &adminv1.GetTurnRequest{Name: s.name})
			cancel()
			if err != nil {
				// Core may be restarting: look again later, within the
				// deadline.
				if time.Now().After(s.deadline()) {
					c.violation("I4", "turn %s unreadable past its deadline: %v", s.name, err)
					continue
				}
				pending = append(pending, s)
				continue
			}
			t := resp.GetTurn()
			switch t.GetState() {
			case adminv1.Turn_STATE_QUEUED, adminv1.Turn_STATE_RUNNING:
				if time.Now().After(s.deadline()) {
					c.violation("I4", "turn %s still %v %v after submission", s.name, t.GetState(), time.Since(s.at).Round(time.Second))
					continue
				}
				pending = append(pending, s)
			case adminv1.Turn_STATE_COMPLETED:
				tally.completed++
				*s.completed = true
				if out := c.turnOutput(s.name); t.GetExitCode() != 0 || out != s.nonce {
					c.violation("I4", "turn %s completed with exit %d and output %q, want 0 and %q", s.name, t.GetExitCode(), out, s.nonce)
				}
			case adminv1.Turn_STATE_FAILED:
				tally.failed++
				c.t.Logf("turn %s FAILED %q after %v", s.name, t.GetFailureCode(), time.Since(s.at).Round(time.Millisecond))
				if t.GetFailureCode() == "" {
					c.violation("I4", "turn %s failed without a failure code", s.name)
				}
			case adminv1.Turn_STATE_CANCELLED, adminv1.Turn_STATE_TIMED_OUT, adminv1.Turn_STATE_UNCONFIRMED:
				tally.failed++
				c.t.Logf("turn %s %v %q after %v", s.name, t.GetState(), t.GetFailureCode(), time.Since(s.at).Round(time.Millisecond))
			default:
				c.violation("I4", "turn %s in state %v", s.name, t.GetState())
			}
		}
		if !wait || len(pending) == 0 {
			return pending
		}
		list = pending
		time.Sleep(500 * time.Millisecond)
	}
}

// turnOutput reads a Turn's standard output.
func (c *cluster) turnOutput(name string) string {
	ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
	defer cancel()
	st, err := c.turns().StreamTurnOutput(ctx, &adminv1.StreamTurnOutputRequest{Name: name})
	if err != nil {
		return fmt.Sprintf("<stream: %v>", err)
	}
	var b strings.Builder
	for {
		m, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return b.String()
		}
		if err != nil {
			return fmt.Sprintf("<stream: %v>", err)
		}
		if m.GetStream() == adminv1.OutputStream_OUTPUT_STREAM_STDOUT {
			b.Write(m.GetData())
		}
	}
}

// TestTurnsAcrossFaults runs Turns in three Sessions spread over the nodes
// while a node agent is SIGKILLed and restarted and berth-core is
// SIGKILLed and restarted: every Turn ends with its exact output or a
// clear failure within its deadline (I4), none runs twice and every
// completed one ran once, counted by its side effects (checkWitness: a
// host-side report and a workspace line per execution), every Session
// ends ACTIVE with its Runtime connected (I6), and afterwards nothing is
// left (I1-I3). Recovery is the time from Core's restart until
// a new Turn completes.
func TestTurnsAcrossFaults(t *testing.T) {
	scenario(t, "Turns across node agent and Core SIGKILL", func(t *testing.T, r *run) {
		c := newCluster(t, r, options{proxied: -1, turns: true})
		sessions := c.mustCreate(3)
		var list, all []submitted
		var tally turnTally
		submit := func() {
			for _, s := range sessions {
				sub, err := c.submitTurn(s)
				if err != nil {
					c.t.Fatalf("SubmitTurn: %v", err)
				}
				list = append(list, sub)
				all = append(all, sub)
				tally.submitted++
			}
		}
		submit()
		c.checkTurns(list, &tally, true)
		list = nil

		n := pick(r.rng, c.nodes)
		r.fault(t, "SIGKILL node agent %s with Runtimes connected", n.name)
		n.kill()
		submit()
		n.restart()
		r.fault(t, "SIGKILL berth-core with Runtimes connected")
		c.restartCore(true)
		restarted := time.Now()
		submit()
		c.checkTurns(list, &tally, true)
		if tally.completed+tally.failed != tally.submitted {
			c.violation("I4", "%d turns submitted, %d ended", tally.submitted, tally.completed+tally.failed)
		}
		// Recovery: a Turn submitted now completes.
		for _, s := range sessions {
			sub, err := c.submitTurn(s)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, sub)
			var one turnTally
			c.checkTurns([]submitted{sub}, &one, true)
			tally.submitted++
			tally.completed += one.completed
			tally.failed += one.failed
			if one.completed != 1 {
				c.violation("I4", "a Turn submitted after recovery did not complete")
			}
		}
		r.recovery = time.Since(restarted)
		t.Logf("turns: %d submitted, %d completed, %d ended with a clear failure", tally.submitted, tally.completed, tally.failed)
		// The Sessions ran through both faults: each ends ACTIVE (I6).
		requireActive(t, c, sessions, activeDeadline)
		if host, _ := c.checkWitness(all); host < tally.completed {
			c.violation("I4", "the host-side witness saw %d Turns, fewer than the %d completed", host, tally.completed)
		}
		c.invariants()
	})
}

// TestRuntimePartitionedMidTurn partitions the Runtimes from Core's
// gateway (a proxy on their path drops every byte, or closes every
// connection, by the seed) for a seeded 2-6 s while each of three
// Sessions runs a Turn that sleeps 3 s after recording its execution.
// Every Turn ends with its exact output or a clear failure in time (I4;
// a result that cannot be delivered ends UNCONFIRMED, never as a guess),
// none runs twice by its side effects, a Turn submitted after the
// partition heals completes in every Session, every Session ends ACTIVE
// with its Runtime connected again (I6), and cleanup leaves nothing
// (I1-I3). Recovery is the time from the repair until those Turns
// completed.
func TestRuntimePartitionedMidTurn(t *testing.T) {
	scenario(t, "Runtime partitioned from Core mid-Turn", func(t *testing.T, r *run) {
		c := newCluster(t, r, options{proxied: -1, turns: true, runtimeProxied: true})
		sessions := c.mustCreate(3)
		requireOutcomes(t, c, sessions, activeDeadline)
		var list []submitted
		var tally turnTally
		for _, s := range sessions {
			sub, err := c.submitTurnSleeping(s, 3*time.Second)
			if err != nil {
				t.Fatalf("SubmitTurn: %v", err)
			}
			list = append(list, sub)
			tally.submitted++
		}
		// Partition once every Turn has recorded its execution: they run.
		end := time.Now().Add(activeDeadline)
		for _, s := range list {
			for c.witness.count(s.nonce) == 0 && time.Now().Before(end) {
				time.Sleep(50 * time.Millisecond)
			}
		}
		hold := time.Duration(2000+r.rng.IntN(4000)) * time.Millisecond
		if r.rng.IntN(2) == 0 {
			r.fault(t, "black-hole the Runtimes' path to Core for %v mid-Turn", hold)
			c.runtimeProxy.BlackHole()
		} else {
			r.fault(t, "cut the Runtimes' path to Core for %v mid-Turn", hold)
			c.runtimeProxy.Cut()
		}
		time.Sleep(hold)
		c.runtimeProxy.Restore()
		repaired := time.Now()
		c.checkTurns(list, &tally, true)

		var after []submitted
		for _, s := range sessions {
			sub, err := c.submitTurn(s)
			if err != nil {
				t.Fatalf("SubmitTurn after the partition: %v", err)
			}
			after = append(after, sub)
			tally.submitted++
		}
		var healed turnTally
		c.checkTurns(after, &healed, true)
		if healed.completed != len(after) {
			c.violation("I4", "%d of %d Turns submitted after the partition healed completed", healed.completed, len(after))
		}
		r.recovery = time.Since(repaired)
		// The partition touched every Session: each ends ACTIVE, its
		// Runtime connected again (I6).
		requireActive(t, c, sessions, activeDeadline)
		tally.completed += healed.completed
		tally.failed += healed.failed
		t.Logf("turns: %d submitted, %d completed, %d ended with a clear failure", tally.submitted, tally.completed, tally.failed)
		c.checkWitness(append(list, after...))
		c.invariants()
	})
}
