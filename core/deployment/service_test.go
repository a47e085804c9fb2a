package deployment_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/sandbox"
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/errdefs/errdefstest"
	"berth.dev/sandbox/redacttest"

	"berth.dev/core/deployment"
	"berth.dev/core/deployment/deploymenttest"
	"berth.dev/core/secrets"
	"berth.dev/core/store"
)

func TestPreviewDockerBeforeFirstCommit(t *testing.T) {
	f := deploymenttest.New(t)
	d, err := f.Svc.Get(f.Ctx)
	errdefstest.Must(t, err)
	if d.Generation != 0 || d.ProviderKind != "" {
		t.Fatalf("deployment before the first commit: %+v", d)
	}
	p, err := f.Svc.Preview(f.Ctx, deploymenttest.DockerCandidate())
	errdefstest.Must(t, err)
	if !p.Changed || p.ExpectedGeneration != 0 || p.Deployment.Generation != 1 ||
		p.Deployment.ProviderKind != "docker" || string(p.Deployment.Public) != "{}" ||
		p.Deployment.HasCredential || p.Deployment.Specification != withDefaults(deploymenttest.DefaultSpec()) {
		t.Fatalf("preview %+v", p)
	}
	f.WantGenerations(t, 0, "after the preview")
}

func TestCommitDockerCreatesGenerationOne(t *testing.T) {
	f := deploymenttest.New(t)
	d, err := f.Svc.Commit(f.Ctx, deploymenttest.DockerCandidate(), 0)
	errdefstest.Must(t, err)
	if d.Generation != 1 || d.ProviderKind != "docker" || d.HasCredential || d.CommitTime.IsZero() ||
		d.Specification != withDefaults(deploymenttest.DefaultSpec()) {
		t.Fatalf("commit %+v", d)
	}
	got, err := f.Svc.Get(f.Ctx)
	errdefstest.Must(t, err)
	if got.Generation != 1 || got.ProviderKind != "docker" || string(got.Public) != "{}" {
		t.Fatalf("get %+v", got)
	}

	// The same candidate again: no change, no new generation.
	p, err := f.Svc.Preview(f.Ctx, deploymenttest.DockerCandidate())
	errdefstest.Must(t, err)
	if p.Changed || p.ExpectedGeneration != 1 || p.Deployment.Generation != 1 {
		t.Fatalf("preview of the current deployment %+v", p)
	}
	again, err := f.Svc.Commit(f.Ctx, deploymenttest.DockerCandidate(), 1)
	errdefstest.Must(t, err)
	if again.Generation != 1 || f.Generations(t) != 1 {
		t.Fatalf("equal commit made generation %d (%d stored)", again.Generation, f.Generations(t))
	}

	// A different specification is a change a preview shows, and a commit
	// refuses: a committed deployment is replaced with Replace.
	c := deploymenttest.DockerCandidate()
	c.Specification.MaxActive = 8
	p, err = f.Svc.Preview(f.Ctx, c)
	errdefstest.Must(t, err)
	if !p.Changed || p.Deployment.Generation != 2 || p.ExpectedGeneration != 1 {
		t.Fatalf("preview of a change %+v", p)
	}
	_, err = f.Svc.Commit(f.Ctx, c, p.ExpectedGeneration)
	errdefstest.WantRefusal(t, err, errdefs.ErrFailedPrecondition, "deployment_committed")
	f.WantGenerations(t, 1, "after the refused commit")
}

// withDefaults is spec with Docker's registered suspension defaults: what
// a Docker candidate without a policy commits.
func withDefaults(spec sandbox.Specification) sandbox.Specification {
	spec.Suspension = docker.DefaultSuspension
	return spec
}

// dockerWithSpec is the docker selection with DefaultSpec changed by
// mutate.
func dockerWithSpec(mutate func(*sandbox.Specification)) deployment.Candidate {
	c := deploymenttest.DockerCandidate()
	mutate(&c.Specification)
	return c
}

