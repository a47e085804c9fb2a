package store

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/store/db"
	"berth.dev/core/store/pgerr"
	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox/errdefs"
)

// The classes of a refused Runtime authentication. Each is a distinct
// sentinel so the gateway maps it to its fixed wire reason.
var (
	// ErrRuntimeCredential: no allocation has this device, or the
	// credential's digest does not match. The Runtime must stop.
	ErrRuntimeCredential = fmt.Errorf("runtime credential rejected: %w", errdefs.ErrOwnership)
	// ErrRuntimeRevoked: terminal cleanup revoked the device (see
	// Termination), the device's Session is being deleted or its
	// allocation is in cleanup. The Runtime must stop.
	ErrRuntimeRevoked = fmt.Errorf("runtime revoked: %w", errdefs.ErrFailedPrecondition)
	// ErrRuntimeNotAdmitted: the allocation's creation is not settled with
	// a running resource yet, or this Core is not the current owner. The
	// Runtime may retry.
	ErrRuntimeNotAdmitted = fmt.Errorf("runtime not admitted: %w", errdefs.ErrFailedPrecondition)
)

// RuntimeConnection is an accepted Runtime connection.
type RuntimeConnection struct {
	ID             uuid.UUID
	AllocationID   uuid.UUID
	Generation     int64
	OwnerEpoch     uint64
	RuntimeVersion string
	ConnectedAt    time.Time
	PreparedAt     *time.Time
	LastSeenAt     time.Time
	DisconnectedAt *time.Time
}

func runtimeConnectionFromRow(r db.RuntimeConnection) RuntimeConnection {
	return RuntimeConnection{
		ID: r.ID, AllocationID: r.AllocationID, Generation: r.Generation, OwnerEpoch: uint64(r.OwnerEpoch),
		RuntimeVersion: r.RuntimeVersion, ConnectedAt: r.ConnectedAt, PreparedAt: r.PreparedAt,
		LastSeenAt: r.LastSeenAt, DisconnectedAt: r.DisconnectedAt,
	}
}

// RuntimeGrant is what an accepted connection may act for.
type RuntimeGrant struct {
	Connection RuntimeConnection
	// Conn is the connection's authority for its writes (Runtime's and
	// ClaimNextTurn): only AcceptRuntime makes one.
	Conn          RuntimeConn
	SessionID     uuid.UUID
	EnvironmentID uuid.UUID
	// Unconfirmed are the Turns that ran on the connection this one
	// replaced: their results can no longer arrive.
	Unconfirmed []uuid.UUID
}

// RuntimeConn is one accepted Runtime connection's authority: every write
// made for a connection (Runtime's, and Owner.ClaimNextTurn) takes it
// instead of raw ids, so a write for a connection cannot be made without
// that connection's grant (RuntimeGrant.Conn, made only by
// AcceptRuntime). Its fields are unexported; the zero value is refused
// with ErrNoRuntimeConn. The SQL still checks that the connection is open
// (and, where it did, under the epoch holding the lease): a value of a
// connection closed or replaced since is fenced there.
type RuntimeConn struct {
	id, session uuid.UUID
}

// ID is the connection's id.
func (c RuntimeConn) ID() uuid.UUID { return c.id }

// SessionID is the Session the connection serves.
func (c RuntimeConn) SessionID() uuid.UUID { return c.session }

// ErrNoRuntimeConn refuses a connection write given the zero RuntimeConn:
// a value not made by AcceptRuntime, a caller's bug.
var ErrNoRuntimeConn error = errdefs.Invalid("runtime_connection", "must be the grant of an accepted connection (AcceptRuntime)")

// param is c's connection id for a query, or ErrNoRuntimeConn.
func (c RuntimeConn) param() (uuid.UUID, error) {
	if c.id == uuid.Nil || c.session == uuid.Nil {
		return uuid.Nil, ErrNoRuntimeConn
	}
	return c.id, nil
}

// AcceptRuntimeParams is the input of AcceptRuntime.
type AcceptRuntimeParams struct {
	// ConnectionID is the new connection's id (the caller's).
	ConnectionID uuid.UUID
	DeviceID     uuid.UUID
	// Credential is the presented credential; only its digest is compared.
	Credential     runtimebootstrap.Secret
	RuntimeVersion string
}

// maxRuntimeVersion bounds the Runtime's reported version (bytes).
const maxRuntimeVersion = 64

