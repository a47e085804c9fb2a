package providers_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/internal/refadapter"
	"berth.dev/sandbox/providercontract"
	"berth.dev/sandbox/providers"
)

// directBuild is a direct registration over the reference adapter whose
// constructor returns what its test says, counting constructor calls and
// closes.
type directBuild struct {
	built  func() providers.DirectBuilt
	err    error
	calls  int
	closed int
	req    providers.DirectRequest
}

func (d *directBuild) registry(t *testing.T) *providers.Registry {
	t.Helper()
	r := refadapter.Registration()
	r.Mode = providers.ModeDirect
	r.BuildLocal = nil
	r.Artifacts = nil
	r.BuildDirect = func(_ context.Context, cfg sandbox.NativeConfiguration, req providers.DirectRequest) (providers.DirectBuilt, error) {
		d.calls++
		d.req = req
		if cfg == nil || cfg.ProviderKind() != refadapter.Kind {
			t.Errorf("constructor got configuration %v", cfg)
		}
		if d.err != nil {
			return providers.DirectBuilt{}, d.err
		}
		return d.built(), nil
	}
	reg, err := providers.NewRegistry(r)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// complete is a DirectBuilt with every part, closing into d.
func (d *directBuild) complete() providers.DirectBuilt {
	return providers.DirectBuilt{
		Provider: refadapter.New("", "i", nil),
		Probe:    func(context.Context) error { return nil },
		Close:    func() error { d.closed++; return nil },
		Fence:    &sandbox.CallFence{},
	}
}

func directRequest() providers.DirectRequest {
	return providers.DirectRequest{
		Deployment:     sandbox.EncodedConfiguration{Public: json.RawMessage(`{}`)},
		Specification:  spec,
		InstallationID: "inst",
		Generation:     3,
		Paths:          providers.ProcessPaths{Root: "/usr/lib/berth", State: "/var/lib/berth/providers"},
	}
}

func TestBuildDirectReturnsTheCompleteResult(t *testing.T) {
	d := &directBuild{}
	d.built = func() providers.DirectBuilt {
		b := d.complete()
		b.BackendFingerprint = "vendor:team-1"
		return b
	}
	built, err := d.registry(t).BuildDirect(context.Background(), refadapter.Kind, directRequest())
	if err != nil {
		t.Fatal(err)
	}
	if built.Provider == nil || built.Probe == nil || built.Close == nil || built.Fence == nil || built.BackendFingerprint != "vendor:team-1" {
		t.Fatalf("built = %+v", built)
	}
	if d.closed != 0 {
		t.Fatalf("an accepted result was closed %d times", d.closed)
	}
	if d.req.Generation != 3 || d.req.InstallationID != "inst" {
		t.Fatalf("constructor got %+v", d.req)
	}
}

// TestBuildDirectRejectsAndClosesAnIncompleteResult: a direct build
// missing a part Core needs to serve or retire a generation is a contract
// error naming the part, and whatever was built is closed (when it has a
// close function at all).
func TestBuildDirectRejectsAndClosesAnIncompleteResult(t *testing.T) {
	var nilProvider *refadapter.Provider
	cases := []struct {
		name       string
		mutate     func(*providers.DirectBuilt)
		code       providercontract.ContractCode
		field      string
		wantClosed int
	}{
		{"probe missing", func(b *providers.DirectBuilt) { b.Probe = nil }, providercontract.CodeBuildResult, "probe", 1},
		{"close missing", func(b *providers.DirectBuilt) { b.Close = nil }, providercontract.CodeBuildResult, "close", 0},
		{"fence missing", func(b *providers.DirectBuilt) { b.Fence = nil }, providercontract.CodeBuildResult, "fence", 1},
		{"provider missing", func(b *providers.DirectBuilt) { b.Provider = nil }, providercontract.CodeBuildResult, "provider", 1},
		{"provider typed nil", func(b *providers.DirectBuilt) { b.Provider = nilProvider }, providercontract.CodeBuildResult, "provider", 1},
		{"declaration mismatch", func(b *providers.DirectBuilt) {
			b.Provider = mismatched{refadapter.New("", "i", nil)}
		}, providercontract.CodeDeclarationMismatch, "operations", 1},
		{"fingerprint too long", func(b *providers.DirectBuilt) {
			b.BackendFingerprint = strings.Repeat("f", 257)
		}, providercontract.CodeBuildResult, "backend_fingerprint", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := &directBuild{}
			d.built = func() providers.DirectBuilt {
				b := d.complete()
				c.mutate(&b)
				return b
			}
			built, err := d.registry(t).BuildDirect(context.Background(), refadapter.Kind, directRequest())
			var ce *providercontract.ContractError
			if !errors.As(err, &ce) || !errdefs.IsContract(err) {
				t.Fatalf("err = %v, want a ContractError", err)
			}
			if ce.Code != c.code || ce.Field != c.field {
				t.Fatalf("got %s/%s, want %s/%s", ce.Code, ce.Field, c.code, c.field)
			}
			if d.closed != c.wantClosed {
				t.Fatalf("closed %d times, want %d", d.closed, c.wantClosed)
			}
			if built.Provider != nil || built.Close != nil || built.Fence != nil {
				t.Fatalf("a rejected build returned parts: %+v", built)
			}
		})
	}
}