// TestCommitRefusesChangedSelection: after the first commit, every change
// of the selection (provider kind, configuration or specification) is
// refused with deployment_committed (Replace replaces) and writes nothing; the
// committed deployment is unchanged.
func TestCommitRefusesChangedSelection(t *testing.T) {
	docker := []struct {
		name string
		c    deployment.Candidate
	}{
		{"memory", dockerWithSpec(func(s *sandbox.Specification) { s.Resources.MemoryBytes *= 2 })},
		{"cpu", dockerWithSpec(func(s *sandbox.Specification) { s.Resources.CPUMillis += 500 })},
		{"max retained", dockerWithSpec(func(s *sandbox.Specification) { s.MaxRetained++ })},
		{"provider kind", deploymenttest.DirectCandidate("eu", "tok")},
	}
	for _, tc := range docker {
		t.Run(tc.name, func(t *testing.T) {
			f := deploymenttest.New(t)
			first, err := f.Svc.Commit(f.Ctx, deploymenttest.DockerCandidate(), 0)
			errdefstest.Must(t, err)
			_, err = f.Svc.Commit(f.Ctx, tc.c, 1)
			errdefstest.WantRefusal(t, err, errdefs.ErrFailedPrecondition, "deployment_committed")
			f.WantGenerations(t, 1, "after the refused replacement")
			got, err := f.Svc.Get(f.Ctx)
			errdefstest.Must(t, err)
			if got.Generation != 1 || got.ProviderKind != "docker" || got.Specification != first.Specification {
				t.Fatalf("current deployment after a refused commit: %+v", got)
			}
		})
	}
	t.Run("direct configuration", func(t *testing.T) {
		f := deploymenttest.New(t)
		_, err := f.Svc.Commit(f.Ctx, deploymenttest.DirectCandidate("eu", "tok"), 0)
		errdefstest.Must(t, err)
		_, err = f.Svc.Commit(f.Ctx, deploymenttest.DirectCandidate("us", "tok"), 1)
		errdefstest.WantRefusal(t, err, errdefs.ErrFailedPrecondition, "deployment_committed")
		f.WantGenerations(t, 1, "after the refused replacement")
	})
}

func TestCommitStaleExpectedGenerationWritesNothing(t *testing.T) {
	f := deploymenttest.New(t)
	_, err := f.Svc.Commit(f.Ctx, deploymenttest.DockerCandidate(), 0)
	errdefstest.Must(t, err)
	c := deploymenttest.DockerCandidate()
	c.Specification.MaxActive = 9
	for _, expected := range []uint64{0, 2, 5} {
		_, err = f.Svc.Commit(f.Ctx, c, expected)
		errdefstest.WantClass(t, err, errdefs.ErrFailedPrecondition)
	}
	// A retry of the first commit after a lost response is refused too,
	// even though it equals the current deployment.
	_, err = f.Svc.Commit(f.Ctx, deploymenttest.DockerCandidate(), 0)
	errdefstest.WantClass(t, err, errdefs.ErrFailedPrecondition)
	f.WantGenerations(t, 1, "after the stale commit")
	d, err := f.Svc.Get(f.Ctx)
	errdefstest.Must(t, err)
	if d.Generation != 1 || d.Specification.MaxActive != deploymenttest.DefaultSpec().MaxActive {
		t.Fatalf("current %+v", d)
	}
}