// AcceptRuntime authenticates a Runtime device and records its new
// connection, in one transaction under the allocation's row lock: the
// device's allocation must carry the credential's digest (compared in
// constant time), belong to an active Session, and have settled creation
// with a running resource and completed bootstrap, and compute that runs
// (PhaseRunning, or PhaseQuiescing not yet acknowledged); the Core must hold
// the Owner's epoch. An open connection of the same allocation is
// closed and the Turns that ran on it become unconfirmed. The new
// connection's generation is one more than any before it.
func (s *Owner) AcceptRuntime(ctx context.Context, p AcceptRuntimeParams) (RuntimeGrant, error) {
	epoch, err := epochParam(s.epoch)
	if err != nil {
		return RuntimeGrant{}, err
	}
	if p.ConnectionID == uuid.Nil {
		return RuntimeGrant{}, errdefs.Invalid("connection_id", "must be set")
	}
	if len(p.RuntimeVersion) > maxRuntimeVersion {
		p.RuntimeVersion = p.RuntimeVersion[:maxRuntimeVersion]
	}
	p.RuntimeVersion = printableASCII(p.RuntimeVersion)
	digest := sha256.Sum256([]byte(p.Credential.Reveal()))
	var g RuntimeGrant
	err = s.inTx(ctx, func(q *db.Queries) error {
		a, err := q.GetDeviceAllocation(ctx, p.DeviceID)
		if errors.Is(pgerr.Classify(err), errdefs.ErrNotFound) {
			return ErrRuntimeCredential
		}
		if err != nil {
			return err
		}
		if err := admit(a, digest[:]); err != nil {
			return err
		}
		if g.Unconfirmed, err = closeOpenConnections(ctx, q, a.ID); err != nil {
			return err
		}
		gen, err := q.NextRuntimeConnectionGeneration(ctx, a.ID)
		if err != nil {
			return err
		}
		row, err := q.InsertRuntimeConnection(ctx, db.InsertRuntimeConnectionParams{
			ID: p.ConnectionID, AllocationID: a.ID, Generation: gen, OwnerEpoch: epoch, RuntimeVersion: p.RuntimeVersion,
		})
		if errors.Is(pgerr.Classify(err), errdefs.ErrNotFound) {
			return ErrRuntimeNotAdmitted // another Core owns the installation now
		}
		if err != nil {
			return err
		}
		g.Connection = runtimeConnectionFromRow(row)
		g.SessionID, g.EnvironmentID = a.SessionID, a.EnvironmentID
		g.Conn = RuntimeConn{id: row.ID, session: a.SessionID}
		return nil
	})
	if err != nil {
		return RuntimeGrant{}, fmt.Errorf("accept runtime: %w", err)
	}
	return g, nil
}

// admit is AcceptRuntime's decision on device allocation a for a
// credential of digest: ErrRuntimeCredential, ErrRuntimeRevoked,
// ErrRuntimeNotAdmitted or nil.
func admit(a db.GetDeviceAllocationRow, digest []byte) error {
	if subtle.ConstantTimeCompare(a.CredentialDigest, digest) != 1 {
		return ErrRuntimeCredential
	}
	state := AllocationState(a.State)
	if SessionState(a.SessionState) != SessionActive || a.DeviceRevokedAt != nil ||
		state.inCleanup() || state == AllocationReleased {
		return ErrRuntimeRevoked
	}
	if state != AllocationRunning || !a.CreateSettled || !a.BootstrapComplete {
		return ErrRuntimeNotAdmitted
	}
	// A capture or restore is under way, or the compute is suspended:
	// the Runtime of a restored incarnation is admitted once Core
	// recorded the restore (PhaseRunning). A quiescing one is admitted
	// until it acknowledged, so a transient disconnect can retry the
	// armed suspension; once acknowledged it is not (a welcome would
	// remove its park marker before the capture) until the suspension
	// ends.
	if p := ComputePhase(a.ComputePhase); p != PhaseRunning && (p != PhaseQuiescing || a.QuiesceAckedAt != nil) {
		return ErrRuntimeNotAdmitted
	}
	return nil
}

