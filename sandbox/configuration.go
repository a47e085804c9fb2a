package sandbox

import (
	"context"
	"encoding/json"

	"berth.dev/sandbox/providercontract"
)

// ConfigurationInput is one admin request's provider configuration: the
// public object and the write-only credential object, kept apart.
type ConfigurationInput struct {
	Public json.RawMessage
	// Credential is write-only: it is never echoed, logged or stored in the
	// clear. nil when the request carries none.
	Credential json.RawMessage
}

// NativeConfiguration is an adapter's typed configuration. Only the adapter
// that produced it interprets it.
type NativeConfiguration interface {
	ProviderKind() string
}

// EncodedConfiguration is what the store persists for a generation: the
// whitelisted public selectors (provider_config), read-only observations
// (provider_metadata) and the credential bytes that the store encrypts
// (provider_credential).
type EncodedConfiguration struct {
	Public       json.RawMessage
	Observations json.RawMessage
	Secret       []byte
}

// Requirement is an explicit yes/no decision; the zero value is no decision.
type Requirement uint8

// The requirement decisions.
const (
	RequirementUnset Requirement = iota
	Required
	NotRequired
)

// ConfigurationRequirements declares, explicitly, what a provider's
// configuration needs. Every field must be decided.
type ConfigurationRequirements struct {
	Credential   Requirement
	PublicOrigin Requirement
	// Discovery is configuration discovery's support decision.
	Discovery providercontract.Decision
}

// DiscoveryQuery is a validated configuration discovery request.
type DiscoveryQuery struct {
	Public json.RawMessage
}

// CatalogEntry is one discoverable choice; Name and Description are safe
// to show.
type CatalogEntry struct {
	Name        string
	Description string
}

// Catalog is configuration discovery's safe answer.
type Catalog struct {
	Entries []CatalogEntry
}

// ConfigurationDiscoverer validates a discovery query and returns a safe
// catalog, never a mutation or an admission decision. A provider without
// discovery returns the typed UnsupportedError.
type ConfigurationDiscoverer interface {
	DiscoverConfiguration(ctx context.Context, q DiscoveryQuery) (Catalog, error)
}

// ConfigurationAdapter translates between requests, stored configuration
// and an adapter's typed native configuration.
type ConfigurationAdapter interface {
	ConfigurationDiscoverer
	// DecodeInput strictly parses a request's public and credential objects.
	DecodeInput(in ConfigurationInput) (NativeConfiguration, error)
	// Encode produces whitelisted public selectors, read-only observations
	// and separate secret bytes; it never passes request JSON through.
	Encode(cfg NativeConfiguration) (EncodedConfiguration, error)
	// Decode restores stored selectors without remote admission or new
	// template validation.
	Decode(stored EncodedConfiguration) (NativeConfiguration, error)
	// Normalize returns a normalized copy; it never changes its input.
	Normalize(cfg NativeConfiguration) (NativeConfiguration, error)
	// ResolveChange applies a change request to the current configuration
	// (inheritance of omitted values).
	ResolveChange(current NativeConfiguration, change ConfigurationInput) (NativeConfiguration, error)
	// Equal compares normalized selectors.
	Equal(a, b NativeConfiguration) bool
	// WithCredential composes a stored configuration with the current
	// credential without rewriting its selectors.
	WithCredential(cfg NativeConfiguration, credential []byte) (NativeConfiguration, error)
	Requirements() ConfigurationRequirements
}
