package turns

import (
	"sync"

	"github.com/google/uuid"
)

// Hub wakes the goroutines that wait for news about a key (a Session or a
// Turn id) in this process: the gateway's dispatch loop and output
// streams. It only shortens waits; every waiter also polls the database,
// so a missed wake-up delays, never loses, work.
type Hub struct {
	mu      sync.Mutex
	waiters map[uuid.UUID]chan struct{}
}

// NewHub returns an empty Hub.
func NewHub() *Hub { return &Hub{waiters: make(map[uuid.UUID]chan struct{})} }

// Wait returns a channel that is closed at the next Notify of key.
func (h *Hub) Wait(key uuid.UUID) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	ch, ok := h.waiters[key]
	if !ok {
		ch = make(chan struct{})
		h.waiters[key] = ch
	}
	return ch
}

// Notify wakes every waiter of keys.
func (h *Hub) Notify(keys ...uuid.UUID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, k := range keys {
		if ch, ok := h.waiters[k]; ok {
			close(ch)
			delete(h.waiters, k)
		}
	}
}
