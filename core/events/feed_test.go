package events_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/events"
	"berth.dev/core/store"
	"berth.dev/core/store/db"
	"berth.dev/core/store/storetest"
)

// TestACommitInOneCoreIsAnEventInAnother: a node-work notification
// committed through one Store (one Core process) is published on the bus
// fed by another Store's listener, as a NodeWork event of that node; one
// queued in a transaction that rolled back is never published.
func TestACommitInOneCoreIsAnEventInAnother(t *testing.T) {
	dsn := storetest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), storetest.TestTimeout)
	defer cancel()
	if err := store.Migrate(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	open := func() *store.Store {
		st, err := store.Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.Close)
		return st
	}
	writer, listener := open(), open()
	bus := events.New()
	sub := bus.Subscribe(events.Any(events.NodeWork))
	fctx, stop := context.WithCancel(ctx)
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		bus.Feed(fctx, listener.ListenEvents, 10*time.Millisecond, slog.New(slog.DiscardHandler))
	}()
	t.Cleanup(func() { stop(); <-fed })

	// The feed is up once a committed enabling of ours arrives (LISTEN may
	// follow the first ones): enable nodes until one does.
	first := awaitListening(t, storetest.Owner(t, storetest.Wrap(writer)), sub)
	if first.Kind != events.NodeWork {
		t.Fatalf("first event %v", first)
	}

	rolledBack, committed := uuid.New(), uuid.New()
	notify := func(id uuid.UUID, commit bool) {
		tx, err := writer.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.New(tx).NotifyEvent(ctx, db.NotifyEventParams{Kind: store.NodeWorkEvent, ID: id.String()}); err != nil {
			t.Fatal(err)
		}
		if commit {
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	notify(rolledBack, false)
	notify(committed, true)
	// Notifications arrive in commit order: once the committed one is
	// here, the rolled-back one would have been too.
	for {
		select {
		case <-sub.Ready():
		case <-ctx.Done():
			t.Fatal("the committed notification never arrived")
		}
		got := sub.Take()
		if slices.Contains(got, events.Event{Kind: events.NodeWork, ID: rolledBack}) {
			t.Fatalf("a rolled-back notification was published: %v", got)
		}
		if slices.Contains(got, events.Event{Kind: events.NodeWork, ID: committed}) {
			return
		}
	}
}

// awaitListening enables a node through writer until the feed publishes
// its NodeWork (store.Owner.SetNodeState notifies it) and returns it.
func awaitListening(t *testing.T, writer *storetest.Owned, sub *events.Subscription) events.Event {
	t.Helper()
	for range 100 {
		node := storetest.EnabledNode(t, writer)
		select {
		case <-sub.Ready():
			for _, e := range sub.Take() {
				if e.ID == node {
					return e
				}
			}
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Fatal("the feed never heard a committed write")
	return events.Event{}
}

// TestTheStoreSpeaksTheBusKinds: the kinds the store queues for node and
// direct-lane work and for key changes are the bus's NodeWork, DirectWork
// and KeysChanged, and they cross processes.
func TestTheStoreSpeaksTheBusKinds(t *testing.T) {
	for kind, stored := range map[events.Kind]string{
		events.NodeWork: store.NodeWorkEvent, events.DirectWork: store.DirectWorkEvent, events.KeysChanged: store.KeysChangedEvent,
	} {
		if kind.String() != stored || !kind.Crosses() {
			t.Errorf("store %q, bus %q (crosses %v)", stored, kind, kind.Crosses())
		}
	}
}
