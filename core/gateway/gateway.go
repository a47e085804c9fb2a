package gateway

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	"berth.dev/platform/errgrpc"
	runtimev1 "berth.dev/proto/berth/runtime/v1"

	"berth.dev/core/events"
	"berth.dev/core/files"
	"berth.dev/core/store"
	"berth.dev/core/turns"
	"berth.dev/runtimebootstrap"
)

// Store is what the gateway reads and writes of Runtime connections. A
// connection's start and end, and Turn state, it records only through
// core/turns; the suspension cycle only through core/suspension.
type Store interface {
	MarkRuntimePrepared(ctx context.Context, c store.RuntimeConn) (store.RuntimeConnection, error)
	TouchRuntimeConnection(ctx context.Context, c store.RuntimeConn) error
	GetRuntimeConnection(ctx context.Context, id uuid.UUID) (conn store.RuntimeConnection, now time.Time, err error)
	GetSession(ctx context.Context, id uuid.UUID) (store.SessionBundle, error)
	// The compute phase the connection follows (suspend.go).
	GetAllocation(ctx context.Context, id uuid.UUID) (store.Allocation, error)
}

// Suspension records what a Runtime answers to a quiesce: core/suspension's
// Service, the one writer of compute-phase state.
type Suspension interface {
	QuiesceAcknowledged(ctx context.Context, allocationID, op uuid.UUID) error
	QuiesceRejected(ctx context.Context, allocationID, op uuid.UUID) error
}

// Defaults of Config.
const (
	DefaultKeepalive  = 15 * time.Second
	DefaultHelloWait  = 10 * time.Second
	DefaultSettleWait = 5 * time.Second
	// missedKeepalives is how many unanswered keepalive intervals end a
	// connection.
	missedKeepalives = 3
	// timeoutGrace is how long past a Turn's timeout Core waits for the
	// Runtime's result before it cancels, and then ends the connection.
	timeoutGrace  = 30 * time.Second
	recordTimeout = 10 * time.Second
	// revocationDrain bounds how long a revoked connection stays open for
	// the result of its cancelled Turn (from the Turn's
	// cancel_requested_at); the lifecycle worker holds the Kill that long.
	revocationDrain = store.CancelDrain
	maxCredential   = 512
)

// Files is what the gateway does for file operations: core/files'
// Service, the one writer of file_operations.
type Files interface {
	Claim(ctx context.Context, conn store.RuntimeConn, files bool) (*runtimev1.OpenTransfer, bool, error)
	ConnectionClosed(ctx context.Context, conn store.RuntimeConn) error
	Attach(ctx context.Context, id, device uuid.UUID, credential runtimebootstrap.Secret, s files.Stream) error
}

// Config configures a Gateway.
type Config struct {
	Store      Store
	Turns      *turns.Service
	Suspension Suspension
	// Files serves file operations; nil refuses every Transfer stream and
	// claims none.
	Files Files
	// Events is the bus core/turns and core/suspension publish on: a
	// connection waits on its Session (events.Session) and its
	// Environment's phase (events.Phase).
	Events *events.Bus
	NewID  func() uuid.UUID
	// Keepalive is the interval of service keepalives (DefaultKeepalive
	// when 0).
	Keepalive time.Duration
	// SettleWait is how long a hello waits for Core to observe the
	// allocation's settled creation before runtime_not_admitted.
	SettleWait time.Duration
	Log        *slog.Logger
}

// Gateway serves berth.runtime.v1.
type Gateway struct {
	runtimev1.UnimplementedRuntimeGatewayServiceServer
	cfg Config
	tel telemetry
}