// TestBuildDirectRefusesBeforeConstruction: invalid requests are refused
// before the adapter's constructor runs.
func TestBuildDirectRefusesBeforeConstruction(t *testing.T) {
	cases := map[string]struct {
		mutate func(*providers.DirectRequest)
		field  string
	}{
		"relative root":      {func(r *providers.DirectRequest) { r.Paths.Root = "usr/lib/berth" }, "paths.root"},
		"missing state":      {func(r *providers.DirectRequest) { r.Paths.State = "" }, "paths.state"},
		"non-canonical root": {func(r *providers.DirectRequest) { r.Paths.Root = "/usr/lib/../berth" }, "paths.root"},
		"trailing slash":     {func(r *providers.DirectRequest) { r.Paths.State = "/var/lib/berth/" }, "paths.state"},
		"filesystem root":    {func(r *providers.DirectRequest) { r.Paths.Root = "/" }, "paths.root"},
		"relative state":     {func(r *providers.DirectRequest) { r.Paths.State = "./state" }, "paths.state"},
		"missing root":       {func(r *providers.DirectRequest) { r.Paths.Root = "" }, "paths.root"},
		"no generation":      {func(r *providers.DirectRequest) { r.Generation = 0 }, "generation"},
		"specification out of bounds": {func(r *providers.DirectRequest) {
			r.Specification.Resources.CPUMillis = 1
		}, ""},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			d := &directBuild{}
			d.built = d.complete
			req := directRequest()
			c.mutate(&req)
			_, err := d.registry(t).BuildDirect(context.Background(), refadapter.Kind, req)
			if !errdefs.IsInvalid(err) {
				t.Fatalf("err = %v, want invalid", err)
			}
			if f, _ := errdefs.Field(err); c.field != "" && f != c.field {
				t.Fatalf("field = %q, want %q", f, c.field)
			}
			if d.calls != 0 {
				t.Fatal("the constructor ran for an invalid request")
			}
		})
	}
}

func TestBuildDirectPassesAConstructorErrorOn(t *testing.T) {
	refused := errdefs.Invalid("configuration.credential", "rejected by the vendor")
	d := &directBuild{err: refused}
	_, err := d.registry(t).BuildDirect(context.Background(), refadapter.Kind, directRequest())
	if !errors.Is(err, refused) || errdefs.IsContract(err) {
		t.Fatalf("err = %v, want the constructor's error", err)
	}
}

func TestBuildOfTheOtherModeIsInvalid(t *testing.T) {
	d := &directBuild{}
	d.built = d.complete
	reg := d.registry(t)
	if _, err := reg.Build(context.Background(), refadapter.Kind, providers.LocalRequest{
		Deployment: sandbox.EncodedConfiguration{Public: json.RawMessage(`{}`)}, Specification: spec,
		Options: providers.LocalOptions{Standalone: true},
	}); !errdefs.IsInvalid(err) {
		t.Fatalf("Build of a direct provider: err = %v", err)
	}
	if d.calls != 0 {
		t.Fatal("the direct constructor ran")
	}
}
