package store

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"berth.dev/core/store/db"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
)

// SessionState is a Session's state.
type SessionState string

// The Session states. A Session is active until its deletion is requested;
// deletion keeps the rows (and the allocation's cleanup ownership) until
// cleanup is confirmed.
const (
	SessionActive          SessionState = "active"
	SessionDeleteRequested SessionState = "delete_requested"
	// SessionArchived: an administrator archived it (ArchiveSession): it
	// keeps its Turns and output and runs nothing.
	SessionArchived SessionState = "archived"
)

// EnvironmentState is the public state of a Session's Environment. It is
// separate from the allocation's state (private compute ownership).
type EnvironmentState string

// The Environment states.
const (
	EnvironmentPending EnvironmentState = "pending"
	EnvironmentReady   EnvironmentState = "ready"
	EnvironmentFailed  EnvironmentState = "failed"
	EnvironmentExpired EnvironmentState = "expired"
)

// maxDisplayNameLen bounds a Session's display name (characters).
const maxDisplayNameLen = 200

// ErrGenerationMoved is the class (errdefs.ErrFailedPrecondition) of a
// CreateSession prepared for a deployment generation that is no longer
// the current one: a replacement committed in between. Nothing was
// written; the request prepared again for the current generation may
// succeed (core/sessions does that once).
var ErrGenerationMoved error = errdefs.Refuse(errdefs.ErrFailedPrecondition, "deployment_generation_moved",
	"a newer deployment generation was committed while the Session was admitted: retry the request")

// ErrNoCapacity is the class (errdefs.ErrFailedPrecondition) of a
// CreateSession that found no eligible node with room (enabled, present by
// its durable record, ready for the generation, within capacity): nothing
// was written, and the same request may succeed once capacity frees up or
// a node comes online. It is a refusal (reason no_ready_node_with_capacity)
// whose message tells the operator what to do.
var ErrNoCapacity error = errdefs.Refuse(errdefs.ErrFailedPrecondition, "no_ready_node_with_capacity",
	"no ready node has capacity: enable a node, check that its node agent reports health, or delete sessions")

// Session is a tenant's Session.
type Session struct {
	ID       uuid.UUID
	TenantID uuid.UUID
	// ProjectID is the project the Session belongs to; TenantID is that
	// project's tenant (a composite foreign key holds it).
	ProjectID         uuid.UUID
	DisplayName       string
	State             SessionState
	RequestID         uuid.UUID
	CreatedAt         time.Time
	DeleteRequestedAt *time.Time
	// ArchivedAt is when the Session was archived (kept if it is deleted
	// later); nil when it never was.
	ArchivedAt *time.Time
}

// Environment is a Session's Environment.
type Environment struct {
	ID        uuid.UUID
	SessionID uuid.UUID
	TenantID  uuid.UUID
	State     EnvironmentState
	// FailureCode is the recorded reason of a failed Environment (for
	// example FailureCreateFailed); empty otherwise.
	FailureCode string
	// TerminalCause is why the Environment ended (terminal cleanup, see
	// Termination); empty while it lives. TerminatedAt is when.
	TerminalCause TerminalCause
	TerminatedAt  *time.Time
	CreatedAt     time.Time
}

// SessionBundle is what CreateSession commits together.
type SessionBundle struct {
	Session     Session
	Environment Environment
	Placement   Placement
	Allocation  Allocation
	// Created is false when the request id had already created these rows
	// (a retry): nothing of the retry's input was stored, so the caller
	// must use the returned ids, digest and receipt and discard its own.
	Created bool
}

