package microsandbox

import (
	"context"

	"berth.dev/sandbox"
)

// The CheckpointProvider methods, all declared unsupported
// (ReasonNoCheckpoints): each returns the typed UnsupportedError and a
// zero result without a native call. doc.go says which guarantee of
// checkpoints on `msb snapshot` is not met yet.

// Initial is unsupported.
func (p *Provider) Initial(sandbox.Reference) (sandbox.Compute, error) {
	return sandbox.Compute{}, p.ops.Check(sandbox.OpInitial)
}

// NewCompute is unsupported.
func (p *Provider) NewCompute(sandbox.Compute) (sandbox.Compute, error) {
	return sandbox.Compute{}, p.ops.Check(sandbox.OpNewCompute)
}

// GetCompute is unsupported.
func (p *Provider) GetCompute(context.Context, sandbox.Compute) (sandbox.ComputeInfo, error) {
	return sandbox.ComputeInfo{}, p.ops.Check(sandbox.OpGetCompute)
}

// Suspend is unsupported.
func (p *Provider) Suspend(context.Context, sandbox.SuspendRequest) (sandbox.SuspendResult, error) {
	return sandbox.SuspendResult{}, p.ops.Check(sandbox.OpSuspend)
}

// Resume is unsupported.
func (p *Provider) Resume(context.Context, sandbox.ResumeRequest) (sandbox.ResumeResult, error) {
	return sandbox.ResumeResult{}, p.ops.Check(sandbox.OpResume)
}

// ResumeCompute is unsupported.
func (p *Provider) ResumeCompute(context.Context, sandbox.Compute) (sandbox.ComputeInfo, error) {
	return sandbox.ComputeInfo{}, p.ops.Check(sandbox.OpResumeCompute)
}

// KillCompute is unsupported.
func (p *Provider) KillCompute(context.Context, sandbox.Compute) error {
	return p.ops.Check(sandbox.OpKillCompute)
}

// DeleteSnapshot is unsupported.
func (p *Provider) DeleteSnapshot(context.Context, sandbox.Reference, sandbox.SnapshotIdentity) error {
	return p.ops.Check(sandbox.OpDeleteSnapshot)
}

// RunCommandCompute is unsupported.
func (p *Provider) RunCommandCompute(context.Context, sandbox.Compute, sandbox.Command) (sandbox.CommandResult, error) {
	return sandbox.CommandResult{}, p.ops.Check(sandbox.OpRunCommandCompute)
}
