package providers_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/internal/refadapter"
	"berth.dev/sandbox/internal/refnative"
	"berth.dev/sandbox/nodeconfig"
	"berth.dev/sandbox/providercontract"
	"berth.dev/sandbox/providers"
)

func TestProductionTableValidates(t *testing.T) {
	reg, err := providers.Default()
	if err != nil {
		t.Fatalf("the registration table does not validate: %v", err)
	}
	for _, k := range reg.Kinds() {
		if _, err := reg.Lookup(k); err != nil {
			t.Errorf("%s: %v", k, err)
		}
	}
}

func TestReferenceRegistrationValidates(t *testing.T) {
	if err := providers.ValidateRegistration(refadapter.Registration()); err != nil {
		t.Fatal(err)
	}
}

// requirementsAdapter overrides the reference adapter's requirements.
type requirementsAdapter struct {
	nodeconfig.Adapter
	req sandbox.ConfigurationRequirements
}

func (a requirementsAdapter) Requirements() sandbox.ConfigurationRequirements { return a.req }

func withRequirements(mutate func(*sandbox.ConfigurationRequirements)) func(*providers.Registration) {
	return func(r *providers.Registration) {
		req := nodeconfig.Adapter{Kind: refadapter.Kind}.Requirements()
		mutate(&req)
		r.Configuration = requirementsAdapter{req: req}
	}
}

func withCheckpoints(state providercontract.Decision) func(*providers.Registration) {
	return func(r *providers.Registration) {
		for _, op := range []providercontract.Operation{
			sandbox.OpInitial, sandbox.OpNewCompute, sandbox.OpGetCompute, sandbox.OpSuspend, sandbox.OpCapture, sandbox.OpCreateSeeded, sandbox.OpExportSnapshot, sandbox.OpImportSnapshot, sandbox.OpResume,
			sandbox.OpResumeCompute, sandbox.OpKillCompute, sandbox.OpDeleteSnapshot, sandbox.OpRunCommandCompute,
		} {
			r.Operations[op] = state
		}
	}
}

func direct(r *providers.Registration) {
	r.Mode = providers.ModeDirect
	r.BuildLocal = nil
	r.BuildDirect = func(context.Context, sandbox.NativeConfiguration, providers.DirectRequest) (providers.DirectBuilt, error) {
		return providers.DirectBuilt{}, errors.New("unused")
	}
}

func all(fs ...func(*providers.Registration)) func(*providers.Registration) {
	return func(r *providers.Registration) {
		for _, f := range fs {
			f(r)
		}
	}
}

var validSuspension = sandbox.SuspensionPolicy{Idle: 15 * time.Minute, Retention: 7 * 24 * time.Hour}

