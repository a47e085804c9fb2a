package gateway_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	runtimev1 "berth.dev/proto/berth/runtime/v1"
	"berth.dev/sandbox"

	"berth.dev/core/events"
	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
)

// idleArmed runs one Turn on a fresh connection, commits a deployment that
// suspends after a second, waits it out and arms a suspension; it returns
// the connection and the operation.
func (f *fixture) idleArmed(t *testing.T) (rt, uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	_, err := f.st.CommitGeneration(ctx, storetest.Seen(t, f.st), store.NewGeneration{
		ProviderKind: "docker", PublicConfig: json.RawMessage(`{}`), Observations: json.RawMessage(`{}`),
		Specification: sandbox.Specification{
			Resources: sandbox.Resources{CPUMillis: 500, MemoryBytes: 256 << 20, DiskBytes: 1 << 30}, MaxActive: 4, MaxRetained: 4,
			Suspension: sandbox.SuspensionPolicy{Idle: time.Second, Retention: time.Hour},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	turn := f.submit(t, "true", nil, nil)
	s, _ := f.connect(t)
	send(t, s, prepared())
	if m := next(t, s).GetRunTurn(); m.GetTurnId() != turn.ID.String() {
		t.Fatalf("run_turn %v", m)
	}
	send(t, s, &runtimev1.ConnectRequest{Message: &runtimev1.ConnectRequest_TurnResult{TurnResult: &runtimev1.TurnResult{
		TurnId: turn.ID.String(), Outcome: runtimev1.TurnResult_OUTCOME_EXITED}}})
	waitState(t, f.st, turn.ID, store.TurnCompleted)
	time.Sleep(1100 * time.Millisecond)
	a, err := f.st.GetAllocation(ctx, f.session.Allocation.ID)
	if err != nil {
		t.Fatal(err)
	}
	op := uuid.New()
	if _, err := f.st.ArmSuspension(ctx, a.ID, a.Revision, op); err != nil {
		t.Fatal(err)
	}
	f.bus.Publish(events.Event{Kind: events.Phase, ID: a.EnvironmentID})
	return s, op
}

// wantQuiesce reads the next message and checks that it asks to quiesce
// for op.
func wantQuiesce(t *testing.T, s rt, op uuid.UUID) {
	t.Helper()
	if q := next(t, s).GetQuiesce(); q.GetSuspensionToken() != op.String() {
		t.Fatalf("quiesce %v, want token %s", q, op)
	}
}

func quiesceAck(token string) *runtimev1.ConnectRequest {
	return &runtimev1.ConnectRequest{Message: &runtimev1.ConnectRequest_QuiesceAck{QuiesceAck: &runtimev1.QuiesceAck{SuspensionToken: token}}}
}

// waitAllocation polls allocation id until ok says so.
func (f *fixture) waitAllocation(t *testing.T, ok func(store.Allocation) bool) store.Allocation {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		a, err := f.st.GetAllocation(context.Background(), f.session.Allocation.ID)
		if err != nil {
			t.Fatal(err)
		}
		if ok(a) {
			return a
		}
		if time.Now().After(deadline) {
			t.Fatalf("allocation %s %+v", a.ComputePhase, a.Suspension)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// capturing is idleArmed with the quiesce acknowledged and the capture
// claimed (PhaseSuspending), announcing nothing.
func (f *fixture) capturing(t *testing.T) (rt, uuid.UUID) {
	t.Helper()
	s, op := f.idleArmed(t)
	wantQuiesce(t, s, op)
	send(t, s, quiesceAck(op.String()))
	f.waitAllocation(t, func(a store.Allocation) bool { return a.Suspension.AckedAt != nil })
	if _, err := f.st.ClaimCapture(context.Background(), f.session.Allocation.ID, op); err != nil {
		t.Fatal(err)
	}
	return s, op
}

// TestArmedSuspensionIsDeliveredAndAcknowledged: the gateway asks the
// connected Runtime to quiesce with the operation's token and records its
// acknowledgement (which alone permits a capture); a Runtime that
// reconnects while the suspension is armed is asked again; an abort ends
// the quiesced connection so the Runtime comes back with open admission.
func TestArmedSuspensionIsDeliveredAndAcknowledged(t *testing.T) {
	f := newFixture(t, time.Minute)
	s, op := f.idleArmed(t)
	wantQuiesce(t, s, op)
	if a, _ := f.st.GetAllocation(context.Background(), f.session.Allocation.ID); a.Suspension.AckedAt != nil {
		t.Fatal("acknowledged before the Runtime answered")
	}
	// A reconnection (the old stream is replaced) is asked again.
	s2, _ := f.connect(t)
	wantQuiesce(t, s2, op)
	send(t, s2, quiesceAck(op.String()))
	f.waitAllocation(t, func(a store.Allocation) bool { return a.Suspension.AckedAt != nil })

	// Work arrived: the worker aborts; the quiesced connection ends.
	if _, err := f.st.AbortQuiesce(context.Background(), f.session.Allocation.ID, op); err != nil {
		t.Fatal(err)
	}
	f.bus.Publish(events.Event{Kind: events.Phase, ID: f.session.Environment.ID})
	endsWith(t, s2, codes.Unavailable, runtimev1.ReasonNotAdmitted)
}

// TestAcknowledgementOfAnotherTokenIsOutOfProtocol: only the token the
// connection was asked for is acknowledged.
func TestAcknowledgementOfAnotherTokenIsOutOfProtocol(t *testing.T) {
	f := newFixture(t, time.Minute)
	s, op := f.idleArmed(t)
	wantQuiesce(t, s, op)
	send(t, s, quiesceAck(uuid.NewString()))
	endsWith(t, s, codes.InvalidArgument, runtimev1.ReasonInvalidMessage)
	if a, _ := f.st.GetAllocation(context.Background(), f.session.Allocation.ID); a.Suspension.AckedAt != nil {
		t.Fatal("a foreign token was recorded as the acknowledgement")
	}
}

// TestRejectedQuiesceAbortsTheSuspension: a Runtime that refuses keeps its
// connection, the suspension is aborted, and queued work runs.
func TestRejectedQuiesceAbortsTheSuspension(t *testing.T) {
	f := newFixture(t, time.Minute)
	s, op := f.idleArmed(t)
	wantQuiesce(t, s, op)
	send(t, s, &runtimev1.ConnectRequest{Message: &runtimev1.ConnectRequest_QuiesceRejected{QuiesceRejected: &runtimev1.QuiesceRejected{
		SuspensionToken: op.String(), Reason: runtimev1.ReasonParkFailed}}})
	f.waitAllocation(t, func(a store.Allocation) bool { return a.ComputePhase == store.PhaseRunning })
	turn := f.submit(t, "echo again", nil, nil)
	if m := next(t, s).GetRunTurn(); m.GetTurnId() != turn.ID.String() {
		t.Fatalf("after the refusal got %v, want the new turn", m)
	}
}

// TestSuspendedComputeEndsTheConnection: once captured, the connection
// ends and the device is not admitted until its restore is recorded.
func TestSuspendedComputeEndsTheConnection(t *testing.T) {
	f := newFixture(t, time.Minute)
	s, op := f.capturing(t)
	ctx := context.Background()
	id := f.session.Allocation.ID
	f.bus.Publish(events.Event{Kind: events.Phase, ID: f.session.Environment.ID})
	endsWith(t, s, codes.Unavailable, runtimev1.ReasonNotAdmitted)
	if _, err := f.st.RecordSuspended(ctx, id, op, sandbox.SnapshotIdentity{ID: "snap", Provenance: "p"}); err != nil {
		t.Fatal(err)
	}
	c, err := f.client.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	send(t, c, &runtimev1.ConnectRequest{Message: &runtimev1.ConnectRequest_Hello{Hello: &runtimev1.Hello{
		ProtocolVersion: runtimev1.ProtocolVersion, DeviceId: f.session.Allocation.DeviceID.String(),
		Credential: string(f.cred), RuntimeVersion: "test",
	}}})
	endsWith(t, c, codes.Unavailable, runtimev1.ReasonNotAdmitted)
}

// TestQuiescedConnectionNeverGetsATurn: a connection whose Runtime was
// asked to quiesce never gets a Turn, even when the suspension has ended
// (a capture rolled back) and work arrives before the connection saw the
// phase change: a Runtime with closed admission would drop the Turn
// (found by the chaos suite: an agent SIGKILL during a capture, the
// rollback after its restart, and a Turn claimed on the quiesced
// connection that then never ran). The connection ends instead, and the
// Turn runs on the Runtime's next connection.
func TestQuiescedConnectionNeverGetsATurn(t *testing.T) {
	f := newFixture(t, time.Minute)
	s, op := f.capturing(t)
	ctx := context.Background()
	id := f.session.Allocation.ID
	// Rolled back, with no phase announcement yet: only the Turn's.
	if _, err := f.st.RollBackCapture(ctx, id, op, "", nil); err != nil {
		t.Fatal(err)
	}
	turn := f.submit(t, "echo after", nil, nil)
	for {
		m, err := s.Recv()
		if err != nil {
			if status.Code(err) != codes.Unavailable || reasonOf(err) != runtimev1.ReasonNotAdmitted {
				t.Fatalf("stream ended with %v, want Unavailable %s", err, runtimev1.ReasonNotAdmitted)
			}
			break
		}
		if m.GetRunTurn() != nil {
			t.Fatal("a Turn was sent to the quiesced Runtime")
		}
	}
	if got, err := f.st.GetTurn(ctx, turn.ID); err != nil || got.State != store.TurnQueued {
		t.Fatalf("the Turn is %s (%v), want still queued", got.State, err)
	}
	s2, _ := f.connect(t)
	send(t, s2, prepared())
	if m := next(t, s2).GetRunTurn(); m.GetTurnId() != turn.ID.String() {
		t.Fatalf("the next connection got %v, want the Turn", m)
	}
}
