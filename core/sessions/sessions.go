package sessions

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providers"

	"berth.dev/core/events"
	"berth.dev/core/projects"
	"berth.dev/core/secrets"
	"berth.dev/core/store"
)

// Store is what the Service writes and reads: the owner-bound store,
// because creation and deletion are fenced lifecycle writes.
type Store interface {
	Reader
	CurrentGeneration(ctx context.Context) (store.Generation, error)
	CreateSession(ctx context.Context, p store.CreateSessionParams) (store.SessionBundle, error)
	CreateFork(ctx context.Context, p store.ForkSessionParams) (store.ForkResult, error)
	DeleteSession(ctx context.Context, id uuid.UUID) (store.SessionBundle, store.Termination, error)
	ArchiveSession(ctx context.Context, id uuid.UUID, prov store.Provenance, eventID uuid.UUID) (store.SessionBundle, store.Termination, error)
}

// Suspension records an admin's suspend-now and resume-now:
// core/suspension's Service, the one writer of compute-phase state.
type Suspension interface {
	SuspendNow(ctx context.Context, sessionID, requestID uuid.UUID) (store.SessionBundle, error)
	ResumeNow(ctx context.Context, sessionID, requestID uuid.UUID) (store.SessionBundle, error)
}

// Reader is what the Service reads: plain, unfenced reads.
type Reader interface {
	projects.SessionReader
	GetProject(ctx context.Context, id uuid.UUID) (store.Project, error)
	ListSessionsByAge(ctx context.Context, limit int, after store.AgeCursor, includeDeleted bool) ([]store.SessionBundle, error)
	ListProjectSessionsByAge(ctx context.Context, projectID uuid.UUID, limit int, after store.AgeCursor, includeDeleted bool) ([]store.SessionBundle, error)
	RuntimeReadiness(ctx context.Context, allocationIDs []uuid.UUID) (map[uuid.UUID]store.RuntimeReadiness, error)
	GetSessionAllocation(ctx context.Context, id uuid.UUID) (store.SessionAllocation, error)
	ListAllocationsByAge(ctx context.Context, limit int, after store.AgeCursor, includeReleased bool) ([]store.SessionAllocation, error)
	ListProjectAllocationsByAge(ctx context.Context, projectID uuid.UUID, limit int, after store.AgeCursor, includeReleased bool) ([]store.SessionAllocation, error)
	CountLiveSessions(ctx context.Context) ([]store.SessionStateCount, error)
}

// CredentialBytes is the size of a device credential's random part; the
// credential itself is its unpadded base64url form.
const CredentialBytes = 32

// Service creates, deletes and reads Sessions and reads their
// allocations.
type Service struct {
	store        Store
	key          secrets.Key
	installation uuid.UUID
	newID        func() uuid.UUID
	suspension   Suspension
	// bus is told what each deletion's terminal cleanup changed
	// (events.Terminated).
	bus *events.Bus
	// admissionClosed is set by CloseAdmission: every later Create is
	// refused (ErrAdmissionClosed).
	admissionClosed atomic.Bool
	// providers is the registry Fork reads declarations from
	// (SetProviders; the default registry, made once, otherwise).
	providers     *providers.Registry
	providersErr  error
	providersOnce sync.Once
}

// ErrAdmissionClosed refuses a Create after Core closed admission
// (CloseAdmission): a lifecycle worker did not drain within its bound, so
// Core no longer vouches for the changes its workers guard.
var ErrAdmissionClosed error = errdefs.Refuse(errdefs.ErrFailedPrecondition, "owner_failure",
	"admission closed after an owner failure (a lifecycle worker did not drain in time): restart berth-core; running Sessions are not affected")

// CloseAdmission refuses every later Create with ErrAdmissionClosed until
// the process ends: Core calls it when a lifecycle worker's drain passes
// its bound (lifecycle.Config.Admission), the guide's closed manager
// admission. What exists goes on: Turns, reads, deletions and the
// workers.
func (s *Service) CloseAdmission() { s.admissionClosed.Store(true) }

