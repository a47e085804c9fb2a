package events

import (
	"strings"
	"sync"

	"github.com/google/uuid"
)

// Kind says what changed; the Event's ID says which one.
type Kind uint8

// The kinds of change, each with the id it carries and its one publisher
// (doc.go).
const (
	// Turn: a Turn was queued, started, given output, finished, cancelled,
	// swept or settled by a terminal cleanup. ID: the Turn.
	Turn Kind = iota + 1
	// Session: what a Session's Runtime connection dispatches changed (a
	// Turn queued, cancelled or finished, its connection ended, its
	// terminal cleanup committed). ID: the Session.
	Session
	// Phase: an Environment's compute phase changed. ID: the Environment.
	Phase
	// NodeWork: lifecycle work committed for a node (crosses processes).
	// ID: the node.
	NodeWork
	// NodeServing: Core's connection to a node was established. ID: the
	// node.
	NodeServing
	// Generation: a deployment generation was committed. ID: uuid.Nil.
	Generation
	// DirectWork: lifecycle work committed for the direct lane (crosses
	// processes). ID: uuid.Nil, the lane's key (store.DirectLane).
	DirectWork
	// KeysChanged: a project key was created or revoked (crosses
	// processes: every Core's key index reloads). ID: the key.
	KeysChanged
	// Reset: a deployment reset started (core/deployment's StartReset,
	// on the owner that wrote it), so the reset runner passes at once.
	// ID: the reset.
	Reset
)

// names are the kinds' wire and log names; the store's NOTIFY payload
// starts with one.
var names = map[Kind]string{
	Turn: "turn", Session: "session", Phase: "phase", NodeWork: "node_work",
	NodeServing: "node_serving", Generation: "generation", DirectWork: "direct_work",
	KeysChanged: "keys_changed", Reset: "reset",
}

func (k Kind) String() string {
	if n, ok := names[k]; ok {
		return n
	}
	return "unknown"
}

// Crosses reports whether events of k arrive from other Core processes
// (Feed): NodeWork and DirectWork, whose writers may be a Core that lost
// the lease, and KeysChanged, whose writer may be any Core (an
// administrator's call is served by whichever Core it reaches).
func (k Kind) Crosses() bool { return k == NodeWork || k == DirectWork || k == KeysChanged }

// Event is one change: its kind and the id of what changed.
type Event struct {
	Kind Kind
	ID   uuid.UUID
}

// Any matches every event of kind in Subscribe.
func Any(kind Kind) Event { return Event{Kind: kind} }

// Terminated is what a terminal cleanup (store.Termination) changed: its
// Session, and the Turns it settled or asked to cancel.
func Terminated(session uuid.UUID, turnLists ...[]uuid.UUID) []Event {
	out := []Event{{Kind: Session, ID: session}}
	for _, ids := range turnLists {
		for _, id := range ids {
			out = append(out, Event{Kind: Turn, ID: id})
		}
	}
	return out
}

// Parse decodes a NOTIFY payload "kind:id" of a kind that crosses
// processes; ok is false for anything else.
func Parse(payload string) (Event, bool) {
	name, rest, found := strings.Cut(payload, ":")
	if !found {
		return Event{}, false
	}
	id, err := uuid.Parse(rest)
	if err != nil {
		return Event{}, false
	}
	for k, n := range names {
		if n == name && k.Crosses() {
			return Event{Kind: k, ID: id}, true
		}
	}
	return Event{}, false
}

// maxPending bounds the distinct events a Subscription holds untaken;
// beyond it new ones are dropped (a wake-up is lossy; scans catch up).
const maxPending = 1024

// Bus delivers events to the subscriptions that match them. The zero
// value is not usable: New. A nil *Bus drops what is published to it
// (tests and tools nobody waits on).
type Bus struct {
	mu   sync.Mutex
	subs map[Event]map[*Subscription]struct{}
}

// New returns a Bus with no subscriptions.
func New() *Bus { return &Bus{subs: make(map[Event]map[*Subscription]struct{})} }

// Publish records each event in every subscription matching it (its kind
// and id, or its kind with Any) and signals them. It never blocks on a
// subscriber.
func (b *Bus) Publish(evs ...Event) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range evs {
		for s := range b.subs[e] {
			s.add(e)
		}
		if e.ID != uuid.Nil {
			for s := range b.subs[Any(e.Kind)] {
				s.add(e)
			}
		}
	}
}

// Subscribe returns a Subscription to the events matching any of match
// (an Event with uuid.Nil as its ID matches its whole kind). Every event
// published after Subscribe returns is recorded until taken; Close ends
// it.
func (b *Bus) Subscribe(match ...Event) *Subscription {
	s := &Subscription{bus: b, match: match, ready: make(chan struct{}, 1), pending: map[Event]struct{}{}}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range match {
		if b.subs[m] == nil {
			b.subs[m] = map[*Subscription]struct{}{}
		}
		b.subs[m][s] = struct{}{}
	}
	return s
}

// Subscription is one subscriber's view of the bus: a set of pending
// events and a channel that signals when it is not empty.
type Subscription struct {
	bus   *Bus
	match []Event
	ready chan struct{}

	mu      sync.Mutex
	pending map[Event]struct{}
}

// Ready receives when events were published since the last receive; a
// wake-up subscriber needs nothing else (Take is for those that act on
// the ids).
func (s *Subscription) Ready() <-chan struct{} { return s.ready }

// Take returns the pending events (in no particular order) and forgets
// them.
func (s *Subscription) Take() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Event, 0, len(s.pending))
	for e := range s.pending {
		out = append(out, e)
	}
	clear(s.pending)
	return out
}

// Close removes the subscription from the bus; nothing is recorded after
// it returns. Closing twice is harmless.
func (s *Subscription) Close() {
	b := s.bus
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range s.match {
		delete(b.subs[m], s)
		if len(b.subs[m]) == 0 {
			delete(b.subs, m)
		}
	}
}

// add records e (dropped when maxPending distinct events wait) and
// signals Ready without blocking.
func (s *Subscription) add(e Event) {
	s.mu.Lock()
	if len(s.pending) < maxPending {
		s.pending[e] = struct{}{}
	}
	s.mu.Unlock()
	select {
	case s.ready <- struct{}{}:
	default:
	}
}
