package direct

import (
	"context"

	"github.com/google/uuid"

	"berth.dev/core/store"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providercontract"
)

// ReasonDirectLane is the reason code of the operations the direct lane's
// provider does not offer: checkpoints (the guide: node mode only),
// observation beyond GetInfo, discovery and credential verification
// (Core verifies a key through the adapter itself, never through the
// lane).
const ReasonDirectLane providercontract.ReasonCode = "direct_lane"

// Operations is the direct lane provider's declaration: the five required
// operations, nothing else.
func Operations() providercontract.Operations {
	s := providercontract.Supported()
	u := providercontract.Unsupported(ReasonDirectLane)
	return sandbox.WithoutCheckpoints(providercontract.Operations{
		sandbox.OpCreate: s, sandbox.OpGetInfo: s, sandbox.OpRenew: s, sandbox.OpKill: s, sandbox.OpRunCommand: s,
		sandbox.OpObserve: u, sandbox.OpObserveBatch: u, sandbox.OpDiscoverSelection: u, sandbox.OpVerifyCredential: u,
	}, ReasonDirectLane)
}

// errNotDirect refuses a Reference that is not a direct allocation's as
// Core recorded it. Nothing was sent.
var errNotDirect error = errdefs.Invalid("reference", "is not a direct allocation")

// proxy is the direct lane's provider (Set.Provider).
type proxy struct {
	set *Set
	ops providercontract.Operations
}

func (p *proxy) ProviderOperations() providercontract.Operations { return p.ops.Clone() }

// resolve returns the adapter of ref's allocation's generation: ref must
// be exactly the Reference of a direct allocation Core recorded.
func (p *proxy) resolve(ctx context.Context, ref sandbox.Reference) (sandbox.SandboxProvider, error) {
	if err := ref.Validate(); err != nil {
		return nil, err
	}
	id, err := uuid.Parse(ref.AllocationID)
	if err != nil {
		return nil, errNotDirect
	}
	a, err := p.set.cfg.Store.GetAllocation(ctx, id)
	switch {
	case errdefs.IsNotFound(err):
		return nil, errNotDirect
	case err != nil:
		return nil, err
	case !a.Answers(store.DirectLane, ref):
		return nil, errNotDirect
	}
	return p.set.adapter(uint64(a.Generation))
}

// Create sends Create to the allocation's adapter. A refusal before
// anything was sent comes with the absence receipt: this attempt can
// never make anything.
func (p *proxy) Create(ctx context.Context, req sandbox.CreateRequest) (sandbox.Info, error) {
	if err := req.Validate(); err != nil {
		return sandbox.Info{}, err
	}
	a, err := p.resolve(ctx, req.Reference)
	if err != nil {
		return sandbox.Info{Reference: req.Reference, State: sandbox.StateAbsent, CreateSettled: true}, err
	}
	return a.Create(ctx, req)
}

func (p *proxy) GetInfo(ctx context.Context, ref sandbox.Reference) (sandbox.Info, error) {
	a, err := p.resolve(ctx, ref)
	if err != nil {
		return sandbox.Info{}, err
	}
	return a.GetInfo(ctx, ref)
}

func (p *proxy) Renew(ctx context.Context, ref sandbox.Reference) (sandbox.Info, error) {
	a, err := p.resolve(ctx, ref)
	if err != nil {
		return sandbox.Info{}, err
	}
	return a.Renew(ctx, ref)
}

func (p *proxy) Kill(ctx context.Context, req sandbox.KillRequest) error {
	a, err := p.resolve(ctx, req.Reference)
	if err != nil {
		return err
	}
	return a.Kill(ctx, req)
}

func (p *proxy) RunCommand(ctx context.Context, ref sandbox.Reference, cmd sandbox.Command) (sandbox.CommandResult, error) {
	a, err := p.resolve(ctx, ref)
	if err != nil {
		return sandbox.CommandResult{}, err
	}
	return a.RunCommand(ctx, ref, cmd)
}