// CreateSessionParams is the input of CreateSession. Every id, the
// credential digest and the create receipt are the caller's: the store
// makes none.
type CreateSessionParams struct {
	// RequestID identifies the create request within ProjectID; a retry
	// reuses it. The same id in another project is another request.
	RequestID uuid.UUID
	// ProjectID is the live project the Session is created in. TenantID
	// must be its tenant: CreateSession reads the project in its
	// transaction and refuses another tenant (ErrProjectNotFound).
	ProjectID   uuid.UUID
	TenantID    uuid.UUID
	DisplayName string

	SessionID     uuid.UUID
	EnvironmentID uuid.UUID
	AllocationID  uuid.UUID // fresh, never the Environment id
	DeviceID      uuid.UUID
	// CredentialDigest is the SHA-256 of the dedicated daemon credential;
	// the credential itself never reaches the store.
	CredentialDigest []byte
	// CredentialCiphertext and CredentialNonce are the credential sealed by
	// the caller (secrets.Key.Seal with secrets.DeviceCredential), kept so the one
	// permitted Create sends the original credential, also after a retry
	// or a restart. The store never opens it.
	CredentialCiphertext []byte
	CredentialNonce      []byte
	// CreateReceipt is the fresh receipt that permits exactly one Create
	// (see ClaimCreate).
	CreateReceipt uuid.UUID

	// Generation is the deployment generation the compute belongs to.
	// Placement chooses only nodes whose durable presence is ready for it.
	Generation int64
	// Resources is what one sandbox of the deployment needs; placement
	// bounds each node by how many of them its reported CPU, memory and
	// free disk fit (a zero need bounds nothing).
	Resources sandbox.Resources
	// MaxActive is the deployment's per-node bound on held Environments
	// (unreleased placements or allocations).
	MaxActive int
}

func (p CreateSessionParams) validate() error {
	for _, f := range []struct {
		name string
		id   uuid.UUID
	}{
		{"request_id", p.RequestID},
		{"project_id", p.ProjectID},
		{"tenant_id", p.TenantID},
		{"session_id", p.SessionID},
	} {
		if f.id == uuid.Nil {
			return errdefs.Invalid(f.name, "must not be the nil UUID")
		}
	}
	if err := validateNewAllocation(p.EnvironmentID, p.AllocationID, p.DeviceID, p.CreateReceipt,
		p.CredentialDigest, p.CredentialNonce, p.CredentialCiphertext); err != nil {
		return err
	}
	switch {
	case !utf8.ValidString(p.DisplayName) || utf8.RuneCountInString(p.DisplayName) > maxDisplayNameLen:
		return errdefs.Invalid("display_name", fmt.Sprintf("must be valid UTF-8 of at most %d characters", maxDisplayNameLen))
	case p.Generation < 1:
		return errdefs.Invalid("generation", "must be positive")
	case p.MaxActive < 1:
		return errdefs.Invalid("max_active", "must be positive")
	case p.Resources.CPUMillis < 0 || p.Resources.MemoryBytes < 0 || p.Resources.DiskBytes < 0:
		return errdefs.Invalid("resources", "must not be negative")
	}
	return nil
}