// TestValidateRegistrationRejects has at least one case per rule of the
// guide's "Registration validation".
func TestValidateRegistrationRejects(t *testing.T) {
	var typedNil *nodeconfig.Adapter
	cases := []struct {
		name   string
		mutate func(*providers.Registration)
		code   providercontract.ContractCode
		field  string
	}{
		{"kind empty", func(r *providers.Registration) { r.Kind = "" }, providercontract.CodeRegistrationKind, "kind"},
		{"kind upper case", func(r *providers.Registration) { r.Kind = "Docker" }, providercontract.CodeRegistrationKind, "kind"},
		{"mode missing", func(r *providers.Registration) { r.Mode = providers.ModeUnset }, providercontract.CodeRegistrationMode, "mode"},
		{"mode unknown", func(r *providers.Registration) { r.Mode = 9 }, providercontract.CodeRegistrationMode, "mode"},
		{"nodes without BuildLocal", func(r *providers.Registration) { r.BuildLocal = nil }, providercontract.CodeRegistrationConstructor, "build_local"},
		{"nodes with BuildDirect too (mixed)", func(r *providers.Registration) {
			direct(r)
			r.Mode = providers.ModeNodes
			r.BuildLocal = refadapter.Registration().BuildLocal
		}, providercontract.CodeRegistrationConstructor, "build_local"},
		{"direct without BuildDirect", func(r *providers.Registration) {
			direct(r)
			r.BuildDirect = nil
		}, providercontract.CodeRegistrationConstructor, "build_direct"},
		{"direct with BuildLocal too (mixed)", func(r *providers.Registration) {
			direct(r)
			r.BuildLocal = refadapter.Registration().BuildLocal
		}, providercontract.CodeRegistrationConstructor, "build_direct"},
		{"specification validator missing", func(r *providers.Registration) { r.ValidateSpecification = nil }, providercontract.CodeRegistrationValidator, "validate_specification"},
		{"resource validator missing", func(r *providers.Registration) { r.ValidateResources = nil }, providercontract.CodeRegistrationValidator, "validate_resources"},
		{"configuration adapter nil", func(r *providers.Registration) { r.Configuration = nil }, providercontract.CodeConfigurationAdapter, "configuration"},
		{"configuration adapter typed nil", func(r *providers.Registration) { r.Configuration = typedNil }, providercontract.CodeConfigurationAdapter, "configuration"},
		{"declaration incomplete", func(r *providers.Registration) { delete(r.Operations, sandbox.OpObserve) }, providercontract.CodeOperationUndeclared, ""},
		{"declaration contradictory", func(r *providers.Registration) {
			r.Operations[sandbox.OpSuspend] = providercontract.Supported()
		}, providercontract.CodeDecisionsMixed, ""},
		{"credential requirement undecided", withRequirements(func(q *sandbox.ConfigurationRequirements) { q.Credential = sandbox.RequirementUnset }), providercontract.CodeConfigurationRequirement, "requirements.credential"},
		{"public origin requirement undecided", withRequirements(func(q *sandbox.ConfigurationRequirements) { q.PublicOrigin = 7 }), providercontract.CodeConfigurationRequirement, "requirements.public_origin"},
		{"discovery undecided", withRequirements(func(q *sandbox.ConfigurationRequirements) { q.Discovery = providercontract.Decision{} }), providercontract.CodeConfigurationRequirement, "requirements.discovery"},
		{"discovery unsupported without reason", withRequirements(func(q *sandbox.ConfigurationRequirements) {
			q.Discovery = providercontract.Decision{State: providercontract.StateUnsupported}
		}), providercontract.CodeConfigurationRequirement, "requirements.discovery"},
		{"discovery reason unsafe", withRequirements(func(q *sandbox.ConfigurationRequirements) {
			q.Discovery = providercontract.Unsupported("Not Available!")
		}), providercontract.CodeConfigurationRequirement, "requirements.discovery"},
		{"node provider requires a credential", withRequirements(func(q *sandbox.ConfigurationRequirements) { q.Credential = sandbox.Required }), providercontract.CodeConfigurationRequirement, "requirements.credential"},
		{"node provider offers discovery", withRequirements(func(q *sandbox.ConfigurationRequirements) { q.Discovery = providercontract.Supported() }), providercontract.CodeConfigurationRequirement, "requirements.discovery"},
		{"runtime policy accepts and rejects", func(r *providers.Registration) { r.RuntimeInput.RejectReason = "runtime_too_old" }, providercontract.CodeRuntimeInputPolicy, "runtime_input"},
		{"runtime policy neither", func(r *providers.Registration) { r.RuntimeInput = providers.RuntimeInputPolicy{} }, providercontract.CodeRuntimeInputPolicy, "runtime_input"},
		{"runtime policy unsafe reason", func(r *providers.Registration) {
			r.RuntimeInput = providers.RuntimeInputPolicy{RejectReason: "image sha256:abc rejected"}
		}, providercontract.CodeRuntimeInputPolicy, "runtime_input"},
		{"checkpoints without suspension defaults", withCheckpoints(providercontract.Supported()), providercontract.CodeSuspensionDefaults, "suspension"},
		{"checkpoints in direct mode", all(withCheckpoints(providercontract.Supported()), direct, func(r *providers.Registration) {
			r.Suspension = validSuspension
		}), providercontract.CodeSuspensionDefaults, "suspension"},
		{"checkpoint idle not whole seconds", all(withCheckpoints(providercontract.Supported()), func(r *providers.Registration) {
			r.Suspension = validSuspension
			r.Suspension.Idle += time.Millisecond
		}), providercontract.CodeSuspensionDefaults, "suspension"},
		{"checkpoint retention beyond runtime bound", all(withCheckpoints(providercontract.Supported()), func(r *providers.Registration) {
			r.Suspension = validSuspension
			r.Suspension.Retention = sandbox.MaxRetention + time.Hour
		}), providercontract.CodeSuspensionDefaults, "suspension"},
		{"suspension defaults without checkpoints", func(r *providers.Registration) { r.Suspension = validSuspension }, providercontract.CodeSuspensionDefaults, "suspension"},
		{"node artifacts missing", func(r *providers.Registration) { r.Artifacts = nil }, providercontract.CodeArtifacts, "artifacts"},
		{"artifact path absolute", artifact(func(a *providers.NodeArtifact) { a.Path = "/usr/bin/x" }), providercontract.CodeArtifacts, "artifacts.path"},
		{"artifact path escapes", artifact(func(a *providers.NodeArtifact) { a.Path = "reference/../../etc/passwd" }), providercontract.CodeArtifacts, "artifacts.path"},
		{"artifact path unclean", artifact(func(a *providers.NodeArtifact) { a.Path = "reference//x" }), providercontract.CodeArtifacts, "artifacts.path"},
		{"artifact suffix empty", artifact(func(a *providers.NodeArtifact) { a.Suffix = "" }), providercontract.CodeArtifacts, "artifacts.suffix"},
		{"artifact role unknown", artifact(func(a *providers.NodeArtifact) { a.Role = "daemon" }), providercontract.CodeArtifacts, "artifacts.role"},
		{"artifact path duplicate", func(r *providers.Registration) { r.Artifacts = append(r.Artifacts, r.Artifacts[0]) }, providercontract.CodeArtifacts, "artifacts.path"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := refadapter.Registration()
			c.mutate(&r)
			err := providers.ValidateRegistration(r)
			var ce *providercontract.ContractError
			if !errors.As(err, &ce) || !errdefs.IsContract(err) {
				t.Fatalf("err = %v, want a ContractError", err)
			}
			if ce.Code != c.code || (c.field != "" && ce.Field != c.field) {
				t.Fatalf("got %s/%s, want %s/%s", ce.Code, ce.Field, c.code, c.field)
			}
			for _, leak := range []string{"sha256:abc", "Not Available", "/usr/bin/x", "passwd", "Docker"} {
				if strings.Contains(err.Error(), leak) {
					t.Fatalf("error echoes submitted text %q: %v", leak, err)
				}
			}
			if _, err := providers.NewRegistry(r); err == nil {
				t.Fatal("NewRegistry accepted the registration")
			}
		})
	}
}

