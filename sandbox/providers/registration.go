package providers

import (
	"path"
	"reflect"
	"regexp"
	"strings"

	"berth.dev/sandbox"
	"berth.dev/sandbox/providerapi"
	"berth.dev/sandbox/providercontract"
)

// The registration types, defined in providerapi so that adapters can name
// them without importing this package (which imports the adapters).
type (
	Mode               = providerapi.Mode
	ArtifactRole       = providerapi.ArtifactRole
	NodeArtifact       = providerapi.NodeArtifact
	RuntimeInputPolicy = providerapi.RuntimeInputPolicy
	LocalOptions       = providerapi.LocalOptions
	LocalRequest       = providerapi.LocalRequest
	Built              = providerapi.Built
	ProcessPaths       = providerapi.ProcessPaths
	DirectRequest      = providerapi.DirectRequest
	DirectBuilt        = providerapi.DirectBuilt
	Registration       = providerapi.Registration
)

// The deployment modes and artifact roles.
const (
	ModeUnset  = providerapi.ModeUnset
	ModeNodes  = providerapi.ModeNodes
	ModeDirect = providerapi.ModeDirect

	RoleNode    = providerapi.RoleNode
	RoleRuntime = providerapi.RoleRuntime
	RolePolicy  = providerapi.RolePolicy
	RoleImage   = providerapi.RoleImage
)

var (
	kindPattern     = regexp.MustCompile(`^[a-z][a-z0-9-]{1,30}[a-z0-9]$`)
	artifactPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._/-]*$`)
	suffixPattern   = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)
)

func contractErr(code providercontract.ContractCode, field string) error {
	return &providercontract.ContractError{Code: code, Field: field}
}

// ValidateRegistration is the single wiring check of a registration.
func ValidateRegistration(r Registration) error {
	if !kindPattern.MatchString(r.Kind) {
		return contractErr(providercontract.CodeRegistrationKind, "kind")
	}
	switch r.Mode {
	case ModeNodes:
		if r.BuildLocal == nil || r.BuildDirect != nil {
			return contractErr(providercontract.CodeRegistrationConstructor, "build_local")
		}
	case ModeDirect:
		if r.BuildDirect == nil || r.BuildLocal != nil {
			return contractErr(providercontract.CodeRegistrationConstructor, "build_direct")
		}
	default:
		return contractErr(providercontract.CodeRegistrationMode, "mode")
	}
	if r.ValidateSpecification == nil {
		return contractErr(providercontract.CodeRegistrationValidator, "validate_specification")
	}
	if r.ValidateResources == nil {
		return contractErr(providercontract.CodeRegistrationValidator, "validate_resources")
	}
	if isNil(r.Configuration) {
		return contractErr(providercontract.CodeConfigurationAdapter, "configuration")
	}
	if err := sandbox.ValidateOperations(r.Operations); err != nil {
		return err
	}
	if err := validateRequirements(r.Mode, r.Configuration.Requirements()); err != nil {
		return err
	}
	if err := validateRuntimeInput(r.RuntimeInput); err != nil {
		return err
	}
	if err := validateSuspension(r); err != nil {
		return err
	}
	return validateArtifacts(r.Mode, r.Artifacts)
}

func validateRequirements(mode Mode, req sandbox.ConfigurationRequirements) error {
	decided := func(r sandbox.Requirement) bool { return r == sandbox.Required || r == sandbox.NotRequired }
	if !decided(req.Credential) {
		return contractErr(providercontract.CodeConfigurationRequirement, "requirements.credential")
	}
	if !decided(req.PublicOrigin) {
		return contractErr(providercontract.CodeConfigurationRequirement, "requirements.public_origin")
	}
	switch d := req.Discovery; {
	case d.State == providercontract.StateSupported && d.Reason == "":
	case d.State == providercontract.StateUnsupported && d.Reason.Valid():
	default:
		return contractErr(providercontract.CodeConfigurationRequirement, "requirements.discovery")
	}
	// A node provider accepts only an empty public object, rejects
	// credentials and has no configuration discovery.
	if mode == ModeNodes {
		if req.Credential != sandbox.NotRequired {
			return contractErr(providercontract.CodeConfigurationRequirement, "requirements.credential")
		}
		if req.Discovery.State != providercontract.StateUnsupported {
			return contractErr(providercontract.CodeConfigurationRequirement, "requirements.discovery")
		}
	}
	return nil
}

func validateRuntimeInput(p RuntimeInputPolicy) error {
	accepts, rejects := p.AcceptsPinnedRuntime, p.RejectReason != ""
	if accepts == rejects || (rejects && !p.RejectReason.Valid()) {
		return contractErr(providercontract.CodeRuntimeInputPolicy, "runtime_input")
	}
	return nil
}

func validateSuspension(r Registration) error {
	checkpoint := r.Operations.Supports(sandbox.OpSuspend)
	if !checkpoint {
		if !r.Suspension.IsZero() {
			return contractErr(providercontract.CodeSuspensionDefaults, "suspension")
		}
		return nil
	}
	if r.Mode != ModeNodes || r.Suspension.Validate() != nil {
		return contractErr(providercontract.CodeSuspensionDefaults, "suspension")
	}
	return nil
}

func validateArtifacts(mode Mode, artifacts []NodeArtifact) error {
	if mode == ModeNodes && len(artifacts) == 0 {
		return contractErr(providercontract.CodeArtifacts, "artifacts")
	}
	seen := make(map[string]bool, len(artifacts))
	for _, a := range artifacts {
		if !safeArtifactPath(a.Path) || seen[a.Path] {
			return contractErr(providercontract.CodeArtifacts, "artifacts.path")
		}
		seen[a.Path] = true
		if !suffixPattern.MatchString(a.Suffix) {
			return contractErr(providercontract.CodeArtifacts, "artifacts.suffix")
		}
		switch a.Role {
		case RoleNode, RoleRuntime, RolePolicy, RoleImage:
		default:
			return contractErr(providercontract.CodeArtifacts, "artifacts.role")
		}
	}
	return nil
}

// safeArtifactPath accepts a clean, relative, lowercase logical path with
// no "." or ".." segment.
func safeArtifactPath(p string) bool {
	if !artifactPattern.MatchString(p) || path.Clean(p) != p || path.IsAbs(p) {
		return false
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "." || seg == ".." || seg == "" {
			return false
		}
	}
	return true
}

// ValidateBinding checks a registration and one of its instances against
// the interfaces and each other: the instance implements every contract
// interface and returns exactly the registered declaration.
func ValidateBinding(r Registration, p sandbox.SandboxProvider) error {
	if err := ValidateRegistration(r); err != nil {
		return err
	}
	if isNil(p) {
		return contractErr(providercontract.CodeBuildResult, "provider")
	}
	if err := sandbox.CheckImplements(p); err != nil {
		return err
	}
	decl := p.ProviderOperations()
	if err := sandbox.ValidateOperations(decl); err != nil {
		return err
	}
	if !decl.Equal(r.Operations) {
		return contractErr(providercontract.CodeDeclarationMismatch, "operations")
	}
	return nil
}

// isNil reports whether v is nil, including an interface holding a typed
// nil pointer, map, slice, func or channel.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return rv.IsNil()
	}
	return false
}
