package nodeconfig

import (
	"bytes"
	"context"
	"encoding/json"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providercontract"
)

// Reason codes of the node configuration adapter.
const (
	ReasonNoDiscovery  providercontract.ReasonCode = "node_provider_no_discovery"
	ReasonNoCredential providercontract.ReasonCode = "node_provider_no_credential"
)

// Adapter is the configuration adapter of node provider Kind.
type Adapter struct {
	Kind string
}

var _ sandbox.ConfigurationAdapter = Adapter{}

// Configuration is a node provider's (empty) deployment configuration.
type Configuration struct {
	kind string
}

// ProviderKind names the provider the configuration belongs to.
func (c Configuration) ProviderKind() string { return c.kind }

func (a Adapter) own(cfg sandbox.NativeConfiguration) bool {
	c, ok := cfg.(Configuration)
	return ok && c.kind == a.Kind
}

// emptyObject accepts nothing, or exactly one JSON object with no members.
func emptyObject(raw json.RawMessage) bool {
	if len(bytes.TrimSpace(raw)) == 0 {
		return true
	}
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&m); err != nil || m == nil || len(m) != 0 || dec.More() {
		return false
	}
	return true
}

// DecodeInput accepts only an empty public object and no credential.
func (a Adapter) DecodeInput(in sandbox.ConfigurationInput) (sandbox.NativeConfiguration, error) {
	if in.Credential.Len() > 0 {
		return nil, errdefs.Invalid("configuration.credential", "this provider takes no credential")
	}
	if !emptyObject(in.Public) {
		return nil, errdefs.Invalid("configuration.public", "must be an empty object; node settings live in each node's configuration")
	}
	return Configuration{kind: a.Kind}, nil
}

// Encode produces the empty public object and no secret.
func (a Adapter) Encode(cfg sandbox.NativeConfiguration) (sandbox.EncodedConfiguration, error) {
	if !a.own(cfg) {
		return sandbox.EncodedConfiguration{}, errdefs.Invalid("configuration", "belongs to another provider")
	}
	return sandbox.EncodedConfiguration{Public: json.RawMessage(`{}`), Observations: json.RawMessage(`{}`)}, nil
}

// Decode restores the empty configuration.
func (a Adapter) Decode(stored sandbox.EncodedConfiguration) (sandbox.NativeConfiguration, error) {
	if !emptyObject(stored.Public) || stored.Secret.Len() > 0 {
		return nil, errdefs.Invalid("configuration.public", "must be an empty object")
	}
	return Configuration{kind: a.Kind}, nil
}

// Normalize returns a new empty configuration.
func (a Adapter) Normalize(cfg sandbox.NativeConfiguration) (sandbox.NativeConfiguration, error) {
	if !a.own(cfg) {
		return nil, errdefs.Invalid("configuration", "belongs to another provider")
	}
	return Configuration{kind: a.Kind}, nil
}

// ResolveChange accepts only an empty change.
func (a Adapter) ResolveChange(current sandbox.NativeConfiguration, change sandbox.ConfigurationInput) (sandbox.NativeConfiguration, error) {
	if _, err := a.DecodeInput(change); err != nil {
		return nil, err
	}
	return a.Normalize(current)
}

// Equal reports whether both are this provider's configuration.
func (a Adapter) Equal(x, y sandbox.NativeConfiguration) bool { return a.own(x) && a.own(y) }

// WithCredential is unsupported: a node provider has no credential.
func (a Adapter) WithCredential(sandbox.NativeConfiguration, []byte) (sandbox.NativeConfiguration, error) {
	return nil, &providercontract.UnsupportedError{Operation: "WithCredential", Code: ReasonNoCredential}
}

// Requirements declares no credential, no public origin and no discovery.
func (a Adapter) Requirements() sandbox.ConfigurationRequirements {
	return sandbox.ConfigurationRequirements{
		Credential:   sandbox.NotRequired,
		PublicOrigin: sandbox.NotRequired,
		Discovery:    providercontract.Unsupported(ReasonNoDiscovery),
	}
}

// DiscoverConfiguration is unsupported for a node provider.
func (a Adapter) DiscoverConfiguration(context.Context, sandbox.DiscoveryQuery) (sandbox.Catalog, error) {
	return sandbox.Catalog{}, &providercontract.UnsupportedError{Operation: "DiscoverConfiguration", Code: ReasonNoDiscovery}
}
