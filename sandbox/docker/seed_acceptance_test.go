package docker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/client"

	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/errdefs"
)

// The CreateSeeded tests run fork's child creation against the real
// engine: children copied from one Capture hold the source's workspace at
// the Capture, each in volumes of its own, with its own bootstrap and no
// parked state of the source; the snapshot outlives them.

// allocationResources lists the containers and volumes of ref's
// allocation on the engine (its allocation label).
func (e *engine) allocationResources(ref sandbox.Reference) (containers, volumes []string) {
	return e.labelled(client.Filters{}.Add("label", docker.LabelInstallation+"="+e.installation).
		Add("label", docker.LabelAllocation+"="+ref.AllocationID))
}

// bootstrapDevice reads the device id of the bootstrap file in the
// running container of ref. The credential is never printed.
func (e *engine) bootstrapDevice(ref sandbox.Reference) string {
	e.t.Helper()
	out := e.run(ref, sh("cat "+runtimebootstrap.Path))
	if out.ExitCode != 0 {
		e.t.Fatalf("read the bootstrap file: exit %d", out.ExitCode)
	}
	var f struct {
		DeviceID string `json:"device_id"`
	}
	if err := json.Unmarshal(out.Stdout, &f); err != nil {
		e.t.Fatalf("decode the bootstrap file: %v", err)
	}
	return f.DeviceID
}

