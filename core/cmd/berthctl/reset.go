package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"

	adminv1 "berth.dev/proto/berth/admin/v1"

	"berth.dev/core/cmd/berthctl/internal/adminclient"
)

func (a *app) deploymentResetCmd() *cobra.Command {
	c := a.groupCmd("reset", "Reset the deployment: archive every Session, wait for their cleanup, clear the provider (StartReset, GetReset)",
		a.resetStartCmd(), a.resetGetCmd())
	c.Long = `A reset decommissions the installation's sandboxes, or clears the way to
another provider kind with nothing left behind. It archives every Session
(their Turns and output stay readable), waits until no node and no direct
lane holds anything, then clears the deployment: no current generation,
every enabled node retired, every unused enrollment token revoked.
Projects, keys and the audit trail stay. While it runs, new Sessions and
deployment changes are refused (deployment_resetting). A node that is
offline keeps its resources held until its agent returns and cleans them
up; if the deadline passes first the reset fails and the deployment stays
as it was (archived Sessions stay archived).`
	c.Example = `  berthctl deployment reset start --yes --wait
  berthctl deployment reset get
  berthctl deployment commit -f candidate.json --expected-generation 7   # the reset's EMPTY GENERATION`
	return c
}

func (a *app) resetStartCmd() *cobra.Command {
	var (
		yes       bool
		timeout   time.Duration
		requestID string
		w         waitFlags
	)
	c := a.command("start", "Start a deployment reset (asks for --yes)", exactArgs(), func(cmd *cobra.Command, _ []string) error {
		if !yes {
			return usagef(cmd, "a reset archives every Session and clears the deployment: run it again with --yes")
		}
		req := &adminv1.StartResetRequest{RequestId: requestID}
		if req.RequestId == "" {
			req.RequestId = uuid.NewString()
		}
		if timeout != 0 {
			req.Timeout = durationpb.New(timeout)
		}
		resp, err := call(a.deployments.StartReset, req)
		if err != nil {
			return err
		}
		r := resp.GetDeploymentReset()
		if w.wait {
			if r, err = a.waitReset(r.GetName(), w.timeout); r != nil {
				resp.DeploymentReset = r
			}
			if err != nil {
				return err
			}
		}
		return a.show(resp, func(out io.Writer) { resetFields(out, resp.GetDeploymentReset()) })
	})
	c.Flags().BoolVar(&yes, "yes", false, "confirm: archive every Session and clear the deployment")
	c.Flags().DurationVar(&timeout, "timeout", 0, "fail the reset if it has not finished after this long (5m to 24h; default 1h)")
	c.Flags().StringVar(&requestID, "request-id", "", "UUID that makes a retry idempotent (default: a new one)")
	w.flags(c.Flags(), "wait until the reset is done (exit 1 if it fails)")
	c.Flags().Lookup("wait-timeout").DefValue = "24h0m0s"
	w.timeout = 24 * time.Hour
	return c
}

func (a *app) resetGetCmd() *cobra.Command {
	return a.command("get [RESET]", "Show a reset and what it waits for (default: the latest)", cobra.MaximumNArgs(1), func(cmd *cobra.Command, args []string) error {
		n := "resets/-"
		if len(args) == 1 {
			n = name("resets", args[0])
		}
		resp, err := call(a.deployments.GetReset, &adminv1.GetResetRequest{Name: n})
		if err != nil {
			return err
		}
		return a.show(resp, func(out io.Writer) { resetFields(out, resp.GetDeploymentReset()) })
	})
}

// waitReset polls reset name until it ends: done is success, failed an
// error with its failure code.
func (a *app) waitReset(name string, timeout time.Duration) (*adminv1.Reset, error) {
	p := a.progress()
	defer p.clear()
	deadline := time.Now().Add(timeout)
	for {
		resp, err := call(a.deployments.GetReset, &adminv1.GetResetRequest{Name: name})
		if err != nil {
			return nil, err
		}
		r := resp.GetDeploymentReset()
		switch r.GetPhase() {
		case adminv1.Reset_PHASE_DONE:
			return r, nil
		case adminv1.Reset_PHASE_FAILED:
			return r, adminclient.Errorf(dash(r.GetFailureCode()), "%s failed: 'berthctl deployment reset get %s' shows what it still held", name, name)
		}
		if time.Now().After(deadline) {
			return r, adminclient.Errorf("wait_timeout", "%s is still %s after %s: 'berthctl deployment reset get' shows it", name, enum(r.GetPhase(), "PHASE_"), timeout)
		}
		p.show("%s: %s, %d Sessions archived, %d held (%d offline)", name, enum(r.GetPhase(), "PHASE_"),
			r.GetSessionsArchived(), r.GetHeld(), r.GetHeldOffline())
		time.Sleep(pollInterval)
	}
}

// resetFields prints a reset for people.
func resetFields(w io.Writer, r *adminv1.Reset) {
	field(w, "NAME", r.GetName())
	field(w, "PHASE", enum(r.GetPhase(), "PHASE_"))
	field(w, "REQUESTED BY", dash(r.GetRequestedBy()))
	field(w, "REQUESTED", ts(r.GetRequestTime()))
	field(w, "DEADLINE", ts(r.GetDeadline()))
	field(w, "GENERATION", fmt.Sprint(r.GetGeneration()))
	field(w, "SESSIONS ARCHIVED", fmt.Sprint(r.GetSessionsArchived()))
	field(w, "HELD", fmt.Sprintf("%d (%d offline), at %s", r.GetHeld(), r.GetHeldOffline(), ts(r.GetProgressTime())))
	var lanes []string
	for _, l := range r.GetWaiting() {
		lane := l.GetNode()
		if lane == "" {
			lane = "direct lane"
		}
		state := "present"
		if !l.GetPresent() {
			state = "offline: waits for its agent"
		}
		lanes = append(lanes, fmt.Sprintf("%s %d (%s)", lane, l.GetHeld(), state))
	}
	field(w, "WAITING FOR", dash(strings.Join(lanes, "; ")))
	if g := r.GetEmptyGeneration(); g != 0 {
		field(w, "EMPTY GENERATION", fmt.Sprintf("%d (commit with --expected-generation %d)", g, g))
	}
	field(w, "FAILURE", dash(r.GetFailureCode()))
	field(w, "ENDED", ts(r.GetEndTime()))
}
