package microsandbox

// TEMPORARY, branch i29-ready only: the operations are helper A's
// (branch i29-adapter). This file exists so that the registration, the
// build and the readiness path (probe, node agent, Core, berthctl) compile
// and are tested on this branch before A's operations land. Every method
// refuses before any native call. The merge deletes this file and keeps
// A's operations (and A's Operations() declaration).

import (
	"context"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providercontract"
)

// ReasonNoCheckpoints is the reason code of the checkpoint operations
// until checkpoints on `msb snapshot` exist.
const ReasonNoCheckpoints providercontract.ReasonCode = "microsandbox_no_checkpoints"

var errPending = errdefs.Refuse(errdefs.ErrFailedPrecondition, "microsandbox_operations_pending",
	"the microsandbox operations are not built on this branch")

func unsupported(op providercontract.Operation) error {
	return &providercontract.UnsupportedError{Operation: op, Code: ReasonNoCheckpoints}
}

func (p *Provider) Create(context.Context, sandbox.CreateRequest) (sandbox.Info, error) {
	return sandbox.Info{}, errPending
}
func (p *Provider) GetInfo(context.Context, sandbox.Reference) (sandbox.Info, error) {
	return sandbox.Info{}, errPending
}
func (p *Provider) Renew(context.Context, sandbox.Reference) (sandbox.Info, error) {
	return sandbox.Info{}, errPending
}
func (p *Provider) Kill(context.Context, sandbox.KillRequest) error { return errPending }
func (p *Provider) RunCommand(context.Context, sandbox.Reference, sandbox.Command) (sandbox.CommandResult, error) {
	return sandbox.CommandResult{}, errPending
}
func (p *Provider) Observe(context.Context, sandbox.Reference) (sandbox.Observation, error) {
	return sandbox.Observation{}, errPending
}
func (p *Provider) ObserveBatch(context.Context, []sandbox.Reference) ([]sandbox.ObservationResult, error) {
	return nil, &providercontract.UnsupportedError{Operation: sandbox.OpObserveBatch, Code: ReasonNoNativeBatch}
}
func (p *Provider) DiscoverSelection(context.Context, sandbox.NativeConfiguration) (sandbox.NativeConfiguration, error) {
	return nil, &providercontract.UnsupportedError{Operation: sandbox.OpDiscoverSelection, Code: "node_provider_no_discovery"}
}
func (p *Provider) VerifyCredential(context.Context, sandbox.NativeConfiguration) error {
	return &providercontract.UnsupportedError{Operation: sandbox.OpVerifyCredential, Code: "node_provider_no_credential"}
}
func (p *Provider) Initial(sandbox.Reference) (sandbox.Compute, error) {
	return sandbox.Compute{}, unsupported(sandbox.OpInitial)
}
func (p *Provider) NewCompute(sandbox.Compute) (sandbox.Compute, error) {
	return sandbox.Compute{}, unsupported(sandbox.OpNewCompute)
}
func (p *Provider) GetCompute(context.Context, sandbox.Compute) (sandbox.ComputeInfo, error) {
	return sandbox.ComputeInfo{}, unsupported(sandbox.OpGetCompute)
}
func (p *Provider) Suspend(context.Context, sandbox.SuspendRequest) (sandbox.SuspendResult, error) {
	return sandbox.SuspendResult{}, unsupported(sandbox.OpSuspend)
}
func (p *Provider) Resume(context.Context, sandbox.ResumeRequest) (sandbox.ResumeResult, error) {
	return sandbox.ResumeResult{}, unsupported(sandbox.OpResume)
}
func (p *Provider) ResumeCompute(context.Context, sandbox.Compute) (sandbox.ComputeInfo, error) {
	return sandbox.ComputeInfo{}, unsupported(sandbox.OpResumeCompute)
}
func (p *Provider) KillCompute(context.Context, sandbox.Compute) error {
	return unsupported(sandbox.OpKillCompute)
}
func (p *Provider) DeleteSnapshot(context.Context, sandbox.Reference, sandbox.SnapshotIdentity) error {
	return unsupported(sandbox.OpDeleteSnapshot)
}
func (p *Provider) RunCommandCompute(context.Context, sandbox.Compute, sandbox.Command) (sandbox.CommandResult, error) {
	return sandbox.CommandResult{}, unsupported(sandbox.OpRunCommandCompute)
}

// owns is used by A's operations; referenced here so that the linter's
// unused check passes on this branch.
var _ = (*Provider).owns
