package main

import (
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/protobuf/proto"

	adminv1 "berth.dev/proto/berth/admin/v1"

	"berth.dev/core/cmd/berthctl/internal/adminclient"
)

// pollInterval is how often a wait reads the resource again.
const pollInterval = 500 * time.Millisecond

func (a *app) sessionCmd() *cobra.Command {
	return a.groupCmd("session", "Create, list, show, suspend, resume, fork, archive and delete Sessions (SessionService)",
		a.sessionCreateCmd(), a.sessionListCmd(), a.sessionGetCmd(), a.sessionDeleteCmd(), a.sessionArchiveCmd(),
		a.sessionSuspendCmd(), a.sessionResumeCmd(), a.sessionForkCmd())
}

// waitFlags are --wait and --wait-timeout of a command that can wait.
type waitFlags struct {
	wait    bool
	timeout time.Duration
}

func (w *waitFlags) flags(fs *pflag.FlagSet, what string) {
	fs.BoolVar(&w.wait, "wait", false, what)
	fs.DurationVar(&w.timeout, "wait-timeout", 5*time.Minute, "give up waiting after this long")
}

// showSession prints resp, which carries the Session *session, after
// waiting for goal when --wait asks; resp then shows the Session last
// read.
func (a *app) showSession(resp proto.Message, session **adminv1.Session, w waitFlags, goal waitGoal) error {
	if w.wait {
		s, err := a.waitSession((*session).GetName(), w.timeout, goal)
		if s != nil {
			*session = s
		}
		if err != nil {
			return err
		}
	}
	return a.show(resp, func(out io.Writer) { sessionFields(out, *session) })
}

func (a *app) sessionCreateCmd() *cobra.Command {
	var (
		display   string
		project   string
		requestID string
		w         waitFlags
	)
	c := a.command("create", "Create a Session (Core places it and creates its sandbox in the background)", exactArgs(), func(cmd *cobra.Command, _ []string) error {
		req := &adminv1.CreateSessionRequest{RequestId: requestID, Session: &adminv1.Session{DisplayName: display, Project: project}}
		if req.RequestId == "" {
			req.RequestId = uuid.NewString()
		}
		resp, err := call(a.sessions.CreateSession, req)
		if err != nil {
			return err
		}
		return a.showSession(resp, &resp.Session, w, admitted)
	})
	c.Flags().StringVar(&display, "display-name", "", "an optional label (at most 63 characters)")
	c.Flags().StringVar(&project, "project", "", "the project, tenants/TENANT/projects/PROJECT (default: the default project)")
	c.Flags().StringVar(&requestID, "request-id", "", "UUID that makes a retry idempotent within the project (default: a new one)")
	w.flags(c.Flags(), "wait until the Session's Runtime accepts Turns (or the Session fails)")
	return c
}

func (a *app) sessionListCmd() *cobra.Command {
	var (
		deleted bool
		project string
		p       page
	)
	c := a.command("list", "List Sessions in creation order", exactArgs(), func(cmd *cobra.Command, _ []string) error {
		sessions, next, err := list(p, func(size int32, token string) ([]*adminv1.Session, string, error) {
			resp, err := call(a.sessions.ListSessions, &adminv1.ListSessionsRequest{PageSize: size, PageToken: token, ShowDeleted: deleted, Project: project})
			return resp.GetSessions(), resp.GetNextPageToken(), err
		})
		if err != nil {
			return err
		}
		err = a.show(&adminv1.ListSessionsResponse{Sessions: sessions, NextPageToken: next}, func(w io.Writer) {
			row(w, "NAME", "STATE", "ADMITTED", "PHASE", "NODE", "CREATED", "DISPLAY NAME")
			for _, s := range sessions {
				env := s.GetEnvironment()
				row(w, s.GetName(), enum(s.GetState(), "STATE_"), yesno(env.GetExecutionAdmitted()), phase(env.GetComputePhase()),
					dash(s.GetNode()), ts(s.GetCreateTime()), dash(s.GetDisplayName()))
			}
		})
		a.more(next)
		return err
	})
	c.Flags().BoolVar(&deleted, "show-deleted", false, "include deleted Sessions")
	c.Flags().StringVar(&project, "project", "", "list only this project's Sessions (tenants/TENANT/projects/PROJECT)")
	p.flags(c.Flags())
	return c
}

