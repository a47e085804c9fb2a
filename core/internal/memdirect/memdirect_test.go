package memdirect_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providercontract"
	"berth.dev/sandbox/providers"

	"berth.dev/core/internal/memdirect"
)

// The test keys: never in any error.
const (
	keyA = "mdk_team_a_0123456789secret"
	keyB = "mdk_team_b_9876543210secret"
)

func vendor() *memdirect.Vendor {
	v := memdirect.NewVendor()
	v.AddKey(keyA, "team-a")
	v.AddKey(keyB, "team-b")
	return v
}

// adapter is one memdirect generation built through the checked
// construction path, as Core will build it.
type adapter struct {
	*memdirect.Provider
	built        providers.DirectBuilt
	installation string
}

func encoded(t *testing.T, reg *providers.Registry, key string) sandbox.EncodedConfiguration {
	t.Helper()
	enc, err := reg.Normalize(memdirect.Kind, sandbox.ConfigurationInput{
		Public:     json.RawMessage(`{"template":"berth-runtime"}`),
		Credential: sandbox.NewCredential([]byte(`{"api_key":"` + key + `"}`)),
	})
	if err != nil {
		t.Fatalf("normalize: %v", err)
	}
	return enc
}

// stored splits enc as the store keeps it: the selectors and
// observations, and the secret the store seals apart (and Core opens).
func stored(enc sandbox.EncodedConfiguration) (sandbox.EncodedConfiguration, sandbox.Credential) {
	return sandbox.EncodedConfiguration{Public: enc.Public, Observations: enc.Observations}, enc.Secret
}

// directRequest is the request Core makes for generation 1 of a
// deployment committed with key: the stored selectors, and the opened
// credential beside them.
func directRequest(t *testing.T, reg *providers.Registry, installation, key string) providers.DirectRequest {
	t.Helper()
	deployment, credential := stored(encoded(t, reg, key))
	return providers.DirectRequest{
		Deployment:     deployment,
		Credential:     credential,
		Specification:  sandbox.Specification{Resources: sandbox.Resources{CPUMillis: 1000, MemoryBytes: 1 << 30, DiskBytes: 4 << 30}, MaxActive: 4},
		InstallationID: installation,
		Generation:     1,
		Paths:          providers.ProcessPaths{Root: "/usr/lib/berth", State: "/var/lib/berth/providers"},
	}
}

func buildErr(t *testing.T, v *memdirect.Vendor, installation, key string) (adapter, error) {
	t.Helper()
	reg, err := providers.NewRegistry(memdirect.Registration(v))
	if err != nil {
		t.Fatal(err)
	}
	built, err := reg.BuildDirect(context.Background(), memdirect.Kind, directRequest(t, reg, installation, key))
	if err != nil {
		return adapter{}, err
	}
	t.Cleanup(func() { _ = built.Close() })
	return adapter{Provider: built.Provider.(*memdirect.Provider), built: built, installation: installation}, nil
}

func build(t *testing.T, v *memdirect.Vendor, installation, key string) adapter {
	t.Helper()
	a, err := buildErr(t, v, installation, key)
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	return a
}

func newRef() sandbox.Reference {
	return sandbox.Reference{TenantID: uuid.NewString(), EnvironmentID: uuid.NewString(), AllocationID: uuid.NewString()}
}

