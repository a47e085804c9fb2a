package docker_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/uuid"

	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/docker/dockertest"
	"berth.dev/sandbox/errdefs"
)

// createLosingLabels runs a Create whose home volume create meets a full
// data root (the engine keeps the volume, unlabelled, and answers 500),
// and checks that the Create is unconfirmed and left exactly that volume.
func createLosingLabels(t *testing.T, h contracttest.Harness, ref sandbox.Reference) (*docker.Provider, *dockertest.Server) {
	t.Helper()
	p := h.Provider.(*docker.Provider)
	srv := h.Native.(*dockertest.Native).Server
	srv.Arm(dockertest.CallVolumeCreate, dockertest.FaultVolumeLabelsLost, nil)
	info, err := p.Create(context.Background(), contracttest.CreateRequest(ref, resources))
	if !errors.Is(err, errdefs.ErrComputeUnconfirmed) || info.CreateSettled || info.Reference != ref {
		t.Fatalf("Create on a full disk = %+v, %v; want an unconfirmed outcome", info, err)
	}
	vs := srv.Volumes()
	if len(vs) != 1 || vs[0].Name != p.HomeVolume(ref) || len(vs[0].Labels) != 0 {
		t.Fatalf("volumes after the Create: %+v; want the home volume without labels", vs)
	}
	return p, srv
}

