package memdirect

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providerapi"
	"berth.dev/sandbox/providercontract"
)

// Kind is memdirect's provider kind.
const Kind = "memdirect"

// The ownership metadata every sandbox of a memdirect adapter carries,
// the berth_* keys the E2B adapter will use.
const (
	MetaInstallation = "berth_installation"
	MetaTenant       = "berth_tenant"
	MetaEnvironment  = "berth_environment"
	MetaAllocation   = "berth_allocation"
)

// The reason codes of its unsupported operations.
const (
	ReasonNoCheckpoint  providercontract.ReasonCode = "memdirect_no_checkpoint"
	ReasonNoObservation providercontract.ReasonCode = "memdirect_no_observation"
	ReasonNoDiscovery   providercontract.ReasonCode = "memdirect_no_discovery"
)

// CreateGrace is how long a Create whose caller gave up may go on (its
// deadline still binds it), keeping its Reference's turn and its count
// in the fence: the node agent's CreateGrace.
const CreateGrace = 5 * time.Second

// Operations is memdirect's one declaration, shared by its instances and
// its registration: the five required operations and credential
// verification supported; checkpoints, observation and discovery not.
func Operations() providercontract.Operations {
	s := providercontract.Supported()
	ops := sandbox.WithoutCheckpoints(providercontract.Operations{
		sandbox.OpCreate: s, sandbox.OpGetInfo: s, sandbox.OpRenew: s, sandbox.OpKill: s, sandbox.OpRunCommand: s,
		sandbox.OpObserve:           providercontract.Unsupported(ReasonNoObservation),
		sandbox.OpObserveBatch:      providercontract.Unsupported(ReasonNoObservation),
		sandbox.OpDiscoverSelection: providercontract.Unsupported(ReasonNoDiscovery),
		sandbox.OpVerifyCredential:  s,
	}, ReasonNoCheckpoint)
	return ops
}

// Registration returns memdirect's direct registration over v. Each
// test builds its own registry with it; the production table never
// holds it.
func Registration(v *Vendor) providerapi.Registration {
	return providerapi.Registration{
		Kind:                  Kind,
		Mode:                  providerapi.ModeDirect,
		ValidateSpecification: func(sandbox.Specification) error { return nil },
		ValidateResources:     func(sandbox.Resources) error { return nil },
		Configuration:         configAdapter{},
		Operations:            Operations(),
		RuntimeInput:          providerapi.RuntimeInputPolicy{AcceptsPinnedRuntime: true},
		BuildDirect: func(ctx context.Context, cfg sandbox.NativeConfiguration, req providerapi.DirectRequest) (providerapi.DirectBuilt, error) {
			return build(ctx, v, cfg, req)
		},
	}
}

// The adapter's errors: errdefs classes with fixed text, never the
// vendor's (which quotes keys and ids).
var (
	errCredentialRejected = errdefs.Refuse(errdefs.ErrFailedPrecondition, "credential_rejected",
		"the vendor rejected the deployment's API key: replace the credential")
	errClosed = errdefs.Refuse(errdefs.ErrFenced, "adapter_closed",
		"the provider adapter of this generation is closed: nothing was sent")
	errForeign = fmt.Errorf("memdirect: a sandbox listed for the allocation carries another owner's berth_* metadata, nothing was touched: %w",
		errdefs.ErrOwnership)
	errDuplicate = fmt.Errorf("memdirect: more than one sandbox carries the allocation's metadata, nothing was touched: %w",
		errdefs.ErrOwnership)
	errNotFound            = fmt.Errorf("memdirect: no sandbox of the allocation is listed: %w", errdefs.ErrNotFound)
	errCreateNotSent       = fmt.Errorf("memdirect create: the vendor's listing failed before anything was sent to create: %w", errdefs.ErrObservationUnavailable)
	errCreateRefused       = fmt.Errorf("memdirect create: the vendor refused the request: %w", errdefs.ErrInvalid)
	errCreateUnconfirmed   = fmt.Errorf("memdirect create: no complete answer from the vendor: %w", errdefs.ErrComputeUnconfirmed)
	errRenewUnconfirmed    = fmt.Errorf("memdirect renew: no complete answer from the vendor: %w", errdefs.ErrComputeUnconfirmed)
	errKillUnconfirmed     = fmt.Errorf("memdirect kill: no complete answer from the vendor: %w", errdefs.ErrComputeUnconfirmed)
	errCommandUnconfirmed  = fmt.Errorf("memdirect run: no complete answer from the vendor: %w", errdefs.ErrCommandUnconfirmed)
	errUnavailable         = fmt.Errorf("memdirect: the vendor's listing failed: %w", errdefs.ErrObservationUnavailable)
	errInstallationInvalid = errdefs.Invalid("installation_id", "must be a canonical lowercase UUID")
	errBuildUnavailable    = fmt.Errorf("memdirect: the vendor did not answer at construction: %w", errdefs.ErrObservationUnavailable)
)

