package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"berth.dev/core/store/db"
	"berth.dev/core/store/pgerr"
)

// EventsChannel is the PostgreSQL notification channel of Core's events
// (core/events): a committed write queues "kind:id" on it, which every
// Core process's listener (ListenEvents) hears, its own included. It makes
// lifecycle work event-driven across Core processes (a standby that took
// the lease over hears writes it did not make); the workers' periodic
// scan stays the safety net for a lost notification.
const EventsChannel = "berth_events"

// NodeWorkEvent is the kind of the event that tells the lifecycle worker
// of a node (the id) it has work: core/events' NodeWork.
const NodeWorkEvent = "node_work"

// DirectWorkEvent is the kind of the event that tells the direct lane's
// lifecycle worker (DirectLane, uuid.Nil) it has work: core/events'
// DirectWork. Its id is always the nil UUID.
const DirectWorkEvent = "direct_work"

// notifyNodeWork queues the work event of lane in the caller's
// transaction: a NodeWorkEvent for a node, a DirectWorkEvent for the
// direct lane (DirectLane). It is delivered when the transaction commits,
// never when it rolls back.
func notifyNodeWork(ctx context.Context, q *db.Queries, lane uuid.UUID) error {
	if lane == DirectLane {
		return q.NotifyEvent(ctx, db.NotifyEventParams{Kind: DirectWorkEvent, ID: DirectLane.String()})
	}
	return q.NotifyEvent(ctx, db.NotifyEventParams{Kind: NodeWorkEvent, ID: lane.String()})
}

// ListenEvents listens on EventsChannel on a connection of its own
// (outside the pool, whose connections stay for queries) and calls
// deliver with the payload of every notification, until ctx ends (nil)
// or the connection fails (the error; the caller listens again). deliver
// must not block: it runs on the listening goroutine.
func (s *Store) ListenEvents(ctx context.Context, deliver func(payload string)) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("listen events: %w", pgerr.Classify(err))
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if _, err := conn.Exec(ctx, "LISTEN "+EventsChannel); err != nil {
		return fmt.Errorf("listen events: %w", pgerr.Classify(err))
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("listen events: %w", pgerr.Classify(err))
		}
		deliver(n.Payload)
	}
}
