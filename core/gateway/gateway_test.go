package gateway_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"berth.dev/platform/errgrpc/errgrpctest"
	runtimev1 "berth.dev/proto/berth/runtime/v1"

	"berth.dev/core/events"
	"berth.dev/core/gateway"
	"berth.dev/core/projects"
	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
	"berth.dev/core/suspension"
	"berth.dev/core/turns"
	"berth.dev/core/turns/turnstest"
)

// fixture is a gateway over a real PostgreSQL with one running Session,
// served on loopback gRPC; the test plays the Runtime.
type fixture struct {
	st      *storetest.Owned
	turns   *turns.Service
	bus     *events.Bus
	client  runtimev1.RuntimeGatewayServiceClient
	cc      *grpc.ClientConn
	session store.SessionBundle
	cred    []byte
	epoch   uint64
}

func newFixture(t *testing.T, keepalive time.Duration) *fixture {
	t.Helper()
	tf := turnstest.New(t)
	srv := grpc.NewServer(gateway.ServerOptions()...)
	gateway.New(gateway.Config{Store: tf.St, Turns: tf.Svc, Suspension: suspension.New(tf.St, tf.Bus), Events: tf.Bus, NewID: uuid.New, Keepalive: keepalive, SettleWait: 200 * time.Millisecond}).Register(srv)
	cc := errgrpctest.Serve(t, srv)
	return &fixture{
		st: tf.St, turns: tf.Svc, bus: tf.Bus, client: runtimev1.NewRuntimeGatewayServiceClient(cc), cc: cc,
		session: tf.Session, cred: tf.Cred, epoch: tf.St.Epoch(),
	}
}

type rt = grpc.BidiStreamingClient[runtimev1.ConnectRequest, runtimev1.ConnectResponse]

// connect says hello as the Session's Runtime and returns the stream
// after the welcome.
func (f *fixture) connect(t *testing.T) (rt, *runtimev1.Welcome) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	s, err := f.client.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	send(t, s, &runtimev1.ConnectRequest{Message: &runtimev1.ConnectRequest_Hello{Hello: &runtimev1.Hello{
		ProtocolVersion: runtimev1.ProtocolVersion, DeviceId: f.session.Allocation.DeviceID.String(),
		Credential: string(f.cred), RuntimeVersion: "test",
	}}})
	m, err := s.Recv()
	if err != nil {
		t.Fatalf("welcome: %v", err)
	}
	if m.GetWelcome() == nil {
		t.Fatalf("first message %v, want welcome", m)
	}
	return s, m.GetWelcome()
}

func send(t *testing.T, s rt, m *runtimev1.ConnectRequest) {
	t.Helper()
	if err := s.Send(m); err != nil {
		t.Fatal(err)
	}
}

// next returns the next message that is not a keepalive.
func next(t *testing.T, s rt) *runtimev1.ConnectResponse {
	t.Helper()
	for {
		m, err := s.Recv()
		if err != nil {
			t.Fatalf("recv: %v", err)
		}
		if m.GetKeepalive() == nil {
			return m
		}
	}
}

func prepared() *runtimev1.ConnectRequest {
	return &runtimev1.ConnectRequest{Message: &runtimev1.ConnectRequest_Prepared{Prepared: &runtimev1.Prepared{}}}
}

func (f *fixture) submit(t *testing.T, script string, env map[string]string, stdin []byte) store.Turn {
	t.Helper()
	turn, err := f.turns.Submit(context.Background(), projects.All(), turns.SubmitRequest{
		SessionID: f.session.Session.ID, RequestID: uuid.New(), Command: turns.Command{Script: &script}, Env: env, Stdin: stdin,
	})
	if err != nil {
		t.Fatal(err)
	}
	return turn
}

func reasonOf(err error) string {
	for _, d := range status.Convert(err).Details() {
		if i, ok := d.(*errdetails.ErrorInfo); ok {
			return i.GetReason()
		}
	}
	return ""
}

// endsWith reads until the stream ends and checks its status.
func endsWith(t *testing.T, s rt, code codes.Code, reason string) {
	t.Helper()
	ends(t, s, code, reason, false)
}

// endsAnswering is endsWith for a live Runtime: it answers keepalives
// until the stream ends, so the end it reads is the one under test, not
// the liveness check of a Runtime that stopped answering (three missed
// keepalives: a short keepalive on a loaded machine would otherwise end
// the connection first).
func endsAnswering(t *testing.T, s rt, code codes.Code, reason string) {
	t.Helper()
	ends(t, s, code, reason, true)
}

