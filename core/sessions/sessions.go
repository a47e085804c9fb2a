// Package sessions creates and deletes Sessions. Create commits the
// Session, its Environment, placement and allocation (with the device's
// sealed credential and a fresh create receipt) in one store transaction
// before any Create; the lifecycle worker (core/lifecycle) sends the one
// Create the receipt permits.
//
// Rules: the raw device credential never reaches the store, a log or an
// error: the store keeps its SHA-256 digest (for authentication) and its
// ciphertext sealed under the installation key, bound to the installation
// and the allocation id.
package sessions

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"

	"berth.dev/core/secrets"
	"berth.dev/core/store"
)

// CredentialBytes is the size of a device credential's random part; the
// credential itself is its unpadded base64url form.
const CredentialBytes = 32

// Service creates and deletes Sessions.
type Service struct {
	store        *store.Store
	key          secrets.Key
	installation uuid.UUID
	newID        func() uuid.UUID
	candidates   func() []uuid.UUID
	capacity     CapacityFunc
}

// CapacityFunc returns, for the nodes it knows, how many sandboxes of res
// each node's reported capacity fits; a node it does not list is bounded
// only by the deployment's max_active.
type CapacityFunc func(res sandbox.Resources) map[uuid.UUID]int

// Option configures a Service.
type Option func(*Service)

// WithCapacity bounds each node by what its reported capacity fits.
func WithCapacity(f CapacityFunc) Option { return func(s *Service) { s.capacity = f } }

// New returns a Service. installation is the installation id the
// credentials are bound to, newID makes every new id, and candidates
// returns the nodes placement may choose from (Core passes the nodes
// present in its node manager).
func New(st *store.Store, key secrets.Key, installation uuid.UUID, newID func() uuid.UUID, candidates func() []uuid.UUID, opts ...Option) *Service {
	s := &Service{store: st, key: key, installation: installation, newID: newID, candidates: candidates}
	for _, o := range opts {
		o(s)
	}
	return s
}

// CreateRequest asks for a Session.
type CreateRequest struct {
	// RequestID identifies the request; a retry reuses it and gets the
	// original Session back.
	RequestID   uuid.UUID
	TenantID    uuid.UUID
	DisplayName string
}

// ErrNoDeployment is the class (errdefs.ErrFailedPrecondition) of a
// Create before any deployment was committed.
var ErrNoDeployment = fmt.Errorf("no deployment: %w", errdefs.ErrFailedPrecondition)

// Create commits a Session with its Environment, placement and
// allocation. A retry with the same RequestID returns the original rows
// (Created false) and keeps the original credential; the new credential
// made for the retry is discarded unused.
func (s *Service) Create(ctx context.Context, req CreateRequest) (store.SessionBundle, error) {
	const op = "create session"
	gen, err := s.store.CurrentGeneration(ctx)
	if errors.Is(err, errdefs.ErrNotFound) {
		return store.SessionBundle{}, fmt.Errorf("%s: %w", op, ErrNoDeployment)
	}
	if err != nil {
		return store.SessionBundle{}, fmt.Errorf("%s: %w", op, err)
	}
	p := store.CreateSessionParams{
		RequestID:     req.RequestID,
		TenantID:      req.TenantID,
		DisplayName:   req.DisplayName,
		SessionID:     s.newID(),
		EnvironmentID: s.newID(),
		AllocationID:  s.newID(),
		DeviceID:      s.newID(),
		CreateReceipt: s.newID(),
		Generation:    int64(gen.Generation),
		Candidates:    s.candidates(),
		MaxActive:     int(gen.Specification.MaxActive),
	}
	if s.capacity != nil {
		p.Limits = s.capacity(gen.Specification.Resources)
	}
	cred, err := NewCredential()
	if err != nil {
		return store.SessionBundle{}, fmt.Errorf("%s: %w", op, err)
	}
	p.CredentialDigest = Digest(cred)
	p.CredentialNonce, p.CredentialCiphertext, err = s.key.Seal([]byte(cred), store.CredentialAD(s.installation, p.AllocationID))
	if err != nil {
		return store.SessionBundle{}, fmt.Errorf("%s: seal credential failed", op)
	}
	b, err := s.store.CreateSession(ctx, p)
	if err != nil {
		return store.SessionBundle{}, err
	}
	return b, nil
}

// Delete requests the Session's deletion and its allocation's cleanup; the
// lifecycle worker kills its compute and releases the allocation only
// after confirmed cleanup and settled creation.
func (s *Service) Delete(ctx context.Context, sessionID uuid.UUID) (store.SessionBundle, error) {
	return s.store.RequestSessionDeletion(ctx, sessionID)
}

// NewCredential returns a fresh device credential: CredentialBytes random
// bytes in unpadded base64url (valid for the Runtime bootstrap file).
func NewCredential() (string, error) {
	b := make([]byte, CredentialBytes)
	if _, err := rand.Read(b); err != nil {
		return "", errors.New("generate device credential failed")
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// Digest is the SHA-256 of a device credential, the only form the store
// keeps for authentication.
func Digest(credential string) []byte {
	d := sha256.Sum256([]byte(credential))
	return d[:]
}