// Provider is memdirect's adapter: one instance per generation Core
// serves, bound to its vendor, key, installation and fence.
type Provider struct {
	// memdirect has no checkpoints (a direct provider: the guide ties
	// checkpoint support to node mode): every CheckpointProvider method
	// answers the declaration's UnsupportedError before any native call.
	sandbox.CheckpointsUnsupported
	ops          providercontract.Operations
	vendor       *Vendor
	key          sandbox.Credential
	template     string
	lease        time.Duration
	installation string
	fence        *sandbox.CallFence
	closed       atomic.Bool
}

var (
	_ sandbox.SandboxProvider    = (*Provider)(nil)
	_ sandbox.CredentialVerifier = (*Provider)(nil)
)

// build is memdirect's constructor: it asks the vendor whose key it
// holds (construction validates the vendor side and creates nothing)
// and names that team in the backend fingerprint.
func build(ctx context.Context, v *Vendor, n sandbox.NativeConfiguration, req providerapi.DirectRequest) (providerapi.DirectBuilt, error) {
	cfg, ok := n.(Config)
	if !ok {
		return providerapi.DirectBuilt{}, errOtherKind
	}
	if !sandbox.CanonicalUUID(req.InstallationID) {
		return providerapi.DirectBuilt{}, errInstallationInvalid
	}
	team, err := v.whoAmI(ctx, string(cfg.key.Reveal()))
	switch {
	case statusOf(err) == 401:
		return providerapi.DirectBuilt{}, errCredentialRejected
	case err != nil:
		return providerapi.DirectBuilt{}, errBuildUnavailable
	}
	ops := Operations()
	p := &Provider{
		CheckpointsUnsupported: sandbox.CheckpointsUnsupported{Ops: ops},
		ops:                    ops,
		vendor:                 v,
		key:                    cfg.key,
		template:               cfg.Template,
		lease:                  cfg.Lease,
		installation:           req.InstallationID,
		fence:                  &sandbox.CallFence{},
	}
	return providerapi.DirectBuilt{
		Provider:           p,
		Probe:              p.probe,
		Close:              p.close,
		Fence:              p.fence,
		BackendFingerprint: "memdirect:" + v.id + ":team:" + team,
	}, nil
}

// Fence returns the adapter's one CallFence (DirectBuilt.Fence).
func (p *Provider) Fence() *sandbox.CallFence { return p.fence }

// ProviderOperations returns a copy of the declaration.
func (p *Provider) ProviderOperations() providercontract.Operations { return p.ops.Clone() }

// Metadata is the berth_* metadata of installation's sandbox for ref:
// what Create writes and every other call requires, key for key.
func Metadata(installation string, ref sandbox.Reference) map[string]string {
	return map[string]string{
		MetaInstallation: installation,
		MetaTenant:       ref.TenantID,
		MetaEnvironment:  ref.EnvironmentID,
		MetaAllocation:   ref.AllocationID,
	}
}

func (p *Provider) owns(ref sandbox.Reference, s Sandbox) bool {
	for k, want := range Metadata(p.installation, ref) {
		if s.Metadata[k] != want {
			return false
		}
	}
	return true
}

func (p *Provider) apiKey() string { return string(p.key.Reveal()) }

