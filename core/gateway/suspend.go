package gateway

import (
	"context"
	"errors"
	"io"

	"github.com/google/uuid"

	runtimev1 "berth.dev/proto/berth/runtime/v1"
	"berth.dev/sandbox/errdefs"

	"berth.dev/core/store"
)

// suspension (at the connection's start and on the lifecycle worker's
// announcement) delivers the quiesce of an armed suspension (the lifecycle
// worker armed it: store.ArmSuspension) to the connection's Runtime, once
// per operation and connection, and only while no Turn runs on it (none
// is claimed once the suspension is armed). A suspension that ended since
// (aborted: the compute runs on; or captured) ends the connection: the
// Runtime closed its admission, and reconnects with it open (or, captured,
// does not reconnect until its restore wakes it).
func (c *conn) suspension(ctx context.Context) error {
	a, err := c.g.cfg.Store.GetAllocation(ctx, c.grant.Connection.AllocationID)
	if err != nil {
		return c.storeErr("read allocation", err)
	}
	return c.followPhase(a)
}

// followPhase is suspension with the connection's allocation as read
// (housekeeping passes the one its Session read holds).
func (c *conn) followPhase(a store.Allocation) error {
	switch a.ComputePhase {
	case store.PhaseQuiescing:
		op := *a.Suspension.Operation
		if c.quiesce == op || c.current != nil {
			return nil
		}
		c.quiesce = op
		if err := c.s.Send(&runtimev1.ConnectResponse{Message: &runtimev1.ConnectResponse_Quiesce{
			Quiesce: &runtimev1.Quiesce{SuspensionToken: op.String()}}}); err != nil {
			return io.EOF
		}
		c.log.Info("runtime asked to quiesce")
		return nil
	case store.PhaseRunning:
		if c.quiesce != uuid.Nil {
			c.log.Info("suspension ended without a capture; the runtime reconnects")
			return errNotAdmit
		}
		return nil
	}
	c.log.Info("compute suspended; connection ends")
	return errNotAdmit
}

// quiesceAcked records the Runtime's acknowledgement of token, which must
// be the operation this connection asked for. An acknowledgement of a
// suspension that ended meanwhile ends the connection.
func (c *conn) quiesceAcked(ctx context.Context, token string) error {
	if c.quiesce == uuid.Nil || token != c.quiesce.String() {
		return errInvalid
	}
	err := c.g.cfg.Suspension.QuiesceAcknowledged(ctx, c.grant.Connection.AllocationID, c.quiesce)
	if errors.Is(err, errdefs.ErrFenced) && !errors.Is(err, store.ErrSuperseded) {
		c.log.Info("quiesce acknowledged after the suspension ended")
		return errNotAdmit
	}
	if err != nil {
		return c.storeErr("record quiesce ack", err)
	}
	c.log.Info("runtime quiesced")
	return nil
}

// quiesceRejected aborts the suspension the Runtime refused (its
// admission is unchanged, so the connection goes on). The reason is
// logged only as one of the protocol's fixed codes.
func (c *conn) quiesceRejected(ctx context.Context, token, reason string) error {
	if c.quiesce == uuid.Nil || token != c.quiesce.String() {
		return errInvalid
	}
	if reason != runtimev1.ReasonTurnRunning && reason != runtimev1.ReasonParkFailed && reason != runtimev1.ReasonFileWorkPending {
		reason = "other"
	}
	op := c.quiesce
	c.quiesce = uuid.Nil
	err := c.g.cfg.Suspension.QuiesceRejected(ctx, c.grant.Connection.AllocationID, op)
	if errors.Is(err, errdefs.ErrFenced) && !errors.Is(err, store.ErrSuperseded) {
		return nil // already ended
	}
	if err != nil {
		return c.storeErr("abort quiesce", err)
	}
	c.log.Info("runtime refused to quiesce", "reason", reason)
	return nil
}