func (a *app) sessionGetCmd() *cobra.Command {
	return a.command("get SESSION", "Show one Session and its Environment's readiness", exactArgs("SESSION"), func(cmd *cobra.Command, args []string) error {
		resp, err := call(a.sessions.GetSession, &adminv1.GetSessionRequest{Name: name("sessions", args[0])})
		if err != nil {
			return err
		}
		return a.showSession(resp, &resp.Session, waitFlags{}, nil)
	})
}

func (a *app) sessionDeleteCmd() *cobra.Command {
	var w waitFlags
	c := a.command("delete SESSION", "Delete a Session; Core removes its sandbox and then marks it DELETED", exactArgs("SESSION"), func(cmd *cobra.Command, args []string) error {
		resp, err := call(a.sessions.DeleteSession, &adminv1.DeleteSessionRequest{Name: name("sessions", args[0])})
		if err != nil {
			return err
		}
		return a.showSession(resp, &resp.Session, w, gone)
	})
	w.flags(c.Flags(), "wait until the cleanup is confirmed (state DELETED)")
	return c
}

func (a *app) sessionArchiveCmd() *cobra.Command {
	return a.command("archive SESSION", "Archive a Session: it keeps its Turns and output, runs nothing, and Core removes its sandbox", exactArgs("SESSION"), func(cmd *cobra.Command, args []string) error {
		resp, err := call(a.sessions.ArchiveSession, &adminv1.ArchiveSessionRequest{Name: name("sessions", args[0])})
		if err != nil {
			return err
		}
		return a.showSession(resp, &resp.Session, waitFlags{}, nil)
	})
}

func (a *app) sessionSuspendCmd() *cobra.Command {
	c := a.sessionComputeCmd("suspend SESSION", "Suspend an idle Session now: its workspace is captured and its compute released",
		"wait until the Session is suspended (compute phase SUSPENDED)", suspended,
		func(name, requestID string) (proto.Message, **adminv1.Session, error) {
			resp, err := call(a.sessions.SuspendSession, &adminv1.SuspendSessionRequest{Name: name, RequestId: requestID})
			if err != nil {
				return nil, nil, err
			}
			return resp, &resp.Session, nil
		})
	c.Long = `suspend asks Core to suspend the Session now, as the deployment's idle
suspension would but without waiting out the idle time: the deployment must
have a suspension policy, and the Session must be idle (at least one Turn
ended, none queued or running). A Turn submitted later, or 'session resume',
restores it.`
	return c
}

func (a *app) sessionResumeCmd() *cobra.Command {
	return a.sessionComputeCmd("resume SESSION", "Resume a suspended Session now: its workspace is restored into new compute",
		"wait until the Session runs again and its Runtime accepts Turns", resumed,
		func(name, requestID string) (proto.Message, **adminv1.Session, error) {
			resp, err := call(a.sessions.ResumeSession, &adminv1.ResumeSessionRequest{Name: name, RequestId: requestID})
			if err != nil {
				return nil, nil, err
			}
			return resp, &resp.Session, nil
		})
}

