package events

import (
	"context"
	"log/slog"
	"time"
)

// Listener listens on the store's events channel on a connection of its
// own, calling deliver with each notification's payload, until ctx ends
// (nil) or the connection fails (the error): store.Store.ListenEvents.
type Listener func(ctx context.Context, deliver func(payload string)) error

// Feed publishes on b what listen hears from every Core process (the
// kinds that cross, Kind.Crosses; anything else is ignored) until ctx
// ends. A failed listen is logged and listened again after retry: what
// was committed meanwhile is lost here and found by the scans.
func (b *Bus) Feed(ctx context.Context, listen Listener, retry time.Duration, log *slog.Logger) {
	deliver := func(payload string) {
		if e, ok := Parse(payload); ok {
			b.Publish(e)
		}
	}
	for {
		if err := listen(ctx, deliver); err != nil {
			log.Warn("listen for events", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(retry):
		}
	}
}