// ends reads s to its end, answering keepalives when answer is set, and
// requires the end's code and reason.
func ends(t *testing.T, s rt, code codes.Code, reason string, answer bool) {
	t.Helper()
	for {
		m, err := s.Recv()
		if err == nil {
			if k := m.GetKeepalive(); k != nil && answer {
				_ = s.Send(&runtimev1.ConnectRequest{Message: &runtimev1.ConnectRequest_KeepaliveAck{KeepaliveAck: &runtimev1.KeepaliveAck{Sequence: k.GetSequence()}}})
			}
			continue
		}
		if status.Code(err) != code || reasonOf(err) != reason {
			t.Fatalf("stream ended with %v (%s), want %v %s", err, reasonOf(err), code, reason)
		}
		return
	}
}

func TestTurnsAreDeliveredOnceInOrderAfterPreparation(t *testing.T) {
	f := newFixture(t, time.Minute)
	first := f.submit(t, "echo one", map[string]string{"SECRET": "s3"}, []byte("in"))
	second := f.submit(t, "echo two", nil, nil)

	s, w := f.connect(t)
	if w.GetConnectionGeneration() != 1 || w.GetConnectionId() == "" {
		t.Fatalf("welcome %v", w)
	}
	// Nothing before preparation: the first message after prepared is the
	// first Turn, with its opened input.
	send(t, s, prepared())
	m := next(t, s).GetRunTurn()
	if m.GetTurnId() != first.ID.String() || m.GetShellScript() != "echo one" || m.GetEnv()["SECRET"] != "s3" ||
		string(m.GetStdin()) != "in" || m.GetWorkingDirectory() != "/workspace" || m.GetMaxOutputBytes() != turns.MaxOutputBytes {
		t.Fatalf("run_turn %v", m)
	}
	id := m.GetTurnId()
	send(t, s, &runtimev1.ConnectRequest{Message: &runtimev1.ConnectRequest_TurnStarted{TurnStarted: &runtimev1.TurnStarted{TurnId: id}}})
	send(t, s, &runtimev1.ConnectRequest{Message: &runtimev1.ConnectRequest_TurnOutput{TurnOutput: &runtimev1.TurnOutput{
		TurnId: id, Stream: runtimev1.OutputStream_OUTPUT_STREAM_STDOUT, Offset: 0, Data: []byte("one\n")}}})
	send(t, s, &runtimev1.ConnectRequest{Message: &runtimev1.ConnectRequest_TurnResult{TurnResult: &runtimev1.TurnResult{
		TurnId: id, Outcome: runtimev1.TurnResult_OUTCOME_EXITED, ExitCode: 0, StdoutBytes: 4}}})
	m = next(t, s).GetRunTurn()
	if m.GetTurnId() != second.ID.String() {
		t.Fatalf("second delivery %v", m)
	}
	got, err := f.st.GetTurn(context.Background(), first.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != store.TurnCompleted || got.StdoutRecorded != 4 || got.StartedAt == nil {
		t.Fatalf("first turn %+v", got)
	}

	// Cancelling the running Turn reaches the Runtime.
	if _, err := f.turns.Cancel(context.Background(), projects.All(), f.session.Session.ID, second.ID); err != nil {
		t.Fatal(err)
	}
	if c := next(t, s).GetCancelTurn(); c.GetTurnId() != second.ID.String() {
		t.Fatalf("cancel %v", c)
	}
	// The Runtime leaves before reporting: the Turn is unconfirmed and is
	// never delivered again, also not to the next connection.
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	waitState(t, f.st, second.ID, store.TurnUnconfirmed)
	s2, w2 := f.connect(t)
	if w2.GetConnectionGeneration() != 2 {
		t.Fatalf("second welcome %v", w2)
	}
	send(t, s2, prepared())
	third := f.submit(t, "echo three", nil, nil)
	if m := next(t, s2).GetRunTurn(); m.GetTurnId() != third.ID.String() {
		t.Fatalf("after reconnect got %v, want only the new turn", m)
	}
}

func waitState(t *testing.T, st *storetest.Owned, id uuid.UUID, want store.TurnState) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := st.GetTurn(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if got.State == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("turn state %s, want %s", got.State, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestProtocolViolationsEndTheConnection(t *testing.T) {
	f := newFixture(t, time.Minute)
	turn := f.submit(t, "echo", nil, nil)
	s, _ := f.connect(t)
	send(t, s, prepared())
	id := next(t, s).GetRunTurn().GetTurnId()
	// Output with a gap: refused, the connection ends, the Turn is
	// unconfirmed (partial output is never success).
	send(t, s, &runtimev1.ConnectRequest{Message: &runtimev1.ConnectRequest_TurnOutput{TurnOutput: &runtimev1.TurnOutput{
		TurnId: id, Stream: runtimev1.OutputStream_OUTPUT_STREAM_STDOUT, Offset: 5, Data: []byte("x")}}})
	endsWith(t, s, codes.InvalidArgument, runtimev1.ReasonInvalidMessage)
	waitState(t, f.st, turn.ID, store.TurnUnconfirmed)

	// A result for a Turn it was not given.
	s, _ = f.connect(t)
	send(t, s, &runtimev1.ConnectRequest{Message: &runtimev1.ConnectRequest_TurnResult{TurnResult: &runtimev1.TurnResult{
		TurnId: uuid.NewString(), Outcome: runtimev1.TurnResult_OUTCOME_EXITED}}})
	endsWith(t, s, codes.InvalidArgument, runtimev1.ReasonInvalidMessage)

	// A first message that is not hello.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := f.client.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	send(t, s, prepared())
	endsWith(t, s, codes.InvalidArgument, runtimev1.ReasonInvalidMessage)
}

// TestMalformedMessagesEndTheConnection: a message that does not decode,
// as the first one or after the welcome, ends the connection as out of
// protocol (invalid_message), never with grpc-go's INTERNAL and parser
// text.
func TestMalformedMessagesEndTheConnection(t *testing.T) {
	f := newFixture(t, time.Minute)
	for name, body := range map[string][]byte{
		"truncated":     {0x0a, 0x7f, 0x01},
		"invalid UTF-8": {0x0a, 0x04, 0x0a, 0x02, 0xff, 0xfe}, // hello.protocol_version
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s, err := f.cc.NewStream(ctx, &runtimev1.RuntimeGatewayService_ServiceDesc.Streams[0],
				"/berth.runtime.v1.RuntimeGatewayService/Connect", grpc.ForceCodec(errgrpctest.Codec{}))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.SendMsg(errgrpctest.Raw(body)); err != nil {
				t.Fatal(err)
			}
			var reply errgrpctest.Raw
			err = s.RecvMsg(&reply)
			st := status.Convert(err)
			if st.Code() != codes.InvalidArgument || reasonOf(err) != runtimev1.ReasonInvalidMessage {
				t.Fatalf("first message: %v %q", st.Code(), st.Message())
			}
		})
	}
	// After the welcome.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	raw, err := f.cc.NewStream(ctx, &runtimev1.RuntimeGatewayService_ServiceDesc.Streams[0],
		"/berth.runtime.v1.RuntimeGatewayService/Connect", grpc.ForceCodec(errgrpctest.Codec{}))
	if err != nil {
		t.Fatal(err)
	}
	hello, err := proto.Marshal(&runtimev1.ConnectRequest{Message: &runtimev1.ConnectRequest_Hello{Hello: &runtimev1.Hello{
		ProtocolVersion: runtimev1.ProtocolVersion, DeviceId: f.session.Allocation.DeviceID.String(),
		Credential: string(f.cred), RuntimeVersion: "test",
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.SendMsg(errgrpctest.Raw(hello)); err != nil {
		t.Fatal(err)
	}
	var reply errgrpctest.Raw
	if err := raw.RecvMsg(&reply); err != nil {
		t.Fatalf("no welcome: %v", err)
	}
	if err := raw.SendMsg(errgrpctest.Raw{0x0a, 0x7f}); err != nil {
		t.Fatal(err)
	}
	for {
		if err = raw.RecvMsg(&reply); err != nil {
			break
		}
	}
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || reasonOf(err) != runtimev1.ReasonInvalidMessage {
		t.Fatalf("after the welcome: %v %q", st.Code(), st.Message())
	}
}

func TestIdleRuntimeGetsKeepalivesAndIsDroppedWhenSilent(t *testing.T) {
	f := newFixture(t, 100*time.Millisecond)
	s, _ := f.connect(t)
	send(t, s, prepared())
	var seqs []int64
	for len(seqs) < 3 {
		m, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		k := m.GetKeepalive()
		if k == nil {
			t.Fatalf("unexpected %v", m)
		}
		seqs = append(seqs, k.GetSequence())
		send(t, s, &runtimev1.ConnectRequest{Message: &runtimev1.ConnectRequest_KeepaliveAck{KeepaliveAck: &runtimev1.KeepaliveAck{Sequence: k.GetSequence()}}})
	}
	if seqs[0] != 1 || seqs[1] != 2 || seqs[2] != 3 {
		t.Fatalf("keepalive sequences %v", seqs)
	}
	// Silent from now on: dropped after a few intervals.
	endsWith(t, s, codes.Unavailable, runtimev1.ReasonNotAdmitted)
	ready, err := f.st.RuntimeReadiness(context.Background(), []uuid.UUID{f.session.Allocation.ID})
	if err != nil {
		t.Fatal(err)
	}
	if ready[f.session.Allocation.ID].Connected {
		t.Fatal("a dropped connection is still reported connected")
	}
}

func TestDeletedSessionRevokesTheRuntime(t *testing.T) {
	f := newFixture(t, 100*time.Millisecond)
	s, _ := f.connect(t)
	if _, err := f.st.RequestSessionDeletion(context.Background(), f.session.Session.ID); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			m, err := s.Recv()
			if err != nil {
				return
			}
			if k := m.GetKeepalive(); k != nil {
				_ = s.Send(&runtimev1.ConnectRequest{Message: &runtimev1.ConnectRequest_KeepaliveAck{KeepaliveAck: &runtimev1.KeepaliveAck{Sequence: k.GetSequence()}}})
			}
		}
	}()
	// A new hello is refused for good.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s2, err := f.client.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	send(t, s2, &runtimev1.ConnectRequest{Message: &runtimev1.ConnectRequest_Hello{Hello: &runtimev1.Hello{
		ProtocolVersion: runtimev1.ProtocolVersion, DeviceId: f.session.Allocation.DeviceID.String(), Credential: string(f.cred)}}})
	endsWith(t, s2, codes.PermissionDenied, runtimev1.ReasonRevoked)
}