func TestRejectedCandidatesNameTheFieldAndWriteNothing(t *testing.T) {
	f := deploymenttest.New(t)
	cases := []struct {
		name  string
		c     deployment.Candidate
		field string // the logic's own name; the adapter maps it
	}{
		{"no kind", deployment.Candidate{Specification: deploymenttest.DefaultSpec()}, "provider.kind"},
		{"unknown kind", deployment.Candidate{ProviderKind: "nope", Specification: deploymenttest.DefaultSpec()}, "provider.kind"},
		{"cpu low", dockerWithSpec(func(s *sandbox.Specification) { s.Resources.CPUMillis = 10 }), "resources.cpu_millis"},
		{"cpu high", dockerWithSpec(func(s *sandbox.Specification) { s.Resources.CPUMillis = sandbox.MaxCPUMillis + 1 }), "resources.cpu_millis"},
		{"memory", dockerWithSpec(func(s *sandbox.Specification) { s.Resources.MemoryBytes = 1 }), "resources.memory_bytes"},
		{"disk", dockerWithSpec(func(s *sandbox.Specification) { s.Resources.DiskBytes = sandbox.MaxDiskBytes + 1 }), "resources.disk_bytes"},
		{"max active", dockerWithSpec(func(s *sandbox.Specification) { s.MaxActive = 0 }), "specification.max_active"},
		{"max retained", dockerWithSpec(func(s *sandbox.Specification) { s.MaxRetained = -1 }), "specification.max_retained"},
		{"idle", dockerWithSpec(func(s *sandbox.Specification) {
			s.Suspension = sandbox.SuspensionPolicy{Idle: time.Second, Retention: 2 * time.Hour}
		}), "suspension.idle"},
		{"retention", dockerWithSpec(func(s *sandbox.Specification) {
			s.Suspension = sandbox.SuspensionPolicy{Idle: time.Hour, Retention: time.Hour + time.Millisecond}
		}), "suspension.retention"},
		{"suspension without checkpoint support", func() deployment.Candidate {
			c := deploymenttest.DirectCandidate("eu", "tok")
			c.Specification.Suspension = sandbox.SuspensionPolicy{Idle: time.Hour, Retention: 2 * time.Hour}
			return c
		}(), "specification.suspension"},
		{"docker public object", deployment.Candidate{ProviderKind: "docker", Public: json.RawMessage(`{"socket":"/x"}`), Specification: deploymenttest.DefaultSpec()}, "configuration.public"},
		{"docker credential", deployment.Candidate{ProviderKind: "docker", Credential: sandbox.NewCredential([]byte(`{"token":"s3cret-value"}`)), Specification: deploymenttest.DefaultSpec()}, "configuration.credential"},
		{"provider resource validator", func() deployment.Candidate {
			c := deploymenttest.DirectCandidate("eu", "tok")
			c.Specification.Resources.CPUMillis = 9000
			return c
		}(), "resources.cpu_millis"},
		{"direct without credential", func() deployment.Candidate {
			c := deploymenttest.DirectCandidate("eu", "tok")
			c.Credential = sandbox.Credential{}
			return c
		}(), "configuration.credential"},
		{"direct bad credential", func() deployment.Candidate {
			c := deploymenttest.DirectCandidate("eu", "tok")
			c.Credential = sandbox.NewCredential([]byte(`{"password":"s3cret-value"}`))
			return c
		}(), "configuration.credential.token"},
		{"direct bad public", func() deployment.Candidate {
			c := deploymenttest.DirectCandidate("eu", "tok")
			c.Public = json.RawMessage(`{}`)
			return c
		}(), "configuration.public.region"},
	}
	for _, tc := range cases {
		_, err := f.Svc.Preview(f.Ctx, tc.c)
		errdefstest.WantField(t, err, tc.field)
		_, err = f.Svc.Commit(f.Ctx, tc.c, 0)
		errdefstest.WantField(t, err, tc.field)
		if strings.Contains(err.Error(), "s3cret-value") {
			t.Fatalf("%s: error echoes the credential", tc.name)
		}
	}
	f.WantGenerations(t, 0, "after rejected candidates")
	d, err := f.Svc.Get(f.Ctx)
	errdefstest.Must(t, err)
	if d.Generation != 0 {
		t.Fatalf("deployment after rejected candidates: %+v", d)
	}
}

