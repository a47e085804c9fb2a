package docker_test

import (
	"context"
	"errors"
	"testing"

	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/docker/dockertest"
	"berth.dev/sandbox/errdefs"
)

// TestKillDuringCreateSettlesIt interleaves Kill with the steps of an
// in-flight Create, through the fixture (a real engine cannot pause a
// Create between its calls). The Kill comes from the node agent's next
// process (a second adapter: within one process the agent serializes an
// allocation's calls, and the adapter places no tombstone while its own
// Create runs): wherever Kill lands, the Create starts nothing, its
// remaining steps change nothing (no archive, no start), and at most two
// Kills leave the tombstone whose GetInfo is the absence receipt.
func TestKillDuringCreateSettlesIt(t *testing.T) {
	for _, tc := range []struct {
		name string
		// at is the Create call after which Kill runs.
		at string
		// wantErr is Create's error class.
		wantErr error
		// kills is the number of Kills until the receipt.
		kills int
	}{
		// Before any mutation: Create's own checks find the tombstone's
		// volumes.
		{"after the container check", dockertest.CallContainerInspect, errdefs.ErrExists, 1},
		{"after the first volume check", dockertest.CallVolumeInspect, errdefs.ErrExists, 1},
		// Between its volume creates and its container create: the volume
		// creates return the tombstone's volumes, the container create is
		// refused.
		{"after the first volume create", dockertest.CallVolumeCreate, errdefs.ErrExists, 1},
		// After its container create: Kill removes that container by id,
		// so Create's next step fails; a second Kill claims the names.
		{"after the container create", dockertest.CallContainerCreate, errdefs.ErrComputeUnconfirmed, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, next := fixtureHarnessAndTwin(t, t.TempDir())
			f := h.Native.(*dockertest.Native)
			p := h.Provider.(*docker.Provider)
			ref := contracttest.NewReference()
			ctx := context.Background()
			var killErr error
			f.Server.Arm(tc.at, dockertest.FaultHookAfterDispatch, func() { killErr = next.Kill(ctx, sandbox.KillRequest{Reference: ref}) })
			info, err := p.Create(ctx, contracttest.CreateRequest(ref, resources))
			if killErr != nil {
				t.Fatalf("Kill during Create: %v", killErr)
			}
			if !errors.Is(err, tc.wantErr) || info.BootstrapComplete || info.State == "running" {
				t.Fatalf("Create = %+v, %v; want %v", info, err, tc.wantErr)
			}
			for _, call := range []string{dockertest.CallContainerArchive, dockertest.CallContainerStart} {
				if n := count(f.Server.CallNames(), call); n != 0 {
					t.Fatalf("%s sent %d times", call, n)
				}
			}
			for i := 1; i < tc.kills; i++ {
				if got, err := p.GetInfo(ctx, ref); err == nil && got.CreateSettled {
					t.Fatalf("settled before Kill %d: %+v", i+1, got)
				}
				if err := p.Kill(ctx, sandbox.KillRequest{Reference: ref}); err != nil {
					t.Fatalf("Kill %d: %v", i+1, err)
				}
			}
			got, err := p.GetInfo(ctx, ref)
			if err != nil || !got.IsAbsenceReceipt(ref) {
				t.Fatalf("GetInfo = %+v, %v; want the absence receipt", got, err)
			}
			cs := f.Server.Containers()
			if len(cs) != 1 || cs[0].Name != p.Name(ref) || cs[0].Labels[docker.LabelTombstone] != "1" ||
				cs[0].State != dockertest.StateCreated {
				t.Fatalf("containers %+v; want only the never-started tombstone", cs)
			}
			for _, v := range f.Server.Volumes() {
				if v.Labels[docker.LabelAllocation] != ref.AllocationID {
					t.Fatalf("volume %+v", v)
				}
			}
		})
	}
}

// TestNoTombstoneWhileTheCreateRunsHere: within one adapter, Kill places
// no tombstone while a Create of the same Reference is running (the
// original attempt must have ended, or its process, before the tombstone
// records the engine that may still hold its requests): it answers
// ErrComputeUnconfirmed and changes nothing, and once the Create has
// returned the next Kill settles it.
func TestNoTombstoneWhileTheCreateRunsHere(t *testing.T) {
	h := newFixtureHarness(t)
	f := h.Native.(*dockertest.Native)
	p := h.Provider.(*docker.Provider)
	ref := contracttest.NewReference()
	ctx := context.Background()
	var killErr error
	f.Server.Arm(dockertest.CallContainerInspect, dockertest.FaultHookAfterDispatch, func() { killErr = p.Kill(ctx, sandbox.KillRequest{Reference: ref}) })
	if _, err := p.Create(ctx, contracttest.CreateRequest(ref, resources)); err != nil {
		t.Fatalf("Create: %v", err)
	}
	if !errors.Is(killErr, errdefs.ErrComputeUnconfirmed) {
		t.Fatalf("Kill during the Create = %v; want ErrComputeUnconfirmed", killErr)
	}
	for _, c := range f.Server.Containers() {
		if c.Labels[docker.LabelTombstone] != "" {
			t.Fatalf("a tombstone was placed while the Create ran: %+v", c)
		}
	}
	if err := p.Kill(ctx, sandbox.KillRequest{Reference: ref}); err != nil {
		t.Fatalf("Kill after the Create: %v", err)
	}
	if err := p.Kill(ctx, sandbox.KillRequest{Reference: ref}); err != nil {
		t.Fatalf("second Kill: %v", err)
	}
	if got, err := p.GetInfo(ctx, ref); err != nil || !got.IsAbsenceReceipt(ref) {
		t.Fatalf("GetInfo = %+v, %v; want the absence receipt", got, err)
	}
}

func count(names []string, name string) int {
	n := 0
	for _, s := range names {
		if s == name {
			n++
		}
	}
	return n
}
