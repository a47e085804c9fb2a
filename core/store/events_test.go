package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/store"
)

// TestCommittedWorkNotifiesItsNode: a committed Session and a committed
// deletion each notify their node's worker (store.NodeWorkEvent on
// store.EventsChannel); a refused write notifies nothing.
func TestCommittedWorkNotifiesItsNode(t *testing.T) {
	st, ctx := ownedStore(t)
	node := presentNode(t, ctx, st)
	got := make(chan uuid.UUID, 16)
	deliver := func(payload string) {
		kind, id, _ := strings.Cut(payload, ":")
		if kind != store.NodeWorkEvent {
			t.Errorf("payload %q, want kind %s", payload, store.NodeWorkEvent)
		}
		got <- uuid.MustParse(id)
	}
	lctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- st.ListenEvents(lctx, deliver) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("ListenEvents: %v", err)
		}
	})
	// The listener is up once a notification of ours arrives: repeat a
	// committed creation until one does (LISTEN may follow the first).
	wait := func(what string) uuid.UUID {
		t.Helper()
		select {
		case id := <-got:
			return id
		case <-time.After(10 * time.Second):
			t.Fatalf("no notification for %s", what)
			return uuid.Nil
		}
	}
	var b store.SessionBundle
	var err error
	for range 50 {
		b, err = st.CreateSession(ctx, sessionParams(t, 100))
		must(t, err)
		select {
		case id := <-got:
			if id != node {
				t.Fatalf("notified %s, want %s", id, node)
			}
			goto listening
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Fatal("the listener never heard a committed Session")
listening:
	// A refused write (no capacity: max_active 0 is refused) notifies
	// nothing; the next committed one does.
	if _, err := st.CreateSession(ctx, sessionParams(t, 0)); err == nil {
		t.Fatal("a Session beyond capacity was created")
	}
	if _, err := st.RequestSessionDeletion(ctx, b.Session.ID); err != nil {
		t.Fatal(err)
	}
	if id := wait("the deletion"); id != node {
		t.Fatalf("deletion notified %s, want %s", id, node)
	}
	select {
	case id := <-got:
		t.Fatalf("an extra notification for %s (the refused creation?)", id)
	case <-time.After(300 * time.Millisecond):
	}
}