func artifact(mutate func(*providers.NodeArtifact)) func(*providers.Registration) {
	return func(r *providers.Registration) {
		a := r.Artifacts[0]
		mutate(&a)
		r.Artifacts = []providers.NodeArtifact{a}
	}
}

func TestRegistrationWithCheckpointsAndDefaultsValidates(t *testing.T) {
	r := refadapter.Registration()
	withCheckpoints(providercontract.Supported())(&r)
	r.Suspension = validSuspension
	if err := providers.ValidateRegistration(r); err != nil {
		t.Fatal(err)
	}
}

func TestNewRegistryRejectsDuplicateKinds(t *testing.T) {
	_, err := providers.NewRegistry(refadapter.Registration(), refadapter.Registration())
	if providercontract.CodeOf(err) != providercontract.CodeRegistrationDuplicate {
		t.Fatalf("err = %v", err)
	}
}

// mismatched declares a different decision than its registration.
type mismatched struct{ *refadapter.Provider }

func (m mismatched) ProviderOperations() providercontract.Operations {
	ops := m.Provider.ProviderOperations()
	ops[sandbox.OpObserve] = providercontract.Unsupported("changed_mind")
	return ops
}

// shapeless lacks the checkpoint and observation methods.
type shapeless struct{ sandbox.SandboxProvider }

