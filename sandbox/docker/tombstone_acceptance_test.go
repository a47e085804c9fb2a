package docker_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/errdefs"
)

// An unknown Create whose container never appeared: before Kill nothing
// settles it; Kill claims the Reference's names with a never-started
// tombstone, GetInfo then returns the absence receipt, and neither the
// original Create's late steps nor a repeated Kill change anything.
func TestAcceptanceKillOfNeverCreatedReferenceLeavesTombstoneAndReceipt(t *testing.T) {
	e := newEngine(t, false)
	ctx := context.Background()
	ref := contracttest.NewReference()

	// Nothing proves absence before Kill: ErrNotFound is only a missing
	// observation.
	if info, err := e.p.GetInfo(ctx, ref); !errdefs.IsNotFound(err) || info.CreateSettled {
		t.Fatalf("GetInfo before Kill = %+v, %v; want ErrNotFound and nothing settled", info, err)
	}

	e.kill(ref)
	tombs, tombVols := e.tombstones()
	all, allVols := e.owned()
	if len(tombs) != 1 || len(tombVols) != 2 || len(all) != 1 || len(allVols) != 2 {
		t.Fatalf("after Kill: tombstones %v %v, owned %v %v; want one tombstone holding both volume names", tombs, tombVols, all, allVols)
	}
	slices.Sort(tombVols)
	if want := []string{e.p.EnvironmentVolume(ref), e.p.HomeVolume(ref)}; !slices.Equal(tombVols, want) {
		t.Fatalf("tombstone volumes %v, want %v", tombVols, want)
	}
	tomb, err := e.cli.ContainerInspect(ctx, e.p.Name(ref), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := tomb.Container
	if c.ID != tombs[0] || c.State == nil || c.State.Status != container.StateCreated ||
		(c.State.StartedAt != "" && c.State.StartedAt != "0001-01-01T00:00:00Z") {
		t.Fatalf("tombstone is not a never-started container: %+v", c.State)
	}
	wantLabels := e.p.Labels(ref)
	wantLabels[docker.LabelTombstone] = "1"
	// The engine process listening when Kill placed it: the test engine's
	// dockerd (TestAcceptanceHousekeepRemovesTombstonesOfAnExitedEngine).
	if engine := c.Config.Labels[docker.LabelTombstoneEngine]; engine == "" || engine == "unknown" {
		t.Fatalf("tombstone engine identity %q; want the test engine's", engine)
	}
	wantLabels[docker.LabelTombstoneEngine] = c.Config.Labels[docker.LabelTombstoneEngine]
	if !maps.Equal(c.Config.Labels, wantLabels) {
		t.Fatalf("tombstone labels %v, want %v", c.Config.Labels, wantLabels)
	}
	if c.HostConfig == nil || c.HostConfig.NetworkMode != "none" || !c.HostConfig.ReadonlyRootfs {
		t.Fatalf("tombstone host config %+v", c.HostConfig)
	}

	// The receipt: absent, settled, no native id, no bootstrap. Renew only
	// observes, and says the same.
	info, err := e.p.GetInfo(ctx, ref)
	if err != nil || !info.IsAbsenceReceipt(ref) {
		t.Fatalf("GetInfo = %+v, %v; want the absence receipt", info, err)
	}
	if info, err := e.p.Renew(ctx, ref); err != nil || !info.IsAbsenceReceipt(ref) {
		t.Fatalf("Renew = %+v, %v; want the absence receipt", info, err)
	}
	// A tombstone is no compute.
	if _, err := e.p.RunCommand(ctx, ref, sh("true")); !errdefs.IsNotFound(err) {
		t.Errorf("RunCommand in a tombstone: %v", err)
	}
	if _, err := e.p.Observe(ctx, ref); !errdefs.IsNotFound(err) {
		t.Errorf("Observe of a tombstone: %v", err)
	}

	// The original Create's late steps, as the engine answers them: its
	// volume create returns the tombstone's volume unchanged, its container
	// create is refused, and the pinned volumes cannot be removed.
	v, err := e.cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: e.p.HomeVolume(ref), Driver: "local", Labels: e.p.Labels(ref)})
	if err != nil || v.Volume.Labels[docker.LabelTombstone] != "1" {
		t.Fatalf("late volume create = %+v, %v; want the tombstone's volume unchanged", v.Volume, err)
	}
	// The refused container create reserves the name before it creates
	// its mounts' volumes: a volume it would create does not appear.
	probe := e.p.Name(ref) + "-probe"
	if _, err := e.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:   e.p.Name(ref),
		Config: &container.Config{Image: e.image, Labels: e.p.Labels(ref)},
		HostConfig: &container.HostConfig{Mounts: []mount.Mount{{
			Type: mount.TypeVolume, Source: probe, Target: "/probe",
			VolumeOptions: &mount.VolumeOptions{Labels: e.p.Labels(ref)},
		}}},
	}); err == nil {
		t.Fatal("the engine created a second container under the tombstone's name")
	}
	if _, err := e.cli.VolumeInspect(ctx, probe, client.VolumeInspectOptions{}); err == nil {
		t.Fatal("a refused container create created its mount's volume")
	}
	if _, err := e.cli.VolumeRemove(ctx, e.p.EnvironmentVolume(ref), client.VolumeRemoveOptions{}); err == nil {
		t.Fatal("the engine removed a volume the tombstone holds")
	}

	// The adapter's Create fails cleanly, with the receipt, and touches
	// nothing; a repeated Kill succeeds and changes nothing either.
	got, err := e.p.Create(ctx, contracttest.CreateRequest(ref, resources))
	if !errdefs.IsExists(err) || !got.IsAbsenceReceipt(ref) {
		t.Fatalf("Create over the tombstone = %+v, %v; want ErrExists with the receipt", got, err)
	}
	e.kill(ref)
	after, afterVols := e.owned()
	if !slices.Equal(after, all) || len(afterVols) != 2 {
		t.Fatalf("resources changed: %v %v -> %v %v", all, allVols, after, afterVols)
	}
	again, err := e.cli.ContainerInspect(ctx, e.p.Name(ref), client.ContainerInspectOptions{})
	if err != nil || again.Container.ID != c.ID || again.Container.State.Status != container.StateCreated {
		t.Fatalf("tombstone after Create and Kill: %+v, %v", again.Container.State, err)
	}
}

