package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"berth.dev/core/store/db"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
)

// NewGeneration is a deployment generation to commit: the provider kind,
// the adapter's encoded public configuration and observations (JSON
// objects the store keeps as they are and never interprets), the sealed
// credential (both nil when there is none) and the specification.
type NewGeneration struct {
	ProviderKind string
	PublicConfig json.RawMessage
	Observations json.RawMessage
	// CredentialCiphertext and CredentialNonce are the credential as the
	// caller sealed it, bound to the installation and the generation
	// number; the store never sees it in the clear.
	CredentialCiphertext []byte
	CredentialNonce      []byte
	Specification        sandbox.Specification
	// Mode is where the registration's adapter runs (its generic Mode):
	// ModeNodes (the zero value stores as it) or ModeDirect, whose
	// Sessions are placed on the direct lane (migration 0020).
	Mode GenerationMode
}

// GenerationMode is where a generation's adapter runs: on the nodes, or
// in Core (the direct lane).
type GenerationMode string

// The generation modes (deployment_generations.mode).
const (
	ModeNodes  GenerationMode = "nodes"
	ModeDirect GenerationMode = "direct"
)

// Generation is a committed, immutable deployment generation.
type Generation struct {
	Generation uint64
	NewGeneration
	CreatedAt time.Time
}

// HasCredential reports whether g stores a credential.
func (g Generation) HasCredential() bool { return len(g.CredentialCiphertext) > 0 }

// GenerationSeen is the current deployment generation as one read saw it
// (Reader.SeenGeneration): the token a deployment write takes, so a
// commit cannot be written without naming the generation it read as
// current. Its fields are unexported; the zero value is
// ErrGenerationNotSeen.
type GenerationSeen struct {
	current Generation
	// committed: a generation was current; read: SeenGeneration made it.
	committed, read bool
}

// Generation is the number of the generation seen current; when none is
// current, 0 before the first commit and the empty generation (the
// generation floor) after a deployment reset.
func (g GenerationSeen) Generation() uint64 { return g.current.Generation }

// Current is the generation seen current; ok is false when none was
// committed.
func (g GenerationSeen) Current() (gen Generation, ok bool) { return g.current, g.committed }

// ErrGenerationNotSeen refuses a deployment write given the zero
// GenerationSeen: a token no read made, a caller's bug.
var ErrGenerationNotSeen error = errdefs.Invalid("seen_generation", "must be read with SeenGeneration before the commit")

// expected is the generation number a write given g expects current.
func (g GenerationSeen) expected() (uint64, error) {
	if !g.read {
		return 0, ErrGenerationNotSeen
	}
	return g.current.Generation, nil
}

// SeenGeneration reads the current deployment generation (none before
// the first commit and after a reset: then the generation floor) as the token CommitGeneration and ReplaceGeneration
// take.
func (s *Reader) SeenGeneration(ctx context.Context) (GenerationSeen, error) {
	row, err := s.q.GetCurrentGeneration(ctx)
	if errors.Is(err, pgx.ErrNoRows) {
		// None current: before the first commit (floor 0), or after a
		// reset, whose empty generation is the floor the next commit
		// goes above.
		f, err := s.q.GetDeploymentFence(ctx)
		if err != nil {
			return GenerationSeen{}, wrap("deployment generation floor", err)
		}
		return GenerationSeen{current: Generation{Generation: uint64(f.GenerationFloor)}, read: true}, nil
	}
	if err != nil {
		return GenerationSeen{}, wrap("current deployment generation", err)
	}
	return GenerationSeen{current: generationFromRow(row), committed: true, read: true}, nil
}

// CommitGeneration commits g as the generation after the one seen current
// and makes it current, in one transaction that holds the deployment
// row's lock: when the current generation (0 before the first commit) is
// not the one seen it writes nothing and returns
// errdefs.ErrFailedPrecondition, so a retried commit never creates two
// generations.
func (s *Admin) CommitGeneration(ctx context.Context, seen GenerationSeen, g NewGeneration) (Generation, error) {
	const op = "commit deployment generation"
	expectedCurrent, err := seen.expected()
	if err != nil {
		return Generation{}, fmt.Errorf("%s: %w", op, err)
	}
	params, err := generationParams(expectedCurrent, g)
	if err != nil {
		return Generation{}, fmt.Errorf("%s: %w", op, err)
	}
	var row db.DeploymentGeneration
	err = s.inTx(ctx, func(q *db.Queries) error {
		current, err := lockDeploymentChange(ctx, q)
		if err != nil {
			return err
		}
		if current != int64(expectedCurrent) {
			return fmt.Errorf("current generation is not the expected one: %w", errdefs.ErrFailedPrecondition)
		}
		row, err = insertCurrent(ctx, q, params, current)
		return err
	})
	if err != nil {
		return Generation{}, wrap(op, err)
	}
	return generationFromRow(row), nil
}