func TestValidateBinding(t *testing.T) {
	reg := refadapter.Registration()
	p := refadapter.New("", "i", nil)
	if err := providers.ValidateBinding(reg, p); err != nil {
		t.Fatalf("matching binding: %v", err)
	}
	var nilProvider *refadapter.Provider
	for name, tc := range map[string]struct {
		p    sandbox.SandboxProvider
		code providercontract.ContractCode
	}{
		"declaration mismatch": {mismatched{p}, providercontract.CodeDeclarationMismatch},
		"missing methods":      {shapeless{p}, providercontract.CodeMethodMissing},
		"nil provider":         {nil, providercontract.CodeBuildResult},
		"typed nil provider":   {nilProvider, providercontract.CodeBuildResult},
	} {
		if got := providercontract.CodeOf(providers.ValidateBinding(reg, tc.p)); got != tc.code {
			t.Errorf("%s: code = %q, want %q", name, got, tc.code)
		}
	}
}

var spec = sandbox.Specification{
	Resources: sandbox.Resources{CPUMillis: 1000, MemoryBytes: 1 << 30, DiskBytes: 10 << 30},
	MaxActive: 4,
}

func localRequest(t *testing.T, opts providers.LocalOptions) providers.LocalRequest {
	srv := refnative.Start(t)
	node, _ := json.Marshal(refadapter.NodeConfig{Endpoint: srv.URL})
	return providers.LocalRequest{
		Deployment:    sandbox.EncodedConfiguration{Public: json.RawMessage(`{}`)},
		Node:          node,
		Specification: spec,
		Options:       opts,
	}
}

func TestBuildSelectsExactlyOneContext(t *testing.T) {
	reg, err := providers.NewRegistry(refadapter.Registration())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	good := []providers.LocalOptions{
		{Standalone: true, InstallationID: "inst"},
		{GenerationStateDirectory: "/var/lib/berth/generations/3", InstallationID: "inst", Generation: 3},
	}
	for _, opts := range good {
		built, err := reg.Build(ctx, refadapter.Kind, localRequest(t, opts))
		if err != nil {
			t.Fatalf("%+v: %v", opts, err)
		}
		if err := built.Probe(ctx); err != nil {
			t.Errorf("probe: %v", err)
		}
		if built.BackendFingerprint == "" || built.SpecificationDigest == "" || built.InstallationID != "inst" {
			t.Errorf("identity missing: %+v", built)
		}
		if err := built.Close(); err != nil {
			t.Error(err)
		}
	}
	bad := map[string]providers.LocalOptions{
		"missing context":       {InstallationID: "inst"},
		"mixed contexts":        {Standalone: true, GenerationStateDirectory: "/var/lib/berth/g", InstallationID: "inst"},
		"relative state dir":    {GenerationStateDirectory: "var/lib/berth/g"},
		"non-canonical state":   {GenerationStateDirectory: "/var/lib/berth/../g"},
		"trailing slash state":  {GenerationStateDirectory: "/var/lib/berth/g/"},
		"root as the state dir": {GenerationStateDirectory: "/"},
	}
	for name, opts := range bad {
		if _, err := reg.Build(ctx, refadapter.Kind, localRequest(t, opts)); !errdefs.IsInvalid(err) {
			t.Errorf("%s: err = %v, want invalid", name, err)
		}
	}
	if _, err := reg.Build(ctx, "docker", localRequest(t, good[0])); !errdefs.IsInvalid(err) {
		t.Errorf("unknown kind: err = %v", err)
	} else if f, _ := errdefs.Field(err); f != "provider.kind" {
		t.Errorf("unknown kind field = %q", f)
	}
	if _, err := reg.BuildDirect(ctx, refadapter.Kind, providers.DirectRequest{Paths: providers.ProcessPaths{Root: "/opt/berth", State: "/var/lib/berth"}}); !errdefs.IsInvalid(err) {
		t.Errorf("BuildDirect of a node provider: err = %v", err)
	}
	req := localRequest(t, good[0])
	req.Specification.Resources.CPUMillis = 1
	if _, err := reg.Build(ctx, refadapter.Kind, req); !errdefs.IsInvalid(err) {
		t.Errorf("out-of-bounds specification: err = %v", err)
	}
}