func TestCredentialIsSealedToInstallationAndGeneration(t *testing.T) {
	f := deploymenttest.New(t)
	const token = "tok-123-s3cret"
	d, err := f.Svc.Commit(f.Ctx, deploymenttest.DirectCandidate("eu", token), 0)
	errdefstest.Must(t, err)
	if d.Generation != 1 || !d.HasCredential || string(d.Public) != `{"region":"eu"}` {
		t.Fatalf("commit %+v", d)
	}
	g, err := f.St.GetGeneration(f.Ctx, 1)
	errdefstest.Must(t, err)
	if !g.HasCredential() || bytes.Contains(g.CredentialCiphertext, []byte(token)) ||
		bytes.Contains(g.PublicConfig, []byte(token)) || bytes.Contains(g.Observations, []byte(token)) {
		t.Fatalf("credential stored in the clear")
	}
	plain, err := deployment.OpenCredential(f.Key, f.InstallationID, g)
	errdefstest.Must(t, err)
	if string(plain) != token {
		t.Fatalf("opened credential differs")
	}

	// Another generation number, installation or key never opens it.
	moved := g
	moved.Generation = 2
	_, err = deployment.OpenCredential(f.Key, f.InstallationID, moved)
	errdefstest.WantClass(t, err, secrets.ErrOpen)
	_, err = deployment.OpenCredential(f.Key, uuid.New(), g)
	errdefstest.WantClass(t, err, secrets.ErrOpen)
	other, _, err := secrets.NewKey()
	errdefstest.Must(t, err)
	_, err = deployment.OpenCredential(other, f.InstallationID, g)
	errdefstest.WantClass(t, err, secrets.ErrOpen)
	_, err = f.Key.Open(g.CredentialNonce, g.CredentialCiphertext, secrets.DeviceCredential(f.InstallationID, uuid.New()))
	errdefstest.WantClass(t, err, secrets.ErrOpen)

	// The same selectors and credential: no change. Another credential is
	// a change a preview shows and a commit refuses: a credential
	// replacement must first verify the retained generations (not built).
	p, err := f.Svc.Preview(f.Ctx, deploymenttest.DirectCandidate("eu", token))
	errdefstest.Must(t, err)
	if p.Changed {
		t.Fatalf("equal candidate previewed as a change")
	}
	again, err := f.Svc.Commit(f.Ctx, deploymenttest.DirectCandidate("eu", token), 1)
	errdefstest.Must(t, err)
	if again.Generation != 1 || f.Generations(t) != 1 {
		t.Fatalf("equal commit made generation %d (%d stored)", again.Generation, f.Generations(t))
	}
	p, err = f.Svc.Preview(f.Ctx, deploymenttest.DirectCandidate("eu", "another-token"))
	errdefstest.Must(t, err)
	if !p.Changed {
		t.Fatalf("new credential previewed as no change")
	}
	_, err = f.Svc.Commit(f.Ctx, deploymenttest.DirectCandidate("eu", "another-token"), 1)
	errdefstest.WantRefusal(t, err, errdefs.ErrFailedPrecondition, "deployment_credential_replacement_unsupported")
	if strings.Contains(err.Error(), "another-token") {
		t.Fatalf("refusal echoes the credential")
	}
	f.WantGenerations(t, 1, "after the refused commit")
	// Generation 1 keeps its own credential.
	plain, err = deployment.OpenCredential(f.Key, f.InstallationID, g)
	errdefstest.Must(t, err)
	if string(plain) != token {
		t.Fatalf("generation 1 credential changed")
	}

	got, err := f.Svc.Get(f.Ctx)
	errdefstest.Must(t, err)
	if s := fmt.Sprintf("%+v", got); strings.Contains(s, "another-token") {
		t.Fatalf("Get carries the credential")
	}
}

// TestCandidateRedactsCredential prints a candidate through fmt and slog,
// alone and held, and looks for its credential.
func TestCandidateRedactsCredential(t *testing.T) {
	redacttest.Check(t, deploymenttest.DirectCandidate("eu", "tok-s3cret-never-printed"), []byte("tok-s3cret-never-printed"))
}

// TestDockerAcceptsASuspensionPolicy: Docker declares checkpoint support,
// so a deployment may set its own suspension policy, and the preview
// keeps it.
func TestDockerAcceptsASuspensionPolicy(t *testing.T) {
	f := deploymenttest.New(t)
	policy := sandbox.SuspensionPolicy{Idle: time.Hour, Retention: 48 * time.Hour}
	p, err := f.Svc.Preview(f.Ctx, dockerWithSpec(func(s *sandbox.Specification) { s.Suspension = policy }))
	if err != nil || p.Deployment.Specification.Suspension != policy {
		t.Fatalf("Preview = %+v, %v; want the policy kept", p.Deployment.Specification, err)
	}
}

