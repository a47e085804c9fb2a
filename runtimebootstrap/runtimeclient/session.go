package runtimeclient

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	runtimev1 "berth.dev/proto/berth/runtime/v1"
	"berth.dev/runtimebootstrap/filexfer"
	"berth.dev/runtimebootstrap/turnexec"
)

var (
	// errNoWelcome: Core's first message was not welcome.
	errNoWelcome = errors.New("core's first message was not welcome")
	// errOutOfProtocol: Core sent a message the protocol forbids here
	// (a run_turn after quiesce_ack, a quiesce with an invalid token); the
	// Runtime ends the connection and reconnects.
	errOutOfProtocol = errors.New("core's message is out of protocol")
)

// session is one Connect stream.
type session struct {
	c      *Client
	conn   *grpc.ClientConn // Connect's; the Transfer streams share it
	stream grpc.BidiStreamingClient[runtimev1.ConnectRequest, runtimev1.ConnectResponse]

	sendMu  sync.Mutex
	sendErr error // the first failed Send; later sends are skipped

	mu         sync.Mutex
	turnID     string // the running Turn, or ""
	cancelTurn context.CancelFunc
	turns      sync.WaitGroup

	// transfers counts the running Transfer streams. Only the receive
	// loop adds to it.
	transfers sync.WaitGroup

	// quiesced: admission is closed (a quiesce was acknowledged). Only
	// the receive loop reads and writes it.
	quiesced bool
}

// testHookTurnCleared, when a test sets it, runs between a Turn's clearing
// of the running Turn and the sending of its result.
var testHookTurnCleared func()

// transportKeepalive is the interval of the client's HTTP/2 pings and how
// long it waits for their answer.
const transportKeepalive = 20 * time.Second

// connect runs one connection until its stream ends. It returns when the
// stream was welcomed (zero if never) and why it ended. Any running Turn is
// killed before it returns: its result could no longer be delivered.
func (c *Client) connect(ctx context.Context) (welcomed time.Time, err error) {
	conn, err := c.dial()
	if err != nil {
		return time.Time{}, err
	}
	defer conn.Close()

	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.log.Info("connecting to core")
	stream, err := runtimev1.NewRuntimeGatewayServiceClient(conn).Connect(sctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("open stream: %w", err)
	}
	s := &session{c: c, conn: conn, stream: stream}
	defer func() {
		cancel()
		s.mu.Lock()
		if s.turnID != "" {
			c.log.Warn("connection ended during a turn; killing it", "turn_id", s.turnID)
		}
		s.mu.Unlock()
		s.turns.Wait()
		s.transfers.Wait()
	}()

	w, err := s.handshake()
	if w == nil {
		return time.Time{}, err
	}
	welcomed = time.Now()
	c.log.Info("connected to core", "connection_id", w.GetConnectionId(), "connection_generation", w.GetConnectionGeneration())
	s.prepareConnection()
	return welcomed, s.receive(sctx)
}

// dial makes the client connection to Core. Transport keepalives find a
// Core that vanished without closing the connection (a partition, a dead
// host), so the Runtime reconnects instead of waiting forever; Core's
// gateway permits them every 10 s.
func (c *Client) dial() (*grpc.ClientConn, error) {
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(c.creds),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: transportKeepalive, Timeout: transportKeepalive, PermitWithoutStream: true}),
	}
	conn, err := grpc.NewClient(c.target, append(opts, c.cfg.DialOptions...)...)
	if err != nil {
		return nil, fmt.Errorf("dial core: %w", err)
	}
	return conn, nil
}

// handshake sends hello (the device's credential) and reads Core's first
// message, which must be welcome. It returns the welcome, or nil and why
// the stream ended: when the hello cannot be sent, the stream's status
// comes from Recv (nil if Recv still returned a message).
func (s *session) handshake() (*runtimev1.Welcome, error) {
	if err := s.send(&runtimev1.ConnectRequest{Message: &runtimev1.ConnectRequest_Hello{Hello: &runtimev1.Hello{
		ProtocolVersion: runtimev1.ProtocolVersion,
		DeviceId:        s.c.cfg.Bootstrap.DeviceID,
		Credential:      s.c.cfg.Bootstrap.Credential.Reveal(),
		RuntimeVersion:  s.c.cfg.RuntimeVersion,
	}}}); err != nil {
		_, err = s.stream.Recv()
		return nil, err
	}
	first, err := s.stream.Recv()
	if err != nil {
		return nil, err
	}
	w := first.GetWelcome()
	if w == nil {
		return nil, errNoWelcome
	}
	return w, nil
}

