package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"berth.dev/core/store/db"
	"berth.dev/core/store/pgerr"
)

// NodeWorkChannel is the PostgreSQL notification channel on which a
// committed write tells the lifecycle worker of a node that it has work:
// its payload is the node id. It makes lifecycle work event-driven across
// Core processes (a standby that took the lease over hears writes it did
// not make); the workers' periodic scan stays the safety net for a lost
// notification.
const NodeWorkChannel = "berth_node_work"

// notifyNodeWork queues a notification for node in the caller's
// transaction: it is delivered when the transaction commits, never when
// it rolls back.
func notifyNodeWork(ctx context.Context, q *db.Queries, node uuid.UUID) error {
	if node == uuid.Nil {
		return nil
	}
	return q.NotifyNodeWork(ctx, node.String())
}

// ListenNodeWork listens on NodeWorkChannel on a connection of its own
// (outside the pool, whose connections stay for queries) and calls wake
// with the node of every notification, until ctx ends (nil) or the
// connection fails (the error; the caller listens again). wake must not
// block: it runs on the listening goroutine.
func (s *Store) ListenNodeWork(ctx context.Context, wake func(uuid.UUID)) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("listen node work: %w", pgerr.Classify(err))
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if _, err := conn.Exec(ctx, "LISTEN "+NodeWorkChannel); err != nil {
		return fmt.Errorf("listen node work: %w", pgerr.Classify(err))
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("listen node work: %w", pgerr.Classify(err))
		}
		if id, err := uuid.Parse(n.Payload); err == nil {
			wake(id)
		}
	}
}