// Replacement is what a deployment replacement commits with the new
// generation.
type Replacement struct {
	// RetireNodes retires every enabled node and revokes every enrollment
	// token not used yet, in the same transaction: the new generation is
	// of another provider kind, which the enrolled nodes do not serve.
	RetireNodes bool
	// Drained are, with RetireNodes, the enabled nodes the caller read
	// (EnabledNodes) and drained the lifecycle workers of before the
	// commit: a commit that would retire any other node (one enabled
	// since) is refused (ErrNodesMoved) and writes nothing.
	Drained []uuid.UUID
	// Rekey, for a key replacement of a direct provider (the new
	// generation has the current one's kind and another credential), are
	// the retained generations of that kind the caller verified with the
	// new key: each is pointed at the new generation's sealed credential
	// (deployment_credential_sources), in the same transaction. A direct
	// generation of that kind that holds anything and is not listed
	// refuses the commit (ErrGenerationsMoved). Nil: not a key
	// replacement; empty: one that found nothing to repoint.
	Rekey []uint64
}

// ErrGenerationsMoved refuses a key replacement when a direct generation
// of the provider kind holds allocations its caller did not verify with
// the new key. Nothing is committed.
var ErrGenerationsMoved error = errdefs.Refuse(errdefs.ErrFenced, "deployment_generations_moved",
	"a generation of this provider came to hold allocations while the new key was verified; nothing was committed: send the replacement again")

// CredentialSource returns the generation whose sealed credential
// generation uses: the one a key replacement pointed it at
// (Replacement.Rekey), or generation itself. Open it with that
// generation's number, to which it is sealed.
func (s *Reader) CredentialSource(ctx context.Context, generation uint64) (uint64, error) {
	if generation == 0 || generation > math.MaxInt64 {
		return 0, errdefs.Invalid("generation", "must be between 1 and 2^63-1")
	}
	src, err := s.q.GetCredentialSource(ctx, int64(generation))
	if err != nil {
		return 0, wrap("credential source", err)
	}
	return uint64(src), nil
}

// HeldDirectGenerations returns the direct generations of provider kind
// kind that unreleased placements or allocations on the direct lane are
// bound to, ascending: what a key replacement of kind must verify.
func (s *Reader) HeldDirectGenerations(ctx context.Context, kind string) ([]uint64, error) {
	rows, err := s.q.ListHeldDirectGenerationsOfKind(ctx, kind)
	if err != nil {
		return nil, wrap("held direct generations", err)
	}
	out := make([]uint64, len(rows))
	for i, g := range rows {
		out[i] = uint64(g)
	}
	return out, nil
}

// ErrNodesMoved refuses a replacement with another provider kind that
// would retire a node its caller did not drain: a node was enabled after
// the caller read the enabled nodes. Nothing is committed.
var ErrNodesMoved error = errdefs.Refuse(errdefs.ErrFenced, "deployment_nodes_moved",
	"a node was enabled while the replacement drained the lifecycle workers of the enabled nodes; nothing was committed: send the replacement again")

// EnabledNodes lists the enabled nodes, in id order: the nodes a
// replacement with another provider kind retires (Replacement.Drained).
func (s *Reader) EnabledNodes(ctx context.Context) ([]uuid.UUID, error) {
	ids, err := s.q.ListEnabledNodeIDs(ctx)
	if err != nil {
		return nil, wrap("list enabled nodes", err)
	}
	return ids, nil
}

// Replaced is what a replacement committed.
type Replaced struct {
	Generation Generation
	// RetiredNodes are the nodes the replacement retired, RevokedTokens
	// how many enrollment tokens it revoked.
	RetiredNodes  []uuid.UUID
	RevokedTokens int64
	// LockWait is how long the transaction waited for the deployment
	// row's lock (admissions in flight hold it shared), and Locked how
	// long it held it: admission is paused from the lock until the commit.
	LockWait, Locked time.Duration
}