// New returns a Service. st must act for Core's owner epoch
// (a *store.Owner, store.Store.AsOwner): creation and deletion are fenced
// lifecycle writes; the reads go through it unfenced. installation is the
// installation id the credentials are bound to and newID makes every new
// id. Placement reads the nodes' durable presence and reported capacity
// inside the store's placement transaction; no caller list takes part.
// susp records Suspend and Resume (core/suspension's Service). bus hears
// what each deletion's terminal cleanup changed (events.Terminated), so
// the gateway forwards the cancellation at once instead of at its next
// keepalive.
func New(st Store, key secrets.Key, installation uuid.UUID, newID func() uuid.UUID, susp Suspension, bus *events.Bus) *Service {
	return &Service{store: st, key: key, installation: installation, newID: newID, suspension: susp, bus: bus}
}

// CreateRequest asks for a Session.
type CreateRequest struct {
	// RequestID identifies the request ("request_id"; required); a retry
	// reuses it and gets the original Session back.
	RequestID uuid.UUID
	// ProjectID is the project the Session belongs to; its tenant is the
	// Session's. uuid.Nil is the scope's project (In), or for All the
	// default project (store.DefaultProjectID).
	ProjectID uuid.UUID
	// TenantID, when set, is the tenant the caller named with ProjectID (a
	// project's name carries both): a project of another tenant is
	// store.ErrProjectNotFound. The Session's tenant is always read from
	// the project.
	TenantID uuid.UUID
	// DisplayName ("display_name") is optional: valid UTF-8 of at most
	// MaxDisplayNameLen characters, no control (Cc) or format (Cf)
	// characters.
	DisplayName string
}

// MaxDisplayNameLen bounds a Session's display name (characters).
const MaxDisplayNameLen = 63

// validate checks r before anything is read or written, naming the
// logic's fields.
func (r CreateRequest) validate() error {
	if r.RequestID == uuid.Nil {
		return errdefs.Invalid("request_id", "required")
	}
	const field = "display_name"
	if !utf8.ValidString(r.DisplayName) || utf8.RuneCountInString(r.DisplayName) > MaxDisplayNameLen {
		return errdefs.Invalid(field, fmt.Sprintf("must be valid UTF-8 of at most %d characters", MaxDisplayNameLen))
	}
	for _, c := range r.DisplayName {
		// A control (Cc) or format (Cf) character reorders or hides what a
		// table or log shows: a bidi override (U+202E) spoofs the name, a
		// zero-width one makes two names look alike.
		if unicode.Is(unicode.Cc, c) || unicode.Is(unicode.Cf, c) {
			return errdefs.Invalid(field, "must not contain control or format characters (bidi overrides, zero-width characters)")
		}
	}
	return nil
}

// errDefaultProjectGone refuses a Create for the default project (no
// project named, administrator's scope) after that project was deleted.
var errDefaultProjectGone = errdefs.Invalid("project", "required: the default project was deleted")

// project resolves the project a Create in scope is for: req's, the
// scope's or the default one. A project the scope does not see, or that
// does not exist or was deleted, is store.ErrProjectNotFound (the same
// answer for each, so a scoped caller cannot probe other projects).
func (s *Service) project(ctx context.Context, scope projects.Scope, id uuid.UUID) (store.Project, error) {
	if err := scope.Check(); err != nil {
		return store.Project{}, err
	}
	named := id != uuid.Nil
	if !named {
		id = store.DefaultProjectID
		if p, ok := scope.Project(); ok {
			id = p
		}
	}
	if !scope.Sees(id) {
		return store.Project{}, store.ErrProjectNotFound
	}
	p, err := s.store.GetProject(ctx, id)
	if err == nil && p.DeletedAt != nil {
		err = store.ErrProjectNotFound
	}
	switch {
	case errors.Is(err, errdefs.ErrNotFound) && !named:
		if _, scoped := scope.Project(); !scoped {
			return store.Project{}, errDefaultProjectGone
		}
		return store.Project{}, store.ErrProjectNotFound
	case errors.Is(err, errdefs.ErrNotFound):
		return store.Project{}, store.ErrProjectNotFound
	case err != nil:
		return store.Project{}, err
	}
	return p, nil
}

// ErrNoDeployment is the class (errdefs.ErrFailedPrecondition) of a
// Create before any deployment was committed: a refusal (reason
// no_deployment) that tells the operator what to do.
var ErrNoDeployment error = errdefs.Refuse(errdefs.ErrFailedPrecondition, "no_deployment",
	"no deployment is committed: commit one with DeploymentService.CommitDeployment")