func createRequest(ref sandbox.Reference) sandbox.CreateRequest {
	return sandbox.CreateRequest{
		Reference: ref,
		Resources: sandbox.Resources{CPUMillis: 500, MemoryBytes: 256 << 20, DiskBytes: 1 << 30},
		Bootstrap: runtimebootstrap.File{
			Version:    runtimebootstrap.Version,
			CoreURL:    "https://core.berth.test:8443",
			DeviceID:   uuid.NewString(),
			Credential: runtimebootstrap.NewSecret(strings.ReplaceAll(uuid.NewString()+uuid.NewString(), "-", "")),
		},
	}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// noSecret fails when err's text, or its printing, shows a test key.
func noSecret(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	for _, s := range []string{err.Error(), fmt.Sprintf("%+v %#v", err, err)} {
		if strings.Contains(s, keyA) || strings.Contains(s, keyB) || strings.Contains(s, "vendor answered") {
			t.Fatalf("%s: error shows the key or the vendor's text: %s", what, s)
		}
	}
}

// calls names the vendor calls made since the last reset.
func calls(v *memdirect.Vendor) []string {
	var out []string
	for _, c := range v.Calls() {
		out = append(out, c.Name)
	}
	return out
}

func wantCalls(t *testing.T, v *memdirect.Vendor, want ...string) {
	t.Helper()
	if got := calls(v); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("vendor calls = %q, want %q", got, want)
	}
}

func TestBuildBindsTheKeysTeam(t *testing.T) {
	v := vendor()
	inst := uuid.NewString()
	a := build(t, v, inst, keyA)
	b := build(t, v, inst, keyB)
	if a.built.BackendFingerprint == "" || a.built.BackendFingerprint == b.built.BackendFingerprint {
		t.Fatalf("fingerprints %q and %q: a key of another team must name another namespace",
			a.built.BackendFingerprint, b.built.BackendFingerprint)
	}
	if a.built.Fence != a.Fence() {
		t.Fatal("DirectBuilt.Fence is not the adapter's fence")
	}
	if err := a.built.Probe(ctxFor(t)); err != nil {
		t.Fatalf("probe: %v", err)
	}
	if err := providers.ValidateBinding(memdirect.Registration(v), a.Provider); err != nil {
		t.Fatal(err)
	}
	if v.Len() != 0 {
		t.Fatal("construction created something")
	}
}