// closeOpenConnections closes allocation id's open Runtime connections
// and makes the Turns that ran on them unconfirmed (returned).
func closeOpenConnections(ctx context.Context, q *db.Queries, id uuid.UUID) ([]uuid.UUID, error) {
	closed, err := q.CloseOpenRuntimeConnections(ctx, id)
	if err != nil {
		return nil, err
	}
	var unconfirmed []uuid.UUID
	for _, c := range closed {
		rows, err := q.UnconfirmTurnsOfConnection(ctx, &c)
		if err != nil {
			return nil, err
		}
		unconfirmed = append(unconfirmed, rows...)
	}
	return unconfirmed, nil
}

// MarkRuntimePrepared records that the connection's Runtime finished its
// common preparation. ErrNotFound when the connection is closed or belongs
// to a superseded owner.
func (s *Runtime) MarkRuntimePrepared(ctx context.Context, c RuntimeConn) (RuntimeConnection, error) {
	id, err := c.param()
	if err != nil {
		return RuntimeConnection{}, fmt.Errorf("mark runtime prepared: %w", err)
	}
	row, err := s.q.MarkRuntimePrepared(ctx, id)
	if err != nil {
		return RuntimeConnection{}, wrap("mark runtime prepared", err)
	}
	return runtimeConnectionFromRow(row), nil
}

// TouchRuntimeConnection records that the connection answered (a
// keepalive); ErrNotFound when it is closed.
func (s *Runtime) TouchRuntimeConnection(ctx context.Context, c RuntimeConn) error {
	id, err := c.param()
	if err != nil {
		return fmt.Errorf("touch runtime connection: %w", err)
	}
	n, err := s.q.TouchRuntimeConnection(ctx, id)
	if err != nil {
		return wrap("touch runtime connection", err)
	}
	if n == 0 {
		return fmt.Errorf("touch runtime connection: %w", errdefs.ErrNotFound)
	}
	return nil
}

// CloseRuntimeConnection ends a connection and makes the Turn running on
// it unconfirmed (returned). Closing twice changes nothing the second
// time.
func (s *Runtime) CloseRuntimeConnection(ctx context.Context, c RuntimeConn) ([]uuid.UUID, error) {
	id, err := c.param()
	if err != nil {
		return nil, fmt.Errorf("close runtime connection: %w", err)
	}
	var ids []uuid.UUID
	err = s.inTx(ctx, func(q *db.Queries) error {
		if _, err := q.CloseRuntimeConnection(ctx, id); err != nil {
			return err
		}
		var err error
		ids, err = q.UnconfirmTurnsOfConnection(ctx, &id)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("close runtime connection: %w", err)
	}
	return ids, nil
}

// GetRuntimeConnection returns a connection by id, and the database clock
// at the read: Core's own clock may be off the database's, so whoever
// compares the time with a database timestamp (a Turn's dispatched_at or
// cancel_requested_at) takes now from here.
func (s *Reader) GetRuntimeConnection(ctx context.Context, id uuid.UUID) (conn RuntimeConnection, now time.Time, err error) {
	row, err := s.q.GetRuntimeConnection(ctx, id)
	if err != nil {
		return RuntimeConnection{}, time.Time{}, wrap("get runtime connection", err)
	}
	return runtimeConnectionFromRow(row.RuntimeConnection), row.ReadAt, nil
}

// RuntimeReadiness is the Runtime half of an Environment's readiness.
type RuntimeReadiness struct {
	// Connected: an open connection accepted under the current owner
	// epoch.
	Connected bool
	// Prepared: that connection reported its common preparation.
	Prepared bool
	// Generation of that connection (0 when none).
	Generation int64
}

// RuntimeReadiness returns, per allocation id, the readiness of its open
// connection; allocations without one are absent from the map.
func (s *Reader) RuntimeReadiness(ctx context.Context, allocationIDs []uuid.UUID) (map[uuid.UUID]RuntimeReadiness, error) {
	out := make(map[uuid.UUID]RuntimeReadiness, len(allocationIDs))
	if len(allocationIDs) == 0 {
		return out, nil
	}
	rows, err := s.q.ListRuntimeReadiness(ctx, allocationIDs)
	if err != nil {
		return nil, wrap("runtime readiness", err)
	}
	for _, r := range rows {
		out[r.AllocationID] = RuntimeReadiness{Connected: true, Prepared: r.PreparedAt != nil, Generation: r.Generation}
	}
	return out, nil
}

// printableASCII drops every byte outside printable ASCII, so a reported
// version can never carry control characters into a log or the database.
func printableASCII(s string) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x20 && s[i] < 0x7f {
			b = append(b, s[i])
		}
	}
	return string(b)
}