// prepareConnection readies a welcomed connection: the quiesced state belongs to a
// connection, and this one starts with admission open, so the park marker
// of an earlier one goes (a restart must not start parked); then the
// Runtime's preparation runs and, when it succeeds, Core hears prepared
// with its capabilities. Before that, the temporary files that an upload
// of a killed Runtime left are swept (see sweepTransfers).
// A failure is logged only: the connection stays, and Core sees that no
// prepared arrived.
func (s *session) prepareConnection() {
	c := s.c
	if removed, err := c.park.RemoveMarker(); err != nil {
		c.log.Error("the park marker could not be removed; a restart would start parked")
	} else if removed {
		c.log.Info("removed the park marker of an earlier connection")
	}
	c.sweepTransfers()
	if step, err := c.prepare(); err != nil {
		c.log.Error("runtime preparation failed; turns cannot run on this connection", "step", step)
	} else if err := s.send(&runtimev1.ConnectRequest{Message: &runtimev1.ConnectRequest_Prepared{Prepared: &runtimev1.Prepared{
		Capabilities: []string{runtimev1.CapabilityFiles},
	}}}); err == nil {
		c.log.Info("runtime prepared")
	}
}

// receive handles Core's messages until the stream ends or Core breaks the
// protocol, and returns why. Turns run under ctx, the stream's context.
func (s *session) receive(ctx context.Context) error {
	for {
		msg, err := s.stream.Recv()
		if err != nil {
			return err
		}
		switch m := msg.GetMessage().(type) {
		case *runtimev1.ConnectResponse_RunTurn:
			if s.quiesced {
				s.c.log.Warn("ending the connection: core sent a turn after quiesce", "turn_id", m.RunTurn.GetTurnId())
				return fmt.Errorf("run_turn after quiesce: %w", errOutOfProtocol)
			}
			s.startTurn(ctx, m.RunTurn)
		case *runtimev1.ConnectResponse_Quiesce:
			if err := s.quiesce(m.Quiesce.GetSuspensionToken()); err != nil {
				return err
			}
		case *runtimev1.ConnectResponse_OpenTransfer:
			s.openTransfer(ctx, m.OpenTransfer)
		case *runtimev1.ConnectResponse_CancelTurn:
			s.cancel(m.CancelTurn.GetTurnId())
		case *runtimev1.ConnectResponse_Keepalive:
			_ = s.send(&runtimev1.ConnectRequest{Message: &runtimev1.ConnectRequest_KeepaliveAck{
				KeepaliveAck: &runtimev1.KeepaliveAck{Sequence: m.Keepalive.GetSequence()},
			}})
		default:
			s.c.log.Warn("ignored an unexpected message from core")
		}
	}
}

// send sends one message; after a failure it only returns that failure (the
// stream is broken and Recv reports why).
func (s *session) send(msg *runtimev1.ConnectRequest) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	if s.sendErr != nil {
		return s.sendErr
	}
	if err := s.stream.Send(msg); err != nil {
		s.sendErr = err
		return err
	}
	return nil
}

// startTurn starts rt unless a Turn is running: a second Turn is refused
// with invalid_turn, a repeat of the running one is ignored.
func (s *session) startTurn(ctx context.Context, rt *runtimev1.RunTurn) {
	id := rt.GetTurnId()
	if id == "" {
		s.c.log.Warn("ignored a run_turn without a turn id")
		return
	}
	s.mu.Lock()
	if s.turnID != "" {
		running := s.turnID
		s.mu.Unlock()
		if running == id {
			s.c.log.Warn("ignored a repeated run_turn", "turn_id", id)
			return
		}
		s.c.log.Warn("refused a turn while another runs", "turn_id", id, "running_turn_id", running)
		_ = s.send(resultMessage(id, turnexec.Result{Outcome: turnexec.Failed, FailureCode: turnexec.CodeInvalidTurn}))
		return
	}
	tctx, cancel := context.WithCancel(ctx)
	s.turnID, s.cancelTurn = id, cancel
	s.turns.Add(1)
	s.mu.Unlock()

	go func() {
		defer s.turns.Done()
		defer cancel()
		res := s.c.runTurn(tctx, id, rt, s.send)
		// Clear before sending the result: Core may deliver the next Turn
		// as soon as it has the result.
		s.mu.Lock()
		s.turnID, s.cancelTurn = "", nil
		s.mu.Unlock()
		if testHookTurnCleared != nil {
			testHookTurnCleared()
		}
		_ = s.send(resultMessage(id, res))
		s.c.log.Info("turn ended", "turn_id", id, "outcome", res.Outcome.String(), "exit_code", res.ExitCode,
			"signal", res.Signal, "failure_code", res.FailureCode,
			"stdout_bytes", res.StdoutBytes, "stderr_bytes", res.StderrBytes)
	}()
}

