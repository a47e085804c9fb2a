package turnadmin

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/errdefs"

	"berth.dev/core/admin"
	"berth.dev/core/store"
	"berth.dev/core/turns"
)

// scopeListTurns is the ListTurns page token scope.
const scopeListTurns = "berth.admin.v1.TurnService/ListTurns"

// Server implements berth.admin.v1.TurnService.
type Server struct {
	adminv1.UnimplementedTurnServiceServer
	turns *turns.Service
	pages *admin.PageTokens
}

// New returns the TurnService over t; pages mints the list page tokens.
func New(t *turns.Service, pages *admin.PageTokens) *Server { return &Server{turns: t, pages: pages} }

// Register registers the service on s.
func (g *Server) Register(s *grpc.Server) { adminv1.RegisterTurnServiceServer(s, g) }

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

// SubmitTurn queues a Turn.
func (g *Server) SubmitTurn(ctx context.Context, req *adminv1.SubmitTurnRequest) (*adminv1.SubmitTurnResponse, error) {
	r, err := SubmitRequest(req)
	if err != nil {
		return nil, err
	}
	t, err := g.turns.Submit(ctx, r)
	if err != nil {
		return nil, requestPaths.Map(fmt.Errorf("submit turn: %w", err))
	}
	return &adminv1.SubmitTurnResponse{Turn: Proto(t)}, nil
}

// GetTurn reads a Turn.
func (g *Server) GetTurn(ctx context.Context, req *adminv1.GetTurnRequest) (*adminv1.GetTurnResponse, error) {
	s, id, err := parseTurn("name", req.GetName())
	if err != nil {
		return nil, err
	}
	t, err := g.turns.Get(ctx, s, id)
	if err != nil {
		return nil, fmt.Errorf("get turn: %w", err)
	}
	return &adminv1.GetTurnResponse{Turn: Proto(t)}, nil
}

// ListTurns lists a Session's Turns in submission order.
func (g *Server) ListTurns(ctx context.Context, req *adminv1.ListTurnsRequest) (*adminv1.ListTurnsResponse, error) {
	s, err := parseSession("parent", req.GetParent())
	if err != nil {
		return nil, err
	}
	page, next, err := admin.Paginate(ctx, g.pages, req.GetPageSize(), req.GetPageToken(), admin.Keyset[store.Turn, int64]{
		Scope: []string{scopeListTurns, req.GetParent()},
		Fetch: func(ctx context.Context, afterSeq int64, limit int) ([]store.Turn, error) {
			page, err := g.turns.List(ctx, s, afterSeq, limit)
			if err != nil {
				return nil, fmt.Errorf("list turns: %w", err)
			}
			return page, nil
		},
		Cursor: func(t store.Turn) ([]byte, error) { return binary.BigEndian.AppendUint64(nil, uint64(t.Seq)), nil },
		Position: func(cursor []byte) (int64, bool) {
			if len(cursor) != 8 {
				return 0, false
			}
			return int64(binary.BigEndian.Uint64(cursor)), true
		},
	})
	if err != nil {
		return nil, err
	}
	resp := &adminv1.ListTurnsResponse{NextPageToken: next}
	for _, t := range page {
		resp.Turns = append(resp.Turns, Proto(t))
	}
	return resp, nil
}

// StreamTurnOutput streams a Turn's output.
func (g *Server) StreamTurnOutput(req *adminv1.StreamTurnOutputRequest, s grpc.ServerStreamingServer[adminv1.StreamTurnOutputResponse]) error {
	sess, id, err := parseTurn("name", req.GetName())
	if err != nil {
		return err
	}
	err = g.turns.StreamOutput(s.Context(), sess, id, req.GetStdoutOffset(), req.GetStderrOffset(), func(c turns.Chunk) error {
		stream := adminv1.OutputStream_OUTPUT_STREAM_STDOUT
		if c.Stream == store.StreamStderr {
			stream = adminv1.OutputStream_OUTPUT_STREAM_STDERR
		}
		return s.Send(&adminv1.StreamTurnOutputResponse{Stream: stream, Data: c.Data, Offset: c.Offset})
	})
	if err != nil {
		if s.Context().Err() != nil {
			return s.Context().Err()
		}
		return requestPaths.Map(fmt.Errorf("stream turn output: %w", err))
	}
	return nil
}

// CancelTurn requests cancellation.
func (g *Server) CancelTurn(ctx context.Context, req *adminv1.CancelTurnRequest) (*adminv1.CancelTurnResponse, error) {
	s, id, err := parseTurn("name", req.GetName())
	if err != nil {
		return nil, err
	}
	t, err := g.turns.Cancel(ctx, s, id)
	if err != nil {
		return nil, fmt.Errorf("cancel turn: %w", err)
	}
	return &adminv1.CancelTurnResponse{Turn: Proto(t)}, nil
}

// Proto maps a Turn to the API; env and stdin are input only and never
// returned.
func Proto(t store.Turn) *adminv1.Turn {
	p := &adminv1.Turn{
		Name:             admin.TurnName.Format(t.SessionID.String(), t.ID.String()),
		WorkingDirectory: t.WorkingDirectory,
		Timeout:          durationpb.New(t.Timeout),
		State:            State(t.State),
		Signal:           t.Signal,
		FailureCode:      t.FailureCode,
		StdoutBytes:      t.StdoutBytes,
		StderrBytes:      t.StderrBytes,
		OutputTruncated:  t.OutputTruncated,
		CreateTime:       timestamppb.New(t.CreatedAt),
		StartTime:        ts(t.StartedAt),
		EndTime:          ts(t.EndedAt),
		CancelTime:       ts(t.CancelRequestedAt),
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
		p.StartTime = ts(t.DispatchedAt)
	}
	return p
}

// State maps a store Turn state to the API.
func State(s store.TurnState) adminv1.Turn_State {
	switch s {
	case store.TurnQueued:
		return adminv1.Turn_STATE_QUEUED
	case store.TurnRunning:
		return adminv1.Turn_STATE_RUNNING
	case store.TurnCompleted:
		return adminv1.Turn_STATE_COMPLETED
	case store.TurnFailed:
		return adminv1.Turn_STATE_FAILED
	case store.TurnCancelled:
		return adminv1.Turn_STATE_CANCELLED
	case store.TurnTimedOut:
		return adminv1.Turn_STATE_TIMED_OUT
	case store.TurnUnconfirmed:
		return adminv1.Turn_STATE_UNCONFIRMED
	}
	return adminv1.Turn_STATE_UNSPECIFIED
}

func ts(t *time.Time) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return timestamppb.New(*t)
}