// TestAcceptanceCreateSeededCopiesTheSnapshot: a running source with 10
// MB in its workspace and a park marker in its home is captured; two
// children are created from the snapshot. Each runs with its own bootstrap
// file (its own device), the 10 MB file byte for byte, and no park marker
// or wake file; no seeder is left. A write in one child is seen neither
// by the other nor by the source, and a write in the source after the
// Capture by neither child. Kill of a child leaves nothing of it and the
// snapshot; Kill of the source removes the snapshot.
func TestAcceptanceCreateSeededCopiesTheSnapshot(t *testing.T) {
	e := newEngine(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	src := contracttest.NewReference()
	e.create(src)
	first, err := e.p.Initial(src)
	if err != nil {
		t.Fatal(err)
	}
	dir := runtimebootstrap.Path[:strings.LastIndex(runtimebootstrap.Path, "/")]
	sum := e.run2(first, "head -c 10485760 /dev/urandom > /workspace/big.bin && sha256sum /workspace/big.bin && "+
		"echo token > "+dir+"/runtime-parked && echo 1 2 > "+dir+"/runtime-parked.pid")
	srcDevice := e.bootstrapDevice(src)
	res, err := e.p.Capture(ctx, sandbox.CaptureRequest{Compute: first, OperationID: uuid.NewString()})
	if err != nil {
		t.Fatalf("Capture: %v", err)
	}
	e.run2(first, "echo after > /workspace/after-capture.txt")

	children := make([]sandbox.Reference, 2)
	for i := range children {
		children[i] = contracttest.NewReference()
		req := contracttest.CreateRequest(children[i], resources)
		start := time.Now()
		info, err := e.p.CreateSeeded(ctx, sandbox.SeededCreateRequest{Create: req, Owner: src, Snapshot: res.Snapshot})
		if err != nil || !info.IsSettledRunning(children[i]) {
			t.Fatalf("CreateSeeded child %d = %+v, %v", i, info, err)
		}
		t.Logf("CreateSeeded of a 10 MB workspace: %v", time.Since(start).Round(time.Millisecond))
		if got := e.bootstrapDevice(children[i]); got != req.Bootstrap.DeviceID || got == srcDevice {
			t.Fatalf("child %d's bootstrap names device %s; want its own %s (the source's is %s)", i, got, req.Bootstrap.DeviceID, srcDevice)
		}
		if _, ok := e.inspect(e.p.Name(children[i]) + "-seeder"); ok {
			t.Fatalf("CreateSeeded left child %d's seeder", i)
		}
	}
	c0, _ := e.p.Initial(children[0])
	c1, _ := e.p.Initial(children[1])
	for i, c := range []sandbox.Compute{c0, c1} {
		if got, want := strings.Fields(e.run2(c, "sha256sum /workspace/big.bin"))[0], strings.Fields(sum)[0]; got != want {
			t.Fatalf("child %d's big.bin: sha256 %s; the source's at the Capture: %s", i, got, want)
		}
		if got := e.run2(c, "ls -A "+dir+" /workspace; id -u; stat -c %u /workspace/big.bin"); strings.Contains(got, "runtime-parked") ||
			strings.Contains(got, "after-capture.txt") || !strings.Contains(got, "1000\n1000") {
			t.Fatalf("child %d holds the source's parked state, a later write, or wrong owners:\n%s", i, got)
		}
	}
	e.run2(c0, "echo child0 > /workspace/only-child0.txt")
	for _, c := range []sandbox.Compute{c1, first} {
		if got := e.run2(c, "ls -A /workspace"); strings.Contains(got, "only-child0.txt") {
			t.Fatalf("%s sees child 0's write:\n%s", c.Name, got)
		}
	}

	e.kill(children[0])
	if cs, vs := e.allocationResources(children[0]); len(cs)+len(vs) != 0 {
		t.Fatalf("Kill of child 0 left containers %v and volumes %v", cs, vs)
	}
	if h, ok := e.inspect(res.Snapshot.ID); !ok || h.Config.Labels[docker.LabelSnapshotRole] != "holder" {
		t.Fatal("Kill of a child removed the snapshot")
	}
	e.kill(children[1])
	e.kill(src)
	for _, ref := range []sandbox.Reference{children[1], src} {
		cs, vs := e.allocationResources(ref)
		tc, tv := e.tombstones()
		if len(cs)+len(vs) > len(tc)+len(tv) {
			t.Fatalf("Kill left containers %v and volumes %v (tombstones %v %v)", cs, vs, tc, tv)
		}
	}
	if _, ok := e.inspect(res.Snapshot.ID); ok {
		t.Fatal("Kill of the source left its snapshot")
	}
}

// TestAcceptanceCreateSeededRefusesAMissingSnapshot: a snapshot that does
// not exist (never captured, or deleted) is refused before any mutation
// with the absence receipt, and the engine holds nothing of the child; a
// snapshot id of another allocation is refused as invalid.
func TestAcceptanceCreateSeededRefusesAMissingSnapshot(t *testing.T) {
	e := newEngine(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	src, child := contracttest.NewReference(), contracttest.NewReference()
	snap := sandbox.SnapshotIdentity{ID: e.p.SnapshotName(src, uuid.NewString()), Provenance: "docker-volumes;source-generation=1;copy=helper-cp-a"}
	info, err := e.p.CreateSeeded(ctx, sandbox.SeededCreateRequest{Create: contracttest.CreateRequest(child, resources), Owner: src, Snapshot: snap})
	if !errdefs.IsNotFound(err) || !info.IsAbsenceReceipt(child) {
		t.Fatalf("CreateSeeded from a missing snapshot = %+v, %v; want the absence receipt and ErrNotFound", info, err)
	}
	if cs, vs := e.allocationResources(child); len(cs)+len(vs) != 0 {
		t.Fatalf("the refused CreateSeeded made containers %v and volumes %v", cs, vs)
	}
	other := contracttest.NewReference()
	snap.ID = e.p.SnapshotName(other, uuid.NewString())
	_, err = e.p.CreateSeeded(ctx, sandbox.SeededCreateRequest{Create: contracttest.CreateRequest(child, resources), Owner: src, Snapshot: snap})
	var inv *errdefs.FieldError
	if !errors.As(err, &inv) || inv.Field != "snapshot.id" {
		t.Fatalf("CreateSeeded from another allocation's snapshot = %v; want InvalidArgument snapshot.id", err)
	}
}

// TestAcceptanceKillRemovesACutShortSeeder: a CreateSeeded whose context
// ends while its seeder runs (the seeder frozen on its start event) fails
// with an unknown outcome and the Reference, leaving its seeder; Kill
// then removes the seeder before the volumes it mounts, and leaves nothing
// of the child (a tombstone at most), while the snapshot stays.
func TestAcceptanceKillRemovesACutShortSeeder(t *testing.T) {
	e := newEngine(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	src, child := contracttest.NewReference(), contracttest.NewReference()
	e.create(src)
	first, _ := e.p.Initial(src)
	// 200 MB: the copy outlasts the pause's round trip on a loaded host.
	e.run2(first, "head -c 209715200 /dev/zero > /workspace/big.bin")
	res, err := e.p.Capture(ctx, sandbox.CaptureRequest{Compute: first, OperationID: uuid.NewString()})
	if err != nil {
		t.Fatalf("Capture: %v", err)
	}
	seeder := e.p.Name(child) + "-seeder"
	callCtx, stop := context.WithCancel(ctx)
	defer stop()
	watch, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	evs := e.cli.Events(watch, client.EventsListOptions{
		Filters: client.Filters{}.Add("type", "container").Add("event", "start").Add("label", docker.LabelAllocation+"="+child.AllocationID),
	})
	go func() {
		// The seeder is frozen as soon as the engine starts it, then the
		// call is cut short: the copy cannot finish first.
		select {
		case m := <-evs.Messages:
			_, _ = e.cli.ContainerPause(context.Background(), m.Actor.ID, client.ContainerPauseOptions{})
			stop()
		case <-watch.Done():
		}
	}()
	info, err := e.p.CreateSeeded(callCtx, sandbox.SeededCreateRequest{Create: contracttest.CreateRequest(child, resources), Owner: src, Snapshot: res.Snapshot})
	stopWatch()
	if err == nil || info.Reference != child || info.CreateSettled {
		t.Fatalf("a cut-short CreateSeeded = %+v, %v; want an unsettled failure with the Reference", info, err)
	}
	// Paused, or (when the copy won the race on a loaded host) exited: it
	// still holds the child's volumes either way.
	if ct, ok := e.inspect(seeder); !ok || ct.State == nil || (!ct.State.Paused && ct.State.Running) {
		t.Fatalf("the seeder after the cut: found %v, state %+v; want it there, paused or exited", ok, ct.State)
	}
	e.kill(child)
	cs, vs := e.allocationResources(child)
	tc, tv := e.tombstones()
	if len(cs)+len(vs) > len(tc)+len(tv) {
		t.Fatalf("Kill after a cut-short CreateSeeded left containers %v and volumes %v", cs, vs)
	}
	if _, ok := e.inspect(seeder); ok {
		t.Fatal("Kill left the seeder")
	}
	if _, ok := e.inspect(res.Snapshot.ID); !ok {
		t.Fatal("Kill of the child removed the snapshot")
	}
	e.kill(src)
}

// opResources lists the containers and volumes carrying snapshot
// operation op's label.
func (e *engine) opResources(op string) (containers, volumes []string) {
	return e.labelled(client.Filters{}.Add("label", docker.LabelInstallation+"="+e.installation).
		Add("label", docker.LabelSnapshotOperation+"="+op))
}

// TestAcceptanceExportImportSeedsAnotherNode: a Capture's snapshot,
// exported and imported under another operation (a fork's seed on another
// node; one engine here), seeds a child that holds the 10 MB file byte
// for byte, a hard link, a symlink and the owners; a repeat of the import
// returns the same snapshot without reading; a stream cut before its
// trailer is refused and leaves nothing; Discard removes the seed.
func TestAcceptanceExportImportSeedsAnotherNode(t *testing.T) {
	e := newEngine(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	src := contracttest.NewReference()
	e.create(src)
	first, _ := e.p.Initial(src)
	sum := e.run2(first, "head -c 10485760 /dev/urandom > /workspace/big.bin && ln /workspace/big.bin /workspace/hard.bin && "+
		"ln -s big.bin /workspace/soft && mkdir -p /workspace/d/e && echo x > /workspace/d/e/f && sha256sum /workspace/big.bin")
	res, err := e.p.Capture(ctx, sandbox.CaptureRequest{Compute: first, OperationID: uuid.NewString()})
	if err != nil {
		t.Fatalf("Capture: %v", err)
	}
	var archive bytes.Buffer
	if err := e.p.ExportSnapshot(ctx, src, res.Snapshot, &archive); err != nil {
		t.Fatalf("ExportSnapshot: %v", err)
	}
	seedOp := uuid.NewString()
	start := time.Now()
	seed, err := e.p.ImportSnapshot(ctx, sandbox.ImportRequest{Owner: src, OperationID: seedOp}, bytes.NewReader(archive.Bytes()))
	if err != nil || seed.ID != e.p.SnapshotName(src, seedOp) || !strings.Contains(seed.Provenance, "copy="+docker.CopyImport) {
		t.Fatalf("ImportSnapshot = %+v, %v", seed, err)
	}
	t.Logf("export of 10 MB: %d bytes; import: %v", archive.Len(), time.Since(start).Round(time.Millisecond))
	if again, err := e.p.ImportSnapshot(ctx, sandbox.ImportRequest{Owner: src, OperationID: seedOp}, strings.NewReader("")); err != nil || again != seed {
		t.Fatalf("ImportSnapshot again = %+v, %v; want %+v without reading", again, err, seed)
	}

	child := contracttest.NewReference()
	info, err := e.p.CreateSeeded(ctx, sandbox.SeededCreateRequest{Create: contracttest.CreateRequest(child, resources), Owner: src, Snapshot: seed})
	if err != nil || !info.IsSettledRunning(child) {
		t.Fatalf("CreateSeeded from the imported seed = %+v, %v", info, err)
	}
	c, _ := e.p.Initial(child)
	got := e.run2(c, "sha256sum /workspace/big.bin; stat -c '%h %u' /workspace/hard.bin; readlink /workspace/soft; cat /workspace/d/e/f")
	want := strings.Fields(sum)[0] + "  /workspace/big.bin\n2 1000\nbig.bin\nx\n"
	if got != want {
		t.Fatalf("the child seeded from the import holds:\n%s\nwant:\n%s", got, want)
	}

	cut := archive.Bytes()[:archive.Len()-2048] // the trailer and the end blocks
	cutOp := uuid.NewString()
	_, err = e.p.ImportSnapshot(ctx, sandbox.ImportRequest{Owner: src, OperationID: cutOp}, bytes.NewReader(cut))
	var inv *errdefs.FieldError
	if !errors.As(err, &inv) || inv.Field != "archive" {
		t.Fatalf("ImportSnapshot of a stream cut short = %v; want InvalidArgument archive", err)
	}
	if cs, vs := e.opResources(cutOp); len(cs)+len(vs) != 0 {
		t.Fatalf("the refused import left containers %v and volumes %v", cs, vs)
	}

	if _, err := e.p.ImportSnapshot(ctx, sandbox.ImportRequest{Owner: src, OperationID: seedOp, Discard: true}, nil); err != nil {
		t.Fatalf("ImportSnapshot Discard: %v", err)
	}
	if cs, vs := e.opResources(seedOp); len(cs)+len(vs) != 0 {
		t.Fatalf("Discard left containers %v and volumes %v", cs, vs)
	}
	e.kill(child)
	e.kill(src)
}