// quiesce answers a Quiesce (see the proto's Quiesce): rejected while a
// Turn runs, while a transfer still runs after transferDrain, or when the
// park marker cannot be written; otherwise, once
// every output and result was sent and the marker is durable, admission
// closes and the ack goes out. It returns errOutOfProtocol for an invalid
// token. The receive loop calls it, so no run_turn is handled meanwhile.
func (s *session) quiesce(token string) error {
	if !validSuspensionToken(token) {
		s.c.log.Warn("ending the connection: core sent a quiesce with an invalid suspension token")
		return fmt.Errorf("quiesce: %w", errOutOfProtocol)
	}
	s.mu.Lock()
	running := s.turnID
	s.mu.Unlock()
	if running != "" {
		s.c.log.Info("refused to quiesce while a turn runs", "turn_id", running, "suspension_token", token)
		_ = s.send(quiesceRejected(token, runtimev1.ReasonTurnRunning))
		return nil
	}
	// The loop is held while transfers drain: no open_transfer starts
	// another, and no Turn starts either.
	if !s.drainTransfers() {
		s.c.log.Info("refused to quiesce while a file transfer runs", "suspension_token", token)
		_ = s.send(quiesceRejected(token, runtimev1.ReasonFileWorkPending))
		return nil
	}
	// A Turn's goroutine clears turnID just before it sends the result;
	// wait for it, so that the result and every output precede the ack.
	s.turns.Wait()
	if err := s.c.park.WriteMarker(token); err != nil {
		s.c.log.Error("refused to quiesce: the park marker could not be written", "suspension_token", token)
		_ = s.send(quiesceRejected(token, runtimev1.ReasonParkFailed))
		return nil
	}
	s.quiesced = true
	s.c.log.Info("quiesced for a planned suspension", "suspension_token", token)
	_ = s.send(&runtimev1.ConnectRequest{Message: &runtimev1.ConnectRequest_QuiesceAck{
		QuiesceAck: &runtimev1.QuiesceAck{SuspensionToken: token},
	}})
	return nil
}

// validSuspensionToken reports whether token is 1 to 128 bytes of
// printable ASCII.
func validSuspensionToken(token string) bool {
	if len(token) < runtimev1.MinSuspensionTokenBytes || len(token) > runtimev1.MaxSuspensionTokenBytes {
		return false
	}
	for i := range len(token) {
		if token[i] < 0x20 || token[i] > 0x7e {
			return false
		}
	}
	return true
}

func quiesceRejected(token, reason string) *runtimev1.ConnectRequest {
	return &runtimev1.ConnectRequest{Message: &runtimev1.ConnectRequest_QuiesceRejected{
		QuiesceRejected: &runtimev1.QuiesceRejected{SuspensionToken: token, Reason: reason},
	}}
}

// cancel kills the running Turn if it is id.
func (s *session) cancel(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.turnID == "" || s.turnID != id {
		s.c.log.Warn("ignored a cancel_turn for a turn that is not running", "turn_id", id)
		return
	}
	s.c.log.Info("cancelling turn", "turn_id", id)
	s.cancelTurn()
}

// runTurn runs rt and streams its start and output through send.
func (c *Client) runTurn(ctx context.Context, id string, rt *runtimev1.RunTurn, send func(*runtimev1.ConnectRequest) error) turnexec.Result {
	turn, ok := toTurn(rt)
	if !ok {
		return turnexec.Result{Outcome: turnexec.Failed, FailureCode: turnexec.CodeInvalidTurn}
	}
	return c.runner.Run(ctx, turn, turnexec.Events{
		Started: func() {
			c.log.Info("turn started", "turn_id", id)
			_ = send(&runtimev1.ConnectRequest{Message: &runtimev1.ConnectRequest_TurnStarted{
				TurnStarted: &runtimev1.TurnStarted{TurnId: id},
			}})
		},
		Output: func(ch turnexec.Chunk) {
			stream := runtimev1.OutputStream_OUTPUT_STREAM_STDOUT
			if ch.Stream == turnexec.Stderr {
				stream = runtimev1.OutputStream_OUTPUT_STREAM_STDERR
			}
			_ = send(&runtimev1.ConnectRequest{Message: &runtimev1.ConnectRequest_TurnOutput{
				TurnOutput: &runtimev1.TurnOutput{TurnId: id, Stream: stream, Offset: ch.Offset, Data: ch.Data},
			}})
		},
	})
}

