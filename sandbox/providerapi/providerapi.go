package providerapi

import (
	"context"
	"encoding/json"

	"berth.dev/sandbox"
	"berth.dev/sandbox/providercontract"
)

// Mode is where a provider's adapter runs.
type Mode uint8

// The deployment modes. The zero value is no decision and never validates.
const (
	ModeUnset Mode = iota
	// ModeNodes: the adapter runs in each berth-nodeagent (BuildLocal).
	ModeNodes
	// ModeDirect: Core constructs the adapter itself (BuildDirect).
	ModeDirect
)

// ArtifactRole is a distribution artifact's installation role.
type ArtifactRole string

// The artifact roles.
const (
	RoleNode    ArtifactRole = "node"
	RoleRuntime ArtifactRole = "runtime"
	RolePolicy  ArtifactRole = "policy"
	RoleImage   ArtifactRole = "image"
)

// NodeArtifact is one file an adapter needs distributed (a node
// adapter's on every node; a direct adapter's, such as a vendor
// template's inputs, for the operator): its logical distribution path,
// release filename suffix and installation role.
type NodeArtifact struct {
	Path   string
	Suffix string
	Role   ArtifactRole
}

// RuntimeInputPolicy either accepts the pinned Runtime or gives the
// adapter's fixed reason for rejecting it, never both.
type RuntimeInputPolicy struct {
	AcceptsPinnedRuntime bool
	RejectReason         providercontract.ReasonCode
}

// LocalOptions are the ephemeral, node-side construction options. Exactly
// one context is selected: Standalone (standalone registration or
// single-provider execution) or GenerationStateDirectory (generation-owned
// execution with a canonical absolute node state directory).
type LocalOptions struct {
	Standalone               bool
	GenerationStateDirectory string
	InstallationID           string
	Generation               uint64
}

// LocalRequest is what a node passes to Build.
type LocalRequest struct {
	// Deployment is the generation's stored configuration.
	Deployment sandbox.EncodedConfiguration
	// Node is the node's persisted local configuration for the adapter,
	// decoded strictly by the adapter.
	Node          json.RawMessage
	Specification sandbox.Specification
	Options       LocalOptions
}

// Built is a constructed node-local adapter. Construction never creates an
// Environment.
type Built struct {
	Provider sandbox.SandboxProvider
	// Probe checks native readiness; its errors carry fixed diagnostic codes.
	Probe               func(ctx context.Context) error
	InstallationID      string
	BackendFingerprint  string
	SpecificationDigest string
	// DataRoot is the absolute directory, as the backend names it on its
	// host, under which the backend keeps sandboxes' data (the Docker
	// engine's DockerRootDir); empty when it has none on this host. The
	// node agent measures free disk there when it can see it. Optional.
	DataRoot string
	// Housekeep removes the creation-absence receipts that are no longer
	// needed (the Docker adapter's tombstones once the engine that could
	// hold a request of their Create has exited) and returns how many the
	// adapter still holds. The node agent calls it, bounded, beside the
	// probe on every health report, and reports the count. Optional: nil
	// for an adapter that keeps no such receipts. It is a callback rather
	// than a provider operation because it is the node's own upkeep: it
	// acts on no Reference Core names, and Core never calls it.
	Housekeep func(ctx context.Context) (held int, err error)
	// Close releases what construction acquired.
	Close func() error
}

// ProcessPaths is sandbox.ProcessPaths: the fixed distribution roots the
// caller derives once and passes to every direct construction.
type ProcessPaths = sandbox.ProcessPaths

// DirectRequest is what Core passes to BuildDirect.
type DirectRequest struct {
	// Deployment is the generation's stored public selectors and
	// observations. It never carries the secret (Secret zero): the
	// credential travels only in Credential.
	Deployment sandbox.EncodedConfiguration
	// Credential is the credential Core opened for the generation (its
	// sealed bytes, as the adapter's Encode wrote them): the current
	// credential of the generation's credential source. providers.
	// BuildDirect composes it into the decoded selectors through the
	// registration's Configuration.WithCredential, the one place an
	// adapter parses it, and passes the constructor a request whose
	// Credential is zero. Zero when the generation has none.
	Credential     sandbox.Credential
	Specification  sandbox.Specification
	InstallationID string
	// Generation is the deployment generation the adapter serves (1 or
	// more), so an adapter can name its private state and receipts per
	// generation; LocalOptions.Generation is the node-side counterpart.
	Generation uint64
	Paths      ProcessPaths
}

// DirectBuilt is a constructed direct adapter: what Core needs to serve
// and retire one generation without knowing the vendor. Construction
// never creates an Environment.
type DirectBuilt struct {
	Provider sandbox.SandboxProvider
	// Probe checks native readiness (the vendor reachable, the credential
	// accepted); its errors carry fixed diagnostic codes (sandbox.ProbeError).
	Probe func(ctx context.Context) error
	// Close releases what construction acquired. Core calls it only after
	// Fence.Exclude returned, so no native call of the adapter still runs.
	Close func() error
	// Fence is the one CallFence around every native call of the adapter:
	// Core excludes it before it replaces the credential or closes the
	// adapter (the guide's prepared fencing callback).
	Fence *sandbox.CallFence
	// BackendFingerprint names the vendor namespace the adapter reaches
	// (such as the API endpoint and the credential's team), at most 256
	// bytes. Optional: when set, Core binds it to the generation, so a
	// rebuilt adapter that reaches another namespace is never sent a
	// retained allocation's calls.
	BackendFingerprint string
}

// Registration binds one provider kind. Every field is mandatory except
// those the mode excludes.
type Registration struct {
	Kind string
	Mode Mode
	// ValidateSpecification and ValidateResources narrow the shared bounds
	// in sandbox/deployment_contract.go.
	ValidateSpecification func(sandbox.Specification) error
	ValidateResources     func(sandbox.Resources) error
	Configuration         sandbox.ConfigurationAdapter
	// Operations is the adapter's one Operations() declaration, the same
	// value its instances return.
	Operations   providercontract.Operations
	RuntimeInput RuntimeInputPolicy
	// Suspension holds the suspension defaults: positive for a provider with
	// checkpoint support, zero for one without.
	Suspension sandbox.SuspensionPolicy
	Artifacts  []NodeArtifact
	// BuildLocal constructs a node-local adapter (ModeNodes only).
	BuildLocal func(ctx context.Context, deployment sandbox.NativeConfiguration, req LocalRequest) (Built, error)
	// BuildDirect constructs a direct adapter (ModeDirect only).
	BuildDirect func(ctx context.Context, deployment sandbox.NativeConfiguration, req DirectRequest) (DirectBuilt, error)
}
