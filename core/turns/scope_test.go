package turns_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"

	"berth.dev/core/projects"
	"berth.dev/core/turns"
	"berth.dev/core/turns/turnstest"
	"berth.dev/sandbox/errdefs"
)

// TestScopeHidesAnotherProjectsTurns: in another project's scope every
// entry answers not found for the Session's Turns, as for a missing
// Session, queues nothing and cancels nothing; its own project's scope
// reaches them.
func TestScopeHidesAnotherProjectsTurns(t *testing.T) {
	f := turnstest.New(t)
	ctx := context.Background()
	b := f.Session
	own, other := projects.In(b.Session.ProjectID), projects.In(uuid.New())
	first, err := f.Svc.Submit(ctx, own, turns.SubmitRequest{SessionID: b.Session.ID, RequestID: uuid.New(), Command: script("true")})
	if err != nil {
		t.Fatal(err)
	}
	notFound := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("%s: %v, want not found", what, err)
		}
	}
	for _, session := range []uuid.UUID{b.Session.ID, uuid.New()} {
		_, err := f.Svc.Submit(ctx, other, turns.SubmitRequest{SessionID: session, RequestID: uuid.New(), Command: script("true")})
		notFound("Submit", err)
		_, err = f.Svc.Get(ctx, other, session, first.ID)
		notFound("Get", err)
		_, err = f.Svc.List(ctx, other, session, 0, 10)
		notFound("List", err)
		_, err = f.Svc.Cancel(ctx, other, session, first.ID)
		notFound("Cancel", err)
		err = f.Svc.StreamOutput(ctx, other, session, first.ID, 0, 0, func(turns.Chunk) error {
			t.Error("a chunk was sent")
			return nil
		})
		notFound("StreamOutput", err)
	}
	list, err := f.Svc.List(ctx, own, b.Session.ID, 0, 10)
	if err != nil || len(list) != 1 {
		t.Fatalf("own List: %d Turns, %v; want only the first", len(list), err)
	}
	got, err := f.Svc.Get(ctx, own, b.Session.ID, first.ID)
	if err != nil || got.State != first.State || got.CancelRequestedAt != nil {
		t.Fatalf("the Turn changed: state %s, cancel requested %v, %v", got.State, got.CancelRequestedAt != nil, err)
	}
}
