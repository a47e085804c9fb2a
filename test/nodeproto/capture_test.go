package nodeproto

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/errdefs"

	"berth.dev/test/internal/stack"
)

// TestCaptureOnTheRealEngine: Capture through Core's proxy -> node agent
// -> Docker adapter -> the real engine, of a running Session's compute:
// the source is the same container afterwards, running (not paused) and
// still writable; ObserveOnly of the operation answers the same snapshot
// and of an operation never captured ErrNotFound; the snapshot resumes
// into the Reference's next incarnation beside the source, with what the
// source held at the Capture and nothing written after; CreateSeeded makes
// a fork's child from it that holds the same, and the child's Kill leaves
// the snapshot; exported and imported as a seed (both streams), it seeds
// another child, and the seed is discarded.
func TestCaptureOnTheRealEngine(t *testing.T) {
	_, n, cli := stack.EngineNode(t)
	_, proxy := n.Connect(t, n.Dial(t), 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ref := contracttest.NewReference()
	if info, err := proxy.Create(ctx, contracttest.CreateRequest(ref, stack.Resources)); err != nil || !info.IsSettledRunning(ref) {
		t.Fatalf("Create: %+v, %v", info, err)
	}
	const write = "echo captured > /workspace/marker && mkdir -p /home/runtime/d && echo home > /home/runtime/d/f"
	if res, err := proxy.RunCommand(ctx, ref, sandbox.Command{Args: []string{"sh", "-c", write}}); err != nil || res.ExitCode != 0 {
		t.Fatalf("write: %+v, %v", res, err)
	}
	// containers lists the allocation's incarnations (the snapshot's
	// holder, which never starts, carries no compute generation), or with
	// all every container of the allocation.
	containers := func(all bool) []container.Summary {
		t.Helper()
		f := client.Filters{}.Add("label", docker.LabelAllocation+"="+ref.AllocationID)
		if !all {
			f = f.Add("label", docker.LabelGeneration+"=1")
		}
		cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
		if err != nil {
			t.Fatal(err)
		}
		return cs.Items
	}
	before := containers(false)
	if len(before) != 1 || before[0].State != container.StateRunning {
		t.Fatalf("before Capture: %+v", before)
	}
	first, err := proxy.Initial(ref)
	if err != nil {
		t.Fatal(err)
	}
	op := uuid.NewString()
	captured, err := proxy.Capture(ctx, sandbox.CaptureRequest{Compute: first, OperationID: op})
	if err != nil || captured.Source.State != sandbox.ComputeRunning || captured.Snapshot.ID == "" || captured.Snapshot.Provenance == "" {
		t.Fatalf("Capture: %+v, %v", captured, err)
	}
	if after := containers(false); len(after) != 1 || after[0].ID != before[0].ID || after[0].State != container.StateRunning {
		t.Fatalf("the source after Capture: %+v; want container %s running", after, before[0].ID)
	}
	if gi, err := proxy.GetCompute(ctx, first); err != nil || gi.State != sandbox.ComputeRunning {
		t.Fatalf("GetCompute of the captured source: %+v, %v", gi, err)
	}
	if res, err := proxy.RunCommand(ctx, ref, sandbox.Command{Args: []string{"sh", "-c", "echo after > /workspace/after"}}); err != nil || res.ExitCode != 0 {
		t.Fatalf("write in the source after Capture: %+v, %v", res, err)
	}
	if again, err := proxy.Capture(ctx, sandbox.CaptureRequest{Compute: first, OperationID: op, ObserveOnly: true}); err != nil || again.Snapshot != captured.Snapshot {
		t.Fatalf("Capture ObserveOnly: %+v, %v; want %+v", again, err, captured.Snapshot)
	}
	if _, err := proxy.Capture(ctx, sandbox.CaptureRequest{Compute: first, OperationID: uuid.NewString(), ObserveOnly: true}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("Capture ObserveOnly of an operation never captured = %v; want ErrNotFound", err)
	}

	second, err := proxy.NewCompute(first)
	if err != nil || second.Generation != 2 {
		t.Fatalf("NewCompute: %+v, %v", second, err)
	}
	resumed, err := proxy.Resume(ctx, sandbox.ResumeRequest{
		Snapshot: captured.Snapshot, Target: second, OperationID: uuid.NewString(),
		Resources: stack.Resources, Bootstrap: contracttest.CreateRequest(ref, stack.Resources).Bootstrap,
	})
	if err != nil || resumed.Compute.State != sandbox.ComputeRunning || resumed.Compute.Compute.ID == "" {
		t.Fatalf("Resume of the Capture's snapshot: %+v, %v", resumed, err)
	}
	second = resumed.Compute.Compute
	res, err := proxy.RunCommandCompute(ctx, second, sandbox.Command{Args: []string{"sh", "-c", "cat /workspace/marker /home/runtime/d/f; test -e /workspace/after && echo present || echo absent"}})
	if err != nil || res.ExitCode != 0 || string(res.Stdout) != "captured\nhome\nabsent\n" {
		t.Fatalf("RunCommandCompute in the resumed incarnation: %q %q, %v", res.Stdout, res.Stderr, err)
	}
	if res, err := proxy.RunCommandCompute(ctx, first, sandbox.Command{Args: []string{"cat", "/workspace/after"}}); err != nil || strings.TrimSpace(string(res.Stdout)) != "after" {
		t.Fatalf("the source lost its own write: %q, %v", res.Stdout, err)
	}

	// A fork's child from the same snapshot, through the node agent: it
	// runs with what was captured and not the later write, and its Kill
	// leaves nothing of it and the snapshot.
	child := contracttest.NewReference()
	info, err := proxy.CreateSeeded(ctx, sandbox.SeededCreateRequest{Create: contracttest.CreateRequest(child, stack.Resources), Owner: ref, Snapshot: captured.Snapshot})
	if err != nil || !info.IsSettledRunning(child) {
		t.Fatalf("CreateSeeded from the Capture's snapshot: %+v, %v", info, err)
	}
	res, err = proxy.RunCommand(ctx, child, sandbox.Command{Args: []string{"sh", "-c", "cat /workspace/marker /home/runtime/d/f; test -e /workspace/after && echo present || echo absent"}})
	if err != nil || res.ExitCode != 0 || string(res.Stdout) != "captured\nhome\nabsent\n" {
		t.Fatalf("RunCommand in the seeded child: %q %q, %v", res.Stdout, res.Stderr, err)
	}
	// The snapshot exported and imported as a seed through the node agent
	// (streams both ways through Core's proxy) seeds a second child; the
	// seed is then discarded.
	var archive bytes.Buffer
	if err := proxy.ExportSnapshot(ctx, ref, captured.Snapshot, &archive); err != nil {
		t.Fatalf("ExportSnapshot: %v", err)
	}
	seedOp := uuid.NewString()
	seed, err := proxy.ImportSnapshot(ctx, sandbox.ImportRequest{Owner: ref, OperationID: seedOp}, &archive)
	if err != nil || seed.ID == "" || seed == captured.Snapshot {
		t.Fatalf("ImportSnapshot: %+v, %v", seed, err)
	}
	grandchild := contracttest.NewReference()
	if info, err := proxy.CreateSeeded(ctx, sandbox.SeededCreateRequest{Create: contracttest.CreateRequest(grandchild, stack.Resources), Owner: ref, Snapshot: seed}); err != nil || !info.IsSettledRunning(grandchild) {
		t.Fatalf("CreateSeeded from the imported seed: %+v, %v", info, err)
	}
	if res, err := proxy.RunCommand(ctx, grandchild, sandbox.Command{Args: []string{"sh", "-c", "cat /workspace/marker /home/runtime/d/f"}}); err != nil || string(res.Stdout) != "captured\nhome\n" {
		t.Fatalf("RunCommand in the child of the imported seed: %q, %v", res.Stdout, err)
	}
	if _, err := proxy.ImportSnapshot(ctx, sandbox.ImportRequest{Owner: ref, OperationID: seedOp, Discard: true}, nil); err != nil {
		t.Fatalf("ImportSnapshot Discard: %v", err)
	}
	if _, err := cli.ContainerInspect(ctx, seed.ID, client.ContainerInspectOptions{}); err == nil {
		t.Fatal("the discarded seed's holder is still there")
	}
	if err := proxy.Kill(ctx, sandbox.KillRequest{Reference: grandchild, CreateSettled: true}); err != nil {
		t.Fatalf("Kill of the second child: %v", err)
	}
	if err := proxy.Kill(ctx, sandbox.KillRequest{Reference: child, CreateSettled: true}); err != nil {
		t.Fatalf("Kill of the child: %v", err)
	}
	if cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", docker.LabelAllocation+"="+child.AllocationID)}); err != nil || len(cs.Items) != 0 {
		t.Fatalf("the child's containers after its Kill: %v, %v", cs, err)
	}
	if _, err := cli.ContainerInspect(ctx, captured.Snapshot.ID, client.ContainerInspectOptions{}); err != nil {
		t.Fatalf("the snapshot after the child's Kill: %v", err)
	}

	if err := proxy.Kill(ctx, sandbox.KillRequest{Reference: ref}); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if cs := containers(true); len(cs) != 0 {
		t.Fatalf("containers of the allocation left: %+v", cs)
	}
	vs, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: client.Filters{}.Add("label", docker.LabelAllocation+"="+ref.AllocationID)})
	if err != nil || len(vs.Items) != 0 {
		t.Fatalf("volumes of the allocation left: %d, %v", len(vs.Items), err)
	}
}