// CreateSession commits, in one transaction, a Session, its Environment,
// the Environment's placement on a node the store chooses and its
// allocation (Reference, node, generation, credential digest, device and
// fresh create receipt), all before any Create.
//
// Placement locks the chosen node's load row (node_load, kept by the
// database) until the transaction commits, and the placement raises that
// count in the same transaction, so a node never holds more than
// MaxActive Environments (nor more than its reported capacity fits);
// concurrent creations lock different nodes and run side by side (see
// ChoosePlacementNode). It reads durable node presence
// only (node_presence, see ChoosePlacementNode in queries/placements.sql):
// an enabled node whose connection is held, ready for Generation, with a
// health report younger than 45 seconds by the database clock, recorded
// under the owner epoch holding the execution lease. No in-memory list
// takes part, so a node with a stale record is never chosen. The chosen
// node is the one holding the fewest Environments (ties: lowest id). No
// node with room is ErrNoCapacity and writes nothing. max_retained is not
// counted yet: nothing can be retained before suspension exists (see
// ChoosePlacementNode for where it plugs in).
//
// Before any node row it locks its project's project_load row (the lock
// order request lock, owner fence, deployment share lock, project share
// lock, project load row, node row; migration 0024): a project holding
// its max_active_sessions actively is ErrProjectActiveLimit and nothing is
// written, so a project at its limit never waits for or holds a node
// lock, and only its own creations queue on its row.
//
// It is a lifecycle write: ErrSuperseded (ErrFenced) unless the Store's
// owner epoch holds the execution lease (see Owner).
//
// While the provider is disabled (SetProviderDisabled) a new Session is
// ErrProviderDisabled and nothing is written; a retry of a committed
// request still returns its rows.
//
// The project must be live and of TenantID, read under a share lock in the
// transaction: otherwise ErrProjectNotFound and nothing is written.
//
// It is idempotent by (ProjectID, RequestID): a retry, also one that races the
// original, returns the rows the first call committed (Created false) and
// writes nothing, whatever ids it carries, so a retry keeps its original
// node even while that node is offline. The same RequestID in the project
// with another tenant or display name is ErrExists.
func (s *Owner) CreateSession(ctx context.Context, p CreateSessionParams) (SessionBundle, error) {
	const op = "create session"
	if err := p.validate(); err != nil {
		return SessionBundle{}, fmt.Errorf("%s: %w", op, err)
	}
	var out SessionBundle
	err := s.inTx(ctx, func(q *db.Queries) error {
		// The request's lock comes first, so the request id lookup below
		// serializes with a concurrent retry of the same request; the owner
		// fence follows it, so the lease row is held only while placing.
		if err := q.LockSessionRequest(ctx, db.LockSessionRequestParams{ProjectID: p.ProjectID, RequestID: p.RequestID}); err != nil {
			return err
		}
		if err := fenceOwner(ctx, q, s.epoch); err != nil {
			return err
		}
		if b, found, err := committedSession(ctx, q, p); err != nil || found {
			out = b
			return err
		}
		// A retry of a committed request returned above; a new Session
		// needs the provider enabled.
		if err := admitGeneration(ctx, q, p.Generation); err != nil {
			return err
		}
		proj, err := admitProject(ctx, q, p.ProjectID, p.TenantID)
		if err != nil {
			return err
		}
		// The project's load row before any node's (migration 0024): a
		// project at its limit is refused here, never reading or locking a
		// node row.
		if err := admitProjectLoad(ctx, q, proj); err != nil {
			return err
		}
		lane, err := choosePlacementLane(ctx, q, p)
		if err != nil {
			return err
		}
		if out, err = insertSessionBundle(ctx, q, p, lane); err != nil {
			return err
		}
		// The lane's worker creates the compute at once, not at its next
		// scan.
		return notifyNodeWork(ctx, q, out.Placement.NodeID)
	})
	if err != nil {
		return SessionBundle{}, wrap(op, err)
	}
	return out, nil
}

// committedSession looks p.RequestID up in p.ProjectID: found, it returns the rows the
// first call committed (a retry writes nothing), or ErrExists when the
// request id was used with another tenant or display name. The caller
// holds the request's lock, so a concurrent retry waits for this answer.
func committedSession(ctx context.Context, q *db.Queries, p CreateSessionParams) (SessionBundle, bool, error) {
	existing, err := q.GetSessionByRequestID(ctx, db.GetSessionByRequestIDParams{ProjectID: p.ProjectID, RequestID: p.RequestID})
	switch {
	case err == nil:
		if existing.TenantID != p.TenantID || existing.DisplayName != p.DisplayName {
			return SessionBundle{}, true, fmt.Errorf("request id already used by another request: %w", errdefs.ErrExists)
		}
		b, err := loadBundle(ctx, q, existing)
		return b, true, err
	case !errors.Is(err, pgx.ErrNoRows):
		return SessionBundle{}, false, err
	}
	return SessionBundle{}, false, nil
}

// admitGeneration admits a new Session: the provider is enabled
// (ErrProviderDisabled), and the admission is fenced by the generation it
// was prepared for: a replacement committed since then (which waits for
// this transaction's share lock, and this one for its) moved it
// (ErrGenerationMoved).
func admitGeneration(ctx context.Context, q *db.Queries, generation int64) error {
	current, err := admitProvider(ctx, q)
	if err != nil {
		return err
	}
	if current != 0 && current != generation {
		return fmt.Errorf("admission for generation %d, current %d: %w", generation, current, ErrGenerationMoved)
	}
	return nil
}

// choosePlacementNode picks the node for a new Session of p's generation
// and resources, within each node's capacity. Every node with room may be
// locked by a concurrent placement, so before deciding there is none
// (ErrNoCapacity) it waits for them and asks again.
func choosePlacementNode(ctx context.Context, q *db.Queries, p CreateSessionParams) (db.ChoosePlacementNodeRow, error) {
	choose := db.ChoosePlacementNodeParams{
		Generation:  p.Generation,
		MaxActive:   int64(p.MaxActive),
		CPUMillis:   p.Resources.CPUMillis,
		MemoryBytes: p.Resources.MemoryBytes,
		DiskBytes:   p.Resources.DiskBytes,
	}
	chosen, err := q.ChoosePlacementNode(ctx, choose)
	if errors.Is(err, pgx.ErrNoRows) {
		var w db.ChoosePlacementNodeWaitRow
		w, err = q.ChoosePlacementNodeWait(ctx, db.ChoosePlacementNodeWaitParams(choose))
		chosen = db.ChoosePlacementNodeRow(w)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return db.ChoosePlacementNodeRow{}, ErrNoCapacity
	}
	if err != nil {
		return db.ChoosePlacementNodeRow{}, err
	}
	return chosen, nil
}

