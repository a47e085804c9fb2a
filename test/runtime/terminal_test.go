package runtime

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	adminv1 "berth.dev/proto/berth/admin/v1"

	"berth.dev/test/internal/stack"
)

// TestDeletionIsTerminalCleanupWhileProviderDisabled is issue 12 items 5
// and 6 over the real binaries and engine: with the provider disabled, a
// new Session is refused (provider_disabled) but deleting a Session with a
// running and a queued Turn goes on: the running Turn is cancelled by its
// Runtime (its result arrives), the queued one fails session_deleted, the
// Runtime's device is refused, and the compute is removed. Enabling the
// provider admits Sessions again.
func TestDeletionIsTerminalCleanupWhileProviderDisabled(t *testing.T) {
	e := newEnv(t)
	session := e.createSession()
	deployments := adminv1.NewDeploymentServiceClient(e.cc)

	running := e.startLongTurn(session)
	queued := e.submit(session, shell("echo never"))

	dis, err := deployments.DisableProvider(e.ctx, &adminv1.DisableProviderRequest{Name: "deployment"})
	if err != nil || !dis.GetDeployment().GetProviderDisabled() {
		t.Fatalf("DisableProvider: %v, %v", dis, err)
	}
	_, err = e.sessions.CreateSession(e.ctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString(), Session: &adminv1.Session{}})
	if status.Code(err) != codes.FailedPrecondition || adminReason(err) != "provider_disabled" {
		t.Fatalf("CreateSession while disabled: %v (%s)", err, adminReason(err))
	}

	if _, err := e.sessions.DeleteSession(e.ctx, &adminv1.DeleteSessionRequest{Name: session}); err != nil {
		t.Fatal(err)
	}
	r := e.wait(running)
	if r.turn.GetState() != adminv1.Turn_STATE_CANCELLED || r.turn.GetCancelTime() == nil || string(r.stdout) != "go\n" {
		t.Fatalf("running turn after deletion: %v", r)
	}
	q, err := e.turns.GetTurn(e.ctx, &adminv1.GetTurnRequest{Name: queued})
	if err != nil {
		t.Fatal(err)
	}
	if q.GetTurn().GetState() != adminv1.Turn_STATE_FAILED || q.GetTurn().GetFailureCode() != "session_deleted" {
		t.Fatalf("queued turn after deletion: %v", q.GetTurn())
	}
	stack.WaitFor(t, 2*time.Minute, "cleanup while disabled", func() bool {
		c, v := stack.Owned(t, e.docker, e.installationID)
		return c == 0 && v == 0
	})

	en, err := deployments.EnableProvider(e.ctx, &adminv1.EnableProviderRequest{Name: "deployment"})
	if err != nil || en.GetDeployment().GetProviderDisabled() {
		t.Fatalf("EnableProvider: %v, %v", en, err)
	}
	e.createSession()
}

// adminReason is the ErrorInfo reason of an admin API error.
func adminReason(err error) string {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetReason()
		}
	}
	return ""
}
