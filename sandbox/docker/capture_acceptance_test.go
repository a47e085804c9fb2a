package docker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/events"
	"github.com/moby/moby/client"

	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/errdefs"
)

// The Capture tests run fork's capture against the real engine: the
// source is the same container, running, after the Capture; the snapshot
// restores what the source held at the Capture and nothing written after
// it; the pause is read from the engine's own events.

// engineEvents returns the engine's events of container id between since
// and until, in order.
func (e *engine) engineEvents(id string, since, until time.Time) []events.Message {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stamp := func(t time.Time) string { return fmt.Sprintf("%d.%09d", t.Unix(), t.Nanosecond()) }
	res := e.cli.Events(ctx, client.EventsListOptions{
		Since: stamp(since), Until: stamp(until),
		Filters: client.Filters{}.Add("type", "container").Add("container", id),
	})
	var out []events.Message
	for {
		select {
		case m := <-res.Messages:
			out = append(out, m)
		case err := <-res.Err:
			if !errors.Is(err, io.EOF) {
				e.t.Fatalf("read the engine's events: %v", err)
			}
			return out
		}
	}
}

// pauses returns the pause and unpause events among msgs.
func pauses(msgs []events.Message) []events.Message {
	var out []events.Message
	for _, m := range msgs {
		if m.Action == events.ActionPause || m.Action == events.ActionUnPause {
			out = append(out, m)
		}
	}
	return out
}

// checkSourceRunning fails unless the container under c's name is c's
// own container id, running and not paused.
func (e *engine) checkSourceRunning(name, id string) {
	e.t.Helper()
	ct, ok := e.inspect(name)
	if !ok || ct.ID != id || ct.State == nil || ct.State.Status != container.StateRunning || ct.State.Paused {
		e.t.Fatalf("the source after Capture: found %v, id %s (want %s), state %+v", ok, ct.ID, id, ct.State)
	}
}