// find lists the sandboxes carrying ref's allocation and splits them
// into owned (every berth_* key equal) and foreign ones.
func (p *Provider) find(ctx context.Context, ref sandbox.Reference) (owned []Sandbox, foreign bool, err error) {
	listed, err := p.vendor.list(ctx, p.apiKey(), map[string]string{MetaAllocation: ref.AllocationID})
	if err != nil {
		return nil, false, err
	}
	for _, s := range listed {
		if p.owns(ref, s) {
			owned = append(owned, s)
		} else {
			foreign = true
		}
	}
	return owned, foreign, nil
}

// fenced runs one native call about ref under its turn in the fence, the
// turn held until the call returned (the vendor's calls return only once
// their work has ended).
func (p *Provider) fenced(ctx context.Context, ref sandbox.Reference, call func(context.Context) error) error {
	if p.closed.Load() {
		return errClosed
	}
	done, err := p.fence.Enter(ctx, ref)
	if err != nil {
		return err
	}
	defer done()
	return call(ctx)
}

// settled is a sandbox observed for ref: running with its bootstrap
// complete (nothing runs in a memdirect sandbox; the vendor holding it is
// all there is), creation settled, its lease's end.
func settled(ref sandbox.Reference, s Sandbox) sandbox.Info {
	return sandbox.Info{Reference: ref, ProviderID: s.ID, State: sandbox.StateRunning,
		BootstrapComplete: true, CreateSettled: true, LeaseExpiry: s.EndAt}
}

// receipt is the explicit creation-absence receipt for ref.
func receipt(ref sandbox.Reference) sandbox.Info {
	return sandbox.Info{Reference: ref, State: sandbox.StateAbsent, CreateSettled: true}
}