// rekey points each generation of rekeyed at generation next's sealed
// credential, after checking that every direct generation of kind that
// holds anything is among them (ErrGenerationsMoved).
func rekey(ctx context.Context, q *db.Queries, epoch uint64, kind string, next uint64, rekeyed []uint64) error {
	if rekeyed == nil {
		return nil
	}
	held, err := q.ListHeldDirectGenerationsOfKind(ctx, kind)
	if err != nil {
		return err
	}
	for _, g := range held {
		if !slices.Contains(rekeyed, uint64(g)) {
			return ErrGenerationsMoved
		}
	}
	for _, g := range rekeyed {
		if g == 0 || g >= next {
			return errdefs.Invalid("rekey", "names a generation that is not an earlier one")
		}
		if err := q.SetCredentialSource(ctx, db.SetCredentialSourceParams{
			Generation: int64(g), SourceGeneration: int64(next), OwnerEpoch: int64(epoch),
		}); err != nil {
			return err
		}
	}
	return nil
}

// ReplaceGeneration commits g as the generation after the one seen
// current and makes it current, with what r asks, in one transaction that holds the deployment
// row's lock: admissions (CreateSession) hold it shared, so the
// replacement waits for those in flight, and those that start after it
// wait for its commit and then see the new generation. When the current
// generation is not the one seen (or nothing is committed) it writes
// nothing and returns errdefs.ErrFailedPrecondition; when it would retire
// a node r does not list as drained, ErrNodesMoved. It is fenced
// (ErrSuperseded): a replacement retires nodes through the owner's drain
// gate, which a deposed Core's drain cannot vouch for.
//
// The same transaction records the decision (deployment.replace, by prov,
// event id eventID: the generations from and to, their provider kinds,
// how many nodes it retired, tokens it revoked and generations it
// rekeyed) and one node.retire per node it retired (a child of the
// replacement's event, its id derived from eventID and the node's).
// prov is checked before anything is read (the zero Provenance is
// invalid).
func (s *Owner) ReplaceGeneration(ctx context.Context, seen GenerationSeen, g NewGeneration, r Replacement, prov Provenance, eventID uuid.UUID) (Replaced, error) {
	const op = "replace deployment generation"
	if err := prov.valid(); err != nil {
		return Replaced{}, fmt.Errorf("%s: %w", op, err)
	}
	expectedCurrent, err := seen.expected()
	if err != nil {
		return Replaced{}, fmt.Errorf("%s: %w", op, err)
	}
	params, err := generationParams(expectedCurrent, g)
	if err != nil {
		return Replaced{}, fmt.Errorf("%s: %w", op, err)
	}
	if !seen.committed {
		return Replaced{}, fmt.Errorf("%s: nothing is committed to replace: %w", op, errdefs.ErrFailedPrecondition)
	}
	var out Replaced
	err = s.ownedTx(ctx, func(q *db.Queries) error {
		start := time.Now()
		current, err := lockDeploymentChange(ctx, q)
		if err != nil {
			return err
		}
		locked := time.Now()
		out.LockWait = locked.Sub(start)
		if current != int64(expectedCurrent) {
			return fmt.Errorf("current generation is not the expected one: %w", errdefs.ErrFailedPrecondition)
		}
		row, err := insertCurrent(ctx, q, params, current)
		if err != nil {
			return err
		}
		if err := rekey(ctx, q, s.epoch, g.ProviderKind, uint64(row.Generation), r.Rekey); err != nil {
			return err
		}
		if r.RetireNodes {
			if out.RetiredNodes, err = q.RetireNodesForReplacement(ctx); err != nil {
				return err
			}
			for _, id := range out.RetiredNodes {
				if !slices.Contains(r.Drained, id) {
					return ErrNodesMoved
				}
			}
			if out.RevokedTokens, err = q.RevokeUnusedEnrollmentTokens(ctx); err != nil {
				return err
			}
		}
		out.Generation = generationFromRow(row)
		if err := recordReplacement(ctx, q, prov, eventID, seen.current, out, len(r.Rekey)); err != nil {
			return err
		}
		out.Locked = time.Since(locked)
		return nil
	})
	if err != nil {
		return Replaced{}, wrap(op, err)
	}
	return out, nil
}

// recordReplacement records a replacement's decision from generation
// from to out.Generation, and one node.retire per node it retired.
func recordReplacement(ctx context.Context, q *db.Queries, prov Provenance, eventID uuid.UUID, from Generation, out Replaced, rekeyed int) error {
	if err := recordAudit(ctx, q, prov, AuditEntry{
		ID: eventID, Kind: AuditDecision, Action: "deployment.replace", Resource: "deployment", Outcome: "ok",
		Detail: map[string]any{
			"from_generation": from.Generation, "to_generation": out.Generation.Generation,
			"from_provider_kind": from.ProviderKind, "to_provider_kind": out.Generation.ProviderKind,
			"nodes_retired": len(out.RetiredNodes), "tokens_revoked": out.RevokedTokens,
			"generations_rekeyed": rekeyed,
		},
	}); err != nil {
		return err
	}
	child := prov.WithParent(eventID)
	for _, id := range out.RetiredNodes {
		if err := recordNodeState(ctx, q, child, uuid.NewSHA1(eventID, id[:]), id, NodeEnabled, NodeRetired,
			map[string]any{"replacement_generation": out.Generation.Generation}); err != nil {
			return err
		}
	}
	return nil
}

