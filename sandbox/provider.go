package sandbox

import (
	"context"
	"io"

	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox/providercontract"
)

// CreateRequest asks for compute for Reference and the bounded Runtime
// bootstrap. Only a fresh allocation receipt permits it, and it is never
// replayed.
type CreateRequest struct {
	Reference Reference
	Resources Resources
	Bootstrap runtimebootstrap.File
	// CoreCA is the PEM CA certificate the Runtime trusts for Core's
	// https URL, which the adapter places beside the bootstrap file
	// (runtimebootstrap.CAFile, mode 0644); empty: none.
	CoreCA []byte
}

// KillRequest asks for an allocation's cleanup. CreateSettled carries what
// Core knows of the allocation's Create: true when Core holds settlement
// evidence (a settled running resource it observed, or an absence
// receipt), so no request of the original attempt can change resources any
// more. An adapter that settles unknown creations by claiming the
// Reference's names (the Docker tombstone) then needs no claim: a Kill
// that finds nothing of a settled allocation leaves nothing behind.
// CreateSettled never makes Kill remove anything it would not remove
// without it.
type KillRequest struct {
	Reference     Reference
	CreateSettled bool
}

// Validate checks the request before any native call.
func (r KillRequest) Validate() error { return r.Reference.Validate() }

// Validate checks the request before any native call.
func (r CreateRequest) Validate() error {
	if err := r.Reference.Validate(); err != nil {
		return err
	}
	if err := r.Resources.Validate(); err != nil {
		return err
	}
	if err := r.Bootstrap.Validate(); err != nil {
		return invalidBootstrap
	}
	if runtimebootstrap.ValidateCA(r.CoreCA) != nil {
		return invalidCoreCA
	}
	return nil
}

// SandboxProvider is the contract every adapter implements. All five
// operations are required and supported; every call receives a bounded
// context whose expiry proves no rollback, stop, cleanup or absence.
type SandboxProvider interface {
	// ProviderOperations returns the adapter's complete declaration, the
	// same value its registration holds.
	ProviderOperations() providercontract.Operations
	// Create creates compute for the Reference and runs the bounded daemon
	// bootstrap. A duplicate returns ErrExists; after a failure with
	// resources in place it returns the Reference with the error.
	Create(ctx context.Context, req CreateRequest) (Info, error)
	// GetInfo observes current compute without changing it. ErrNotFound is
	// only a missing observation.
	GetInfo(ctx context.Context, ref Reference) (Info, error)
	// Renew extends a native lease, or only observes for a backend without
	// leases. It never revives compute.
	Renew(ctx context.Context, ref Reference) (Info, error)
	// Kill removes the allocation's owned compute and retained storage and
	// confirms absence; repeated confirmed absence succeeds. It never removes
	// a resource it does not own.
	Kill(ctx context.Context, req KillRequest) error
	// RunCommand runs a bounded command. Missing native completion is
	// ErrCommandUnconfirmed; it is never replayed.
	RunCommand(ctx context.Context, ref Reference, cmd Command) (CommandResult, error)
}

// CheckpointProvider captures and restores exact compute incarnations.
// Every adapter implements it and declares all of its methods alike.
type CheckpointProvider interface {
	// Initial constructs the first incarnation's reference without
	// allocating anything.
	Initial(ref Reference) (Compute, error)
	// NewCompute constructs the reference of the incarnation after
	// previous, without allocating anything.
	NewCompute(previous Compute) (Compute, error)
	GetCompute(ctx context.Context, c Compute) (ComputeInfo, error)
	Suspend(ctx context.Context, req SuspendRequest) (SuspendResult, error)
	// Capture copies an incarnation's filesystem into a snapshot like
	// Suspend but keeps the source (CaptureRequest), so a fork can seed
	// children from a Session that goes on working.
	Capture(ctx context.Context, req CaptureRequest) (CaptureResult, error)
	// CreateSeeded is Create for a fork's child: the new allocation's
	// filesystem starts as a copy of another allocation's snapshot
	// (SeededCreateRequest), which stays.
	CreateSeeded(ctx context.Context, req SeededCreateRequest) (Info, error)
	// ExportSnapshot writes snapshot s of owner to w as an archive that
	// ImportSnapshot on another node reads back; the snapshot stays.
	ExportSnapshot(ctx context.Context, owner Reference, s SnapshotIdentity, w io.Writer) error
	// ImportSnapshot makes a snapshot of req.Owner from an archive
	// ExportSnapshot wrote (ImportRequest), or discards one.
	ImportSnapshot(ctx context.Context, req ImportRequest, r io.Reader) (SnapshotIdentity, error)
	Resume(ctx context.Context, req ResumeRequest) (ResumeResult, error)
	// ResumeCompute only thaws the same resident instance after an aborted
	// pause; it never cold-starts a stopped one.
	ResumeCompute(ctx context.Context, c Compute) (ComputeInfo, error)
	KillCompute(ctx context.Context, c Compute) error
	DeleteSnapshot(ctx context.Context, ref Reference, s SnapshotIdentity) error
	// RunCommandCompute runs a bounded command in one exact incarnation.
	RunCommandCompute(ctx context.Context, c Compute, cmd Command) (CommandResult, error)
}

// ObservationSource is runtimeobs.Source: ownership-checked read-only
// observations. Observation never renews, starts, prepares or stops compute.
type ObservationSource interface {
	Observe(ctx context.Context, ref Reference) (Observation, error)
}

// BatchObservationSource is runtimeobs.BatchSource: bounded observations in
// input order with per-target errors. Only a typed UnsupportedError for
// ObserveBatch permits per-target Observe calls.
type BatchObservationSource interface {
	ObserveBatch(ctx context.Context, refs []Reference) ([]ObservationResult, error)
}

// SelectionDiscoverer resolves omitted native values of a configuration,
// read-only, before commit.
type SelectionDiscoverer interface {
	DiscoverSelection(ctx context.Context, cfg NativeConfiguration) (NativeConfiguration, error)
}

// CredentialVerifier verifies access to owned resources without mutation.
type CredentialVerifier interface {
	VerifyCredential(ctx context.Context, cfg NativeConfiguration) error
}