func isContext(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// Create lists the allocation's metadata, refuses a duplicate or a
// foreign sandbox, and creates once. It runs detached (sandbox.Detach):
// a caller that gives up gets an unknown outcome while the vendor call
// keeps the Reference's turn until it has returned, so the next call
// about the Reference observes its result. A refusal before the create
// call was sent (the fence, a foreign sandbox, a failed listing) and a
// complete refusal of it return the absence receipt with the error: the
// one attempt can never make anything.
func (p *Provider) Create(ctx context.Context, req sandbox.CreateRequest) (sandbox.Info, error) {
	if err := p.ops.Check(sandbox.OpCreate); err != nil {
		return sandbox.Info{}, err
	}
	if err := req.Validate(); err != nil {
		return sandbox.Info{}, err
	}
	ref := req.Reference
	if p.closed.Load() {
		return receipt(ref), errClosed
	}
	info, err := sandbox.Detach(p.fence, ctx, ref, CreateGrace, func(nctx context.Context) (sandbox.Info, error) {
		return p.create(nctx, ref)
	})
	switch {
	case errors.Is(err, sandbox.ErrCallFenced):
		return receipt(ref), err
	case isContext(err):
		return sandbox.Info{}, errCreateUnconfirmed
	}
	return info, err
}

func (p *Provider) create(ctx context.Context, ref sandbox.Reference) (sandbox.Info, error) {
	owned, foreign, err := p.find(ctx, ref)
	switch {
	case statusOf(err) == 401:
		return receipt(ref), errCredentialRejected
	case err != nil:
		return receipt(ref), errCreateNotSent
	case foreign:
		return receipt(ref), errForeign
	case len(owned) > 0:
		return sandbox.Info{}, fmt.Errorf("memdirect create: a sandbox of the allocation exists: %w", errdefs.ErrExists)
	}
	s, err := p.vendor.create(ctx, p.apiKey(), p.template, Metadata(p.installation, ref), p.lease)
	switch status := statusOf(err); {
	case status == 401:
		return receipt(ref), errCredentialRejected
	case status != 0:
		return receipt(ref), errCreateRefused
	case err != nil:
		return sandbox.Info{}, errCreateUnconfirmed
	}
	return settled(ref, s), nil
}

// GetInfo lists the allocation's metadata: its one owned sandbox, or,
// when none is listed, the absence receipt. The receipt is justified
// because GetInfo holds the Reference's turn, so no Create of this
// adapter about it runs, the vendor's calls are atomic, and Core sends
// a Reference's calls to one adapter instance only, excluding its fence
// before it builds another (see doc.go). An owned and a foreign sandbox,
// or two owned ones, are an ownership error.
func (p *Provider) GetInfo(ctx context.Context, ref sandbox.Reference) (sandbox.Info, error) {
	if err := p.ops.Check(sandbox.OpGetInfo); err != nil {
		return sandbox.Info{}, err
	}
	if err := ref.Validate(); err != nil {
		return sandbox.Info{}, err
	}
	var info sandbox.Info
	err := p.fenced(ctx, ref, func(ctx context.Context) error {
		owned, foreign, err := p.find(ctx, ref)
		switch {
		case err != nil:
			return p.readErr(err)
		case foreign:
			return errForeign
		case len(owned) > 1:
			return errDuplicate
		case len(owned) == 0:
			info = receipt(ref)
			return nil
		}
		info = settled(ref, owned[0])
		return nil
	})
	if isContext(err) {
		return sandbox.Info{}, errUnavailable
	}
	return info, err
}

// readErr maps a failed listing: a rejected key, or no observation now.
func (p *Provider) readErr(err error) error {
	if statusOf(err) == 401 {
		return errCredentialRejected
	}
	return errUnavailable
}

// Renew sets the lease of the allocation's one owned sandbox to the
// configured lease from now and reads it back. It never revives: with
// nothing listed it is ErrNotFound.
func (p *Provider) Renew(ctx context.Context, ref sandbox.Reference) (sandbox.Info, error) {
	if err := p.ops.Check(sandbox.OpRenew); err != nil {
		return sandbox.Info{}, err
	}
	if err := ref.Validate(); err != nil {
		return sandbox.Info{}, err
	}
	var info sandbox.Info
	err := p.fenced(ctx, ref, func(ctx context.Context) error {
		owned, err := p.one(ctx, ref)
		if err != nil {
			return err
		}
		err = p.vendor.setTimeout(ctx, p.apiKey(), owned.ID, p.lease)
		switch status := statusOf(err); {
		case status == 401:
			return errCredentialRejected
		case status == 404:
			return errNotFound
		case err != nil:
			return errRenewUnconfirmed
		}
		after, err := p.one(ctx, ref)
		if err != nil || after.ID != owned.ID {
			return errRenewUnconfirmed
		}
		info = settled(ref, after)
		return nil
	})
	if isContext(err) {
		return sandbox.Info{}, errRenewUnconfirmed
	}
	return info, err
}

// one is the allocation's one owned sandbox, or an error: a rejected
// key, no listing, a foreign or duplicate sandbox, or ErrNotFound.
func (p *Provider) one(ctx context.Context, ref sandbox.Reference) (Sandbox, error) {
	owned, foreign, err := p.find(ctx, ref)
	switch {
	case err != nil:
		return Sandbox{}, p.readErr(err)
	case foreign:
		return Sandbox{}, errForeign
	case len(owned) > 1:
		return Sandbox{}, errDuplicate
	case len(owned) == 0:
		return Sandbox{}, errNotFound
	}
	return owned[0], nil
}

// Kill removes every owned sandbox of the allocation and confirms with a
// second listing that none is left. With a foreign sandbox listed it
// touches nothing. Nothing listed is confirmed absence, within its key's
// team (see doc.go).
func (p *Provider) Kill(ctx context.Context, req sandbox.KillRequest) error {
	if err := p.ops.Check(sandbox.OpKill); err != nil {
		return err
	}
	if err := req.Validate(); err != nil {
		return err
	}
	ref := req.Reference
	err := p.fenced(ctx, ref, func(ctx context.Context) error {
		owned, foreign, err := p.find(ctx, ref)
		switch {
		case statusOf(err) == 401:
			return errCredentialRejected
		case err != nil:
			return errKillUnconfirmed
		case foreign:
			return errForeign
		}
		for _, s := range owned {
			err := p.vendor.kill(ctx, p.apiKey(), s.ID)
			switch status := statusOf(err); {
			case status == 401:
				return errCredentialRejected
			case status == 404:
				// Gone already (its lease ended): the listing confirms.
			case err != nil:
				return errKillUnconfirmed
			}
		}
		left, foreign, err := p.find(ctx, ref)
		switch {
		case err != nil:
			return errKillUnconfirmed
		case foreign:
			return errForeign
		case len(left) > 0:
			return errKillUnconfirmed
		}
		return nil
	})
	if isContext(err) {
		return errKillUnconfirmed
	}
	return err
}

// RunCommand runs nothing: the vendor answers exit 0 with no output for
// the allocation's one owned sandbox.
func (p *Provider) RunCommand(ctx context.Context, ref sandbox.Reference, cmd sandbox.Command) (sandbox.CommandResult, error) {
	if err := p.ops.Check(sandbox.OpRunCommand); err != nil {
		return sandbox.CommandResult{}, err
	}
	if err := ref.Validate(); err != nil {
		return sandbox.CommandResult{}, err
	}
	if err := cmd.Validate(); err != nil {
		return sandbox.CommandResult{}, err
	}
	var res sandbox.CommandResult
	err := p.fenced(ctx, ref, func(ctx context.Context) error {
		owned, err := p.one(ctx, ref)
		if err != nil {
			return err
		}
		code, err := p.vendor.run(ctx, p.apiKey(), owned.ID)
		switch status := statusOf(err); {
		case status == 401:
			return errCredentialRejected
		case status == 404:
			return errNotFound
		case err != nil:
			return errCommandUnconfirmed
		}
		res = sandbox.CommandResult{ExitCode: code}
		return nil
	})
	if isContext(err) {
		return sandbox.CommandResult{}, errCommandUnconfirmed
	}
	return res, err
}

// Observe is unsupported.
func (p *Provider) Observe(context.Context, sandbox.Reference) (sandbox.Observation, error) {
	return sandbox.Observation{}, p.ops.Check(sandbox.OpObserve)
}

// ObserveBatch is unsupported.
func (p *Provider) ObserveBatch(context.Context, []sandbox.Reference) ([]sandbox.ObservationResult, error) {
	return nil, p.ops.Check(sandbox.OpObserveBatch)
}

// DiscoverSelection is unsupported.
func (p *Provider) DiscoverSelection(context.Context, sandbox.NativeConfiguration) (sandbox.NativeConfiguration, error) {
	return nil, p.ops.Check(sandbox.OpDiscoverSelection)
}

// VerifyCredential checks, without mutation, that cfg's key is accepted
// and can list the installation's sandboxes. It runs under the fence's
// turn of the zero Reference, so it is excluded with every other call.
// It proves access, not visibility of a given allocation: a key of
// another team passes it too (Core checks each allocation through
// GetInfo, docs/direct-lifecycle-plan.md §6).
func (p *Provider) VerifyCredential(ctx context.Context, n sandbox.NativeConfiguration) error {
	if err := p.ops.Check(sandbox.OpVerifyCredential); err != nil {
		return err
	}
	cfg, ok := n.(Config)
	if !ok {
		return errOtherKind
	}
	if cfg.key.Len() == 0 {
		return errCredential
	}
	err := p.fenced(ctx, sandbox.Reference{}, func(ctx context.Context) error {
		_, err := p.vendor.list(ctx, string(cfg.key.Reveal()), map[string]string{MetaInstallation: p.installation})
		if err != nil {
			return p.readErr(err)
		}
		return nil
	})
	if isContext(err) {
		return errUnavailable
	}
	return err
}

// The probe's fixed diagnostic codes.
const (
	ProbeCredentialRejected = "credential_rejected"
	ProbeVendorUnreachable  = "vendor_unreachable"
	ProbeFenced             = "call_fenced"
)

// probe asks the vendor whose key the adapter holds, under the fence.
func (p *Provider) probe(ctx context.Context) error {
	err := p.fenced(ctx, sandbox.Reference{}, func(ctx context.Context) error {
		_, err := p.vendor.whoAmI(ctx, p.apiKey())
		return err
	})
	switch {
	case err == nil:
		return nil
	case statusOf(err) == 401:
		return &sandbox.ProbeError{Code: ProbeCredentialRejected}
	case errors.Is(err, sandbox.ErrCallFenced), errors.Is(err, errClosed):
		return &sandbox.ProbeError{Code: ProbeFenced}
	}
	return &sandbox.ProbeError{Code: ProbeVendorUnreachable}
}

// close makes every later call answer errClosed without reaching the
// vendor. Core calls it after excluding the fence.
func (p *Provider) close() error {
	p.closed.Store(true)
	return nil
}