// insertSessionBundle writes a new Session's rows: the Session, its
// Environment, the placement on node and the allocation with its device
// credential and create receipt.
func insertSessionBundle(ctx context.Context, q *db.Queries, p CreateSessionParams, node uuid.UUID) (SessionBundle, error) {
	sess, err := q.InsertSession(ctx, db.InsertSessionParams{
		ID: p.SessionID, TenantID: p.TenantID, ProjectID: p.ProjectID, DisplayName: p.DisplayName, RequestID: p.RequestID,
	})
	if err != nil {
		return SessionBundle{}, err
	}
	env, err := q.InsertEnvironment(ctx, db.InsertEnvironmentParams{
		ID: p.EnvironmentID, SessionID: sess.ID, TenantID: sess.TenantID,
	})
	if err != nil {
		return SessionBundle{}, err
	}
	pl, err := q.InsertPlacement(ctx, db.InsertPlacementParams{
		EnvironmentID: env.ID, NodeID: laneParam(node), Generation: p.Generation,
	})
	if err != nil {
		return SessionBundle{}, err
	}
	alloc, err := insertAllocation(ctx, q, env, pl, p.AllocationID, p.DeviceID, p.CreateReceipt,
		p.CredentialDigest, p.CredentialNonce, p.CredentialCiphertext)
	if err != nil {
		return SessionBundle{}, err
	}
	return SessionBundle{
		Session:     sessionFromRow(sess),
		Environment: environmentFromRow(env),
		Placement:   placementFromRow(pl),
		Allocation:  allocationFromRow(alloc),
		Created:     true,
	}, nil
}

// loadBundle reads the rows a committed CreateSession wrote for sess. The
// allocation is the Environment's unreleased one; after its release the
// bundle carries the zero Allocation.
func loadBundle(ctx context.Context, q *db.Queries, sess db.Session) (SessionBundle, error) {
	env, err := q.GetEnvironmentBySession(ctx, sess.ID)
	if err != nil {
		return SessionBundle{}, err
	}
	pl, err := q.GetPlacement(ctx, env.ID)
	if err != nil {
		return SessionBundle{}, err
	}
	b := SessionBundle{
		Session:     sessionFromRow(sess),
		Environment: environmentFromRow(env),
		Placement:   placementFromRow(pl),
	}
	alloc, err := q.GetUnreleasedAllocationForEnvironment(ctx, env.ID)
	switch {
	case err == nil:
		b.Allocation = allocationFromRow(alloc)
	case !errors.Is(err, pgx.ErrNoRows):
		return SessionBundle{}, err
	}
	return b, nil
}

// loadBundles is loadBundle for a page of Sessions, in three queries for
// the whole page (Environments, placements, unreleased allocations)
// instead of three per Session: a page of 100 was 301 round trips. A
// Session without its Environment or placement is pgx.ErrNoRows, as in
// loadBundle.
func loadBundles(ctx context.Context, q *db.Queries, sessions []db.Session) ([]SessionBundle, error) {
	if len(sessions) == 0 {
		return []SessionBundle{}, nil
	}
	ids := make([]uuid.UUID, len(sessions))
	for i, s := range sessions {
		ids[i] = s.ID
	}
	envRows, err := q.ListEnvironmentsBySessions(ctx, ids)
	if err != nil {
		return nil, err
	}
	envs := make(map[uuid.UUID]db.Environment, len(envRows))
	envIDs := make([]uuid.UUID, 0, len(envRows))
	for _, e := range envRows {
		envs[e.SessionID] = e
		envIDs = append(envIDs, e.ID)
	}
	plRows, err := q.ListPlacementsByEnvironments(ctx, envIDs)
	if err != nil {
		return nil, err
	}
	pls := make(map[uuid.UUID]db.Placement, len(plRows))
	for _, p := range plRows {
		pls[p.EnvironmentID] = p
	}
	allocRows, err := q.ListUnreleasedAllocationsByEnvironments(ctx, envIDs)
	if err != nil {
		return nil, err
	}
	allocs := make(map[uuid.UUID]db.Allocation, len(allocRows))
	for _, a := range allocRows {
		allocs[a.EnvironmentID] = a
	}
	out := make([]SessionBundle, 0, len(sessions))
	for _, s := range sessions {
		env, ok := envs[s.ID]
		if !ok {
			return nil, pgx.ErrNoRows
		}
		pl, ok := pls[env.ID]
		if !ok {
			return nil, pgx.ErrNoRows
		}
		b := SessionBundle{
			Session:     sessionFromRow(s),
			Environment: environmentFromRow(env),
			Placement:   placementFromRow(pl),
		}
		if a, ok := allocs[env.ID]; ok {
			b.Allocation = allocationFromRow(a)
		}
		out = append(out, b)
	}
	return out, nil
}

