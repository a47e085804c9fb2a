package docker_test

import (
	"context"
	"maps"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/moby/moby/client"

	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/docker/dockertest"
	"berth.dev/sandbox/errdefs"
)

// The shared contract suite through the adapter's real HTTP boundary,
// against the Docker Engine API fixture with native-side faults.

const fixtureImage = "sha256:4f3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c"

type dockerFixture struct {
	srv     *dockertest.Server
	p       *docker.Provider
	foreign map[string]map[string]string // resource name -> labels
}

func (f *dockerFixture) Arm(call string, fault contracttest.Fault, cancel context.CancelFunc) {
	switch fault {
	case contracttest.FaultTransport:
		f.srv.Arm(call, dockertest.FaultDrop, nil)
	case contracttest.FaultCancelAfterDispatch:
		f.srv.Arm(call, dockertest.FaultCancelAfterDispatch, cancel)
	case contracttest.FaultCleanupFailure:
		f.srv.Arm(call, dockertest.FaultServerError, nil)
	}
}

// PlantForeign creates a container and both volumes with ref's names but
// another tenant's labels.
func (f *dockerFixture) PlantForeign(ref sandbox.Reference) {
	labels := f.p.Labels(ref)
	labels[docker.LabelTenant] = uuid.NewString()
	f.srv.PutContainer(f.p.Name(ref), labels, dockertest.StateRunning)
	f.srv.PutVolume(f.p.HomeVolume(ref), labels)
	f.srv.PutVolume(f.p.EnvironmentVolume(ref), labels)
	for _, n := range []string{f.p.Name(ref), f.p.HomeVolume(ref), f.p.EnvironmentVolume(ref)} {
		f.foreign[n] = maps.Clone(labels)
	}
}

func (f *dockerFixture) ForeignIntact() bool {
	for name, want := range f.foreign {
		var got map[string]string
		if c, ok := f.srv.Container(name); ok {
			got = c.Labels
		} else if v, ok := f.srv.Volume(name); ok {
			got = v.Labels
		} else {
			return false
		}
		if !maps.Equal(got, want) {
			return false
		}
	}
	return true
}

func (f *dockerFixture) Calls() []contracttest.NativeCall {
	var out []contracttest.NativeCall
	for _, c := range f.srv.Calls() {
		out = append(out, contracttest.NativeCall{Name: c.Name, Mutating: c.Mutating})
	}
	return out
}

func (f *dockerFixture) ResetCalls()         { f.srv.ResetCalls() }
func (f *dockerFixture) Sensitive() []string { return f.srv.Sensitive() }

func newFixtureHarness(t *testing.T) contracttest.Harness {
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
	p := docker.New(cli, docker.Options{
		InstallationID: uuid.NewString(),
		Config:         docker.NodeConfig{Image: fixtureImage, Network: "none"},
		Seccomp:        []byte(`{"defaultAction":"SCMP_ACT_ERRNO"}`),
		Resources:      resources,
	})
	return contracttest.Harness{Provider: p, Native: &dockerFixture{srv: srv, p: p, foreign: map[string]map[string]string{}}, Resources: resources}
}

