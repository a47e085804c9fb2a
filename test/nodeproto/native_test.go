package nodeproto

import (
	"context"
	"testing"
	"time"

	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"

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
	if err := proxy.Kill(ctx, ref); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if _, err := proxy.GetInfo(ctx, ref); err == nil {
		t.Fatal("GetInfo after Kill found the container")
	}
}