// New returns a Gateway.
func New(cfg Config) *Gateway {
	if cfg.Keepalive <= 0 {
		cfg.Keepalive = DefaultKeepalive
	}
	if cfg.SettleWait <= 0 {
		cfg.SettleWait = DefaultSettleWait
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Gateway{cfg: cfg, tel: newTelemetry()}
}

// Register registers the gateway on s.
func (g *Gateway) Register(s *grpc.Server) { runtimev1.RegisterRuntimeGatewayServiceServer(s, g) }

// refusedMessage is how a Connect stream ends after a failed receive: the
// decoder's refusal of a malformed message crosses (invalid_message); a
// Runtime that left or a broken transport ends the stream quietly.
func refusedMessage(err error) error {
	if codec.Owns(err) {
		return err
	}
	return nil
}

// ServerOptions are the options of the server the gateway is registered
// on, before any other interceptor option: its codec refuses a message
// that does not decode as out of protocol (invalid_message), as the
// gateway refuses a well-formed one out of order, instead of grpc-go's
// INTERNAL and parser text.
func ServerOptions() []grpc.ServerOption {
	return errgrpc.NewDecoder(0, func() error { return codec.ToStatus(errInvalid) }).ServerOptions()
}

// stream is the Connect stream as the gateway uses it.
type stream = grpc.BidiStreamingServer[runtimev1.ConnectRequest, runtimev1.ConnectResponse]

// The gateway's refusals. Handlers return them as they are; Connect
// converts once, with codec.
var (
	errCredential = errors.New("runtime credential rejected")
	errRevoked    = errors.New("runtime revoked")
	errProtocol   = errors.New("protocol version mismatch")
	errNotAdmit   = errors.New("runtime not admitted yet")
	errInvalid    = errors.New("message out of protocol")
	// errInternal is Core's own failure: no row of its own, so it crosses
	// as the unknown row, and the Runtime retries.
	errInternal = errors.New("core cannot serve the connection now")
)

// codec is the Runtime gateway's one codec: the protocol's fixed reasons
// (runtimev1.Reason*) and nothing of errdefs, since a Runtime acts only on
// these. Anything else is "not admitted" with a message of its own, which
// the Runtime retries.
var codec = errgrpc.New(runtimev1.ErrorDomain, append(slices.Clone(sharedRows),
	errgrpc.Row{Class: errRevoked, Code: codes.PermissionDenied, Reason: runtimev1.ReasonRevoked, Message: "runtime revoked"},
	errgrpc.Row{Class: errNotAdmit, Code: codes.Unavailable, Reason: runtimev1.ReasonNotAdmitted, Message: "runtime not admitted yet"},
), errgrpc.Options{Unknown: errgrpc.Row{Code: codes.Unavailable, Reason: runtimev1.ReasonNotAdmitted, Message: "core cannot serve the connection now"}})

// sharedRows are the codes Connect and Transfer streams both end with.
var sharedRows = []errgrpc.Row{
	{Class: errCredential, Code: codes.Unauthenticated, Reason: runtimev1.ReasonCredentialRejected, Message: "runtime credential rejected"},
	{Class: errProtocol, Code: codes.FailedPrecondition, Reason: runtimev1.ReasonProtocolMismatch, Message: "protocol version mismatch"},
	{Class: errInvalid, Code: codes.InvalidArgument, Reason: runtimev1.ReasonInvalidMessage, Message: "message out of protocol"},
}

// Connect serves one Runtime connection. Its error crosses once, through
// codec.
func (g *Gateway) Connect(s stream) error { return codec.ToStatus(g.connect(s)) }

func (g *Gateway) connect(s stream) error {
	ctx := s.Context()
	in := make(chan *runtimev1.ConnectRequest)
	recvErr := make(chan error, 1)
	go func() {
		for {
			m, err := s.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case in <- m:
			case <-ctx.Done():
				return
			}
		}
	}()

	var hello *runtimev1.Hello
	select {
	case m := <-in:
		hello = m.GetHello()
	case err := <-recvErr:
		return refusedMessage(err)
	case <-time.After(DefaultHelloWait):
		return errInvalid
	case <-ctx.Done():
		return nil
	}
	grant, err := g.accept(ctx, hello)
	if err != nil {
		return err
	}
	c := &conn{g: g, s: s, grant: grant, log: g.cfg.Log.With("connection", grant.Connection.ID.String(),
		"session", grant.SessionID.String(), "generation", grant.Connection.Generation), ctx: ctx}
	g.tel.connected(ctx)
	defer c.close()
	if err := s.Send(&runtimev1.ConnectResponse{Message: &runtimev1.ConnectResponse_Welcome{Welcome: &runtimev1.Welcome{
		ConnectionId:         grant.Connection.ID.String(),
		ConnectionGeneration: grant.Connection.Generation,
		KeepaliveInterval:    durationpb.New(g.cfg.Keepalive),
	}}}); err != nil {
		return nil
	}
	c.log.Info("runtime connected")
	return c.serve(ctx, in, recvErr)
}