// Create commits a Session with its Environment, placement and
// allocation. A retry with the same RequestID returns the original rows
// (Created false) and keeps the original credential; the new credential
// made for the retry is discarded unused. A retry with another
// DisplayName is errdefs.ErrExists. An invalid request
// (errdefs.ErrInvalid naming "request_id" or "display_name"), a Create
// before any deployment (ErrNoDeployment), one while the provider is
// disabled (store.ErrProviderDisabled, reason provider_disabled: enable it
// with DeploymentService.EnableProvider) and one that finds no node with
// room (store.ErrNoCapacity: enabled, present by its durable record,
// ready for the generation, within capacity) create nothing, and so does
// one after CloseAdmission (ErrAdmissionClosed, reason owner_failure). A
// project scope does not see, or that is missing or deleted, is
// store.ErrProjectNotFound; the deleted default project, when no project
// is named, is an invalid "project".
func (s *Service) Create(ctx context.Context, scope projects.Scope, req CreateRequest) (store.SessionBundle, error) {
	if err := req.validate(); err != nil {
		return store.SessionBundle{}, err
	}
	if s.admissionClosed.Load() {
		return store.SessionBundle{}, ErrAdmissionClosed
	}
	p, err := s.project(ctx, scope, req.ProjectID)
	if err == nil && req.TenantID != uuid.Nil && req.TenantID != p.TenantID {
		err = store.ErrProjectNotFound
	}
	if err != nil {
		return store.SessionBundle{}, fmt.Errorf("create session: %w", err)
	}
	// The tenant is the project's: the store's transaction locks the
	// project and refuses it if it was deleted or moved meanwhile.
	req.ProjectID = p.ID
	tenant := p.TenantID
	// A replacement committed between the read of the current generation
	// and the admission's transaction moves it (store.ErrGenerationMoved,
	// nothing written): prepared once more for the new current
	// generation, it is admitted there.
	b, err := s.create(ctx, tenant, req)
	if errors.Is(err, store.ErrGenerationMoved) {
		b, err = s.create(ctx, tenant, req)
	}
	return b, err
}

// create admits req, for a project of tenant, for the current generation.
func (s *Service) create(ctx context.Context, tenant uuid.UUID, req CreateRequest) (store.SessionBundle, error) {
	const op = "create session"
	gen, err := s.currentGeneration(ctx)
	if err != nil {
		return store.SessionBundle{}, fmt.Errorf("%s: %w", op, err)
	}
	p := store.CreateSessionParams{
		RequestID:     req.RequestID,
		ProjectID:     req.ProjectID,
		TenantID:      tenant,
		DisplayName:   req.DisplayName,
		SessionID:     s.newID(),
		EnvironmentID: s.newID(),
		AllocationID:  s.newID(),
		DeviceID:      s.newID(),
		CreateReceipt: s.newID(),
		Generation:    int64(gen.Generation),
		Resources:     gen.Specification.Resources,
		MaxActive:     int(gen.Specification.MaxActive),
	}
	cred, err := NewSealedCredential(s.key, s.installation, p.AllocationID)
	if err != nil {
		return store.SessionBundle{}, fmt.Errorf("%s: %w", op, err)
	}
	p.CredentialDigest, p.CredentialNonce, p.CredentialCiphertext = cred.Digest, cred.Nonce, cred.Ciphertext
	b, err := s.store.CreateSession(ctx, p)
	if err != nil {
		return store.SessionBundle{}, err
	}
	return b, nil
}

// currentGeneration is the deployment's current generation, or
// ErrNoDeployment before the first commit.
func (s *Service) currentGeneration(ctx context.Context) (store.Generation, error) {
	gen, err := s.store.CurrentGeneration(ctx)
	if errors.Is(err, errdefs.ErrNotFound) {
		return store.Generation{}, ErrNoDeployment
	}
	return gen, err
}

// Delete requests the Session's deletion: one terminal cleanup
// transaction (store.Termination) revokes the device, records the
// Environment deleted, ends queued Turns (session_deleted), requests
// cancellation of the running Turn (the gateway forwards it and keeps its
// result) and requests the allocation's cleanup; only then does the
// lifecycle worker kill its compute, and it releases the allocation only
// after confirmed cleanup and settled creation. A disabled provider never
// blocks it. Deleting again changes
// nothing and returns the Session as it is; an unknown Session, or one
// scope does not see, is errdefs.ErrNotFound.
func (s *Service) Delete(ctx context.Context, scope projects.Scope, sessionID uuid.UUID) (store.SessionBundle, error) {
	if err := projects.Visible(ctx, s.store, scope, sessionID); err != nil {
		return store.SessionBundle{}, fmt.Errorf("delete session: %w", err)
	}
	b, term, err := s.store.DeleteSession(ctx, sessionID)
	if err != nil {
		return store.SessionBundle{}, fmt.Errorf("delete session: %w", err)
	}
	s.bus.Publish(events.Terminated(term.SessionID, term.SettledTurns, term.CancelRequested)...)
	return b, nil
}

