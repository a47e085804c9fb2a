package events_test

import (
	"slices"
	"sync"
	"testing"

	"github.com/google/uuid"

	"berth.dev/core/events"
)

func pending(t *testing.T, s *events.Subscription) []events.Event {
	t.Helper()
	select {
	case <-s.Ready():
	default:
		t.Fatal("the subscription was not signalled")
	}
	return s.Take()
}

func quiet(t *testing.T, s *events.Subscription) {
	t.Helper()
	select {
	case <-s.Ready():
		t.Fatalf("signalled with %v", s.Take())
	default:
	}
}

// TestASubscriptionGetsWhatMatchesIt: a subscription to one key gets that
// key's events and no other; one to a whole kind gets every id of it.
func TestASubscriptionGetsWhatMatchesIt(t *testing.T) {
	b := events.New()
	turn, other := uuid.New(), uuid.New()
	one := b.Subscribe(events.Event{Kind: events.Turn, ID: turn})
	all := b.Subscribe(events.Any(events.NodeWork))
	b.Publish(events.Event{Kind: events.Turn, ID: other}, events.Event{Kind: events.Session, ID: turn})
	quiet(t, one)
	quiet(t, all)
	b.Publish(events.Event{Kind: events.Turn, ID: turn}, events.Event{Kind: events.NodeWork, ID: other},
		events.Event{Kind: events.NodeWork, ID: turn})
	if got := pending(t, one); !slices.Equal(got, []events.Event{{Kind: events.Turn, ID: turn}}) {
		t.Fatalf("one got %v", got)
	}
	got := pending(t, all)
	if len(got) != 2 || !slices.Contains(got, events.Event{Kind: events.NodeWork, ID: other}) ||
		!slices.Contains(got, events.Event{Kind: events.NodeWork, ID: turn}) {
		t.Fatalf("all got %v", got)
	}
}

// TestAnEventBetweenReadAndWaitIsNotLost: the reader's pattern (subscribe,
// read, wait) wakes for an event published after the read and before the
// wait: the subscription holds it until the wait.
func TestAnEventBetweenReadAndWaitIsNotLost(t *testing.T) {
	b := events.New()
	key := events.Event{Kind: events.Session, ID: uuid.New()}
	s := b.Subscribe(key)
	defer s.Close()
	state := 0
	read := func() int { return state }
	if read() != 0 {
		t.Fatal("unexpected state")
	}
	state = 1 // the writer commits...
	b.Publish(key)
	<-s.Ready() // ...and the wait armed before the read sees it
	if read() != 1 {
		t.Fatal("woken before the change")
	}
}

// TestASlowSubscriberNeverBlocksThePublisher: a subscriber that never
// takes does not stop publishing (to it or anyone); its pending set stays
// bounded and coalesced, and it still learns that something happened.
func TestASlowSubscriberNeverBlocksThePublisher(t *testing.T) {
	b := events.New()
	slow := b.Subscribe(events.Any(events.Turn))
	key := events.Event{Kind: events.Turn, ID: uuid.New()}
	fast := b.Subscribe(key)
	for range 10000 {
		b.Publish(events.Event{Kind: events.Turn, ID: uuid.New()})
	}
	b.Publish(key, key)
	if got := pending(t, fast); !slices.Equal(got, []events.Event{key}) {
		t.Fatalf("fast got %v, want the one key, coalesced", got)
	}
	got := pending(t, slow)
	if len(got) == 0 || len(got) > 1024 {
		t.Fatalf("slow holds %d events, want 1 to 1024", len(got))
	}
}

// TestAClosedSubscriptionGetsNothing: after Close nothing is recorded,
// the other subscriptions of the key go on, and closing twice is harmless.
func TestAClosedSubscriptionGetsNothing(t *testing.T) {
	b := events.New()
	key := events.Event{Kind: events.Phase, ID: uuid.New()}
	gone, stays := b.Subscribe(key), b.Subscribe(key)
	gone.Close()
	gone.Close()
	b.Publish(key)
	quiet(t, gone)
	if got := pending(t, stays); !slices.Equal(got, []events.Event{key}) {
		t.Fatalf("stays got %v", got)
	}
}

// TestPublishAndSubscribeConcurrently: publishers, subscribers and
// closers at once (run with -race); every subscription made before the
// publishers start hears them.
func TestPublishAndSubscribeConcurrently(t *testing.T) {
	b := events.New()
	key := events.Event{Kind: events.Turn, ID: uuid.New()}
	early := b.Subscribe(key)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range 200 {
				b.Publish(key, events.Event{Kind: events.Turn, ID: uuid.New()})
			}
		}()
		go func() {
			defer wg.Done()
			for range 200 {
				s := b.Subscribe(key, events.Any(events.Turn))
				s.Take()
				s.Close()
			}
		}()
	}
	wg.Wait()
	if got := pending(t, early); !slices.Equal(got, []events.Event{key}) {
		t.Fatalf("early got %v", got)
	}
}

// TestOnlyKindsThatCrossAreParsed: a NOTIFY payload is accepted only for
// a kind that crosses processes, with a valid id.
func TestOnlyKindsThatCrossAreParsed(t *testing.T) {
	id := uuid.New()
	if e, ok := events.Parse("node_work:" + id.String()); !ok || e != (events.Event{Kind: events.NodeWork, ID: id}) {
		t.Fatalf("node_work: %v %v", e, ok)
	}
	if e, ok := events.Parse("direct_work:" + uuid.Nil.String()); !ok || e != (events.Event{Kind: events.DirectWork}) {
		t.Fatalf("direct_work: %v %v", e, ok)
	}
	for _, p := range []string{"turn:" + id.String(), "node_work", "node_work:x", id.String(), "nope:" + id.String()} {
		if e, ok := events.Parse(p); ok {
			t.Errorf("%q parsed as %v", p, e)
		}
	}
}

// TestANilBusDropsWhatIsPublished: publishing to nil is a no-op.
func TestANilBusDropsWhatIsPublished(t *testing.T) {
	var b *events.Bus
	b.Publish(events.Event{Kind: events.Turn, ID: uuid.New()})
}