// TestVolumeLeftUnlabelledIsCleanedUp is issue 14's full-disk defect: the
// engine left a volume of an unknown Create without labels; the name's
// intent record proves it ref's, so Kill removes it, claims the names with
// the tombstone and settles the creation, and the records go.
func TestVolumeLeftUnlabelledIsCleanedUp(t *testing.T) {
	dir := t.TempDir()
	h := fixtureHarness(t, dir)
	ref := contracttest.NewReference()
	p, srv := createLosingLabels(t, h, ref)
	ctx := context.Background()

	srv.ResetCalls()
	if err := p.Kill(ctx, sandbox.KillRequest{Reference: ref}); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if n := count(srv.CallNames(), dockertest.CallVolumeRemove); n != 1 {
		t.Fatalf("Kill removed %d volumes (calls %v); want the unlabelled one", n, srv.CallNames())
	}
	got, err := p.GetInfo(ctx, ref)
	if err != nil || !got.IsAbsenceReceipt(ref) {
		t.Fatalf("GetInfo = %+v, %v; want the absence receipt", got, err)
	}
	for _, v := range srv.Volumes() {
		if v.Labels[docker.LabelAllocation] != ref.AllocationID || v.Labels[docker.LabelTombstone] != "1" {
			t.Fatalf("volume %+v; want only the tombstone's labelled volumes", v)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("intent records left after settlement: %v", left)
	}
	if err := p.Kill(ctx, sandbox.KillRequest{Reference: ref}); err != nil {
		t.Fatalf("Kill of the tombstone: %v", err)
	}
}

// TestUnlabelledVolumeWithoutRecordIsForeign: without an intent record
// (a standalone adapter, or a record for another Reference under the
// name) an unlabelled volume is never proved ref's, and Kill touches
// nothing.
func TestUnlabelledVolumeWithoutRecordIsForeign(t *testing.T) {
	t.Run("no intent directory", func(t *testing.T) {
		h := fixtureHarness(t, "")
		ref := contracttest.NewReference()
		p, srv := createLosingLabels(t, h, ref)
		requireUntouched(t, p, srv, ref)
	})
	t.Run("the record names another allocation", func(t *testing.T) {
		dir := t.TempDir()
		h := fixtureHarness(t, dir)
		ref := contracttest.NewReference()
		p, srv := createLosingLabels(t, h, ref)
		other, err := json.Marshal(map[string]string{
			"installation": "x", "tenant": ref.TenantID, "environment": ref.EnvironmentID, "allocation": contracttest.NewReference().AllocationID,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p.Name(ref)), other, 0o600); err != nil {
			t.Fatal(err)
		}
		requireUntouched(t, p, srv, ref)
	})
	t.Run("a labelled volume under a recorded name", func(t *testing.T) {
		h := fixtureHarness(t, t.TempDir())
		ref := contracttest.NewReference()
		p, srv := createLosingLabels(t, h, ref)
		srv.PutVolume(p.HomeVolume(ref), map[string]string{docker.LabelAllocation: "another"})
		requireUntouched(t, p, srv, ref)
	})
}

// requireUntouched checks that Kill refuses ref with ErrOwnership and
// sends no mutation.
func requireUntouched(t *testing.T, p *docker.Provider, srv *dockertest.Server, ref sandbox.Reference) {
	t.Helper()
	srv.ResetCalls()
	if err := p.Kill(context.Background(), sandbox.KillRequest{Reference: ref}); !errors.Is(err, errdefs.ErrOwnership) {
		t.Fatalf("Kill = %v; want ErrOwnership", err)
	}
	for _, c := range srv.Calls() {
		if c.Mutating {
			t.Fatalf("Kill sent %s", c.Name)
		}
	}
	if _, ok := srv.Volume(p.HomeVolume(ref)); !ok {
		t.Fatal("the volume is gone")
	}
}

// TestCreateRacedByAnUnlabelledVolume: a volume that appears under ref's
// name between Create's check and its create is answered unchanged by the
// engine; Create refuses it and drops the name's record, so that Kill
// never takes that volume for ref's.
func TestCreateRacedByAnUnlabelledVolume(t *testing.T) {
	h := fixtureHarness(t, t.TempDir())
	p := h.Provider.(*docker.Provider)
	srv := h.Native.(*dockertest.Native).Server
	ref := contracttest.NewReference()
	srv.Arm(dockertest.CallVolumeInspect, dockertest.FaultHookAfterDispatch, func() { srv.PutVolume(p.HomeVolume(ref), nil) })
	if _, err := p.Create(context.Background(), contracttest.CreateRequest(ref, resources)); !errors.Is(err, errdefs.ErrOwnership) {
		t.Fatalf("Create = %v; want ErrOwnership", err)
	}
	requireUntouched(t, p, srv, ref)
}

// TestCreateWithoutIntentRecordMutatesNothing: when the state directory
// refuses the records, Create sends no mutation and returns its own
// absence receipt with ErrFailedPrecondition.
func TestCreateWithoutIntentRecordMutatesNothing(t *testing.T) {
	blocked := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocked, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	h := fixtureHarness(t, filepath.Join(blocked, "intents")) // under a file: never a directory
	p := h.Provider.(*docker.Provider)
	srv := h.Native.(*dockertest.Native).Server
	ref := contracttest.NewReference()
	srv.ResetCalls()
	info, err := p.Create(context.Background(), contracttest.CreateRequest(ref, resources))
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !info.IsAbsenceReceipt(ref) {
		t.Fatalf("Create = %+v, %v; want ErrFailedPrecondition with the absence receipt", info, err)
	}
	if slices.ContainsFunc(srv.Calls(), func(c dockertest.Call) bool { return c.Mutating }) {
		t.Fatalf("Create sent mutations: %v", srv.CallNames())
	}
}

// TestResumeRacedByAnUnlabelledVolume is Create's race for Resume (issue
// 26, item 12): a volume that appears under the target's name between
// Resume's check and its create is answered unchanged by the engine;
// Resume refuses it and drops the group's record, so that Kill, which
// removes every later incarnation of ref, never takes that volume for
// ref's.
func TestResumeRacedByAnUnlabelledVolume(t *testing.T) {
	f := newCheckpointFixture(t)
	ctx := context.Background()
	res, err := f.p.Suspend(ctx, sandbox.SuspendRequest{Compute: f.first, OperationID: uuid.NewString()})
	if err != nil {
		t.Fatal(err)
	}
	second, _ := f.p.NewCompute(f.first)
	home := second.Name + "-home"
	f.srv.Arm(dockertest.CallVolumeInspect, dockertest.FaultHookAfterDispatch, func() { f.srv.PutVolume(home, nil) })
	if _, err := f.p.Resume(ctx, sandbox.ResumeRequest{
		Snapshot: res.Snapshot, Target: second, OperationID: uuid.NewString(),
		Resources: resources, Bootstrap: contracttest.CreateRequest(f.ref, resources).Bootstrap,
	}); !errors.Is(err, errdefs.ErrOwnership) {
		t.Fatalf("Resume = %v; want ErrOwnership", err)
	}
	if err := f.p.Kill(ctx, sandbox.KillRequest{Reference: f.ref}); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if _, ok := f.srv.Volume(home); !ok {
		t.Fatal("Kill removed the foreign volume that raced Resume")
	}
}
