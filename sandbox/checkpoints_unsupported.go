package sandbox

import (
	"context"
	"io"

	"berth.dev/sandbox/providercontract"
)

// CheckpointsUnsupported implements CheckpointProvider for an adapter
// whose declaration marks every checkpoint operation unsupported: each
// method answers the declaration's typed UnsupportedError and a zero
// result, with no native call. An adapter embeds it over its own
// declaration, so what it answers and what it declares cannot disagree,
// and the node proxy and Core see the same interface from every adapter.
type CheckpointsUnsupported struct {
	Ops providercontract.Operations
}

var _ CheckpointProvider = CheckpointsUnsupported{}

// Initial is unsupported.
func (c CheckpointsUnsupported) Initial(Reference) (Compute, error) {
	return Compute{}, c.Ops.Check(OpInitial)
}

// NewCompute is unsupported.
func (c CheckpointsUnsupported) NewCompute(Compute) (Compute, error) {
	return Compute{}, c.Ops.Check(OpNewCompute)
}

// GetCompute is unsupported.
func (c CheckpointsUnsupported) GetCompute(context.Context, Compute) (ComputeInfo, error) {
	return ComputeInfo{}, c.Ops.Check(OpGetCompute)
}

// Suspend is unsupported.
func (c CheckpointsUnsupported) Suspend(context.Context, SuspendRequest) (SuspendResult, error) {
	return SuspendResult{}, c.Ops.Check(OpSuspend)
}

// Capture is unsupported.
func (c CheckpointsUnsupported) Capture(context.Context, CaptureRequest) (CaptureResult, error) {
	return CaptureResult{}, c.Ops.Check(OpCapture)
}

// CreateSeeded is unsupported.
func (c CheckpointsUnsupported) CreateSeeded(context.Context, SeededCreateRequest) (Info, error) {
	return Info{}, c.Ops.Check(OpCreateSeeded)
}

// ExportSnapshot is unsupported.
func (c CheckpointsUnsupported) ExportSnapshot(context.Context, Reference, SnapshotIdentity, io.Writer) error {
	return c.Ops.Check(OpExportSnapshot)
}

// ImportSnapshot is unsupported.
func (c CheckpointsUnsupported) ImportSnapshot(context.Context, ImportRequest, io.Reader) (SnapshotIdentity, error) {
	return SnapshotIdentity{}, c.Ops.Check(OpImportSnapshot)
}

// Resume is unsupported.
func (c CheckpointsUnsupported) Resume(context.Context, ResumeRequest) (ResumeResult, error) {
	return ResumeResult{}, c.Ops.Check(OpResume)
}

// ResumeCompute is unsupported.
func (c CheckpointsUnsupported) ResumeCompute(context.Context, Compute) (ComputeInfo, error) {
	return ComputeInfo{}, c.Ops.Check(OpResumeCompute)
}

// KillCompute is unsupported.
func (c CheckpointsUnsupported) KillCompute(context.Context, Compute) error {
	return c.Ops.Check(OpKillCompute)
}

// DeleteSnapshot is unsupported.
func (c CheckpointsUnsupported) DeleteSnapshot(context.Context, Reference, SnapshotIdentity) error {
	return c.Ops.Check(OpDeleteSnapshot)
}

// RunCommandCompute is unsupported.
func (c CheckpointsUnsupported) RunCommandCompute(context.Context, Compute, Command) (CommandResult, error) {
	return CommandResult{}, c.Ops.Check(OpRunCommandCompute)
}