// TestAcceptanceCaptureKeepsTheSource: a Capture of a running Session with
// 10 MB written to its workspace leaves the same container running (the
// pause lasted the copy, read from the engine's events), records the
// snapshot's holder, and a restore of the snapshot holds the 10 MB file
// byte for byte and nothing written after the Capture. The same operation
// again copies nothing; ObserveOnly returns the snapshot, or ErrNotFound
// for an operation never captured; Kill removes everything.
func TestAcceptanceCaptureKeepsTheSource(t *testing.T) {
	e := newEngine(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ref := contracttest.NewReference()
	info := e.create(ref)
	first, err := e.p.Initial(ref)
	if err != nil {
		t.Fatal(err)
	}
	sum := e.run2(first, "head -c 10485760 /dev/urandom > /workspace/big.bin && sha256sum /workspace/big.bin")

	op := uuid.NewString()
	since := time.Now()
	start := time.Now()
	res, err := e.p.Capture(ctx, sandbox.CaptureRequest{Compute: first, OperationID: op})
	if err != nil {
		t.Fatalf("Capture: %v", err)
	}
	took := time.Since(start)
	until := time.Now()
	if res.Snapshot.ID != e.p.SnapshotName(ref, op) || !strings.Contains(res.Snapshot.Provenance, "copy="+docker.CopyHelperCP) ||
		res.Source.State != sandbox.ComputeRunning || res.Source.Compute.ID != info.ProviderID {
		t.Fatalf("Capture = %+v", res)
	}
	e.checkSourceRunning(first.Name, info.ProviderID)
	evs := pauses(e.engineEvents(info.ProviderID, since, until.Add(time.Second)))
	if len(evs) != 2 || evs[0].Action != events.ActionPause || evs[1].Action != events.ActionUnPause {
		t.Fatalf("the engine's pause events of the source during Capture: %+v; want one pause, then one unpause", evs)
	}
	t.Logf("Capture of 10 MB: %v; the source's pause window (engine events): %v",
		took.Round(time.Millisecond), time.Duration(evs[1].TimeNano-evs[0].TimeNano).Round(time.Millisecond))

	holder, ok := e.inspect(res.Snapshot.ID)
	if !ok || holder.State == nil || holder.State.Status != container.StateCreated ||
		holder.Config.Labels[docker.LabelSnapshotOperation] != op || holder.Config.Labels[docker.LabelSnapshotRole] != "holder" {
		t.Fatalf("snapshot holder %v %+v", ok, holder.Config)
	}
	for _, helper := range []string{res.Snapshot.ID + "-copier", res.Snapshot.ID + "-capture"} {
		if _, ok := e.inspect(helper); ok {
			t.Fatalf("Capture left %s", helper)
		}
	}
	e.run2(first, "echo after > /workspace/after.txt")

	// The same operation again copies nothing and never pauses.
	beforeC, beforeV := e.owned()
	since = time.Now()
	again, err := e.p.Capture(ctx, sandbox.CaptureRequest{Compute: first, OperationID: op})
	if err != nil || again.Snapshot != res.Snapshot || again.Source.State != sandbox.ComputeRunning {
		t.Fatalf("Capture again = %+v, %v; want %+v", again, err, res.Snapshot)
	}
	if evs := pauses(e.engineEvents(info.ProviderID, since, time.Now().Add(time.Second))); len(evs) != 0 {
		t.Fatalf("Capture again paused the source: %+v", evs)
	}
	if h, _ := e.inspect(res.Snapshot.ID); h.ID != holder.ID {
		t.Fatal("Capture again replaced the holder")
	}
	if afterC, afterV := e.owned(); !sameSet(beforeC, afterC) || !sameSet(beforeV, afterV) {
		t.Fatalf("Capture again changed the engine: containers %v -> %v, volumes %v -> %v", beforeC, afterC, beforeV, afterV)
	}
	observed, err := e.p.Capture(ctx, sandbox.CaptureRequest{Compute: first, OperationID: op, ObserveOnly: true})
	if err != nil || observed.Snapshot != res.Snapshot || observed.Source.State != sandbox.ComputeRunning {
		t.Fatalf("Capture ObserveOnly = %+v, %v", observed, err)
	}
	if _, err := e.p.Capture(ctx, sandbox.CaptureRequest{Compute: first, OperationID: uuid.NewString(), ObserveOnly: true}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("Capture ObserveOnly of an operation never captured = %v; want ErrNotFound", err)
	}
	if afterC, afterV := e.owned(); !sameSet(beforeC, afterC) || !sameSet(beforeV, afterV) {
		t.Fatalf("ObserveOnly changed the engine: containers %v -> %v, volumes %v -> %v", beforeC, afterC, beforeV, afterV)
	}

	// The snapshot restores into the Reference's next incarnation, beside
	// the source: the 10 MB file as captured, nothing written after.
	second, err := e.p.NewCompute(first)
	if err != nil {
		t.Fatal(err)
	}
	resumed, err := e.p.Resume(ctx, sandbox.ResumeRequest{
		Snapshot: res.Snapshot, Target: second, OperationID: uuid.NewString(), Resources: resources,
		Bootstrap: contracttest.CreateRequest(ref, resources).Bootstrap,
	})
	if err != nil || resumed.Compute.State != sandbox.ComputeRunning {
		t.Fatalf("Resume of the Capture's snapshot = %+v, %v", resumed, err)
	}
	second = resumed.Compute.Compute
	if got := e.run2(second, "sha256sum /workspace/big.bin"); got != sum {
		t.Fatalf("the restored file's digest %q differs from the captured %q", got, sum)
	}
	if got := e.run2(second, "test -e /workspace/after.txt && echo present || echo absent"); got != "absent\n" {
		t.Fatalf("a file written after the Capture is %s in the restore", strings.TrimSpace(got))
	}
	if got := e.run2(first, "cat /workspace/after.txt"); got != "after\n" {
		t.Fatalf("the source lost its own write: %q", got)
	}

	// Kill removes the source, the restored incarnation and the snapshot:
	// nothing of the installation is left (the first container existed, so
	// no tombstone either).
	e.kill(ref)
	if cs, vs := e.owned(); len(cs) != 0 || len(vs) != 0 {
		t.Fatalf("after Kill: containers %v and volumes %v", cs, vs)
	}
}

// TestAcceptanceCaptureLeavesAPausedOrStoppedSourceAsItWas: a paused
// source is copied paused and stays paused (no pause or unpause event);
// a stopped one is copied and stays stopped. DeleteSnapshot removes each
// snapshot exactly.
func TestAcceptanceCaptureLeavesAPausedOrStoppedSourceAsItWas(t *testing.T) {
	e := newEngine(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ref := contracttest.NewReference()
	info := e.create(ref)
	first, _ := e.p.Initial(ref)
	e.run2(first, "echo kept > /workspace/kept.txt")
	if _, err := e.cli.ContainerPause(ctx, info.ProviderID, client.ContainerPauseOptions{}); err != nil {
		t.Fatal(err)
	}
	since := time.Now()
	res, err := e.p.Capture(ctx, sandbox.CaptureRequest{Compute: first, OperationID: uuid.NewString()})
	if err != nil || res.Source.State != sandbox.ComputePaused || res.Source.Compute.ID != info.ProviderID {
		t.Fatalf("Capture of a paused source = %+v, %v", res, err)
	}
	if evs := pauses(e.engineEvents(info.ProviderID, since, time.Now().Add(time.Second))); len(evs) != 0 {
		t.Fatalf("Capture of a paused source paused or unpaused it: %+v", evs)
	}
	if ct, _ := e.inspect(info.ProviderID); ct.State == nil || !ct.State.Paused {
		t.Fatal("the paused source is not paused after Capture")
	}
	if err := e.p.DeleteSnapshot(ctx, ref, res.Snapshot); err != nil {
		t.Fatalf("DeleteSnapshot: %v", err)
	}
	if _, ok := e.inspect(res.Snapshot.ID); ok || e.volumeExists(res.Snapshot.ID+"-home") || e.volumeExists(res.Snapshot.ID+"-environment") {
		t.Fatal("the snapshot is still there after DeleteSnapshot")
	}

	if _, err := e.cli.ContainerUnpause(ctx, info.ProviderID, client.ContainerUnpauseOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cli.ContainerStop(ctx, info.ProviderID, client.ContainerStopOptions{}); err != nil {
		t.Fatal(err)
	}
	stopped, err := e.p.Capture(ctx, sandbox.CaptureRequest{Compute: first, OperationID: uuid.NewString()})
	if err != nil || stopped.Source.State != sandbox.ComputeStopped || stopped.Source.Compute.ID != info.ProviderID {
		t.Fatalf("Capture of a stopped source = %+v, %v", stopped, err)
	}
	if ct, _ := e.inspect(info.ProviderID); ct.State == nil || ct.State.Status != container.StateExited {
		t.Fatal("the stopped source is not stopped after Capture")
	}
	second, _ := e.p.NewCompute(first)
	resumed, err := e.p.Resume(ctx, sandbox.ResumeRequest{
		Snapshot: stopped.Snapshot, Target: second, OperationID: uuid.NewString(), Resources: resources,
		Bootstrap: contracttest.CreateRequest(ref, resources).Bootstrap,
	})
	if err != nil {
		t.Fatalf("Resume of a stopped source's snapshot: %v", err)
	}
	if got := e.run2(resumed.Compute.Compute, "cat /workspace/kept.txt"); got != "kept\n" {
		t.Fatalf("the restore holds %q", got)
	}
	e.kill(ref)
	if cs, vs := e.owned(); len(cs) != 0 || len(vs) != 0 {
		t.Fatalf("after Kill: containers %v and volumes %v", cs, vs)
	}
}

// TestAcceptanceCaptureCutShortThawsAndLeavesNothing: the caller's context
// ends as soon as the engine reports the copier started (the copier is
// paused first, so the copy never wins the race). The Capture's
// outcome is unknown to its caller (ErrComputeUnconfirmed), yet the source
// runs again, the same container, and the copier, the capture container
// and the snapshot's volumes are gone, so ObserveOnly reads ErrNotFound.
func TestAcceptanceCaptureCutShortThawsAndLeavesNothing(t *testing.T) {
	e := newEngine(t, false)
	ref := contracttest.NewReference()
	info := e.create(ref)
	first, _ := e.p.Initial(ref)
	e.run2(first, "head -c 52428800 /dev/urandom > /workspace/big.bin")
	op := uuid.NewString()
	name := e.p.SnapshotName(ref, op)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watch, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	evs := e.cli.Events(watch, client.EventsListOptions{
		Filters: client.Filters{}.Add("type", "container").Add("event", "start").Add("label", docker.LabelSnapshotOperation+"="+op),
	})
	go func() {
		select {
		case m := <-evs.Messages:
			// The copier is frozen before the cancellation, so the copy
			// cannot finish first: the cut always lands mid-copy.
			_, _ = e.cli.ContainerPause(context.Background(), m.Actor.ID, client.ContainerPauseOptions{})
			cancel()
		case <-watch.Done():
		}
	}()
	_, err := e.p.Capture(ctx, sandbox.CaptureRequest{Compute: first, OperationID: op})
	stopWatch()
	if !errors.Is(err, errdefs.ErrComputeUnconfirmed) {
		t.Fatalf("Capture cut short = %v; want ErrComputeUnconfirmed", err)
	}
	e.checkSourceRunning(first.Name, info.ProviderID)
	for _, c := range []string{name, name + "-copier", name + "-capture"} {
		if _, ok := e.inspect(c); ok {
			t.Fatalf("the cut Capture left %s", c)
		}
	}
	if e.volumeExists(name+"-home") || e.volumeExists(name+"-environment") {
		t.Fatal("the cut Capture left the snapshot's volumes")
	}
	bg := context.Background()
	if _, err := e.p.Capture(bg, sandbox.CaptureRequest{Compute: first, OperationID: op, ObserveOnly: true}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("ObserveOnly after the cut Capture = %v; want ErrNotFound", err)
	}
	e.kill(ref)
	if cs, vs := e.owned(); len(cs) != 0 || len(vs) != 0 {
		t.Fatalf("after Kill: containers %v and volumes %v", cs, vs)
	}
}

// TestAcceptanceCaptureRefusesForeignSnapshotNames: a foreign container
// under the snapshot's name, or a foreign volume under one of its volume
// names, makes Capture refuse (ErrOwnership) before it creates or pauses
// anything, and the foreign resource is never touched.
func TestAcceptanceCaptureRefusesForeignSnapshotNames(t *testing.T) {
	e := newEngine(t, false)
	ctx := context.Background()
	ref := contracttest.NewReference()
	info := e.create(ref)
	first, _ := e.p.Initial(ref)
	foreign := map[string]string{"io.example.owner": "someone"}

	op := uuid.NewString()
	cc, err := e.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: e.p.SnapshotName(ref, op), Config: &container.Config{Image: e.image, Cmd: []string{"true"}, Labels: foreign},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = e.cli.ContainerRemove(ctx, cc.ID, client.ContainerRemoveOptions{Force: true}) })
	volOp := uuid.NewString()
	vol := e.p.SnapshotName(ref, volOp) + "-home"
	if _, err := e.cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: vol, Labels: foreign}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = e.cli.VolumeRemove(ctx, vol, client.VolumeRemoveOptions{Force: true}) })

	beforeC, beforeV := e.owned()
	since := time.Now()
	for _, o := range []string{op, volOp} {
		if _, err := e.p.Capture(ctx, sandbox.CaptureRequest{Compute: first, OperationID: o}); !errors.Is(err, errdefs.ErrOwnership) {
			t.Fatalf("Capture under a foreign snapshot name = %v; want ErrOwnership", err)
		}
	}
	if evs := pauses(e.engineEvents(info.ProviderID, since, time.Now().Add(time.Second))); len(evs) != 0 {
		t.Fatalf("a refused Capture paused the source: %+v", evs)
	}
	if afterC, afterV := e.owned(); !sameSet(beforeC, afterC) || !sameSet(beforeV, afterV) {
		t.Fatalf("a refused Capture changed the engine: containers %v -> %v, volumes %v -> %v", beforeC, afterC, beforeV, afterV)
	}
	e.checkSourceRunning(first.Name, info.ProviderID)
	if c, err := e.cli.ContainerInspect(ctx, cc.ID, client.ContainerInspectOptions{}); err != nil || c.Container.Config.Labels["io.example.owner"] != "someone" {
		t.Fatalf("the foreign container changed: %v", err)
	}
	if v, err := e.cli.VolumeInspect(ctx, vol, client.VolumeInspectOptions{}); err != nil || v.Volume.Labels["io.example.owner"] != "someone" {
		t.Fatalf("the foreign volume changed: %v", err)
	}
	e.kill(ref)
}