func TestDeletionCancelsTheRunningTurnAndKeepsItsResult(t *testing.T) {
	f := newFixture(t, 100*time.Millisecond)
	turn := f.submit(t, "sleep 60", nil, nil)
	s, _ := f.connect(t)
	send(t, s, prepared())
	if m := next(t, s); m.GetRunTurn().GetTurnId() != turn.ID.String() {
		t.Fatalf("got %v, want the turn", m)
	}
	if _, err := f.st.RequestSessionDeletion(context.Background(), f.session.Session.ID); err != nil {
		t.Fatal(err)
	}
	// The gateway forwards the cancellation terminal cleanup requested
	// (answering keepalives meanwhile), then takes the result.
	for {
		m, err := s.Recv()
		if err != nil {
			t.Fatalf("connection ended before the cancellation: %v", err)
		}
		if k := m.GetKeepalive(); k != nil {
			send(t, s, &runtimev1.ConnectRequest{Message: &runtimev1.ConnectRequest_KeepaliveAck{KeepaliveAck: &runtimev1.KeepaliveAck{Sequence: k.GetSequence()}}})
			continue
		}
		if m.GetCancelTurn().GetTurnId() != turn.ID.String() {
			t.Fatalf("got %v, want the cancellation", m)
		}
		break
	}
	send(t, s, &runtimev1.ConnectRequest{Message: &runtimev1.ConnectRequest_TurnResult{TurnResult: &runtimev1.TurnResult{
		TurnId: turn.ID.String(), Outcome: runtimev1.TurnResult_OUTCOME_CANCELLED, Signal: 15}}})
	// With the result recorded nothing runs any more: the revoked
	// connection ends.
	endsAnswering(t, s, codes.PermissionDenied, runtimev1.ReasonRevoked)
	got, err := f.st.GetTurn(context.Background(), turn.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != store.TurnCancelled {
		t.Fatalf("turn = %s, want cancelled by its result", got.State)
	}
}

func TestQuietTurnKeepsItsConnection(t *testing.T) {
	f := newFixture(t, 100*time.Millisecond)
	turn := f.submit(t, "sleep 60", nil, nil)
	s, _ := f.connect(t)
	send(t, s, prepared())
	// The Runtime runs the Turn without output for ten keepalive
	// intervals, answering only keepalives: it stays connected.
	deadline := time.Now().Add(time.Second)
	gotTurn := false
	for time.Now().Before(deadline) {
		m, err := s.Recv()
		if err != nil {
			t.Fatalf("connection ended during a quiet turn: %v", err)
		}
		if m.GetRunTurn() != nil {
			gotTurn = true
		}
		if k := m.GetKeepalive(); k != nil {
			send(t, s, &runtimev1.ConnectRequest{Message: &runtimev1.ConnectRequest_KeepaliveAck{KeepaliveAck: &runtimev1.KeepaliveAck{Sequence: k.GetSequence()}}})
		}
	}
	got, err := f.st.GetTurn(context.Background(), turn.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !gotTurn || got.State != store.TurnRunning {
		t.Fatalf("delivered %v, state %s", gotTurn, got.State)
	}
}