// Archive archives a live Session (the guide's administrator archive):
// one Session-first terminal cleanup transaction (store.ArchiveSession)
// revokes the device, ends the Environment (cause archived), fails its
// queued Turns session_archived, asks its running Turn to cancel (the
// gateway forwards it at once: events.Terminated) and requests cleanup;
// the Session keeps its Turns and output, readable, and runs nothing.
// Archiving again returns it unchanged; a deleted Session is refused
// session_deleted; one scope does not see is errdefs.ErrNotFound. prov
// (core/audit's From: who asked, and the call's request id) is recorded
// with the decision in the same transaction.
func (s *Service) Archive(ctx context.Context, scope projects.Scope, sessionID uuid.UUID, prov store.Provenance) (store.SessionBundle, error) {
	if err := projects.Visible(ctx, s.store, scope, sessionID); err != nil {
		return store.SessionBundle{}, fmt.Errorf("archive session: %w", err)
	}
	b, term, err := s.store.ArchiveSession(ctx, sessionID, prov, s.newID())
	if err != nil {
		return store.SessionBundle{}, fmt.Errorf("archive session: %w", err)
	}
	if term.SessionID != uuid.Nil {
		s.bus.Publish(events.Terminated(term.SessionID, term.SettledTurns, term.CancelRequested)...)
	}
	return b, nil
}

// Suspend asks for the Session's suspension now (store.RequestSuspend,
// through core/suspension):
// the node's lifecycle worker arms it at once, the Runtime quiesces, and
// the workspace is captured. It obeys the idle suspension's predicate
// except the idle time (a Turn ended, nothing queued or running), and is
// refused otherwise with what to wait for (no_turn_ended, session_busy).
// Idempotent by requestID. A Session scope does not see is
// errdefs.ErrNotFound.
func (s *Service) Suspend(ctx context.Context, scope projects.Scope, sessionID, requestID uuid.UUID) (store.SessionBundle, error) {
	if err := projects.Visible(ctx, s.store, scope, sessionID); err != nil {
		return store.SessionBundle{}, fmt.Errorf("suspend session: %w", err)
	}
	b, err := s.suspension.SuspendNow(ctx, sessionID, requestID)
	if err != nil {
		return store.SessionBundle{}, fmt.Errorf("suspend session: %w", err)
	}
	return b, nil
}

// Resume asks for a suspended Session's restore now
// (store.RequestResume, through core/suspension), as a submitted Turn
// would. Idempotent by
// requestID. A Session scope does not see is errdefs.ErrNotFound.
func (s *Service) Resume(ctx context.Context, scope projects.Scope, sessionID, requestID uuid.UUID) (store.SessionBundle, error) {
	if err := projects.Visible(ctx, s.store, scope, sessionID); err != nil {
		return store.SessionBundle{}, fmt.Errorf("resume session: %w", err)
	}
	b, err := s.suspension.ResumeNow(ctx, sessionID, requestID)
	if err != nil {
		return store.SessionBundle{}, fmt.Errorf("resume session: %w", err)
	}
	return b, nil
}

// SealedCredential is a new device credential in the forms the store
// keeps: its digest (for authentication) and its sealed form (for the one
// Create). The credential itself is not kept.
type SealedCredential struct {
	Digest     []byte
	Nonce      []byte
	Ciphertext []byte
}

// NewSealedCredential makes a fresh device credential for allocation
// allocationID and returns its digest and its ciphertext sealed under key,
// bound to the installation and the allocation (secrets.DeviceCredential).
func NewSealedCredential(key secrets.Key, installation, allocationID uuid.UUID) (SealedCredential, error) {
	cred, err := NewCredential()
	if err != nil {
		return SealedCredential{}, err
	}
	nonce, ct, err := key.Seal([]byte(cred), secrets.DeviceCredential(installation, allocationID))
	if err != nil {
		return SealedCredential{}, errors.New("seal device credential failed")
	}
	return SealedCredential{Digest: Digest(cred), Nonce: nonce, Ciphertext: ct}, nil
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