// A container that carries the tombstone label under the Reference's name
// but another tenant's labels is foreign: it is never read as a receipt,
// never removed and never claimed.
func TestAcceptanceForeignTombstoneIsNeverTrusted(t *testing.T) {
	e := newEngine(t, false)
	ctx := context.Background()
	ref := contracttest.NewReference()
	foreign := e.p.Labels(ref)
	foreign[docker.LabelTenant] = uuid.NewString()
	foreign[docker.LabelTombstone] = "1"
	cc, err := e.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:   e.p.Name(ref),
		Config: &container.Config{Image: e.image, Cmd: []string{"true"}, Labels: foreign},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = e.cli.ContainerRemove(ctx, cc.ID, client.ContainerRemoveOptions{Force: true}) })
	if info, err := e.p.GetInfo(ctx, ref); !errdefs.IsOwnership(err) || info != (sandbox.Info{}) {
		t.Errorf("GetInfo of a foreign tombstone = %+v, %v", info, err)
	}
	// Nothing of ref's exists: Kill has nothing to clean up, touches
	// nothing, and places no tombstone over the foreign name.
	if err := e.p.Kill(ctx, sandbox.KillRequest{Reference: ref}); err != nil {
		t.Errorf("Kill over a foreign tombstone: %v", err)
	}
	if info, err := e.p.GetInfo(ctx, ref); !errdefs.IsOwnership(err) || info != (sandbox.Info{}) {
		t.Errorf("GetInfo after Kill over a foreign tombstone = %+v, %v", info, err)
	}
	// Create refuses before any mutation: the receipt it returns is its own
	// attempt's (it made nothing), not the foreign tombstone's.
	if info, err := e.p.Create(ctx, contracttest.CreateRequest(ref, resources)); !errdefs.IsOwnership(err) || !info.IsAbsenceReceipt(ref) {
		t.Errorf("Create over a foreign tombstone = %+v, %v", info, err)
	}
	if got, err := e.cli.ContainerInspect(ctx, cc.ID, client.ContainerInspectOptions{}); err != nil || got.Container.Name != "/"+e.p.Name(ref) {
		t.Errorf("foreign container changed: %v", err)
	}
	if _, vols := e.owned(); len(vols) != 0 {
		t.Errorf("volumes created under a foreign name: %v", vols)
	}
}

