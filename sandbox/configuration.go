package sandbox

import (
	"context"
	"encoding/json"

	"berth.dev/sandbox/providercontract"
	"berth.dev/sandbox/redact"
)

// ConfigurationInput is one admin request's provider configuration: the
// public object and the write-only credential object, kept apart.
type ConfigurationInput struct {
	Public json.RawMessage
	// Credential is the credential object's JSON. It is write-only: it is
	// never echoed, logged or stored in the clear. Zero when the request
	// carries none.
	Credential Credential
}

// Credential is a provider credential's bytes: a request's credential
// object or the secret bytes an adapter encodes for the store to seal. It
// prints as "[redacted]" with every fmt verb, through slog (LogValue) and
// through encoding/json (which slog's JSON handler uses for a struct
// holding one); Reveal returns the bytes for the adapter that parses them
// and the store that seals them.
//
// The bytes sit behind a pointer to a string: fmt prints a struct by
// reflection, without asking its fields to format themselves, when the
// struct is in an unexported field or reached by a mismatched verb, and
// there such a pointer shows only its address (a pointer to a slice would
// be followed). A Credential is not comparable; compare Reveal values (in
// constant time).
type Credential struct {
	redact.Redacted
	v *string
	_ [0]func()
}

// NewCredential returns a copy of b as a Credential; empty b is the zero
// Credential (none).
func NewCredential(b []byte) Credential {
	if len(b) == 0 {
		return Credential{}
	}
	s := string(b)
	return Credential{v: &s}
}

// Reveal returns a copy of the credential's bytes (nil for none).
func (c Credential) Reveal() []byte {
	if c.v == nil {
		return nil
	}
	return []byte(*c.v)
}

// Len is the credential's length in bytes, 0 for none.
func (c Credential) Len() int {
	if c.v == nil {
		return 0
	}
	return len(*c.v)
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
	Secret       Credential
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