// accept checks the hello and records the connection, waiting up to
// SettleWait for the allocation's creation to be observed settled.
func (g *Gateway) accept(ctx context.Context, h *runtimev1.Hello) (store.RuntimeGrant, error) {
	if h == nil {
		return store.RuntimeGrant{}, errInvalid
	}
	if h.GetProtocolVersion() != runtimev1.ProtocolVersion {
		return store.RuntimeGrant{}, errProtocol
	}
	device, err := uuid.Parse(h.GetDeviceId())
	if err != nil || device.String() != h.GetDeviceId() || len(h.GetCredential()) == 0 || len(h.GetCredential()) > maxCredential {
		return store.RuntimeGrant{}, errCredential
	}
	deadline := time.Now().Add(g.cfg.SettleWait)
	for {
		grant, err := g.cfg.Turns.ConnectionOpened(ctx, store.AcceptRuntimeParams{
			ConnectionID: g.cfg.NewID(), DeviceID: device, Credential: runtimebootstrap.NewSecret(h.GetCredential()),
			RuntimeVersion: h.GetRuntimeVersion(),
		})
		switch {
		case err == nil:
			return grant, nil
		case errors.Is(err, store.ErrRuntimeCredential):
			g.cfg.Log.Warn("runtime credential rejected")
			return store.RuntimeGrant{}, errCredential
		case errors.Is(err, store.ErrRuntimeRevoked):
			return store.RuntimeGrant{}, errRevoked
		case errors.Is(err, store.ErrRuntimeNotAdmitted):
			if time.Now().After(deadline) {
				return store.RuntimeGrant{}, errNotAdmit
			}
		default:
			g.cfg.Log.Warn("accept runtime failed", "error", err)
			return store.RuntimeGrant{}, errInternal
		}
		select {
		case <-ctx.Done():
			return store.RuntimeGrant{}, errNotAdmit
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// conn is one accepted connection.
type conn struct {
	g        *Gateway
	s        stream
	grant    store.RuntimeGrant
	log      *slog.Logger
	prepared bool
	// ctx is the connection's context (its server span).
	ctx context.Context
	// current is the Turn delivered and not finished, if any, and
	// currentSpan its span (telemetry.go).
	current     *store.Turn
	currentSpan trace.Span
	cancelSent  bool
	// files is whether the Runtime's prepared announced the files
	// capability (runtimev1.CapabilityFiles).
	files      bool
	keepalive  int64
	lastAnswer time.Time
	// quiesce is the suspension operation this connection asked the
	// Runtime to quiesce for (uuid.Nil: none).
	quiesce uuid.UUID
}

func (c *conn) id() uuid.UUID { return c.grant.Connection.ID }

// serve runs the connection until the Runtime leaves, breaks the
// protocol, is revoked or stops answering.
func (c *conn) serve(ctx context.Context, in <-chan *runtimev1.ConnectRequest, recvErr <-chan error) error {
	tick := time.NewTicker(c.g.cfg.Keepalive)
	defer tick.Stop()
	c.lastAnswer = time.Now()
	// The subscriptions are made before the first read of the store and
	// hold every event until the select below takes it, so a Turn or a
	// phase announced after a dispatch's read wakes the next select;
	// subscribed after it, the announcement would be lost until the next
	// keepalive tick.
	wake := c.g.cfg.Events.Subscribe(events.Event{Kind: events.Session, ID: c.grant.SessionID})
	defer wake.Close()
	phase := c.g.cfg.Events.Subscribe(events.Event{Kind: events.Phase, ID: c.grant.EnvironmentID})
	defer phase.Close()
	if err := c.suspension(ctx); err != nil {
		return err
	}
	for {
		woken := false
		select {
		case <-ctx.Done():
			return nil
		case err := <-recvErr:
			// The Runtime left (EOF), the transport broke or it sent a
			// message that does not decode: either way the connection is
			// over and close records it.
			return refusedMessage(err)
		case m := <-in:
			c.lastAnswer = time.Now()
			if err := c.handle(ctx, m); err != nil {
				return err
			}
			// A prepared Runtime may now take the file operations that
			// waited for it.
			woken = m.GetPrepared() != nil
		case <-wake.Ready():
			woken = true
		case <-phase.Ready():
			if err := c.suspension(ctx); err != nil {
				return err
			}
		case <-tick.C:
			woken = true
			if err := c.housekeeping(ctx); err != nil {
				return err
			}
		}
		if err := c.dispatch(ctx, woken); err != nil {
			return err
		}
		if err := c.dispatchFiles(ctx, woken); err != nil {
			return err
		}
	}
}

// dispatchFiles, when woken, claims the Session's pending file operations
// for a prepared connection that is not quiescing and asks the Runtime to
// open a Transfer stream for each (core/files fails one a Runtime without
// the capability cannot serve). A Turn may run beside them.
func (c *conn) dispatchFiles(ctx context.Context, woken bool) error {
	if !woken || !c.prepared || c.quiesce != uuid.Nil || c.g.cfg.Files == nil {
		return nil
	}
	for {
		spec, ok, err := c.g.cfg.Files.Claim(ctx, c.grant.Conn, c.files)
		if err != nil {
			c.log.Warn("claim file operation failed", "error", err)
			return errInternal
		}
		if !ok {
			return nil
		}
		if err := c.s.Send(&runtimev1.ConnectResponse{Message: &runtimev1.ConnectResponse_OpenTransfer{OpenTransfer: spec}}); err != nil {
			return nil
		}
		c.log.Info("file operation delivered", "operation", spec.GetTransferId())
	}
}

// handle applies one Runtime message.
func (c *conn) handle(ctx context.Context, m *runtimev1.ConnectRequest) error {
	st := c.g.cfg.Store
	switch m.GetMessage().(type) {
	case *runtimev1.ConnectRequest_Prepared:
		if _, err := st.MarkRuntimePrepared(ctx, c.grant.Conn); err != nil {
			return c.storeErr("mark prepared", err)
		}
		c.prepared = true
		c.files = slices.Contains(m.GetPrepared().GetCapabilities(), runtimev1.CapabilityFiles)
		c.log.Info("runtime prepared", "files", c.files)
		return nil
	case *runtimev1.ConnectRequest_KeepaliveAck:
		return c.storeErr("keepalive", st.TouchRuntimeConnection(ctx, c.grant.Conn))
	case *runtimev1.ConnectRequest_TurnStarted:
		if !c.isCurrent(m.GetTurnStarted().GetTurnId()) {
			return errInvalid
		}
		return c.storeErr("turn started", c.g.cfg.Turns.Started(ctx, c.current.ID, c.grant.Conn))
	case *runtimev1.ConnectRequest_TurnOutput:
		o := m.GetTurnOutput()
		if !c.isCurrent(o.GetTurnId()) {
			return errInvalid
		}
		var sid int16
		switch o.GetStream() {
		case runtimev1.OutputStream_OUTPUT_STREAM_STDOUT:
			sid = store.StreamStdout
		case runtimev1.OutputStream_OUTPUT_STREAM_STDERR:
			sid = store.StreamStderr
		default:
			return errInvalid
		}
		return c.storeErr("turn output", c.g.cfg.Turns.Output(ctx, c.current.ID, c.grant.Conn, sid, o.GetOffset(), o.GetData()))
	case *runtimev1.ConnectRequest_QuiesceAck:
		return c.quiesceAcked(ctx, m.GetQuiesceAck().GetSuspensionToken())
	case *runtimev1.ConnectRequest_QuiesceRejected:
		r := m.GetQuiesceRejected()
		return c.quiesceRejected(ctx, r.GetSuspensionToken(), r.GetReason())
	case *runtimev1.ConnectRequest_TurnResult:
		r := m.GetTurnResult()
		if !c.isCurrent(r.GetTurnId()) {
			return errInvalid
		}
		res, ok := resultFromWire(r)
		if !ok {
			return errInvalid
		}
		t, err := c.g.cfg.Turns.Finish(ctx, c.current.ID, c.grant.Conn, res)
		if err != nil {
			return c.storeErr("turn result", err)
		}
		c.log.InfoContext(c.turnContext(), "turn finished", "turn", t.ID.String(), "state", string(t.State))
		c.g.tel.finished(ctx, c.currentSpan, t)
		c.current, c.currentSpan, c.cancelSent = nil, nil, false
		return nil
	default:
		return errInvalid
	}
}

func (c *conn) isCurrent(id string) bool {
	return c.current != nil && id == c.current.ID.String()
}

// storeErr ends the connection after a failed record (nil after one that
// succeeded): a report that does not fit the Turn is a protocol error;
// anything else is Core's problem, and the Runtime retries.
func (c *conn) storeErr(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, store.ErrTurnProtocol) {
		c.log.Warn("runtime report out of protocol", "op", op)
		return errInvalid
	}
	c.log.Warn("record runtime report failed", "op", op, "error", err)
	return errInternal
}

// dispatch delivers the next queued Turn when the Runtime is prepared and
// idle, and, when woken, forwards a cancellation of the current one.
func (c *conn) dispatch(ctx context.Context, woken bool) error {
	if !c.prepared {
		return nil
	}
	if c.current != nil {
		if c.cancelSent || !woken {
			return nil
		}
		t, err := c.g.cfg.Turns.Current(ctx, c.current.ID)
		if err != nil {
			return c.storeErr("read turn", err)
		}
		if t.CancelRequestedAt != nil {
			return c.sendCancel()
		}
		return nil
	}
	if c.quiesce != uuid.Nil {
		// This connection asked its Runtime to quiesce: its admission may
		// be closed, and a Turn sent to it would never run. Claim nothing
		// here; once the suspension has ended (or moved on) followPhase
		// ends the connection, and the Turn goes to the next one. The
		// phase is read again because the announcement of its change may
		// not have been seen yet (the Turn's may come first).
		return c.suspension(ctx)
	}
	t, ok, err := c.g.cfg.Turns.Claim(ctx, c.grant.Conn)
	if err != nil {
		return c.storeErr("claim turn", err)
	}
	if !ok {
		return nil
	}
	c.current, c.currentSpan, c.cancelSent = &t, c.g.tel.dispatched(ctx, t), false
	msg, err := c.runTurn(t)
	if err != nil {
		// The Turn is claimed: it is never delivered; ending the
		// connection makes it unconfirmed.
		c.log.WarnContext(c.turnContext(), "prepare turn failed", "turn", t.ID.String())
		return errInternal
	}
	if err := c.s.Send(msg); err != nil {
		return nil
	}
	c.log.InfoContext(c.turnContext(), "turn delivered", "turn", t.ID.String())
	return nil
}

// turnContext carries the current Turn's span, for log records about it.
func (c *conn) turnContext() context.Context {
	if c.currentSpan == nil {
		return c.ctx
	}
	return trace.ContextWithSpan(c.ctx, c.currentSpan)
}

func (c *conn) runTurn(t store.Turn) (*runtimev1.ConnectResponse, error) {
	in, err := c.g.cfg.Turns.OpenInput(t)
	if err != nil {
		return nil, err
	}
	rt := &runtimev1.RunTurn{
		TurnId: t.ID.String(), WorkingDirectory: t.WorkingDirectory, Env: in.Env, Stdin: in.Stdin,
		Timeout: durationpb.New(t.Timeout), MaxOutputBytes: t.MaxOutputBytes,
	}
	if t.ShellScript != nil {
		rt.Program = &runtimev1.RunTurn_ShellScript{ShellScript: *t.ShellScript}
	} else {
		rt.Program = &runtimev1.RunTurn_Argv{Argv: &runtimev1.Argv{Args: t.Argv}}
	}
	return &runtimev1.ConnectResponse{Message: &runtimev1.ConnectResponse_RunTurn{RunTurn: rt}}, nil
}

func (c *conn) sendCancel() error {
	c.cancelSent = true
	if err := c.s.Send(&runtimev1.ConnectResponse{Message: &runtimev1.ConnectResponse_CancelTurn{
		CancelTurn: &runtimev1.CancelTurn{TurnId: c.current.ID.String()}}}); err != nil {
		return io.EOF
	}
	return nil
}

// housekeeping runs on every keepalive tick: keepalive, liveness,
// revocation, the compute phase (suspend.go) and the timeout backstop.
func (c *conn) housekeeping(ctx context.Context) error {
	if time.Since(c.lastAnswer) > missedKeepalives*c.g.cfg.Keepalive {
		c.log.Warn("runtime stopped answering")
		return errNotAdmit
	}
	// now is the database clock: the Turn's timestamps below are the
	// database's, and Core's clock may be off it (lifecycle decisions are
	// made on the database clock).
	conn, now, err := c.g.cfg.Store.GetRuntimeConnection(ctx, c.id())
	if err != nil {
		return c.storeErr("read connection", err)
	}
	if conn.DisconnectedAt != nil {
		return errNotAdmit // replaced by a newer connection of the device
	}
	sess, err := c.g.cfg.Store.GetSession(ctx, c.grant.SessionID)
	if err != nil {
		return c.storeErr("read session", err)
	}
	if sess.Session.State != store.SessionActive || sess.Allocation.ID != c.grant.Connection.AllocationID ||
		sess.Allocation.DeviceRevokedAt != nil {
		if done, err := c.drainRevoked(ctx, now); done || err != nil {
			return err
		}
	}
	// The compute phase, from the same read: a missed wake of the
	// lifecycle worker's announcement costs at most one tick.
	if sess.Allocation.ID == c.grant.Connection.AllocationID {
		if err := c.followPhase(sess.Allocation); err != nil {
			return err
		}
	}
	if c.current != nil && c.current.DispatchedAt != nil {
		over := now.Sub(*c.current.DispatchedAt) - c.current.Timeout
		switch {
		case over > 2*timeoutGrace:
			c.log.Warn("runtime did not report a timed-out turn")
			return errNotAdmit
		case over > timeoutGrace && !c.cancelSent:
			if err := c.sendCancel(); err != nil {
				return err
			}
		}
	}
	// Keepalives go out during Turns too: a quiet Turn sends nothing, and
	// the answers are what tells a live Runtime from a silent one.
	c.keepalive++
	if err := c.s.Send(&runtimev1.ConnectResponse{Message: &runtimev1.ConnectResponse_Keepalive{
		Keepalive: &runtimev1.Keepalive{Sequence: c.keepalive}}}); err != nil {
		return io.EOF
	}
	return nil
}

// drainRevoked handles a connection whose device terminal cleanup revoked
// (store.Termination): no new Turn is claimed for it (the store refuses
// the claim), and the Turn running on it, whose cancellation terminal
// cleanup requested, is asked to cancel and may still report its result
// for revocationDrain from its cancel_requested_at, measured on the
// database clock (now). done is true (with errRevoked) when nothing runs
// any more or the drain is over: the connection ends and a result that
// did not arrive leaves the Turn unconfirmed.
func (c *conn) drainRevoked(ctx context.Context, now time.Time) (done bool, err error) {
	if c.current == nil {
		return true, errRevoked
	}
	t, err := c.g.cfg.Turns.Current(ctx, c.current.ID)
	if err != nil {
		return true, c.storeErr("read turn", err)
	}
	if t.State.Terminal() || t.CancelRequestedAt == nil || now.Sub(*t.CancelRequestedAt) > revocationDrain {
		return true, errRevoked
	}
	if !c.cancelSent {
		if err := c.sendCancel(); err != nil {
			return true, err
		}
	}
	return false, nil
}

// close records the end of the connection; a Turn still running on it
// becomes unconfirmed.
func (c *conn) close() {
	ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	defer cancel()
	c.g.tel.closed(ctx)
	c.g.tel.lost(c.currentSpan)
	ids, err := c.g.cfg.Turns.ConnectionClosed(ctx, c.grant.Conn)
	if err != nil {
		c.log.Warn("record disconnect failed", "error", err)
		return
	}
	if c.g.cfg.Files != nil {
		if err := c.g.cfg.Files.ConnectionClosed(ctx, c.grant.Conn); err != nil {
			c.log.Warn("record file operations' disconnect failed", "error", err)
		}
	}
	c.log.Info("runtime disconnected", "unconfirmed_turns", len(ids))
}

// resultFromWire maps a TurnResult; ok is false when it is malformed.
func resultFromWire(r *runtimev1.TurnResult) (store.TurnResult, bool) {
	res := store.TurnResult{
		Signal: r.GetSignal(), StdoutBytes: r.GetStdoutBytes(), StderrBytes: r.GetStderrBytes(),
		Truncated: r.GetStdoutTruncated() || r.GetStderrTruncated(),
	}
	switch r.GetOutcome() {
	case runtimev1.TurnResult_OUTCOME_EXITED:
		code := r.GetExitCode()
		res.State, res.ExitCode = store.TurnCompleted, &code
	case runtimev1.TurnResult_OUTCOME_TIMED_OUT:
		res.State = store.TurnTimedOut
	case runtimev1.TurnResult_OUTCOME_CANCELLED:
		res.State = store.TurnCancelled
	case runtimev1.TurnResult_OUTCOME_FAILED:
		res.State = store.TurnFailed
		switch r.GetFailureCode() {
		case "invalid_turn", "working_directory_missing", "program_not_found", "start_failed":
			res.FailureCode = r.GetFailureCode()
		default:
			res.FailureCode = "start_failed"
		}
	default:
		return store.TurnResult{}, false
	}
	if res.Signal < 0 || res.Signal > 128 || res.StdoutBytes < 0 || res.StderrBytes < 0 {
		return store.TurnResult{}, false
	}
	return res, true
}
