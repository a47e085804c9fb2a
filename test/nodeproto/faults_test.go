package nodeproto

import (
	"context"
	"slices"
	"testing"
	"time"

	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/docker/dockertest"
	"berth.dev/sandbox/errdefs"

	"berth.dev/test/internal/stack"
)

// TestLostCreateResponse kills the node agent (SIGKILL) right after the
// engine performed the container create, before any answer reached Core.
// Core sees an unknown outcome; the restarted node keeps its identity;
// Core observes the original Reference (the container exists) without any
// Create being resent, and owned cleanup removes everything.
func TestLostCreateResponse(t *testing.T) {
	_, engine, n := startFixtureNode(t)
	cc := n.Dial(t)
	_, proxy := n.Connect(t, cc, 1)
	ref := contracttest.NewReference()
	engine.ResetCalls()
	// The restart below waits for the kill itself, not only for the exit:
	// Kill reads the node's process fields, which Start replaces.
	killed := make(chan struct{})
	engine.Arm(dockertest.CallContainerCreate, dockertest.FaultCancelAfterDispatch, func() {
		go func() { n.Kill(); close(killed) }()
	})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := proxy.Create(ctx, contracttest.CreateRequest(ref, stack.Resources))
	if !errdefs.IsComputeUnconfirmed(err) {
		t.Fatalf("Create with a lost response: %+v, %v; want an unknown outcome", info, err)
	}
	if info.CreateSettled || info.BootstrapComplete {
		t.Fatalf("a lost Create claimed settlement: %+v", info)
	}
	<-killed

	n.Start()
	cc2 := n.Dial(t)
	_, proxy2 := n.Connect(t, cc2, 1)
	observed, err := proxy2.GetInfo(ctx, ref)
	if err != nil || observed.Reference != ref || observed.ProviderID == "" || observed.State != sandbox.StateCreated {
		t.Fatalf("after restart, GetInfo = %+v, %v; want the original, never-started container", observed, err)
	}
	if observed.CreateSettled {
		t.Fatalf("a never-started container claimed settled creation: %+v", observed)
	}
	if err := proxy2.Kill(ctx, sandbox.KillRequest{Reference: ref}); err != nil {
		t.Fatalf("owned cleanup after a lost Create: %v", err)
	}
	calls := adapterCalls(engine)
	if n := count(calls, dockertest.CallContainerCreate); n != 1 {
		t.Errorf("container create sent %d times: %v", n, calls)
	}
	if n := count(calls, dockertest.CallContainerStart); n != 0 {
		t.Errorf("the lost Create was continued: %v", calls)
	}
	if c, v := len(engine.Containers()), len(engine.Volumes()); c+v != 0 {
		t.Errorf("left behind: %d containers, %d volumes", c, v)
	}
}

// TestCutConnectionMidCall cuts Core's side mid-call (its context ends
// after the engine performed the call): the outcome is unknown, and the
// next call on a fresh connection observes without resending.
func TestCutConnectionMidCall(t *testing.T) {
	_, engine, n := startFixtureNode(t)
	cc := n.Dial(t)
	conn, proxy := n.Connect(t, cc, 1)
	ref := contracttest.NewReference()
	ctx := context.Background()
	if _, err := proxy.Create(ctx, contracttest.CreateRequest(ref, stack.Resources)); err != nil {
		t.Fatal(err)
	}
	engine.ResetCalls()
	callCtx, cancel := context.WithCancel(ctx)
	engine.Arm(dockertest.CallContainerRemove, dockertest.FaultCancelAfterDispatch, func() { cancel(); cc.Close() })
	if err := proxy.Kill(callCtx, sandbox.KillRequest{Reference: ref}); !errdefs.IsComputeUnconfirmed(err) {
		t.Fatalf("Kill cut mid-call: %v", err)
	}
	conn.Close()
	_, proxy2 := n.Connect(t, n.Dial(t), 1)
	if _, err := proxy2.GetInfo(ctx, ref); !errdefs.IsNotFound(err) {
		t.Fatalf("after the cut, the container the engine removed: %v", err)
	}
	if err := proxy2.Kill(ctx, sandbox.KillRequest{Reference: ref}); err != nil {
		t.Fatalf("finishing cleanup: %v", err)
	}
	if got := count(adapterCalls(engine), dockertest.CallContainerRemove); got != 1 {
		t.Errorf("container remove sent %d times", got)
	}
}

func count(list []string, name string) int {
	return len(slices.DeleteFunc(slices.Clone(list), func(s string) bool { return s != name }))
}
