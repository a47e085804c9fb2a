package providers

import (
	"encoding/json"
	"fmt"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providercontract"
)

// Description is a stored configuration as it may be shown: whitelisted
// public selectors and read-only observations, never the credential.
type Description struct {
	Kind          string
	Public        json.RawMessage
	Observations  json.RawMessage
	HasCredential bool
	Requirements  sandbox.ConfigurationRequirements
}

// Normalize turns an admin request's configuration into the encoded form
// the store persists. Preview, retry and commit share it, so they share the
// same defaults.
func (r *Registry) Normalize(kind string, in sandbox.ConfigurationInput) (sandbox.EncodedConfiguration, error) {
	reg, err := r.Lookup(kind)
	if err != nil {
		return sandbox.EncodedConfiguration{}, err
	}
	if err := checkCredentialAllowed(reg, in); err != nil {
		return sandbox.EncodedConfiguration{}, err
	}
	cfg, err := reg.Configuration.DecodeInput(in)
	if err != nil {
		return sandbox.EncodedConfiguration{}, fmt.Errorf("decode configuration: %w", err)
	}
	return normalizeEncode(reg, cfg)
}

// Describe restores a stored configuration through the adapter and
// re-encodes it, so only whitelisted selectors are ever shown.
func (r *Registry) Describe(kind string, stored sandbox.EncodedConfiguration) (Description, error) {
	reg, err := r.Lookup(kind)
	if err != nil {
		return Description{}, err
	}
	cfg, err := reg.Configuration.Decode(stored)
	if err != nil {
		return Description{}, fmt.Errorf("decode stored configuration: %w", err)
	}
	enc, err := reg.Configuration.Encode(cfg)
	if err != nil {
		return Description{}, fmt.Errorf("encode configuration: %w", err)
	}
	return Description{
		Kind:          kind,
		Public:        enc.Public,
		Observations:  enc.Observations,
		HasCredential: enc.Secret.Len() > 0,
		Requirements:  reg.Configuration.Requirements(),
	}, nil
}

// ResolveChange applies a change request to a stored configuration; the
// adapter owns inheritance of omitted values.
func (r *Registry) ResolveChange(kind string, current sandbox.EncodedConfiguration, change sandbox.ConfigurationInput) (sandbox.EncodedConfiguration, error) {
	reg, err := r.Lookup(kind)
	if err != nil {
		return sandbox.EncodedConfiguration{}, err
	}
	if err := checkCredentialAllowed(reg, change); err != nil {
		return sandbox.EncodedConfiguration{}, err
	}
	cur, err := reg.Configuration.Decode(current)
	if err != nil {
		return sandbox.EncodedConfiguration{}, fmt.Errorf("decode stored configuration: %w", err)
	}
	next, err := reg.Configuration.ResolveChange(cur, change)
	if err != nil {
		return sandbox.EncodedConfiguration{}, fmt.Errorf("resolve configuration change: %w", err)
	}
	return normalizeEncode(reg, next)
}

func normalizeEncode(reg Registration, cfg sandbox.NativeConfiguration) (sandbox.EncodedConfiguration, error) {
	if isNil(cfg) || cfg.ProviderKind() != reg.Kind {
		return sandbox.EncodedConfiguration{}, contractErr(providercontract.CodeConfigurationKind, "configuration")
	}
	norm, err := reg.Configuration.Normalize(cfg)
	if err != nil {
		return sandbox.EncodedConfiguration{}, fmt.Errorf("normalize configuration: %w", err)
	}
	enc, err := reg.Configuration.Encode(norm)
	if err != nil {
		return sandbox.EncodedConfiguration{}, fmt.Errorf("encode configuration: %w", err)
	}
	return enc, nil
}

// checkCredentialAllowed rejects a credential object for a provider that
// declares it needs none (every node provider), before the adapter sees it.
func checkCredentialAllowed(reg Registration, in sandbox.ConfigurationInput) error {
	if in.Credential.Len() > 0 && reg.Configuration.Requirements().Credential == sandbox.NotRequired {
		return errdefs.Invalid("configuration.credential", "this provider takes no credential")
	}
	return nil
}
