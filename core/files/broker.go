package files

import (
	"context"
	"errors"
	"sync"

	"github.com/google/uuid"

	runtimev1 "berth.dev/proto/berth/runtime/v1"
)

// Stream is the Runtime's side of one operation: the gateway's Transfer
// stream after its hello was accepted.
type Stream interface {
	Send(*runtimev1.TransferResponse) error
	Recv() (*runtimev1.TransferRequest, error)
}

// broker is where an admin call waiting for its Runtime and the Transfer
// stream the Runtime opened meet, by operation id. Both live in this
// process: one active Core serves the admin API and the gateway.
type broker struct {
	mu      sync.Mutex
	waiting map[uuid.UUID]*waiter
}

// waiter is one admin call waiting for its Transfer stream.
type waiter struct {
	spec     *runtimev1.OpenTransfer
	attached chan *transfer
	// gone closes when the admin call stops waiting.
	gone chan struct{}
}

// transfer is an attached Transfer stream; release lets the gateway's
// handler return, which ends the stream.
type transfer struct {
	Stream
	done chan struct{}
	once sync.Once
}

func (t *transfer) release() { t.once.Do(func() { close(t.done) }) }

func newBroker() *broker { return &broker{waiting: map[uuid.UUID]*waiter{}} }

func (b *broker) register(id uuid.UUID, spec *runtimev1.OpenTransfer) *waiter {
	w := &waiter{spec: spec, attached: make(chan *transfer), gone: make(chan struct{})}
	b.mu.Lock()
	b.waiting[id] = w
	b.mu.Unlock()
	return w
}

func (b *broker) unregister(id uuid.UUID) {
	b.mu.Lock()
	w, ok := b.waiting[id]
	delete(b.waiting, id)
	b.mu.Unlock()
	if ok {
		close(w.gone)
	}
}

func (b *broker) lookup(id uuid.UUID) (*waiter, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w, ok := b.waiting[id]
	return w, ok
}

// errNotWaiting: no admin call waits for the operation (it ended, or
// another stream attached first).
var errNotWaiting = errors.New("no file operation waits for this transfer")

// attach hands s to the admin call waiting for operation id and blocks
// until that call is done with it or ctx ends.
func (b *broker) attach(ctx context.Context, id uuid.UUID, s Stream) error {
	w, ok := b.lookup(id)
	if !ok {
		return errNotWaiting
	}
	t := &transfer{Stream: s, done: make(chan struct{})}
	select {
	case w.attached <- t:
	case <-w.gone:
		return errNotWaiting
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-t.done:
	case <-ctx.Done():
	}
	return nil
}
