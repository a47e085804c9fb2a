package chaos

import (
	"context"
	"testing"
	"time"

	adminv1 "berth.dev/proto/berth/admin/v1"
)

// clockSkew is how far berth-core's clock is off the database's.
const clockSkew = 10 * time.Minute

// TestClockSkewBetweenCoreAndDatabase runs a cluster whose berth-core
// clock is 10 minutes ahead of its PostgreSQL's, then one 10 minutes
// behind, in the seed's order. Core's own clock cannot be moved on one
// host (CLOCK_REALTIME has no namespace, and Go reads it from the vDSO,
// past any LD_PRELOAD), so the database's is: libfaketime offsets the
// server's, and the offset is checked from its now(). Only the database
// clock may matter (lifecycle decisions are made on it): the Sessions end
// ACTIVE with their Runtimes connected (I6); Turns that run across several
// of the gateway's housekeeping ticks complete with their exact output,
// once by their side effects (I4); a Session deleted under a running
// Turn cancels it (CANCELLED: the Runtime reports within the gateway's
// revocation drain); and cleanup leaves nothing (I1-I3).
func TestClockSkewBetweenCoreAndDatabase(t *testing.T) {
	scenario(t, "Core's clock 10 minutes off the database's", func(t *testing.T, r *run) {
		skews := []time.Duration{clockSkew, -clockSkew}
		if r.rng.IntN(2) == 0 {
			skews[0], skews[1] = skews[1], skews[0]
		}
		for _, skew := range skews {
			// The database runs at host time minus skew: Core, on host
			// time, is skew ahead of it.
			pg := startPostgresSkewed(t, -skew)
			c := newCluster(t, r, options{nodes: 2, proxied: -1, dsn: pg.DSN, turns: true})
			r.fault(t, "berth-core's clock %v off its database's", skew)
			sessions := c.mustCreate(2)
			requireOutcomes(t, c, sessions, activeDeadline)

			// Turns that sleep 5 s: the harness's gateway housekeeps every
			// 2 s, so each Turn is checked against its timeout while it runs.
			var list []submitted
			var tally turnTally
			for _, s := range sessions {
				sub, err := c.submitTurnSleeping(s, 5*time.Second)
				if err != nil {
					t.Fatalf("SubmitTurn: %v", err)
				}
				list = append(list, sub)
				tally.submitted++
			}
			c.checkTurns(list, &tally, true)
			if tally.completed != tally.submitted {
				c.violation("I4", "Core %v off the database: %d of %d Turns completed", skew, tally.completed, tally.submitted)
			}
			c.checkWitness(list)

			// Delete a Session under a running Turn: the Turn is cancelled.
			running, err := c.submitTurnSleeping(sessions[0], 60*time.Second)
			if err != nil {
				t.Fatalf("SubmitTurn: %v", err)
			}
			end := time.Now().Add(activeDeadline)
			for c.witness.count(running.nonce) == 0 && time.Now().Before(end) {
				time.Sleep(50 * time.Millisecond)
			}
			if err := c.deleteSession(sessions[0]); err != nil {
				t.Fatalf("DeleteSession: %v", err)
			}
			c.requireTurnState(running, adminv1.Turn_STATE_CANCELLED, 60*time.Second)
			c.invariants()
		}
	})
}

// requireTurnState waits up to within for s to end and requires want.
func (c *cluster) requireTurnState(s submitted, want adminv1.Turn_State, within time.Duration) {
	c.t.Helper()
	end := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
		resp, err := c.turns().GetTurn(ctx, &adminv1.GetTurnRequest{Name: s.name})
		cancel()
		state := resp.GetTurn().GetState()
		if err == nil && state != adminv1.Turn_STATE_QUEUED && state != adminv1.Turn_STATE_RUNNING {
			if state != want {
				c.violation("I4", "turn %s ended %v (%s), want %v", s.name, state, resp.GetTurn().GetFailureCode(), want)
			}
			return
		}
		if time.Now().After(end) {
			c.violation("I4", "turn %s not ended %v after %v (%v, %v)", s.name, want, within, state, err)
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}
