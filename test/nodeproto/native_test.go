package nodeproto

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/client"

	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/docker"

	"berth.dev/test/internal/stack"
)

// TestRoundTripOnTheRealEngine: Core's proxy -> node agent -> Docker
// adapter -> the real engine: create, commands, observe, kill.
func TestRoundTripOnTheRealEngine(t *testing.T) {
	_, n, _ := stack.EngineNode(t)
	_, proxy := n.Connect(t, n.Dial(t), 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ref := contracttest.NewReference()
	info, err := proxy.Create(ctx, contracttest.CreateRequest(ref, stack.Resources))
	if err != nil || !info.IsSettledRunning(ref) {
		t.Fatalf("Create: %+v, %v", info, err)
	}
	res, err := proxy.RunCommand(ctx, ref, sandbox.Command{
		Args:  []string{"sh", "-c", "cat; echo; id -u; echo err >&2; exit 3"},
		Stdin: []byte("secret-stdin"),
	})
	if err != nil || string(res.Stdout) != "secret-stdin\n1000\n" || string(res.Stderr) != "err\n" || res.ExitCode != 3 {
		t.Fatalf("RunCommand = %q %q %d, %v", res.Stdout, res.Stderr, res.ExitCode, err)
	}
	big, err := proxy.RunCommand(ctx, ref, sandbox.Command{
		Args: []string{"sh", "-c", "dd if=/dev/zero bs=1048576 count=6 2>/dev/null"}, OutputLimit: 5 << 20,
	})
	if err != nil || len(big.Stdout) != 5<<20 || !big.StdoutTruncated {
		t.Fatalf("large output through the node: %d bytes, truncated %v, %v", len(big.Stdout), big.StdoutTruncated, err)
	}
	obs, err := proxy.Observe(ctx, ref)
	if err != nil || obs.MemoryBytes == 0 {
		t.Fatalf("Observe: %+v, %v", obs, err)
	}
	if err := proxy.Kill(ctx, sandbox.KillRequest{Reference: ref}); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if _, err := proxy.GetInfo(ctx, ref); err == nil {
		t.Fatal("GetInfo after Kill found the container")
	}
}

// TestCheckpointsOnTheRealEngine: the checkpoint operations through Core's
// proxy -> node agent -> Docker adapter -> the real engine: a Session
// with files in its workspace and home is suspended (the first
// incarnation gone), observed again under the same operation, resumed
// into the next incarnation with a fresh bootstrap, where the files are
// back and commands run, then the snapshot and the incarnation are
// removed exactly.
func TestCheckpointsOnTheRealEngine(t *testing.T) {
	_, n, cli := stack.EngineNode(t)
	_, proxy := n.Connect(t, n.Dial(t), 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ref := contracttest.NewReference()
	if info, err := proxy.Create(ctx, contracttest.CreateRequest(ref, stack.Resources)); err != nil || !info.IsSettledRunning(ref) {
		t.Fatalf("Create: %+v, %v", info, err)
	}
	const write = "echo checkpointed > /workspace/marker && mkdir -p /home/runtime/d && echo home > /home/runtime/d/f && chmod 600 /home/runtime/d/f"
	if res, err := proxy.RunCommand(ctx, ref, sandbox.Command{Args: []string{"sh", "-c", write}}); err != nil || res.ExitCode != 0 {
		t.Fatalf("write: %+v, %v", res, err)
	}
	first, err := proxy.Initial(ref)
	if err != nil {
		t.Fatal(err)
	}
	op := uuid.NewString()
	suspended, err := proxy.Suspend(ctx, sandbox.SuspendRequest{Compute: first, OperationID: op})
	if err != nil || suspended.Source.State != sandbox.ComputeAbsent || suspended.Snapshot.ID == "" || suspended.Snapshot.Provenance == "" {
		t.Fatalf("Suspend: %+v, %v", suspended, err)
	}
	if gi, err := proxy.GetCompute(ctx, first); err != nil || gi.State != sandbox.ComputeAbsent {
		t.Fatalf("GetCompute of the suspended source: %+v, %v", gi, err)
	}
	if again, err := proxy.Suspend(ctx, sandbox.SuspendRequest{Compute: first, OperationID: op, ObserveOnly: true}); err != nil || again.Snapshot != suspended.Snapshot {
		t.Fatalf("Suspend ObserveOnly: %+v, %v; want %+v", again, err, suspended.Snapshot)
	}
	second, err := proxy.NewCompute(first)
	if err != nil || second.Generation != 2 {
		t.Fatalf("NewCompute: %+v, %v", second, err)
	}
	resumed, err := proxy.Resume(ctx, sandbox.ResumeRequest{
		Snapshot: suspended.Snapshot, Target: second, OperationID: uuid.NewString(),
		Resources: stack.Resources, Bootstrap: contracttest.CreateRequest(ref, stack.Resources).Bootstrap,
	})
	if err != nil || resumed.Compute.State != sandbox.ComputeRunning || resumed.Compute.Compute.ID == "" {
		t.Fatalf("Resume: %+v, %v", resumed, err)
	}
	second = resumed.Compute.Compute
	res, err := proxy.RunCommandCompute(ctx, second, sandbox.Command{Args: []string{"sh", "-c", "cat /workspace/marker /home/runtime/d/f; ls -ln /home/runtime/d/f"}})
	if err != nil || res.ExitCode != 0 || !strings.HasPrefix(string(res.Stdout), "checkpointed\nhome\n-rw-------    1 1000     1000") {
		t.Fatalf("RunCommandCompute in the resumed incarnation: %q %q, %v", res.Stdout, res.Stderr, err)
	}
	if err := proxy.DeleteSnapshot(ctx, ref, suspended.Snapshot); err != nil {
		t.Fatalf("DeleteSnapshot: %v", err)
	}
	if err := proxy.KillCompute(ctx, second); err != nil {
		t.Fatalf("KillCompute: %v", err)
	}
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", docker.LabelAllocation+"="+ref.AllocationID)})
	if err != nil || len(cs.Items) != 0 {
		t.Fatalf("containers of the allocation left: %d, %v", len(cs.Items), err)
	}
	vs, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: client.Filters{}.Add("label", docker.LabelAllocation+"="+ref.AllocationID)})
	if err != nil || len(vs.Items) != 0 {
		t.Fatalf("volumes of the allocation left: %d, %v", len(vs.Items), err)
	}
}