func TestBuildRejectsAndClosesAnIncompleteResult(t *testing.T) {
	closed := 0
	r := refadapter.Registration()
	inner := r.BuildLocal
	r.BuildLocal = func(ctx context.Context, cfg sandbox.NativeConfiguration, req providers.LocalRequest) (providers.Built, error) {
		b, err := inner(ctx, cfg, req)
		b.BackendFingerprint = ""
		b.Close = func() error { closed++; return nil }
		return b, err
	}
	reg, err := providers.NewRegistry(r)
	if err != nil {
		t.Fatal(err)
	}
	_, err = reg.Build(context.Background(), refadapter.Kind, localRequest(t, providers.LocalOptions{Standalone: true, InstallationID: "i"}))
	if providercontract.CodeOf(err) != providercontract.CodeBuildResult || closed != 1 {
		t.Fatalf("err = %v, closed = %d", err, closed)
	}
}

func TestConfigurationOfANodeProvider(t *testing.T) {
	reg, err := providers.NewRegistry(refadapter.Registration())
	if err != nil {
		t.Fatal(err)
	}
	enc, err := reg.Normalize(refadapter.Kind, sandbox.ConfigurationInput{Public: json.RawMessage(` { } `)})
	if err != nil {
		t.Fatalf("empty object: %v", err)
	}
	if string(enc.Public) != `{}` || enc.Secret.Len() != 0 {
		t.Fatalf("encoded = %+v", enc)
	}
	desc, err := reg.Describe(refadapter.Kind, enc)
	if err != nil || desc.HasCredential || string(desc.Public) != `{}` {
		t.Fatalf("describe = %+v, %v", desc, err)
	}
	if _, err := reg.ResolveChange(refadapter.Kind, enc, sandbox.ConfigurationInput{Public: json.RawMessage(`{}`)}); err != nil {
		t.Fatalf("empty change: %v", err)
	}
	rejected := map[string]sandbox.ConfigurationInput{
		"credential":       {Public: json.RawMessage(`{}`), Credential: sandbox.NewCredential([]byte(`{"token":"hunter2-secret"}`))},
		"non-empty public": {Public: json.RawMessage(`{"socket":"/var/run/docker.sock"}`)},
		"not an object":    {Public: json.RawMessage(`[]`)},
		"trailing data":    {Public: json.RawMessage(`{} {}`)},
	}
	for name, in := range rejected {
		_, err := reg.Normalize(refadapter.Kind, in)
		if !errdefs.IsInvalid(err) {
			t.Errorf("%s: err = %v", name, err)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "docker.sock") {
			t.Errorf("%s: error echoes input: %v", name, err)
		}
		if _, err := reg.ResolveChange(refadapter.Kind, enc, in); !errdefs.IsInvalid(err) {
			t.Errorf("%s: ResolveChange err = %v", name, err)
		}
	}
	if _, err := reg.Normalize("e2b", sandbox.ConfigurationInput{}); !errdefs.IsInvalid(err) {
		t.Errorf("unknown kind: %v", err)
	}
	_, err = nodeconfig.Adapter{Kind: refadapter.Kind}.WithCredential(nil, []byte("k"))
	if _, ok := providercontract.AsUnsupported(err, "WithCredential"); !ok {
		t.Errorf("credential replacement: %v", err)
	}
	_, err = nodeconfig.Adapter{Kind: refadapter.Kind}.DiscoverConfiguration(context.Background(), sandbox.DiscoveryQuery{})
	if _, ok := providercontract.AsUnsupported(err, "DiscoverConfiguration"); !ok {
		t.Errorf("discovery: %v", err)
	}
}
