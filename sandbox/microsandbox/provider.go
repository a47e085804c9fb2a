package microsandbox

import (
	"crypto/sha256"
	"encoding/hex"

	"berth.dev/sandbox"
	"berth.dev/sandbox/nodeconfig"
	"berth.dev/sandbox/providercontract"
)

// Kind is the microsandbox provider's kind.
const Kind = "microsandbox"

// PinnedVersion is the one msb release the adapter drives; `msb --version`
// must print exactly "msb " + PinnedVersion. libkrunfw comes with it.
const (
	PinnedVersion   = "0.6.18"
	PinnedLibkrunfw = "libkrunfw.so.5.6.1"
)

// The ownership labels carried by every sandbox (the same keys as the
// Docker adapter's, so an operator reads one vocabulary).
const (
	LabelInstallation = "io.berth.installation"
	LabelTenant       = "io.berth.tenant"
	LabelEnvironment  = "io.berth.environment"
	LabelAllocation   = "io.berth.allocation"
)

// The reason codes of the adapter's unsupported operations.
const (
	ReasonNoNativeBatch providercontract.ReasonCode = "microsandbox_no_native_batch"
)

// Operations is the adapter's one declaration, shared by its instances and
// its registration.
func Operations() providercontract.Operations {
	s := providercontract.Supported()
	return sandbox.WithoutCheckpoints(providercontract.Operations{
		sandbox.OpCreate: s, sandbox.OpGetInfo: s, sandbox.OpRenew: s, sandbox.OpKill: s, sandbox.OpRunCommand: s,
		sandbox.OpObserve:           s,
		sandbox.OpObserveBatch:      providercontract.Unsupported(ReasonNoNativeBatch),
		sandbox.OpDiscoverSelection: providercontract.Unsupported(nodeconfig.ReasonNoDiscovery),
		sandbox.OpVerifyCredential:  providercontract.Unsupported(nodeconfig.ReasonNoCredential),
	}, ReasonNoCheckpoints)
}

// Options configure a Provider.
type Options struct {
	// InstallationID binds every sandbox to the installation.
	InstallationID string
	Config         NodeConfig
	// Resources are the deployment's per-sandbox limits, used by the
	// probe's capacity check; Create takes its limits from the request.
	Resources sandbox.Resources
	// StateDirectory is the generation's state directory on the node
	// (providerapi.LocalOptions.GenerationStateDirectory): workspaces and
	// the adapter's records live below it.
	StateDirectory string
	// Host are the host files the probe reads; zero fields are the real
	// host's (DefaultHostPaths). Only tests set them.
	Host HostPaths
}

// Provider is the microsandbox adapter.
type Provider struct {
	ops  providercontract.Operations
	msb  Runner
	opts Options
}

// New returns an adapter that drives msb through run.
func New(run Runner, opts Options) *Provider {
	return &Provider{ops: Operations(), msb: run, opts: opts}
}

// ProviderOperations returns a copy of the declaration.
func (p *Provider) ProviderOperations() providercontract.Operations { return p.ops.Clone() }

// Name is the deterministic sandbox name of ref.
func (p *Provider) Name(ref sandbox.Reference) string {
	return ResourceName(p.opts.InstallationID, ref)
}

// ResourceName derives the sandbox name of ref in an installation.
func ResourceName(installation string, ref sandbox.Reference) string {
	sum := sha256.Sum256([]byte(installation + "\x00" + ref.TenantID + "\x00" + ref.EnvironmentID + "\x00" + ref.AllocationID))
	return "berth-" + hex.EncodeToString(sum[:12])
}

// Labels returns the ownership labels of ref's sandbox.
func (p *Provider) Labels(ref sandbox.Reference) map[string]string {
	return map[string]string{
		LabelInstallation: p.opts.InstallationID,
		LabelTenant:       ref.TenantID,
		LabelEnvironment:  ref.EnvironmentID,
		LabelAllocation:   ref.AllocationID,
	}
}

// owns reports whether labels carry every ownership label of ref.
func (p *Provider) owns(ref sandbox.Reference, labels map[string]string) bool {
	for k, v := range p.Labels(ref) {
		if labels[k] != v {
			return false
		}
	}
	return true
}
