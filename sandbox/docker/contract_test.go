package docker_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/moby/moby/client"

	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/docker/dockertest"
)

// The shared contract suite through the adapter's real HTTP boundary,
// against the Docker Engine API fixture with native-side faults.

const fixtureImage = "sha256:4f3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c"

// newFixtureHarness is the adapter as a node agent builds it: with a
// volume intent directory (intents.go).
func newFixtureHarness(t *testing.T) contracttest.Harness {
	return fixtureHarness(t, t.TempDir())
}

// fixtureHarness is the adapter over a new fixture, recording its volume
// intents in intentDir ("" records nothing).
func fixtureHarness(t *testing.T, intentDir string) contracttest.Harness {
	h, _ := fixtureHarnessAndTwin(t, intentDir)
	return h
}

// fixtureHarnessAndTwin is fixtureHarness and a second adapter of the
// same installation over the same fixture and intent directory: what the
// node agent's next process builds after a restart, while a call of the
// first may still be at the engine.
func fixtureHarnessAndTwin(t *testing.T, intentDir string) (contracttest.Harness, *docker.Provider) {
	srv := dockertest.Start(t)
	srv.PutImage(fixtureImage)
	cli, err := docker.NewClient(srv.Host())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	// The client negotiates its API version on first use; do it now so the
	// cases' call lists hold only the operation's own calls.
	if _, err := cli.ServerVersion(context.Background(), client.ServerVersionOptions{}); err != nil {
		t.Fatal(err)
	}
	installation := uuid.NewString()
	opts := docker.Options{
		InstallationID:  installation,
		Config:          docker.NodeConfig{Image: fixtureImage, Network: "none"},
		Seccomp:         []byte(`{"defaultAction":"SCMP_ACT_ERRNO"}`),
		Resources:       resources,
		IntentDirectory: intentDir,
	}
	p := docker.New(cli, opts)
	return contracttest.Harness{Provider: p, Native: dockertest.NewNative(srv, installation), Resources: resources}, docker.New(cli, opts)
}

func TestContractFailures(t *testing.T) {
	contracttest.RunFailures(t, newFixtureHarness, dockertest.ContractCases())
}

// TestFixtureLifecycle checks the happy path against the fixture: the exact
// calls of a clean Create, RunCommand and Kill.
func TestFixtureLifecycle(t *testing.T) {
	h := newFixtureHarness(t)
	f := h.Native.(*dockertest.Native)
	ref := contracttest.NewReference()
	ctx := context.Background()
	f.ResetCalls()
	info, err := h.Provider.Create(ctx, contracttest.CreateRequest(ref, resources))
	if err != nil || !info.IsSettledRunning(ref) {
		t.Fatalf("Create = %+v, %v", info, err)
	}
	res, err := h.Provider.RunCommand(ctx, ref, sandbox.Command{Args: []string{"interleave"}})
	if err != nil || string(res.Stdout) != "o1o2" || string(res.Stderr) != "e1" {
		t.Fatalf("RunCommand = %+v, %v", res, err)
	}
	if err := h.Provider.Kill(ctx, sandbox.KillRequest{Reference: ref}); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if n := len(f.Server.Containers()) + len(f.Server.Volumes()); n != 0 {
		t.Fatalf("%d resources left", n)
	}
	got := strings.Join(callNames(f.Calls()), " ")
	want := "container.inspect volume.inspect volume.inspect volume.create volume.create container.create container.inspect container.archive container.archive container.start " +
		"container.inspect exec.create exec.start exec.inspect " +
		"container.list volume.list container.inspect volume.inspect volume.inspect container.remove volume.remove volume.remove container.inspect volume.inspect volume.inspect"
	if got != want {
		t.Errorf("calls:\n got %s\nwant %s", got, want)
	}
}

func callNames(calls []contracttest.NativeCall) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = c.Name
	}
	return out
}

func TestCheckpointContractFailures(t *testing.T) {
	contracttest.RunCheckpointFailures(t, newFixtureHarness, dockertest.CheckpointCases())
}
