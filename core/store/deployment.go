package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
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
}

// Generation is a committed, immutable deployment generation.
type Generation struct {
	Generation uint64
	NewGeneration
	CreatedAt time.Time
}

// HasCredential reports whether g stores a credential.
func (g Generation) HasCredential() bool { return len(g.CredentialCiphertext) > 0 }

// CommitGeneration commits g as generation expectedCurrent+1 and makes it
// current, in one transaction that holds the deployment row's lock: when
// the current generation (0 before the first commit) is not
// expectedCurrent it writes nothing and returns errdefs.ErrFailedPrecondition,
// so a retried commit never creates two generations.
func (s *Store) CommitGeneration(ctx context.Context, expectedCurrent uint64, g NewGeneration) (Generation, error) {
	const op = "commit deployment generation"
	params, err := generationParams(expectedCurrent, g)
	if err != nil {
		return Generation{}, fmt.Errorf("%s: %w", op, err)
	}
	var row db.DeploymentGeneration
	err = s.InTx(ctx, func(q *db.Queries) error {
		current, err := q.LockDeployment(ctx)
		if err != nil {
			return err
		}
		if current != int64(expectedCurrent) {
			return fmt.Errorf("current generation is not the expected one: %w", errdefs.ErrFailedPrecondition)
		}
		if row, err = q.InsertDeploymentGeneration(ctx, params); err != nil {
			return err
		}
		n, err := q.SetCurrentGeneration(ctx, db.SetCurrentGenerationParams{
			Generation: pgtype.Int8{Int64: params.Generation, Valid: true},
			Expected:   current,
		})
		if err != nil {
			return err
		}
		if n != 1 {
			// The row lock makes this unreachable; refuse rather than guess.
			return fmt.Errorf("deployment pointer moved under its lock: %w", errdefs.ErrFailedPrecondition)
		}
		return nil
	})
	if err != nil {
		return Generation{}, wrap(op, err)
	}
	return generationFromRow(row), nil
}

// CurrentGeneration returns the current deployment generation,
// errdefs.ErrNotFound before the first commit.
func (s *Store) CurrentGeneration(ctx context.Context) (Generation, error) {
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
func (s *Store) GetGeneration(ctx context.Context, n uint64) (Generation, error) {
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
// the current one while the node is enabled, and every generation an
// unreleased placement or allocation on it is bound to.
func (s *Store) NodeGenerations(ctx context.Context, node uuid.UUID) ([]Generation, error) {
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
	spec := g.Specification
	p := db.InsertDeploymentGenerationParams{
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