func (a *app) sessionForkCmd() *cobra.Command {
	var (
		count, minCount int32
		prefix          string
		requestID       string
		w               waitFlags
	)
	c := a.command("fork SESSION", "Make new Sessions from a Session's current filesystem (each with its own sandbox and workspace copy)", exactArgs("SESSION"), func(cmd *cobra.Command, args []string) error {
		req := &adminv1.ForkSessionRequest{Name: name("sessions", args[0]), RequestId: requestID, Count: count, MinCount: minCount, DisplayNamePrefix: prefix}
		if req.RequestId == "" {
			req.RequestId = uuid.NewString()
		}
		resp, err := call(a.sessions.ForkSession, req)
		if err != nil {
			return err
		}
		if w.wait {
			for i, child := range resp.GetChildren() {
				s, err := a.waitSession(child.GetName(), w.timeout, admitted)
				if s != nil {
					resp.Children[i] = s
				}
				if err != nil {
					return err
				}
			}
		}
		return a.show(resp, func(out io.Writer) {
			row(out, "FORK", resp.GetFork())
			row(out, "PLACED", fmt.Sprintf("%d of %d", resp.GetPlaced(), resp.GetRequested()))
			if r := resp.GetUnplacedReason(); r != "" {
				row(out, "UNPLACED REASON", r)
			}
			row(out, "CAPTURED", dash(ts(resp.GetCaptureTime())))
			row(out, "")
			row(out, "NAME", "STATE", "ADMITTED", "NODE", "DISPLAY NAME")
			for _, s := range resp.GetChildren() {
				row(out, s.GetName(), enum(s.GetState(), "STATE_"), yesno(s.GetEnvironment().GetExecutionAdmitted()), dash(s.GetNode()), dash(s.GetDisplayName()))
			}
		})
	})
	c.Flags().Int32Var(&count, "count", 1, "how many Sessions to make (1 to 128)")
	c.Flags().Int32Var(&minCount, "min-count", 0, "the fewest that must be placed, or nothing is made (default 1)")
	c.Flags().StringVar(&prefix, "display-name-prefix", "", "name the children PREFIX-0, PREFIX-1, ... (default: the source's display name)")
	c.Flags().StringVar(&requestID, "request-id", "", "UUID that makes a retry return the same fork (default: a new one)")
	w.flags(c.Flags(), "wait until every child's Runtime accepts Turns (or a child fails)")
	c.Long = `fork makes --count new Sessions from the Session's current filesystem: a
running Session is paused only while its workspace and home are copied and
keeps its Runtime and Turns; a suspended one lends its snapshot and stays
suspended. Each child has its own sandbox, Runtime, device credential and
copy of the files; writes in one are never seen by another or by the source.
The children spread over the nodes with room, as created Sessions do; when
not all fit, the answer says how many were placed and why (--min-count makes
fewer a refusal that creates nothing).`
	return c
}

// sessionComputeCmd is suspend and resume: send, called with the
// Session's name and a request id (--request-id, or a new one), returns
// the response and where in it the Session is; --wait then waits for goal.
func (a *app) sessionComputeCmd(use, short, waitWhat string, goal waitGoal,
	send func(name, requestID string) (proto.Message, **adminv1.Session, error)) *cobra.Command {
	var (
		requestID string
		w         waitFlags
	)
	c := a.command(use, short, exactArgs("SESSION"), func(cmd *cobra.Command, args []string) error {
		id := requestID
		if id == "" {
			id = uuid.NewString()
		}
		resp, session, err := send(name("sessions", args[0]), id)
		if err != nil {
			return err
		}
		return a.showSession(resp, session, w, goal)
	})
	c.Flags().StringVar(&requestID, "request-id", "", "UUID that makes a retry idempotent (default: a new one)")
	w.flags(c.Flags(), waitWhat)
	return c
}

// A waitGoal says whether a Session is where a wait wants it (done), or
// can no longer get there (err).
type waitGoal func(s *adminv1.Session) (done bool, err error)

// admitted is create --wait's goal: the Runtime accepts Turns.
func admitted(s *adminv1.Session) (bool, error) {
	if err := live(s); err != nil {
		return false, err
	}
	return s.GetEnvironment().GetExecutionAdmitted(), nil
}

// suspended is suspend --wait's goal: a snapshot holds the workspace.
func suspended(s *adminv1.Session) (bool, error) {
	if err := live(s); err != nil {
		return false, err
	}
	return s.GetEnvironment().GetComputePhase() == adminv1.ComputePhase_COMPUTE_PHASE_SUSPENDED, nil
}

// resumed is resume --wait's goal: running again and admitted.
func resumed(s *adminv1.Session) (bool, error) {
	if err := live(s); err != nil {
		return false, err
	}
	env := s.GetEnvironment()
	return env.GetComputePhase() == adminv1.ComputePhase_COMPUTE_PHASE_RUNNING && env.GetExecutionAdmitted(), nil
}

