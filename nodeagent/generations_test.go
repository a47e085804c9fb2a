package nodeagent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"berth.dev/platform/nodewire"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providers"
)

func testGeneration(n uint64, memory int64) nodewire.Generation {
	spec := sandbox.Specification{
		Resources: sandbox.Resources{CPUMillis: 1000, MemoryBytes: memory, DiskBytes: 1 << 30},
		MaxActive: 4,
	}
	return nodewire.Generation{
		Number: n, ProviderKind: "docker", Public: []byte(`{}`), Specification: spec,
		DeploymentDigest: providers.DeploymentDigest("docker", spec),
	}
}

// TestGenerationsServeTheExactSet: Serve builds each published generation
// once in its own state directory, routes by number, stops serving (and
// closes) a generation left out, refuses a duplicate, reports a digest or
// kind that is not the node's and a failed build (tried again on the next
// Serve) as not ready with a fixed code, and keeps the first selection of
// a generation published twice.
func TestGenerationsServeTheExactSet(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "generations")
	var builds, closes atomic.Int32
	var fail atomic.Bool
	build := func(_ context.Context, g nodewire.Generation, dir string) (providers.Built, error) {
		if dir != filepath.Join(root, map[uint64]string{1: "1", 2: "2", 3: "3"}[g.Number]) {
			t.Errorf("generation %d built in %s", g.Number, dir)
		}
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			t.Errorf("state directory %s: %v", dir, err)
		}
		if fail.Load() {
			return providers.Built{}, errors.Join(errors.New("engine down"), &sandbox.ProbeError{Code: "engine_unreachable"})
		}
		builds.Add(1)
		_, p := fixtureProvider(t)
		return providers.Built{
			Provider: p, Probe: func(context.Context) error { return nil },
			BackendFingerprint: "docker:fixture", SpecificationDigest: "sha256:spec",
			Close: func() error { closes.Add(1); return nil },
		}, nil
	}
	var dataRoots atomic.Int32
	gens := NewGenerations("docker", root, build, func(providers.Built) { dataRoots.Add(1) }, nil)
	defer gens.Close()

	st, err := gens.Serve(ctx, []nodewire.Generation{testGeneration(1, 1<<30)})
	if err != nil || len(st) != 1 || st[0].GetGeneration() != 1 || !st[0].GetReadiness().GetReady() ||
		st[0].GetBackendFingerprint() != "docker:fixture" || st[0].GetDeploymentDigest() != testGeneration(1, 1<<30).DeploymentDigest {
		t.Fatalf("serve 1: %v %v", st, err)
	}
	if _, ok := gens.Agent(1); !ok {
		t.Fatal("generation 1 not routed")
	}
	if _, ok := gens.Agent(2); ok {
		t.Fatal("generation 2 routed before it was published")
	}
	st, err = gens.Serve(ctx, []nodewire.Generation{testGeneration(1, 1<<30), testGeneration(2, 2<<30)})
	if err != nil || len(st) != 2 || st[0].GetGeneration() != 1 || st[1].GetGeneration() != 2 || builds.Load() != 2 {
		t.Fatalf("serve 1 and 2: %v %v (builds %d)", st, err, builds.Load())
	}
	if dataRoots.Load() != 2 {
		t.Fatalf("built callback ran %d times, want 2", dataRoots.Load())
	}
	// Generation 1 left out: no longer routed, closed once idle.
	if st, err = gens.Serve(ctx, []nodewire.Generation{testGeneration(2, 2<<30)}); err != nil || len(st) != 1 || st[0].GetGeneration() != 2 {
		t.Fatalf("serve 2: %v %v", st, err)
	}
	if _, ok := gens.Agent(1); ok {
		t.Fatal("generation 1 still routed")
	}
	for end := time.Now().Add(5 * time.Second); closes.Load() != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("generation 1 closed %d times", closes.Load())
		}
	}
	// A duplicate is refused and changes nothing.
	if _, err := gens.Serve(ctx, []nodewire.Generation{testGeneration(3, 1<<30), testGeneration(3, 1<<30)}); !errdefs.IsInvalid(err) {
		t.Fatalf("duplicate: %v", err)
	}
	if _, ok := gens.Agent(2); !ok {
		t.Fatal("a refused Serve changed the set")
	}
	// A digest or kind that is not the node's, and a failed build.
	bad := testGeneration(3, 1<<30)
	bad.DeploymentDigest = "sha256:other"
	st, _ = gens.Serve(ctx, []nodewire.Generation{testGeneration(2, 2<<30), bad})
	if len(st) != 2 || st[1].GetReadiness().GetReady() || st[1].GetReadiness().GetDiagnosticCode() != DiagnosticDeploymentDigestMismatch {
		t.Fatalf("digest mismatch: %v", st)
	}
	other := testGeneration(3, 1<<30)
	other.ProviderKind = "e2b"
	st, _ = gens.Serve(ctx, []nodewire.Generation{testGeneration(2, 2<<30), other})
	if st[1].GetReadiness().GetDiagnosticCode() != DiagnosticProviderKindMismatch {
		t.Fatalf("kind mismatch: %v", st)
	}
	fail.Store(true)
	st, _ = gens.Serve(ctx, []nodewire.Generation{testGeneration(2, 2<<30), testGeneration(3, 1<<30)})
	if st[1].GetReadiness().GetReady() || st[1].GetReadiness().GetDiagnosticCode() != "engine_unreachable" {
		t.Fatalf("failed build: %v", st)
	}
	if _, ok := gens.Agent(3); ok {
		t.Fatal("a generation that failed to build is routed")
	}
	fail.Store(false)
	st, _ = gens.Serve(ctx, []nodewire.Generation{testGeneration(2, 2<<30), testGeneration(3, 1<<30)})
	if !st[1].GetReadiness().GetReady() {
		t.Fatalf("build not tried again: %v", st)
	}
	// Generation 2 published again with another selection: the first is
	// kept, reported not ready, whatever its probe says.
	st, _ = gens.Serve(ctx, []nodewire.Generation{testGeneration(2, 4<<30), testGeneration(3, 1<<30)})
	if st[0].GetReadiness().GetReady() || st[0].GetReadiness().GetDiagnosticCode() != DiagnosticGenerationChanged ||
		st[0].GetDeploymentDigest() != testGeneration(2, 2<<30).DeploymentDigest {
		t.Fatalf("changed generation: %v", st)
	}
	if r := gens.Probe(ctx); r[0].GetReady() || r[0].GetDiagnosticCode() != DiagnosticGenerationChanged || !r[1].GetReady() {
		t.Fatalf("probe after a change: %v", r)
	}
}

// TestConfigRefusesAGenerationBlock: a configuration file written for a
// node agent that read its generation from the file is refused, naming
// the block, instead of serving a stale generation.
func TestConfigRefusesAGenerationBlock(t *testing.T) {
	_, err := DecodeConfig([]byte(validConfig + `,"generation":{"number":1}}`))
	var fe *errdefs.FieldError
	if !errors.As(err, &fe) || fe.Field != "config.generation" {
		t.Fatalf("generation block: %v", err)
	}
}