// ServingPin is the deployment's durable serving pin: the generation a
// node last reported ready for while it was current, and since when
// (database clock). Zero before any.
type ServingPin struct {
	Generation uint64
	Since      time.Time
}

// GetServingPin reads the serving pin.
func (s *Reader) GetServingPin(ctx context.Context) (ServingPin, error) {
	row, err := s.q.GetServingPin(ctx)
	if err != nil {
		return ServingPin{}, wrap("get serving pin", err)
	}
	if !row.ServingGeneration.Valid || row.ServingSince == nil {
		return ServingPin{}, nil
	}
	return ServingPin{Generation: uint64(row.ServingGeneration.Int64), Since: *row.ServingSince}, nil
}

// PromoteServingPin pins generation as served when it is the current
// generation and not pinned yet, and reports whether it did. One
// statement takes the deployment row's lock, so it serializes with a
// commit: a report for a generation a replacement superseded pins
// nothing. It is a lifecycle write, fenced by the owner epoch.
func (s *Owner) PromoteServingPin(ctx context.Context, generation uint64) (bool, error) {
	const op = "promote serving pin"
	if generation == 0 || generation > math.MaxInt64 {
		return false, fmt.Errorf("%s: %w", op, errdefs.Invalid("generation", "must be between 1 and 2^63-1"))
	}
	var n int64
	err := s.inTx(ctx, func(q *db.Queries) error {
		if err := fenceOwner(ctx, q, s.epoch); err != nil {
			return err
		}
		var err error
		n, err = q.PromoteServingPin(ctx, int64(generation))
		return err
	})
	if err != nil {
		return false, wrap(op, err)
	}
	return n == 1, nil
}

// RetainedGeneration is a generation unreleased allocations are bound to.
type RetainedGeneration struct {
	Generation  uint64
	Allocations int64
}

// RetainedGenerations returns every generation unreleased allocations are
// bound to, with how many, ascending.
func (s *Reader) RetainedGenerations(ctx context.Context) ([]RetainedGeneration, error) {
	rows, err := s.q.ListRetainedGenerations(ctx)
	if err != nil {
		return nil, wrap("retained generations", err)
	}
	out := make([]RetainedGeneration, len(rows))
	for i, r := range rows {
		out[i] = RetainedGeneration{Generation: uint64(r.Generation), Allocations: r.Allocations}
	}
	return out, nil
}

// insertCurrent inserts generation params and moves the deployment's
// pointer to it from current, in the caller's transaction, which holds the
// deployment row's lock (LockDeployment).
func insertCurrent(ctx context.Context, q *db.Queries, params db.InsertDeploymentGenerationParams, current int64) (db.DeploymentGeneration, error) {
	row, err := q.InsertDeploymentGeneration(ctx, params)
	if err != nil {
		return db.DeploymentGeneration{}, err
	}
	n, err := q.SetCurrentGeneration(ctx, db.SetCurrentGenerationParams{
		Generation: pgtype.Int8{Int64: params.Generation, Valid: true},
		Expected:   current,
	})
	if err != nil {
		return db.DeploymentGeneration{}, err
	}
	if n != 1 {
		// The row lock makes this unreachable; refuse rather than guess.
		return db.DeploymentGeneration{}, fmt.Errorf("deployment pointer moved under its lock: %w", errdefs.ErrFailedPrecondition)
	}
	return row, nil
}

// CurrentGeneration returns the current deployment generation,
// errdefs.ErrNotFound before the first commit.
func (s *Reader) CurrentGeneration(ctx context.Context) (Generation, error) {
	row, err := s.q.GetCurrentGeneration(ctx)
	if errors.Is(err, pgx.ErrNoRows) {
		return Generation{}, fmt.Errorf("current deployment generation: none committed: %w", errdefs.ErrNotFound)
	}
	if err != nil {
		return Generation{}, wrap("current deployment generation", err)
	}
	return generationFromRow(row), nil
}

// GetGeneration returns deployment generation n, errdefs.ErrNotFound when
// there is none.
func (s *Reader) GetGeneration(ctx context.Context, n uint64) (Generation, error) {
	const op = "get deployment generation"
	if n == 0 || n > math.MaxInt64 {
		return Generation{}, fmt.Errorf("%s: %w", op, errdefs.Invalid("generation", "must be between 1 and 2^63-1"))
	}
	row, err := s.q.GetDeploymentGeneration(ctx, int64(n))
	if err != nil {
		return Generation{}, wrap(op, err)
	}
	return generationFromRow(row), nil
}