// live is the error of a wait for a Session that can no longer get
// anywhere: failed, deleted or archived.
func live(s *adminv1.Session) error {
	switch s.GetState() {
	case adminv1.Session_STATE_FAILED:
		return adminclient.Errorf(dash(s.GetEnvironment().GetFailureCode()), "%s failed: 'berthctl session get %s' shows it", s.GetName(), s.GetName())
	case adminv1.Session_STATE_DELETING, adminv1.Session_STATE_DELETED:
		return adminclient.Errorf("session_deleted", "%s was deleted while waiting for it", s.GetName())
	case adminv1.Session_STATE_ARCHIVED:
		return adminclient.Errorf("session_archived", "%s was archived while waiting for it", s.GetName())
	}
	return nil
}

// gone is delete --wait's goal: cleanup confirmed.
func gone(s *adminv1.Session) (bool, error) {
	return s.GetState() == adminv1.Session_STATE_DELETED, nil
}

// waitSession reads the Session until goal is reached, showing its state
// on the progress line; it returns the Session last read.
func (a *app) waitSession(name string, timeout time.Duration, goal waitGoal) (*adminv1.Session, error) {
	p := a.progress()
	defer p.clear()
	deadline := time.Now().Add(timeout)
	var last *adminv1.Session
	for {
		resp, err := call(a.sessions.GetSession, &adminv1.GetSessionRequest{Name: name})
		if err != nil {
			return last, err
		}
		last = resp.GetSession()
		done, err := goal(last)
		if done || err != nil {
			return last, err
		}
		if time.Now().After(deadline) {
			return last, adminclient.Errorf("wait_timeout", "%s is still %s after %s: 'berthctl session get %s' shows where it is", name, enum(last.GetState(), "STATE_"), timeout, name)
		}
		env := last.GetEnvironment()
		p.show("%s: %s, compute %s, runtime connected %s, admitted %s", name, enum(last.GetState(), "STATE_"),
			yesno(env.GetComputeAvailable()), yesno(env.GetRuntimeConnected()), yesno(env.GetExecutionAdmitted()))
		time.Sleep(pollInterval)
	}
}

// phase is a compute phase for people, "-" when unspecified.
func phase(p adminv1.ComputePhase) string {
	if p == adminv1.ComputePhase_COMPUTE_PHASE_UNSPECIFIED {
		return "-"
	}
	return enum(p, "COMPUTE_PHASE_")
}

func sessionFields(w io.Writer, s *adminv1.Session) {
	env := s.GetEnvironment()
	field(w, "NAME", s.GetName())
	field(w, "DISPLAY NAME", dash(s.GetDisplayName()))
	field(w, "PROJECT", dash(s.GetProject()))
	field(w, "STATE", enum(s.GetState(), "STATE_"))
	field(w, "CREATED", ts(s.GetCreateTime()))
	if s.GetDeleteTime() != nil {
		field(w, "DELETE REQUESTED", ts(s.GetDeleteTime()))
	}
	field(w, "NODE", dash(s.GetNode()))
	field(w, "ALLOCATION", dash(s.GetAllocation()))
	field(w, "COMPUTE AVAILABLE", yesno(env.GetComputeAvailable()))
	if env.GetComputeReason() != "" {
		field(w, "COMPUTE REASON", env.GetComputeReason())
	}
	field(w, "COMPUTE PHASE", phase(env.GetComputePhase()))
	field(w, "RUNTIME CONNECTED", yesno(env.GetRuntimeConnected()))
	field(w, "CAPABILITIES PREPARED", yesno(env.GetCapabilitiesPrepared()))
	field(w, "EXECUTION ADMITTED", yesno(env.GetExecutionAdmitted()))
	if env.GetFailureCode() != "" {
		field(w, "FAILURE", env.GetFailureCode())
	}
	if env.GetSnapshotExpireTime() != nil {
		field(w, "SNAPSHOT EXPIRES", ts(env.GetSnapshotExpireTime()))
	}
}