func TestContractFailures(t *testing.T) {
	const (
		cInspect, cCreate, cArchive = dockertest.CallContainerInspect, dockertest.CallContainerCreate, dockertest.CallContainerArchive
		cStart, cRemove             = dockertest.CallContainerStart, dockertest.CallContainerRemove
		vInspect, vCreate, vRemove  = dockertest.CallVolumeInspect, dockertest.CallVolumeCreate, dockertest.CallVolumeRemove
		eCreate, eStart, eInspect   = dockertest.CallExecCreate, dockertest.CallExecStart, dockertest.CallExecInspect
	)
	T, C := contracttest.FaultTransport, contracttest.FaultCancelAfterDispatch
	F, X := contracttest.FaultForeignOwnership, contracttest.FaultCleanupFailure
	unconfirmed, unobserved := errdefs.ErrComputeUnconfirmed, errdefs.ErrObservationUnavailable
	pre := []string{cInspect, vInspect, vInspect}
	upTo := func(calls ...string) []string { return append(append([]string{}, pre...), calls...) }
	full := upTo(vCreate, vCreate, cCreate, cInspect, cArchive, cArchive, cStart)
	killChecks := []string{cInspect, vInspect, vInspect}
	cases := []contracttest.Case{
		{Operation: sandbox.OpCreate, Fault: T, At: vCreate, WantErr: unconfirmed, WantCalls: upTo(vCreate)},
		{Operation: sandbox.OpCreate, Fault: T, At: cCreate, WantErr: unconfirmed, WantCalls: upTo(vCreate, vCreate, cCreate)},
		{Operation: sandbox.OpCreate, Fault: T, At: cArchive, WantErr: unconfirmed, WantCalls: upTo(vCreate, vCreate, cCreate, cInspect, cArchive)},
		{Operation: sandbox.OpCreate, Fault: T, At: cStart, WantErr: unconfirmed, WantCalls: full},
		{Operation: sandbox.OpCreate, Fault: C, At: cCreate, WantErr: unconfirmed, WantCalls: upTo(vCreate, vCreate, cCreate)},
		{Operation: sandbox.OpCreate, Fault: C, At: cStart, WantErr: unconfirmed, WantCalls: full},
		{Operation: sandbox.OpCreate, Fault: X, At: cCreate, WantErr: unconfirmed, WantCalls: upTo(vCreate, vCreate, cCreate)},
		{Operation: sandbox.OpCreate, Fault: X, At: cStart, WantErr: unconfirmed, WantCalls: full},
		{Operation: sandbox.OpCreate, Fault: F, WantErr: errdefs.ErrOwnership, WantCalls: []string{cInspect}},

		{Operation: sandbox.OpGetInfo, Fault: T, At: cInspect, Existing: true, WantErr: unobserved, WantCalls: []string{cInspect}},
		{Operation: sandbox.OpGetInfo, Fault: C, At: cInspect, Existing: true, WantErr: unobserved, WantCalls: []string{cInspect}},
		{Operation: sandbox.OpGetInfo, Fault: F, WantErr: errdefs.ErrOwnership, WantCalls: []string{cInspect}},

		{Operation: sandbox.OpRenew, Fault: T, At: cInspect, Existing: true, WantErr: unobserved, WantCalls: []string{cInspect}},
		{Operation: sandbox.OpRenew, Fault: C, At: cInspect, Existing: true, WantErr: unobserved, WantCalls: []string{cInspect}},
		{Operation: sandbox.OpRenew, Fault: F, WantErr: errdefs.ErrOwnership, WantCalls: []string{cInspect}},

		{Operation: sandbox.OpKill, Fault: T, At: cInspect, Existing: true, WantErr: unconfirmed, WantCalls: []string{cInspect}},
		{Operation: sandbox.OpKill, Fault: T, At: cRemove, Existing: true, WantErr: unconfirmed, WantCalls: append(killChecks, cRemove)},
		{Operation: sandbox.OpKill, Fault: C, At: cRemove, Existing: true, WantErr: unconfirmed, WantCalls: append(killChecks, cRemove)},
		{Operation: sandbox.OpKill, Fault: C, At: vRemove, Existing: true, WantErr: unconfirmed, WantCalls: append(killChecks, cRemove, vRemove)},
		{Operation: sandbox.OpKill, Fault: X, At: cRemove, Existing: true, WantErr: unconfirmed, WantCalls: append(killChecks, cRemove)},
		{Operation: sandbox.OpKill, Fault: X, At: vRemove, Existing: true, WantErr: unconfirmed, WantCalls: append(killChecks, cRemove, vRemove)},
		{Operation: sandbox.OpKill, Fault: F, WantErr: errdefs.ErrOwnership, WantCalls: []string{cInspect}},

		{Operation: sandbox.OpRunCommand, Fault: T, At: eCreate, Existing: true, WantErr: errdefs.ErrCommandUnconfirmed, WantCalls: []string{cInspect, eCreate}},
		{Operation: sandbox.OpRunCommand, Fault: T, At: eStart, Existing: true, WantErr: errdefs.ErrCommandUnconfirmed, WantCalls: []string{cInspect, eCreate, eStart}},
		{Operation: sandbox.OpRunCommand, Fault: C, At: eStart, Existing: true, WantErr: errdefs.ErrCommandUnconfirmed, WantCalls: []string{cInspect, eCreate, eStart}},
		{Operation: sandbox.OpRunCommand, Fault: T, At: eInspect, Existing: true, WantErr: errdefs.ErrCommandUnconfirmed, WantCalls: []string{cInspect, eCreate, eStart, eInspect}},
		{Operation: sandbox.OpRunCommand, Fault: F, WantErr: errdefs.ErrOwnership, WantCalls: []string{cInspect}},
	}
	contracttest.RunFailures(t, newFixtureHarness, cases)
}

// TestFixtureLifecycle checks the happy path against the fixture: the exact
// calls of a clean Create, RunCommand and Kill.
func TestFixtureLifecycle(t *testing.T) {
	h := newFixtureHarness(t)
	f := h.Native.(*dockerFixture)
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
	if err := h.Provider.Kill(ctx, ref); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if n := len(f.srv.Containers()) + len(f.srv.Volumes()); n != 0 {
		t.Fatalf("%d resources left", n)
	}
	got := strings.Join(callNames(f.Calls()), " ")
	want := "container.inspect volume.inspect volume.inspect volume.create volume.create container.create container.inspect container.archive container.archive container.start " +
		"container.inspect exec.create exec.start exec.inspect " +
		"container.inspect volume.inspect volume.inspect container.remove volume.remove volume.remove container.inspect volume.inspect volume.inspect"
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