func TestHappyPathCreateRenewKill(t *testing.T) {
	v := vendor()
	a := build(t, v, uuid.NewString(), keyA)
	ctx := ctxFor(t)
	ref := newRef()
	info, err := a.Create(ctx, createRequest(ref))
	if err != nil || !info.IsSettledRunning(ref) || info.LeaseExpiry.IsZero() {
		t.Fatalf("create: %+v, %v", info, err)
	}
	got := v.Sandboxes()
	if len(got) != 1 || got[0].ID != info.ProviderID || got[0].Team != "team-a" {
		t.Fatalf("vendor holds %+v", got)
	}
	for k, want := range memdirect.Metadata(a.installation, ref) {
		if got[0].Metadata[k] != want {
			t.Fatalf("metadata %s = %q, want %q", k, got[0].Metadata[k], want)
		}
	}
	observed, err := a.GetInfo(ctx, ref)
	if err != nil || observed != info {
		t.Fatalf("GetInfo = %+v, %v; want %+v", observed, err, info)
	}
	v.Advance(10 * time.Minute)
	renewed, err := a.Renew(ctx, ref)
	if err != nil || renewed.ProviderID != info.ProviderID || !renewed.LeaseExpiry.After(info.LeaseExpiry.Add(9*time.Minute)) {
		t.Fatalf("Renew = %+v, %v; the lease must end a lease from the advanced clock", renewed, err)
	}
	res, err := a.RunCommand(ctx, ref, sandbox.Command{Args: []string{"true"}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("RunCommand = %+v, %v", res, err)
	}
	if err := a.Kill(ctx, sandbox.KillRequest{Reference: ref, CreateSettled: true}); err != nil {
		t.Fatalf("kill: %v", err)
	}
	if v.Len() != 0 {
		t.Fatal("Kill left the sandbox")
	}
	if info, err := a.GetInfo(ctx, ref); err != nil || !info.IsAbsenceReceipt(ref) {
		t.Fatalf("GetInfo after Kill = %+v, %v; want the absence receipt", info, err)
	}
	if err := a.Kill(ctx, sandbox.KillRequest{Reference: ref, CreateSettled: true}); err != nil {
		t.Fatalf("a repeated Kill of confirmed absence: %v", err)
	}
	if _, err := a.Renew(ctx, ref); !errdefs.IsNotFound(err) {
		t.Fatalf("Renew after Kill = %v, want not found (Renew never revives)", err)
	}
	if v.Len() != 0 {
		t.Fatal("something revived the sandbox")
	}
}

func TestLeaseEndKillsAndRenewNeverRevives(t *testing.T) {
	v := vendor()
	a := build(t, v, uuid.NewString(), keyA)
	ctx := ctxFor(t)
	ref := newRef()
	if _, err := a.Create(ctx, createRequest(ref)); err != nil {
		t.Fatal(err)
	}
	v.Advance(memdirect.DefaultLease)
	if _, err := a.Renew(ctx, ref); !errdefs.IsNotFound(err) {
		t.Fatalf("Renew after the lease ended = %v, want not found", err)
	}
	if v.Len() != 0 {
		t.Fatal("Renew revived a sandbox whose lease had ended")
	}
	if info, err := a.GetInfo(ctx, ref); err != nil || !info.IsAbsenceReceipt(ref) {
		t.Fatalf("GetInfo = %+v, %v", info, err)
	}
}

// TestLostAnswerAfterCreatingSettlesByListing: the vendor created the
// sandbox and the answer was lost. Create is an unknown outcome claiming
// nothing; the next GetInfo settles it running from the metadata listing,
// and nothing creates again.
func TestLostAnswerAfterCreatingSettlesByListing(t *testing.T) {
	v := vendor()
	a := build(t, v, uuid.NewString(), keyA)
	ctx := ctxFor(t)
	ref := newRef()
	v.LoseAnswer(memdirect.CallCreate)
	info, err := a.Create(ctx, createRequest(ref))
	if !errdefs.IsComputeUnconfirmed(err) || info.CreateSettled || info.ProviderID != "" {
		t.Fatalf("create with a lost answer = %+v, %v; want an unknown outcome claiming nothing", info, err)
	}
	held := v.Sandboxes()
	if len(held) != 1 {
		t.Fatalf("the vendor holds %d sandboxes, want the one it created", len(held))
	}
	v.ResetCalls()
	observed, err := a.GetInfo(ctx, ref)
	if err != nil || !observed.IsSettledRunning(ref) || observed.ProviderID != held[0].ID {
		t.Fatalf("GetInfo = %+v, %v; want the created sandbox, settled", observed, err)
	}
	wantCalls(t, v, memdirect.CallList)
}

// TestUnknownCreateThatMadeNothingSettlesAbsent: a slow create whose
// deadline ends before the vendor goes on makes nothing; the listing then
// gives the absence receipt.
func TestUnknownCreateThatMadeNothingSettlesAbsent(t *testing.T) {
	v := vendor()
	a := build(t, v, uuid.NewString(), keyA)
	ref := newRef()
	_, release := v.Hold(memdirect.CallCreate)
	defer release()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	info, err := a.Create(ctx, createRequest(ref))
	if !errdefs.IsComputeUnconfirmed(err) || info.CreateSettled {
		t.Fatalf("create = %+v, %v; want an unknown outcome", info, err)
	}
	waitIdle(t, a.Fence())
	release()
	observed, err := a.GetInfo(ctxFor(t), ref)
	if err != nil || !observed.IsAbsenceReceipt(ref) {
		t.Fatalf("GetInfo = %+v, %v; want the absence receipt", observed, err)
	}
	if v.Len() != 0 {
		t.Fatal("the create made a sandbox after its deadline")
	}
}

func waitIdle(t *testing.T, f *sandbox.CallFence) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for f.Active() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("fence still has %d active calls", f.Active())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestDetachedCreateHoldsTheFence: a Create whose caller gave up while the
// vendor is slow returns an unknown outcome at once, but stays counted in
// the fence and keeps the Reference's turn until the vendor call returns:
// Exclude reports busy, a GetInfo of the same Reference waits and sends
// nothing, and after the vendor goes on the Create's result is what the
// listing settles.
func TestDetachedCreateHoldsTheFence(t *testing.T) {
	v := vendor()
	a := build(t, v, uuid.NewString(), keyA)
	ref := newRef()
	received, release := v.Hold(memdirect.CallCreate)
	defer release()
	ctx, cancel := context.WithCancel(context.Background())
	type result struct {
		info sandbox.Info
		err  error
	}
	out := make(chan result, 1)
	go func() {
		info, err := a.Create(ctx, createRequest(ref))
		out <- result{info, err}
	}()
	<-received
	cancel()
	r := <-out
	if !errdefs.IsComputeUnconfirmed(r.err) || r.info.CreateSettled {
		t.Fatalf("create = %+v, %v; want an unknown outcome", r.info, r.err)
	}
	if n := a.Fence().Active(); n != 1 {
		t.Fatalf("Active() = %d after the caller gave up, want 1: the vendor call has not returned", n)
	}
	short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err := a.Fence().Exclude(short)
	cancelShort()
	if !errors.Is(err, sandbox.ErrFenceBusy) {
		t.Fatalf("Exclude = %v, want busy while the detached Create runs", err)
	}
	v.ResetCalls()
	short, cancelShort = context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err = a.GetInfo(short, ref)
	cancelShort()
	if !errdefs.IsObservationUnavailable(err) {
		t.Fatalf("GetInfo while the Create holds the turn = %v, want unavailable", err)
	}
	wantCalls(t, v)

	release()
	waitIdle(t, a.Fence())
	readmit, err := a.Fence().Exclude(ctxFor(t))
	if err != nil {
		t.Fatalf("Exclude once the Create returned: %v", err)
	}
	readmit()
	observed, err := a.GetInfo(ctxFor(t), ref)
	if err != nil || !observed.IsSettledRunning(ref) {
		t.Fatalf("GetInfo = %+v, %v; want the sandbox the detached Create made", observed, err)
	}
}

// TestExcludedFenceRefusesWithoutSending: while excluded, Create is
// refused with its absence receipt and nothing reaches the vendor.
func TestExcludedFenceRefusesWithoutSending(t *testing.T) {
	v := vendor()
	a := build(t, v, uuid.NewString(), keyA)
	ref := newRef()
	readmit, err := a.Fence().Exclude(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	v.ResetCalls()
	info, err := a.Create(ctxFor(t), createRequest(ref))
	if !errdefs.IsFenced(err) || !info.IsAbsenceReceipt(ref) {
		t.Fatalf("create while excluded = %+v, %v; want fenced with the absence receipt", info, err)
	}
	if _, err := a.GetInfo(ctxFor(t), ref); !errdefs.IsFenced(err) {
		t.Fatalf("GetInfo while excluded = %v", err)
	}
	if err := a.built.Probe(ctxFor(t)); sandbox.ProbeCode(err) != memdirect.ProbeFenced {
		t.Fatalf("probe while excluded = %v", err)
	}
	wantCalls(t, v)
	readmit()
	if _, err := a.Create(ctxFor(t), createRequest(ref)); err != nil {
		t.Fatalf("create after readmit: %v", err)
	}
}

// TestForeignMetadataIsNeverTouched: a sandbox listed under the
// allocation with another installation's metadata makes every operation
// an ownership error; Create sends no create and returns the absence
// receipt, and the foreign sandbox survives.
func TestForeignMetadataIsNeverTouched(t *testing.T) {
	v := vendor()
	a := build(t, v, uuid.NewString(), keyA)
	ctx := ctxFor(t)
	ref := newRef()
	meta := memdirect.Metadata(uuid.NewString(), ref)
	foreign := v.Plant("team-a", meta)
	v.ResetCalls()

	info, err := a.Create(ctx, createRequest(ref))
	if !errdefs.IsOwnership(err) || !info.IsAbsenceReceipt(ref) {
		t.Fatalf("create = %+v, %v; want ownership with the absence receipt", info, err)
	}
	if _, err := a.GetInfo(ctx, ref); !errdefs.IsOwnership(err) {
		t.Fatalf("GetInfo = %v", err)
	}
	if _, err := a.Renew(ctx, ref); !errdefs.IsOwnership(err) {
		t.Fatalf("Renew = %v", err)
	}
	if _, err := a.RunCommand(ctx, ref, sandbox.Command{Args: []string{"true"}}); !errdefs.IsOwnership(err) {
		t.Fatalf("RunCommand = %v", err)
	}
	if err := a.Kill(ctx, sandbox.KillRequest{Reference: ref}); !errdefs.IsOwnership(err) {
		t.Fatalf("Kill = %v", err)
	}
	for _, c := range v.Calls() {
		if c.Mutating {
			t.Fatalf("mutating vendor call %s despite foreign metadata", c.Name)
		}
	}
	if got := v.Sandboxes(); len(got) != 1 || got[0].ID != foreign {
		t.Fatalf("vendor holds %+v, want the foreign sandbox untouched", got)
	}
	// Foreign metadata of another allocation is not listed for this one.
	other := newRef()
	if _, err := a.Create(ctx, createRequest(other)); err != nil {
		t.Fatalf("create of another allocation: %v", err)
	}
}

// TestKeyOfAnotherTeamCannotSeeOrKill: a sandbox created with team A's
// key is invisible to an adapter holding team B's key: its GetInfo finds
// nothing (within its team), its Kill removes nothing, and the sandbox
// runs on for team A. VerifyCredential passes for both keys, which is why
// it alone cannot justify a key replacement.
func TestKeyOfAnotherTeamCannotSeeOrKill(t *testing.T) {
	v := vendor()
	inst := uuid.NewString()
	a := build(t, v, inst, keyA)
	b := build(t, v, inst, keyB)
	ctx := ctxFor(t)
	ref := newRef()
	created, err := a.Create(ctx, createRequest(ref))
	if err != nil {
		t.Fatal(err)
	}
	seen, err := b.GetInfo(ctx, ref)
	if err != nil || seen.ProviderID != "" || seen.State == sandbox.StateRunning {
		t.Fatalf("team B's GetInfo = %+v, %v; it must not see team A's sandbox", seen, err)
	}
	if _, err := b.Renew(ctx, ref); !errdefs.IsNotFound(err) {
		t.Fatalf("team B's Renew = %v", err)
	}
	if _, err := b.RunCommand(ctx, ref, sandbox.Command{Args: []string{"true"}}); !errdefs.IsNotFound(err) {
		t.Fatalf("team B's RunCommand = %v", err)
	}
	if err := b.Kill(ctx, sandbox.KillRequest{Reference: ref, CreateSettled: true}); err != nil {
		t.Fatalf("team B's Kill = %v", err)
	}
	still, err := a.GetInfo(ctx, ref)
	if err != nil || !still.IsSettledRunning(ref) || still.ProviderID != created.ProviderID {
		t.Fatalf("after team B's Kill, team A sees %+v, %v; want its sandbox running", still, err)
	}
	if v.Len() != 1 {
		t.Fatal("team B's Kill removed team A's sandbox")
	}
	for _, c := range v.Calls() {
		if c.Team == "team-b" && c.Mutating {
			t.Fatalf("team B's key made a mutating call %s", c.Name)
		}
	}
	cfgB := decoded(t, v, keyB)
	if err := a.VerifyCredential(ctx, cfgB); err != nil {
		t.Fatalf("VerifyCredential of team B's key: %v", err)
	}
}

func decoded(t *testing.T, v *memdirect.Vendor, key string) sandbox.NativeConfiguration {
	t.Helper()
	reg, err := providers.NewRegistry(memdirect.Registration(v))
	if err != nil {
		t.Fatal(err)
	}
	r, err := reg.Lookup(memdirect.Kind)
	if err != nil {
		t.Fatal(err)
	}
	deployment, credential := stored(encoded(t, reg, key))
	cfg, err := r.Configuration.Decode(deployment)
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err = r.Configuration.WithCredential(cfg, credential.Reveal()); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestRejectedKeyNeverShows: the vendor's refusal quotes the key; the
// adapter's errors, at construction, in VerifyCredential, in the probe
// and in every operation, never do.
func TestRejectedKeyNeverShows(t *testing.T) {
	v := vendor()
	const revoked = "mdk_revoked_key_secret"
	v.AddKey(revoked, "team-c")
	inst := uuid.NewString()
	a := build(t, v, inst, revoked)
	ctx := ctxFor(t)

	_, err := buildErr(t, v, inst, "mdk_unknown_key_secret")
	if !errdefs.IsFailedPrecondition(err) || strings.Contains(err.Error(), "mdk_unknown") {
		t.Fatalf("build with an unknown key = %v", err)
	}
	noSecret(t, "build", err)

	v.RemoveKey(revoked)
	if code := sandbox.ProbeCode(a.built.Probe(ctx)); code != memdirect.ProbeCredentialRejected {
		t.Fatalf("probe code = %q", code)
	}
	ref := newRef()
	info, err := a.Create(ctx, createRequest(ref))
	if !errdefs.IsFailedPrecondition(err) || !info.IsAbsenceReceipt(ref) {
		t.Fatalf("create with a revoked key = %+v, %v", info, err)
	}
	errs := map[string]error{"create": err}
	_, errs["get"] = a.GetInfo(ctx, ref)
	_, errs["renew"] = a.Renew(ctx, ref)
	errs["kill"] = a.Kill(ctx, sandbox.KillRequest{Reference: ref})
	_, errs["run"] = a.RunCommand(ctx, ref, sandbox.Command{Args: []string{"true"}})
	errs["verify"] = a.VerifyCredential(ctx, decoded(t, v, "mdk_other_unknown_secret"))
	for name, err := range errs {
		if !errdefs.IsFailedPrecondition(err) {
			t.Errorf("%s with a rejected key = %v", name, err)
		}
		if err != nil && (strings.Contains(err.Error(), "mdk_") || strings.Contains(err.Error(), "vendor answered")) {
			t.Errorf("%s: error shows the key or the vendor's text: %v", name, err)
		}
		noSecret(t, name, err)
	}
	if r, ok := errdefs.AsRefusal(errs["get"]); !ok || r.Reason != "credential_rejected" {
		t.Fatalf("refusal = %+v", r)
	}
	cfg := decoded(t, v, keyA)
	for _, s := range []string{fmt.Sprintf("%v", cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg)} {
		if strings.Contains(s, keyA) {
			t.Fatalf("printing the configuration shows the key: %s", s)
		}
	}
}

func TestVerifyCredentialMutatesNothing(t *testing.T) {
	v := vendor()
	a := build(t, v, uuid.NewString(), keyA)
	v.ResetCalls()
	if err := a.VerifyCredential(ctxFor(t), decoded(t, v, keyA)); err != nil {
		t.Fatal(err)
	}
	for _, c := range v.Calls() {
		if c.Mutating {
			t.Fatalf("VerifyCredential made mutating call %s", c.Name)
		}
	}
	if err := a.VerifyCredential(ctxFor(t), otherConfig{}); !errdefs.IsInvalid(err) {
		t.Fatalf("VerifyCredential of another kind's configuration = %v", err)
	}
}

type otherConfig struct{}

func (otherConfig) ProviderKind() string { return "other" }

func TestUnsupportedOperationsSendNothing(t *testing.T) {
	v := vendor()
	a := build(t, v, uuid.NewString(), keyA)
	ref := newRef()
	v.ResetCalls()
	ctx := ctxFor(t)
	_, err := a.Suspend(ctx, sandbox.SuspendRequest{})
	if _, ok := providercontract.AsUnsupported(err, sandbox.OpSuspend); !ok {
		t.Fatalf("Suspend = %v", err)
	}
	_, err = a.Observe(ctx, ref)
	if _, ok := providercontract.AsUnsupported(err, sandbox.OpObserve); !ok {
		t.Fatalf("Observe = %v", err)
	}
	_, err = a.DiscoverSelection(ctx, nil)
	if _, ok := providercontract.AsUnsupported(err, sandbox.OpDiscoverSelection); !ok {
		t.Fatalf("DiscoverSelection = %v", err)
	}
	wantCalls(t, v)
	if memdirect.Operations().Supports(sandbox.OpSuspend) || !memdirect.Operations().Supports(sandbox.OpVerifyCredential) {
		t.Fatal("declaration")
	}
}

func TestClosedAdapterSendsNothing(t *testing.T) {
	v := vendor()
	a := build(t, v, uuid.NewString(), keyA)
	ref := newRef()
	if err := a.built.Close(); err != nil {
		t.Fatal(err)
	}
	v.ResetCalls()
	info, err := a.Create(ctxFor(t), createRequest(ref))
	if !errdefs.IsFenced(err) || !info.IsAbsenceReceipt(ref) {
		t.Fatalf("create after close = %+v, %v", info, err)
	}
	if _, err := a.GetInfo(ctxFor(t), ref); !errdefs.IsFenced(err) {
		t.Fatalf("GetInfo after close = %v", err)
	}
	wantCalls(t, v)
}

func TestConfiguration(t *testing.T) {
	v := vendor()
	reg, err := providers.NewRegistry(memdirect.Registration(v))
	if err != nil {
		t.Fatal(err)
	}
	enc := encoded(t, reg, keyA)
	if string(enc.Public) != `{"template":"berth-runtime","lease_seconds":900}` || string(enc.Secret.Reveal()) != keyA {
		t.Fatalf("encoded public %s", enc.Public)
	}
	bad := map[string]sandbox.ConfigurationInput{
		"no credential":    {Public: json.RawMessage(`{"template":"t"}`)},
		"unknown field":    {Public: json.RawMessage(`{"template":"t","region":"x"}`), Credential: sandbox.NewCredential([]byte(`{"api_key":"` + keyA + `"}`))},
		"bad template":     {Public: json.RawMessage(`{"template":"T!"}`), Credential: sandbox.NewCredential([]byte(`{"api_key":"` + keyA + `"}`))},
		"short lease":      {Public: json.RawMessage(`{"template":"t","lease_seconds":5}`), Credential: sandbox.NewCredential([]byte(`{"api_key":"` + keyA + `"}`))},
		"credential field": {Public: json.RawMessage(`{"template":"t"}`), Credential: sandbox.NewCredential([]byte(`{"key":"` + keyA + `"}`))},
		"trailing data":    {Public: json.RawMessage(`{"template":"t"} {}`), Credential: sandbox.NewCredential([]byte(`{"api_key":"` + keyA + `"}`))},
	}
	for name, in := range bad {
		_, err := reg.Normalize(memdirect.Kind, in)
		if !errdefs.IsInvalid(err) {
			t.Errorf("%s: %v", name, err)
		}
		noSecret(t, name, err)
	}
	changed, err := reg.ResolveChange(memdirect.Kind, enc, sandbox.ConfigurationInput{Public: json.RawMessage(`{"lease_seconds":600}`)})
	if err != nil || string(changed.Public) != `{"template":"berth-runtime","lease_seconds":600}` || string(changed.Secret.Reveal()) != keyA {
		t.Fatalf("a change inherits the template and the key: %s, %v", changed.Public, err)
	}
}