// toTurn maps a RunTurn to a turnexec.Turn; turnexec checks the rest.
func toTurn(rt *runtimev1.RunTurn) (turnexec.Turn, bool) {
	t := turnexec.Turn{
		Dir:            rt.GetWorkingDirectory(),
		Env:            rt.GetEnv(),
		Stdin:          rt.GetStdin(),
		MaxOutputBytes: rt.GetMaxOutputBytes(),
	}
	switch p := rt.GetProgram().(type) {
	case *runtimev1.RunTurn_Argv:
		t.Argv = p.Argv.GetArgs()
		if len(t.Argv) == 0 {
			return t, false
		}
	case *runtimev1.RunTurn_ShellScript:
		t.Script = p.ShellScript
		if t.Script == "" {
			return t, false
		}
	default:
		return t, false
	}
	if d := rt.GetTimeout(); d != nil {
		if d.CheckValid() != nil {
			return t, false
		}
		t.Timeout = d.AsDuration()
	}
	return t, true
}

var outcomes = map[turnexec.Outcome]runtimev1.TurnResult_Outcome{
	turnexec.Exited:    runtimev1.TurnResult_OUTCOME_EXITED,
	turnexec.TimedOut:  runtimev1.TurnResult_OUTCOME_TIMED_OUT,
	turnexec.Cancelled: runtimev1.TurnResult_OUTCOME_CANCELLED,
	turnexec.Failed:    runtimev1.TurnResult_OUTCOME_FAILED,
}

func resultMessage(id string, r turnexec.Result) *runtimev1.ConnectRequest {
	return &runtimev1.ConnectRequest{Message: &runtimev1.ConnectRequest_TurnResult{TurnResult: &runtimev1.TurnResult{
		TurnId:          id,
		Outcome:         outcomes[r.Outcome],
		ExitCode:        int32(r.ExitCode),
		Signal:          int32(r.Signal),
		FailureCode:     r.FailureCode,
		StdoutBytes:     r.StdoutBytes,
		StderrBytes:     r.StderrBytes,
		StdoutTruncated: r.StdoutTruncated,
		StderrTruncated: r.StderrTruncated,
	}}}
}

// workspaceRoot is the Runner's workspace: Turns and transfers share it.
func (c *Client) workspaceRoot() string {
	if c.runner.WorkspaceRoot == "" {
		return turnexec.DefaultWorkspaceRoot
	}
	return c.runner.WorkspaceRoot
}

// sweepTransfers removes the temporary files listed by the transfer
// journals (filexfer.Sweep): an upload whose Runtime was killed, or whose
// sandbox was captured for a suspension or fork mid-upload, leaves none
// behind once the next preparation ran. The journals lie beside the
// bootstrap file, in the home volume, so a restored sandbox sweeps too.
// Only counts are logged.
func (c *Client) sweepTransfers() {
	if err := os.MkdirAll(c.journalDir, 0o700); err != nil {
		c.log.Error("the transfer journal directory could not be created")
		return
	}
	removed, err := filexfer.Sweep(c.workspaceRoot(), c.journalDir)
	if err != nil {
		c.log.Error("the transfer journals could not be swept", "removed", removed)
		return
	}
	if removed > 0 {
		c.log.Info("removed temporary files of interrupted uploads", "removed", removed)
	}
}

// prepare is the common Runtime preparation: the workspace exists and is
// writable, and the shell exists. It returns the failed step's name.
func (c *Client) prepare() (string, error) {
	f, err := os.CreateTemp(c.workspaceRoot(), ".berth-prepare-*")
	if err != nil {
		return "workspace", fmt.Errorf("workspace: %w", err)
	}
	name := f.Name()
	cerr := f.Close()
	rerr := os.Remove(name)
	if err := errors.Join(cerr, rerr); err != nil {
		return "workspace", fmt.Errorf("workspace: %w", err)
	}
	shell := c.runner.Shell
	if shell == "" {
		shell = turnexec.DefaultShell
	}
	info, err := os.Stat(shell)
	if err != nil || info.IsDir() || info.Mode().Perm()&0o111 == 0 {
		return "shell", errors.New("shell: missing or not executable")
	}
	return "", nil
}
