package gateway_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"

	"berth.dev/platform/errgrpc/errgrpctest"
	runtimev1 "berth.dev/proto/berth/runtime/v1"

	"berth.dev/core/gateway"
	"berth.dev/core/projects"
	"berth.dev/core/secrets"
	"berth.dev/core/store"
	"berth.dev/core/suspension"
	"berth.dev/core/turns"
	"berth.dev/core/turns/turnstest"
)

// lateSubmit is the Turns store with one race made certain: the first
// claim after armed finds nothing, and a Turn is submitted (and announced)
// right after that read, before the claim returns.
type lateSubmit struct {
	turns.Store
	armed  chan struct{}
	once   sync.Once
	submit func()
}

func (l *lateSubmit) ClaimNextTurn(ctx context.Context, conn store.RuntimeConn) (store.Turn, bool, error) {
	t, ok, err := l.Store.ClaimNextTurn(ctx, conn)
	select {
	case <-l.armed:
		if !ok && err == nil {
			l.once.Do(l.submit)
		}
	default:
	}
	return t, ok, err
}

// TestATurnSubmittedDuringAClaimIsDeliveredAtOnce: a Turn committed and
// announced after a claim found the queue empty reaches the prepared
// Runtime at once, not at the next keepalive (a minute here). Before the
// fix the connection armed its wait only after the claim, so the
// announcement was lost (seen in CI as TestTurnsAreDeliveredOnceInOrder
// AfterPreparation timing out).
func TestATurnSubmittedDuringAClaimIsDeliveredAtOnce(t *testing.T) {
	tf := turnstest.New(t)
	inst, err := tf.St.GetInstallation(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := secrets.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	late := &lateSubmit{Store: tf.St, armed: make(chan struct{})}
	svc := turns.New(late, key, inst.ID, uuid.New, tf.Bus)
	var submitted store.Turn
	late.submit = func() {
		script := "echo late"
		submitted, err = svc.Submit(context.Background(), projects.All(), turns.SubmitRequest{
			SessionID: tf.Session.Session.ID, RequestID: uuid.New(), Command: turns.Command{Script: &script},
		})
		if err != nil {
			t.Error(err)
		}
	}
	srv := grpc.NewServer(gateway.ServerOptions()...)
	gateway.New(gateway.Config{Store: tf.St, Turns: svc, Suspension: suspension.New(tf.St, tf.Bus), Events: tf.Bus, NewID: uuid.New, Keepalive: time.Minute, SettleWait: 200 * time.Millisecond}).Register(srv)
	f := &fixture{st: tf.St, turns: svc, bus: tf.Bus, client: runtimev1.NewRuntimeGatewayServiceClient(errgrpctest.Serve(t, srv)),
		session: tf.Session, cred: tf.Cred, epoch: tf.St.Epoch()}

	s, _ := f.connect(t)
	close(late.armed)
	send(t, s, prepared())
	got := make(chan *runtimev1.ConnectResponse, 1)
	go func() {
		m, err := s.Recv()
		if err == nil {
			got <- m
		}
	}()
	select {
	case m := <-got:
		if m.GetRunTurn().GetTurnId() != submitted.ID.String() {
			t.Fatalf("got %v, want the late Turn %s", m, submitted.ID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the Turn submitted during the claim was not delivered within 10 s (the keepalive is a minute): its announcement was lost")
	}
}
