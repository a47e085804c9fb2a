package providers

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providercontract"
)

// Registry is a validated set of registrations, keyed by kind.
type Registry struct {
	regs map[string]Registration
}

// NewRegistry validates every registration and rejects duplicate kinds.
func NewRegistry(regs ...Registration) (*Registry, error) {
	r := &Registry{regs: make(map[string]Registration, len(regs))}
	for _, reg := range regs {
		if err := ValidateRegistration(reg); err != nil {
			return nil, err
		}
		if _, dup := r.regs[reg.Kind]; dup {
			return nil, contractErr(providercontract.CodeRegistrationDuplicate, "kind")
		}
		r.regs[reg.Kind] = reg
	}
	return r, nil
}

// Kinds returns the registered kinds in order.
func (r *Registry) Kinds() []string {
	kinds := make([]string, 0, len(r.regs))
	for k := range r.regs {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	return kinds
}

// Lookup returns the registration of kind after validating it again. An
// unknown kind is invalid input.
func (r *Registry) Lookup(kind string) (Registration, error) {
	reg, ok := r.regs[kind]
	if !ok {
		return Registration{}, errdefs.Invalid("provider.kind", "unknown provider kind")
	}
	if err := ValidateRegistration(reg); err != nil {
		return Registration{}, err
	}
	return reg, nil
}

// Build constructs a node-local adapter of kind. It rejects missing or
// mixed construction contexts, decodes the stored deployment configuration
// through the adapter, and checks the result's binding and identity before
// returning it; a rejected result is closed.
func (r *Registry) Build(ctx context.Context, kind string, req LocalRequest) (Built, error) {
	reg, err := r.Lookup(kind)
	if err != nil {
		return Built{}, err
	}
	if reg.Mode != ModeNodes {
		return Built{}, errdefs.Invalid("provider.kind", "provider is not a node provider")
	}
	if err := validateLocalOptions(req.Options); err != nil {
		return Built{}, err
	}
	if err := validateSpecification(reg, req.Specification); err != nil {
		return Built{}, err
	}
	cfg, err := reg.Configuration.Decode(req.Deployment)
	if err != nil {
		return Built{}, fmt.Errorf("decode deployment configuration: %w", err)
	}
	built, err := reg.BuildLocal(ctx, cfg, req)
	if err != nil {
		return Built{}, fmt.Errorf("build %s provider: %w", kind, err)
	}
	if err := checkBuilt(reg, built); err != nil {
		if built.Close != nil {
			err = errors.Join(err, built.Close())
		}
		return Built{}, err
	}
	return built, nil
}

// BuildDirect constructs a direct adapter of kind for one generation. It
// requires valid process paths (sandbox.ProcessPaths.Validate) and a
// generation, validates the specification, decodes the stored selectors
// (which never carry the secret) through the adapter, composes the opened
// credential into them with the registration's
// Configuration.WithCredential, and only then calls the constructor, with
// the composed configuration and a request whose Credential is zero: the
// adapter parses the credential once, in WithCredential, and a retained
// generation meets the current credential only there (the guide's
// composition). A credential-required registration without a credential
// is refused with ErrCredentialRequired, and a credential for a
// registration that takes none is invalid, both before construction. It
// checks the result before returning it: the provider's binding, a probe,
// a close function and the call fence Core excludes before a credential
// change or a close. A rejected result is closed.
func (r *Registry) BuildDirect(ctx context.Context, kind string, req DirectRequest) (DirectBuilt, error) {
	reg, err := r.Lookup(kind)
	if err != nil {
		return DirectBuilt{}, err
	}
	if reg.Mode != ModeDirect {
		return DirectBuilt{}, errdefs.Invalid("provider.kind", "provider is not a direct provider")
	}
	if err := req.Paths.Validate(); err != nil {
		return DirectBuilt{}, err
	}
	if req.Generation == 0 {
		return DirectBuilt{}, errdefs.Invalid("generation", "must name a deployment generation (1 or more)")
	}
	if err := validateSpecification(reg, req.Specification); err != nil {
		return DirectBuilt{}, err
	}
	cfg, err := composeDirect(reg, req.Deployment, req.Credential)
	if err != nil {
		return DirectBuilt{}, err
	}
	req.Credential = sandbox.Credential{}
	built, err := reg.BuildDirect(ctx, cfg, req)
	if err != nil {
		return DirectBuilt{}, fmt.Errorf("build %s provider: %w", kind, err)
	}
	if err := checkBuiltDirect(reg, built); err != nil {
		if built.Close != nil {
			err = errors.Join(err, built.Close())
		}
		return DirectBuilt{}, err
	}
	return built, nil
}

// ErrCredentialRequired refuses a direct build of a credential-required
// registration without a credential, before the adapter sees anything:
// reason credential_required, class ErrFailedPrecondition.
var ErrCredentialRequired error = errdefs.Refuse(errdefs.ErrFailedPrecondition, "credential_required",
	"this direct provider requires a credential and none was given for the generation: nothing was constructed")

// composeDirect decodes stored (refused when it carries a secret: the
// credential travels only beside it) and composes credential into the
// result through the adapter, as the registration's requirement says.
func composeDirect(reg Registration, stored sandbox.EncodedConfiguration, credential sandbox.Credential) (sandbox.NativeConfiguration, error) {
	if stored.Secret.Len() > 0 {
		return nil, errdefs.Invalid("deployment.secret", "the stored configuration carries no credential: pass the opened credential as DirectRequest.Credential")
	}
	required := reg.Configuration.Requirements().Credential == sandbox.Required
	switch {
	case required && credential.Len() == 0:
		return nil, ErrCredentialRequired
	case !required && credential.Len() > 0:
		return nil, errdefs.Invalid("credential", "this provider takes no credential")
	}
	cfg, err := reg.Configuration.Decode(stored)
	if err != nil {
		return nil, fmt.Errorf("decode deployment configuration: %w", err)
	}
	if !required {
		return checkKind(reg, cfg)
	}
	// The bytes are revealed only into the adapter's WithCredential.
	composed, err := reg.Configuration.WithCredential(cfg, credential.Reveal())
	if err != nil {
		return nil, fmt.Errorf("compose deployment credential: %w", err)
	}
	return checkKind(reg, composed)
}

// checkKind requires cfg to be a configuration of reg's kind.
func checkKind(reg Registration, cfg sandbox.NativeConfiguration) (sandbox.NativeConfiguration, error) {
	if isNil(cfg) || cfg.ProviderKind() != reg.Kind {
		return nil, contractErr(providercontract.CodeConfigurationKind, "configuration")
	}
	return cfg, nil
}

// maxBackendFingerprint bounds DirectBuilt.BackendFingerprint, which Core
// stores beside the generation.
const maxBackendFingerprint = 256

// checkBuiltDirect names the first part of b that Core cannot serve a
// generation without.
func checkBuiltDirect(reg Registration, b DirectBuilt) error {
	if err := ValidateBinding(reg, b.Provider); err != nil {
		return err
	}
	switch {
	case b.Probe == nil:
		return contractErr(providercontract.CodeBuildResult, "probe")
	case b.Close == nil:
		return contractErr(providercontract.CodeBuildResult, "close")
	case b.Fence == nil:
		return contractErr(providercontract.CodeBuildResult, "fence")
	case len(b.BackendFingerprint) > maxBackendFingerprint:
		return contractErr(providercontract.CodeBuildResult, "backend_fingerprint")
	}
	return nil
}

func validateLocalOptions(o LocalOptions) error {
	switch {
	case o.Standalone && o.GenerationStateDirectory != "":
		return errdefs.Invalid("local_options", "standalone and generation state directory are mutually exclusive")
	case !o.Standalone && o.GenerationStateDirectory == "":
		return errdefs.Invalid("local_options", "select standalone or a generation state directory")
	case o.GenerationStateDirectory != "" && !canonicalAbs(o.GenerationStateDirectory):
		return errdefs.Invalid("local_options.generation_state_directory", "must be a canonical absolute path")
	}
	return nil
}

func canonicalAbs(p string) bool {
	return p != "" && p != "/" && filepath.IsAbs(p) && filepath.Clean(p) == p
}

func validateSpecification(reg Registration, spec sandbox.Specification) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	if err := reg.ValidateResources(spec.Resources); err != nil {
		return err
	}
	return reg.ValidateSpecification(spec)
}

func checkBuilt(reg Registration, b Built) error {
	if err := ValidateBinding(reg, b.Provider); err != nil {
		return err
	}
	switch {
	case b.Probe == nil:
		return contractErr(providercontract.CodeBuildResult, "probe")
	case b.Close == nil:
		return contractErr(providercontract.CodeBuildResult, "close")
	case b.InstallationID == "":
		return contractErr(providercontract.CodeBuildResult, "installation_id")
	case b.BackendFingerprint == "":
		return contractErr(providercontract.CodeBuildResult, "backend_fingerprint")
	case b.SpecificationDigest == "":
		return contractErr(providercontract.CodeBuildResult, "specification_digest")
	}
	return nil
}