// TestAbsentSuspensionPolicyIsTheRegisteredDefaults: a candidate without
// a suspension policy gets its provider's registered defaults (Docker:
// idle 15 minutes, retention 7 days): the preview shows them, the commit
// stores them and a later read reports them. A provider without
// checkpoint support registers none, so its deployment suspends nothing.
func TestAbsentSuspensionPolicyIsTheRegisteredDefaults(t *testing.T) {
	f := deploymenttest.New(t)
	want := sandbox.SuspensionPolicy{Idle: 15 * time.Minute, Retention: 7 * 24 * time.Hour}
	p, err := f.Svc.Preview(f.Ctx, deploymenttest.DockerCandidate())
	errdefstest.Must(t, err)
	if got := p.Deployment.Specification.Suspension; got != want {
		t.Fatalf("preview suspension %+v, want the registered defaults %+v", got, want)
	}
	d, err := f.Svc.Commit(f.Ctx, deploymenttest.DockerCandidate(), 0)
	errdefstest.Must(t, err)
	g, err := f.St.GetGeneration(f.Ctx, 1)
	errdefstest.Must(t, err)
	if d.Specification.Suspension != want || g.Specification.Suspension != want {
		t.Fatalf("committed suspension %+v, stored %+v, want %+v", d.Specification.Suspension, g.Specification.Suspension, want)
	}
	// The same candidate again is the same deployment: no change.
	p, err = f.Svc.Preview(f.Ctx, deploymenttest.DockerCandidate())
	errdefstest.Must(t, err)
	if p.Changed {
		t.Fatalf("the committed candidate previewed as a change: %+v", p.Deployment.Specification)
	}

	t.Run("without checkpoint support", func(t *testing.T) {
		direct := deploymenttest.New(t)
		p, err := direct.Svc.Preview(direct.Ctx, deploymenttest.DirectCandidate("eu", "tok"))
		errdefstest.Must(t, err)
		if !p.Deployment.Specification.Suspension.IsZero() {
			t.Fatalf("a provider without checkpoint support previewed suspension %+v", p.Deployment.Specification.Suspension)
		}
	})
}

// TestSuspensionOffIsAnExplicitChoice: a candidate that turns suspension
// off commits a deployment that suspends nothing, and differs from one
// that leaves the policy to the defaults; off together with a policy is
// invalid and writes nothing. A replacement that sets the suspension part
// resolves it the same way: no policy is the registered defaults.
func TestSuspensionOffIsAnExplicitChoice(t *testing.T) {
	f := deploymenttest.New(t)
	both := deploymenttest.DockerCandidate()
	both.SuspensionOff = true
	both.Specification.Suspension = sandbox.SuspensionPolicy{Idle: time.Hour, Retention: 2 * time.Hour}
	_, err := f.Svc.Preview(f.Ctx, both)
	errdefstest.WantField(t, err, "specification.suspension")
	_, err = f.Svc.Commit(f.Ctx, both, 0)
	errdefstest.WantField(t, err, "specification.suspension")
	f.WantGenerations(t, 0, "after off with a policy")

	off := deploymenttest.DockerCandidate()
	off.SuspensionOff = true
	d, err := f.Svc.Commit(f.Ctx, off, 0)
	errdefstest.Must(t, err)
	g, err := f.St.GetGeneration(f.Ctx, 1)
	errdefstest.Must(t, err)
	if !d.Specification.Suspension.IsZero() || !g.Specification.Suspension.IsZero() {
		t.Fatalf("suspension off committed %+v, stored %+v", d.Specification.Suspension, g.Specification.Suspension)
	}
	p, err := f.Svc.Preview(f.Ctx, deploymenttest.DockerCandidate())
	errdefstest.Must(t, err)
	if !p.Changed || p.Deployment.Specification.Suspension != docker.DefaultSuspension {
		t.Fatalf("the defaults against a deployment with suspension off: changed %v, %+v", p.Changed, p.Deployment.Specification.Suspension)
	}

	// Replacing only the suspension part with no policy: the defaults.
	r, err := f.Svc.Replace(f.Ctx, deployment.Candidate{}, deployment.Fields{deployment.FieldSuspension}, 1, store.NewAdminProvenance(uuid.New()))
	errdefstest.Must(t, err)
	if !r.Changed || r.Deployment.Specification.Suspension != docker.DefaultSuspension {
		t.Fatalf("replacement %+v", r.Deployment.Specification)
	}
	// And off again.
	r, err = f.Svc.Replace(f.Ctx, deployment.Candidate{SuspensionOff: true}, deployment.Fields{deployment.FieldSuspension}, 2, store.NewAdminProvenance(uuid.New()))
	errdefstest.Must(t, err)
	if !r.Changed || !r.Deployment.Specification.Suspension.IsZero() {
		t.Fatalf("replacement turning suspension off %+v", r.Deployment.Specification)
	}
}