// NodeGenerations returns the generations node must serve, ascending:
// the current one while the node is enabled and it is a node generation
// (a direct one is served by Core's direct lane), and every generation an
// unreleased placement or allocation on it is bound to.
func (s *Reader) NodeGenerations(ctx context.Context, node uuid.UUID) ([]Generation, error) {
	rows, err := s.q.ListNodeGenerations(ctx, node)
	if err != nil {
		return nil, wrap("node generations", err)
	}
	out := make([]Generation, len(rows))
	for i, r := range rows {
		out[i] = generationFromRow(r)
	}
	return out, nil
}

// generationParams checks what the schema would refuse anyway, so a bad
// argument is named instead of surfacing as a constraint violation.
func generationParams(expectedCurrent uint64, g NewGeneration) (db.InsertDeploymentGenerationParams, error) {
	if expectedCurrent >= math.MaxInt64 {
		return db.InsertDeploymentGenerationParams{}, errdefs.Invalid("expected_generation", "out of range")
	}
	if (g.CredentialCiphertext == nil) != (g.CredentialNonce == nil) {
		return db.InsertDeploymentGenerationParams{}, errdefs.Invalid("credential", "ciphertext and nonce go together")
	}
	for _, o := range []struct {
		field string
		raw   json.RawMessage
	}{{"public_config", g.PublicConfig}, {"observations", g.Observations}} {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(o.raw, &m); err != nil || m == nil {
			return db.InsertDeploymentGenerationParams{}, errdefs.Invalid(o.field, "must be a JSON object")
		}
	}
	mode := g.Mode
	switch mode {
	case "":
		mode = ModeNodes
	case ModeNodes, ModeDirect:
	default:
		return db.InsertDeploymentGenerationParams{}, errdefs.Invalid("mode", "must be nodes or direct")
	}
	spec := g.Specification
	p := db.InsertDeploymentGenerationParams{
		Mode:                 string(mode),
		Generation:           int64(expectedCurrent) + 1,
		ProviderKind:         g.ProviderKind,
		PublicConfig:         g.PublicConfig,
		Observations:         g.Observations,
		CredentialCiphertext: g.CredentialCiphertext,
		CredentialNonce:      g.CredentialNonce,
		CPUMillis:            spec.Resources.CPUMillis,
		MemoryBytes:          spec.Resources.MemoryBytes,
		DiskBytes:            spec.Resources.DiskBytes,
		MaxActive:            spec.MaxActive,
		MaxRetained:          spec.MaxRetained,
	}
	if !spec.Suspension.IsZero() {
		if spec.Suspension.Idle%time.Second != 0 || spec.Suspension.Retention%time.Second != 0 {
			return db.InsertDeploymentGenerationParams{}, errdefs.Invalid("specification.suspension", "must be whole seconds")
		}
		p.SuspensionIdleSeconds = pgtype.Int8{Int64: int64(spec.Suspension.Idle / time.Second), Valid: true}
		p.SuspensionRetentionSeconds = pgtype.Int8{Int64: int64(spec.Suspension.Retention / time.Second), Valid: true}
	}
	return p, nil
}

func generationFromRow(r db.DeploymentGeneration) Generation {
	g := Generation{
		Generation: uint64(r.Generation),
		NewGeneration: NewGeneration{
			ProviderKind:         r.ProviderKind,
			PublicConfig:         json.RawMessage(r.PublicConfig),
			Observations:         json.RawMessage(r.Observations),
			CredentialCiphertext: r.CredentialCiphertext,
			CredentialNonce:      r.CredentialNonce,
			Mode:                 GenerationMode(r.Mode),
			Specification: sandbox.Specification{
				Resources: sandbox.Resources{
					CPUMillis:   r.CPUMillis,
					MemoryBytes: r.MemoryBytes,
					DiskBytes:   r.DiskBytes,
				},
				MaxActive:   r.MaxActive,
				MaxRetained: r.MaxRetained,
			},
		},
		CreatedAt: r.CreatedAt,
	}
	if r.SuspensionIdleSeconds.Valid && r.SuspensionRetentionSeconds.Valid {
		g.Specification.Suspension = sandbox.SuspensionPolicy{
			Idle:      time.Duration(r.SuspensionIdleSeconds.Int64) * time.Second,
			Retention: time.Duration(r.SuspensionRetentionSeconds.Int64) * time.Second,
		}
	}
	return g
}
