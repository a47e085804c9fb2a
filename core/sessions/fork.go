package sessions

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/google/uuid"

	"berth.dev/core/projects"
	"berth.dev/core/store"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providers"
)

// ErrForkUnsupported is the class (errdefs.ErrFailedPrecondition) of a
// fork under a deployment whose provider has no checkpoints (its
// declaration does not support Capture and CreateSeeded): nothing was
// written.
var ErrForkUnsupported error = errdefs.Refuse(errdefs.ErrFailedPrecondition, "fork_unsupported",
	"the deployment's provider cannot capture a sandbox's filesystem (no checkpoints): fork needs a provider that supports them, such as docker")

// ForkRequest asks for count new Sessions from the filesystem of
// SessionID (ForkSession).
type ForkRequest struct {
	SessionID uuid.UUID
	// RequestID identifies the fork; a retry returns the same fork.
	RequestID uuid.UUID
	// Count is 1..store.MaxForkChildren; MinCount 1..Count (0 means 1).
	Count, MinCount int
	// DisplayNamePrefix names the children "{prefix}-{index}"; empty is
	// the source's display name.
	DisplayNamePrefix string
}

func (r *ForkRequest) validate() error {
	switch {
	case r.RequestID == uuid.Nil:
		return errdefs.Invalid("request_id", "must be a UUID")
	case r.Count < 1 || r.Count > store.MaxForkChildren:
		return errdefs.Invalid("count", fmt.Sprintf("must be 1 to %d (the fork bound)", store.MaxForkChildren))
	case r.MinCount < 0 || r.MinCount > r.Count:
		return errdefs.Invalid("min_count", "must be 0 to count")
	case (CreateRequest{RequestID: r.RequestID, DisplayName: r.DisplayNamePrefix}).validate() != nil ||
		utf8.RuneCountInString(r.DisplayNamePrefix) > maxForkPrefixLen:
		return errdefs.Invalid("display_name_prefix", fmt.Sprintf("must be a display name (no control or format characters) of at most %d characters", maxForkPrefixLen))
	}
	if r.MinCount == 0 {
		r.MinCount = 1
	}
	return nil
}

// maxForkPrefixLen leaves room in MaxDisplayNameLen for "-127".
const maxForkPrefixLen = MaxDisplayNameLen - 4

// Fork makes req.Count Sessions from the current filesystem of Session
// req.SessionID (store.CreateFork): each child is minted here like a
// created Session (its own ids, device and sealed credential), with a
// request id derived from the fork's (a retry derives the same ones), and
// placed as CreateSession places. A deployment whose provider has no
// checkpoints is ErrForkUnsupported; a Session scope does not see is
// errdefs.ErrNotFound; after CloseAdmission, ErrAdmissionClosed. The
// store's refusals pass as they are (fork_source_busy,
// fork_source_not_ready, the placement's own when fewer than MinCount
// fit).
func (s *Service) Fork(ctx context.Context, scope projects.Scope, req ForkRequest) (store.ForkResult, error) {
	const op = "fork session"
	if err := req.validate(); err != nil {
		return store.ForkResult{}, err
	}
	if err := projects.Visible(ctx, s.store, scope, req.SessionID); err != nil {
		return store.ForkResult{}, fmt.Errorf("%s: %w", op, err)
	}
	if s.admissionClosed.Load() {
		return store.ForkResult{}, ErrAdmissionClosed
	}
	src, err := s.store.GetSession(ctx, req.SessionID)
	if err != nil {
		return store.ForkResult{}, fmt.Errorf("%s: %w", op, err)
	}
	res, err := s.fork(ctx, src, req)
	if errors.Is(err, store.ErrGenerationMoved) {
		res, err = s.fork(ctx, src, req)
	}
	return res, err
}

// fork admits req for the current generation.
func (s *Service) fork(ctx context.Context, src store.SessionBundle, req ForkRequest) (store.ForkResult, error) {
	const op = "fork session"
	gen, err := s.currentGeneration(ctx)
	if err != nil {
		return store.ForkResult{}, fmt.Errorf("%s: %w", op, err)
	}
	if err := s.forkable(gen.ProviderKind); err != nil {
		return store.ForkResult{}, fmt.Errorf("%s: %w", op, err)
	}
	prefix := req.DisplayNamePrefix
	if prefix == "" {
		prefix = truncate(src.Session.DisplayName, maxForkPrefixLen)
	}
	p := store.ForkSessionParams{
		ForkID: s.newID(), CaptureOp: s.newID(), RequestID: req.RequestID,
		SourceSessionID: src.Session.ID, ProjectID: src.Session.ProjectID, TenantID: src.Session.TenantID,
		MinCount: req.MinCount, Generation: int64(gen.Generation), Resources: gen.Specification.Resources,
		MaxActive: int(gen.Specification.MaxActive),
	}
	for i := range req.Count {
		c := store.ForkChild{
			SessionID: s.newID(), EnvironmentID: s.newID(), AllocationID: s.newID(), DeviceID: s.newID(),
			CreateReceipt: s.newID(), RequestID: ChildRequestID(req.RequestID, i),
			DisplayName: prefix + "-" + strconv.Itoa(i),
		}
		cred, err := NewSealedCredential(s.key, s.installation, c.AllocationID)
		if err != nil {
			return store.ForkResult{}, fmt.Errorf("%s: %w", op, err)
		}
		c.CredentialDigest, c.CredentialNonce, c.CredentialCiphertext = cred.Digest, cred.Nonce, cred.Ciphertext
		p.Children = append(p.Children, c)
	}
	return s.store.CreateFork(ctx, p)
}

// ChildRequestID is the request id of a fork's child number index: a name
// UUID under the fork's request id, so a retried fork names the same
// children.
func ChildRequestID(fork uuid.UUID, index int) uuid.UUID {
	return uuid.NewSHA1(fork, []byte("fork-child-"+strconv.Itoa(index)))
}

// forkable refuses a provider kind whose declaration cannot fork
// (ErrForkUnsupported): Capture and CreateSeeded must be supported.
func (s *Service) forkable(kind string) error {
	r, err := s.registry()
	if err != nil {
		return err
	}
	reg, err := r.Lookup(kind)
	if err != nil {
		return err
	}
	if !reg.Operations.Supports(sandbox.OpCapture) || !reg.Operations.Supports(sandbox.OpCreateSeeded) {
		return ErrForkUnsupported
	}
	return nil
}

// registry is the provider registry Fork reads declarations from: the
// one SetProviders gave, or the default registry.
func (s *Service) registry() (*providers.Registry, error) {
	s.providersOnce.Do(func() {
		if s.providers == nil {
			s.providers, s.providersErr = providers.Default()
		}
	})
	return s.providers, s.providersErr
}

// SetProviders makes Fork read provider declarations from r (Core's
// registry) instead of the default one. Call it before serving.
func (s *Service) SetProviders(r *providers.Registry) { s.providers = r }

// truncate returns s cut to at most n characters.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}
