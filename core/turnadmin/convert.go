package turnadmin

import (
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/errdefs"

	"berth.dev/core/admin"
	"berth.dev/core/store"
	"berth.dev/core/turns"
)

// The conversions between berth.admin.v1 Turn messages and core/turns:
// resource names, the Turn message, field paths, and store Turns back to
// the API. server.go only forwards.

func parseSession(field, name string) (uuid.UUID, error) {
	ids, err := admin.ValidateName(field, name, admin.SessionName)
	if err != nil {
		return uuid.Nil, err
	}
	return uuid.MustParse(ids[0]), nil
}

func parseTurn(field, name string) (session, turn uuid.UUID, err error) {
	ids, err := admin.ValidateName(field, name, admin.TurnName)
	if err != nil {
		return uuid.Nil, uuid.Nil, err
	}
	return uuid.MustParse(ids[0]), uuid.MustParse(ids[1]), nil
}

// SubmitRequest converts an API request to the logic's, naming the field
// of any error.
func SubmitRequest(req *adminv1.SubmitTurnRequest) (turns.SubmitRequest, error) {
	session, err := parseSession("parent", req.GetParent())
	if err != nil {
		return turns.SubmitRequest{}, err
	}
	if err := admin.ValidateRequestID("request_id", req.GetRequestId()); err != nil {
		return turns.SubmitRequest{}, err
	}
	t := req.GetTurn()
	if t == nil {
		return turns.SubmitRequest{}, errdefs.Invalid("turn", "is required")
	}
	if err := outputOnlyEmpty(t); err != nil {
		return turns.SubmitRequest{}, err
	}
	r := turns.SubmitRequest{
		SessionID: session, RequestID: uuid.MustParse(req.GetRequestId()),
		WorkingDirectory: t.GetWorkingDirectory(), Env: t.GetEnv(), Stdin: t.GetStdin(),
	}
	switch p := t.GetCommand().GetProgram().(type) {
	case *adminv1.Command_Argv:
		args := p.Argv.GetArgs()
		if args == nil {
			args = []string{}
		}
		r.Command.Argv = args
	case *adminv1.Command_ShellScript:
		s := p.ShellScript
		r.Command.Script = &s
	default:
		return turns.SubmitRequest{}, errdefs.Invalid("turn.command", "is required: argv or shell_script")
	}
	if d, err := duration("turn.timeout", t.GetTimeout()); err != nil {
		return turns.SubmitRequest{}, err
	} else {
		r.Timeout = d
	}
	if d, err := duration("turn.queue_timeout", t.GetQueueTimeout()); err != nil {
		return turns.SubmitRequest{}, err
	} else {
		r.QueueTimeout = d
	}
	return r, requestPaths.Map(r.Validate())
}

// requestPaths maps the logic's field names to the request's.
var requestPaths = admin.FieldPaths{Renames: []admin.Rename{
	{From: "session_id", To: "parent"},
	{From: "command.argv", To: "turn.command.argv.args"},
	{From: "command.script", To: "turn.command.shell_script"},
	{From: "command", To: "turn.command"},
	{From: "working_directory", To: "turn.working_directory"},
	{From: "env", To: "turn.env"},
	{From: "stdin", To: "turn.stdin"},
	{From: "timeout", To: "turn.timeout"},
	{From: "queue_timeout", To: "turn.queue_timeout"},
	{From: "stdout_from", To: "stdout_offset"},
	{From: "stderr_from", To: "stderr_offset"},
}}

func duration(field string, d *durationpb.Duration) (time.Duration, error) {
	if d == nil {
		return 0, nil
	}
	if err := d.CheckValid(); err != nil || d.AsDuration() <= 0 {
		return 0, errdefs.Invalid(field, "must be a positive duration")
	}
	return d.AsDuration(), nil
}

func outputOnlyEmpty(t *adminv1.Turn) error {
	const reason = "is output only"
	switch {
	case t.GetName() != "":
		return errdefs.Invalid("turn.name", reason)
	case t.GetState() != adminv1.Turn_STATE_UNSPECIFIED:
		return errdefs.Invalid("turn.state", reason)
	case t.GetExitCode() != 0, t.GetSignal() != 0:
		return errdefs.Invalid("turn.exit_code", reason)
	case t.GetStdoutBytes() != 0 || t.GetStderrBytes() != 0 || t.GetOutputTruncated():
		return errdefs.Invalid("turn.stdout_bytes", reason)
	case t.GetCreateTime() != nil || t.GetStartTime() != nil || t.GetEndTime() != nil || t.GetCancelTime() != nil:
		return errdefs.Invalid("turn.create_time", reason)
	case t.GetFailureCode() != "":
		return errdefs.Invalid("turn.failure_code", reason)
	}
	return nil
}

// Proto maps a Turn to the API; env and stdin are input only and never
// returned.
func Proto(t store.Turn) *adminv1.Turn {
	p := &adminv1.Turn{
		Name:             admin.TurnName.Format(t.SessionID.String(), t.ID.String()),
		WorkingDirectory: t.WorkingDirectory,
		Timeout:          durationpb.New(t.Timeout),
		QueueTimeout:     durationpb.New(t.QueueTimeout),
		State:            State(t.State),
		Signal:           t.Signal,
		FailureCode:      t.FailureCode,
		StdoutBytes:      t.StdoutBytes,
		StderrBytes:      t.StderrBytes,
		OutputTruncated:  t.OutputTruncated,
		CreateTime:       timestamppb.New(t.CreatedAt),
		StartTime:        admin.Timestamp(t.StartedAt),
		EndTime:          admin.Timestamp(t.EndedAt),
		CancelTime:       admin.Timestamp(t.CancelRequestedAt),
	}
	if t.ExitCode != nil {
		p.ExitCode = *t.ExitCode
	}
	if t.ShellScript != nil {
		p.Command = &adminv1.Command{Program: &adminv1.Command_ShellScript{ShellScript: *t.ShellScript}}
	} else {
		p.Command = &adminv1.Command{Program: &adminv1.Command_Argv{Argv: &adminv1.Argv{Args: t.Argv}}}
	}
	if p.StartTime == nil && t.DispatchedAt != nil && t.State != store.TurnQueued {
		p.StartTime = admin.Timestamp(t.DispatchedAt)
	}
	return p
}

// State maps a store Turn state to the API (STATE_UNSPECIFIED for an
// unknown one): the API's Turn state names are the store's.
func State(s store.TurnState) adminv1.Turn_State {
	return adminv1.Turn_State(admin.StateValue(adminv1.Turn_State_value, string(s)))
}