// GetSession returns a Session with its Environment, placement and
// unreleased allocation; ErrNotFound when there is no such Session.
func (s *Reader) GetSession(ctx context.Context, id uuid.UUID) (SessionBundle, error) {
	const op = "get session"
	var out SessionBundle
	err := s.inTx(ctx, func(q *db.Queries) error {
		sess, err := q.GetSession(ctx, id)
		if err != nil {
			return err
		}
		out, err = loadBundle(ctx, q, sess)
		return err
	})
	if err != nil {
		return SessionBundle{}, wrap(op, err)
	}
	return out, nil
}

// GetSessionInProject is GetSession within one project: a Session of
// another project is ErrNotFound, as a missing one is, by one indexed
// lookup with the project in its WHERE.
func (s *Reader) GetSessionInProject(ctx context.Context, projectID, id uuid.UUID) (SessionBundle, error) {
	const op = "get session in project"
	var out SessionBundle
	err := s.inTx(ctx, func(q *db.Queries) error {
		sess, err := q.GetSessionInProject(ctx, db.GetSessionInProjectParams{ID: id, ProjectID: projectID})
		if err != nil {
			return err
		}
		out, err = loadBundle(ctx, q, sess)
		return err
	})
	if err != nil {
		return SessionBundle{}, wrap(op, err)
	}
	return out, nil
}

// RequestSessionDeletion marks the Session delete_requested and, in the
// same transaction, runs terminal cleanup of its Environment with cause
// TerminalDeleted (see Termination): the device is revoked, the queued
// Turns end session_deleted, the running Turn's cancellation is requested
// and cleanup of the unreleased allocation is requested, which also spends
// an unclaimed create receipt: a deletion committed first wins over any
// later ClaimCreate. All of it commits or none of it does. The rows stay;
// the allocation is released only after confirmed cleanup and settled
// creation (Release). When the Environment has no unreleased allocation
// its placement is released at once. Calling it again changes nothing. It
// is a lifecycle write, fenced like CreateSession.
func (s *Owner) RequestSessionDeletion(ctx context.Context, id uuid.UUID) (SessionBundle, error) {
	b, _, err := s.DeleteSession(ctx, id)
	return b, err
}

// DeleteSession is RequestSessionDeletion that also returns what its
// terminal cleanup recorded, so the caller can wake the Turns it settled
// or asked to cancel.
func (s *Owner) DeleteSession(ctx context.Context, id uuid.UUID) (SessionBundle, Termination, error) {
	const op = "request session deletion"
	var (
		out  SessionBundle
		term Termination
	)
	err := s.ownedTx(ctx, func(q *db.Queries) error {
		sess, err := q.RequestSessionDeletion(ctx, id)
		if err != nil {
			return err
		}
		env, err := q.GetEnvironmentBySession(ctx, sess.ID)
		if err != nil {
			return err
		}
		if term, err = terminate(ctx, q, env.ID, TerminalDeleted, ""); err != nil {
			return err
		}
		out, err = loadBundle(ctx, q, sess)
		return err
	})
	if err != nil {
		return SessionBundle{}, Termination{}, wrap(op, err)
	}
	return out, term, nil
}