// TestAcceptanceKillOfASettledCreationLeavesNothing is issue 26's item 11:
// a Session whose container was removed from outside, then deleted. Core
// had settled the creation (it saw the started container), so its Kill
// says so, and the engine then holds nothing of the allocation: no
// tombstone, no empty volumes. Without Core's settlement the same Kill
// still claims the names (the creation-absence receipt).
func TestAcceptanceKillOfASettledCreationLeavesNothing(t *testing.T) {
	e := newEngine(t, false)
	ctx := context.Background()
	for _, settled := range []bool{true, false} {
		ref := contracttest.NewReference()
		info := e.create(ref)
		if _, err := e.cli.ContainerRemove(ctx, info.ProviderID, client.ContainerRemoveOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
		if err := e.p.Kill(ctx, sandbox.KillRequest{Reference: ref, CreateSettled: settled}); err != nil {
			t.Fatalf("Kill (settled %v): %v", settled, err)
		}
		f := client.Filters{}.Add("label", docker.LabelAllocation+"="+ref.AllocationID)
		cs, vs := e.labelled(f)
		switch {
		case settled && (len(cs) != 0 || len(vs) != 0):
			t.Errorf("Kill of a settled creation left %d containers and %d volumes, want none", len(cs), len(vs))
		case !settled && (len(cs) != 1 || len(vs) != 2):
			t.Errorf("Kill of an unsettled creation left %d containers and %d volumes, want the tombstone and its two volumes", len(cs), len(vs))
		}
		if got, err := e.p.GetInfo(ctx, ref); settled && !errdefs.IsNotFound(err) {
			t.Errorf("GetInfo after the settled Kill = %+v, %v; want ErrNotFound", got, err)
		}
	}
}

// TestAcceptanceHousekeepRemovesTombstonesOfAnExitedEngine is issue 26's
// item 11, second part, on a real engine: a tombstone records the engine
// process that was listening when Kill placed it, and stays while that
// process runs (a request of the original Create may still be inside
// it); one whose engine process has exited (planted as an earlier engine
// would have left it: the same container and volumes, the identity of a
// process that has since ended) is removed with its two volumes; one whose
// engine identity is unknown stays. Housekeep counts what it still holds.
func TestAcceptanceHousekeepRemovesTombstonesOfAnExitedEngine(t *testing.T) {
	e := newEngine(t, false)
	ctx := context.Background()

	live := contracttest.NewReference()
	e.kill(live) // never created: Kill claims the names
	c, ok := e.inspect(e.p.Name(live))
	if !ok {
		t.Fatal("no tombstone after Kill")
	}
	identity := c.Config.Labels[docker.LabelTombstoneEngine]
	pid, start, found := strings.Cut(identity, ":")
	if !found || start == "" {
		t.Fatalf("tombstone engine identity %q; want <pid>:<start time> of the test engine", identity)
	}
	if comm, err := os.ReadFile("/proc/" + pid + "/comm"); err != nil || strings.TrimSpace(string(comm)) != "dockerd" {
		t.Fatalf("tombstone engine identity %q names no running dockerd (%q, %v)", identity, comm, err)
	}

	// A process that has ended: its identity is an exited engine's.
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", sleeper.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	exited := fmt.Sprintf("%d:%s", sleeper.Process.Pid, fields[19])
	_ = sleeper.Process.Kill()
	_ = sleeper.Wait()

	gone, unknown := contracttest.NewReference(), contracttest.NewReference()
	plant := func(ref sandbox.Reference, engine string) {
		labels := e.p.Labels(ref)
		labels[docker.LabelTombstone] = "1"
		volumeLabels := maps.Clone(labels)
		labels[docker.LabelTombstoneEngine] = engine
		if _, err := e.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
			Name:   e.p.Name(ref),
			Config: &container.Config{Image: e.image, Entrypoint: []string{"/never"}, Cmd: []string{}, Labels: labels, NetworkDisabled: true},
			HostConfig: &container.HostConfig{NetworkMode: "none", Mounts: []mount.Mount{
				{Type: mount.TypeVolume, Source: e.p.HomeVolume(ref), Target: "/home", VolumeOptions: &mount.VolumeOptions{Labels: volumeLabels}},
				{Type: mount.TypeVolume, Source: e.p.EnvironmentVolume(ref), Target: "/environment", VolumeOptions: &mount.VolumeOptions{Labels: volumeLabels}},
			}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	plant(gone, exited)
	plant(unknown, "unknown")
	// The two volumes a removal cut short left behind (the agent stopped
	// after removing the container): they carry the tombstone's labels.
	orphan := contracttest.NewReference()
	orphanLabels := e.p.Labels(orphan)
	orphanLabels[docker.LabelTombstone] = "1"
	orphanLabels[docker.LabelTombstoneEngine] = exited
	for _, name := range []string{e.p.HomeVolume(orphan), e.p.EnvironmentVolume(orphan)} {
		if _, err := e.cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: name, Labels: orphanLabels}); err != nil {
			t.Fatal(err)
		}
	}

	held, err := e.p.Housekeep(ctx)
	if err != nil {
		t.Fatalf("Housekeep: %v", err)
	}
	if held != 2 {
		t.Errorf("Housekeep holds %d tombstones; want 2 (the live engine's and the unknown one)", held)
	}
	for _, ref := range []sandbox.Reference{live, unknown} {
		if _, ok := e.inspect(e.p.Name(ref)); !ok {
			t.Errorf("Housekeep removed a tombstone whose engine may still hold the Create's requests (%s)", e.p.Name(ref))
		}
	}
	for _, ref := range []sandbox.Reference{gone, orphan} {
		f := client.Filters{}.Add("label", docker.LabelAllocation+"="+ref.AllocationID)
		if cs, vs := e.labelled(f); len(cs) != 0 || len(vs) != 0 {
			t.Errorf("after Housekeep the exited engine's tombstone %s left %d containers and %d volumes, want none", e.p.Name(ref), len(cs), len(vs))
		}
	}
	if held, err := e.p.Housekeep(ctx); err != nil || held != 2 {
		t.Errorf("second Housekeep = %d, %v; want 2, nil", held, err)
	}
}