func sessionFromRow(r db.Session) Session {
	return Session{
		ID:                r.ID,
		TenantID:          r.TenantID,
		ProjectID:         r.ProjectID,
		DisplayName:       r.DisplayName,
		State:             SessionState(r.State),
		RequestID:         r.RequestID,
		CreatedAt:         r.CreatedAt,
		DeleteRequestedAt: r.DeleteRequestedAt,
		ArchivedAt:        r.ArchivedAt,
	}
}

func environmentFromRow(r db.Environment) Environment {
	return Environment{
		ID:            r.ID,
		SessionID:     r.SessionID,
		TenantID:      r.TenantID,
		State:         EnvironmentState(r.State),
		FailureCode:   r.FailureCode.String,
		TerminalCause: TerminalCause(r.TerminalCause.String),
		TerminatedAt:  r.TerminatedAt,
		CreatedAt:     r.CreatedAt,
	}
}

// AgeCursor is a position in a listing in creation order: the creation
// time and id of the last row of a page. The zero cursor is the start.
type AgeCursor struct {
	CreatedAt time.Time
	ID        uuid.UUID
}

// ListSessionsByAge returns up to limit (1 to MaxPageSize+1) Sessions
// after cursor after (the zero cursor for the start) in creation order
// (ties by id), each with its Environment, placement and unreleased
// allocation as GetSession reads them. A deleted Session (deletion
// requested and its allocation released) is listed only with
// includeDeleted.
func (s *Reader) ListSessionsByAge(ctx context.Context, limit int, after AgeCursor, includeDeleted bool) (page []SessionBundle, err error) {
	const op = "list sessions by age"
	n, err := limitParam(limit)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	err = s.inTx(ctx, func(q *db.Queries) error {
		rows, err := q.ListSessionsByAge(ctx, db.ListSessionsByAgeParams{
			AfterCreatedAt: after.CreatedAt,
			AfterID:        after.ID,
			IncludeDeleted: includeDeleted,
			PageSize:       n,
		})
		if err != nil {
			return err
		}
		page, err = loadBundles(ctx, q, rows)
		return err
	})
	if err != nil {
		return nil, wrap(op, err)
	}
	return page, nil
}

// ListProjectSessionsByAge is ListSessionsByAge within one project, on
// its own keyset index (sessions_project_created_at_id).
func (s *Reader) ListProjectSessionsByAge(ctx context.Context, projectID uuid.UUID, limit int, after AgeCursor, includeDeleted bool) (page []SessionBundle, err error) {
	const op = "list project sessions by age"
	n, err := limitParam(limit)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	err = s.inTx(ctx, func(q *db.Queries) error {
		rows, err := q.ListProjectSessionsByAge(ctx, db.ListProjectSessionsByAgeParams{
			ProjectID:      projectID,
			AfterCreatedAt: after.CreatedAt,
			AfterID:        after.ID,
			IncludeDeleted: includeDeleted,
			PageSize:       n,
		})
		if err != nil {
			return err
		}
		page, err = loadBundles(ctx, q, rows)
		return err
	})
	if err != nil {
		return nil, wrap(op, err)
	}
	return page, nil
}

// SessionStateCount is how many Sessions whose deletion has not completed
// share one combination of the facts their state is derived from
// (sessions.StateOf): the Session's state, its Environment's and its
// unreleased allocation's.
type SessionStateCount struct {
	Session     SessionState
	Environment EnvironmentState
	// Allocation is the state of the unreleased allocation; empty when
	// the Session has none.
	Allocation    AllocationState
	CreateSettled bool
	Sessions      int64
}

// CountLiveSessions counts the Sessions whose deletion has not completed,
// by the facts their state is derived from (a few rows). It reads every
// Session row once: metrics call it at most once per refresh, never per
// request.
func (s *Reader) CountLiveSessions(ctx context.Context) ([]SessionStateCount, error) {
	return fetchRows("count live sessions", func() ([]db.CountLiveSessionsRow, error) { return s.q.CountLiveSessions(ctx) },
		func(r db.CountLiveSessionsRow) SessionStateCount {
			return SessionStateCount{
				Session: SessionState(r.SessionState), Environment: EnvironmentState(r.EnvironmentState),
				Allocation: AllocationState(r.AllocationState), CreateSettled: r.CreateSettled, Sessions: r.Sessions,
			}
		})
}
