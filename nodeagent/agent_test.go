package nodeagent

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/docker/dockertest"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providercontract"
)

const fixtureImage = "sha256:4f3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c"

// overlapMeter wraps the real Docker adapter and measures how many GetInfo
// calls per allocation are inside the adapter at once.
type overlapMeter struct {
	*docker.Provider
	mu     sync.Mutex
	inside map[string]int
	max    map[string]int
}

func (m *overlapMeter) GetInfo(ctx context.Context, ref sandbox.Reference) (sandbox.Info, error) {
	m.mu.Lock()
	m.inside[ref.AllocationID]++
	if m.inside[ref.AllocationID] > m.max[ref.AllocationID] {
		m.max[ref.AllocationID] = m.inside[ref.AllocationID]
	}
	m.mu.Unlock()
	defer func() { m.mu.Lock(); m.inside[ref.AllocationID]--; m.mu.Unlock() }()
	time.Sleep(20 * time.Millisecond)
	return m.Provider.GetInfo(ctx, ref)
}

// fixtureProvider is the Docker adapter on a dockertest engine that holds
// the fixture image, for the agent tests that wrap it; it returns the
// engine too, for the calls it saw.
func fixtureProvider(t *testing.T) (*dockertest.Server, *docker.Provider) {
	t.Helper()
	srv := dockertest.Start(t)
	srv.PutImage(fixtureImage)
	cli, err := docker.NewClient(srv.Host())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return srv, docker.New(cli, docker.Options{InstallationID: "inst", Config: docker.NodeConfig{Image: fixtureImage, Network: "none"}, Seccomp: []byte(`{}`)})
}

func newMeteredAgent(t *testing.T) (*Agent, *overlapMeter) {
	_, p := fixtureProvider(t)
	m := &overlapMeter{Provider: p, inside: map[string]int{}, max: map[string]int{}}
	a, err := NewAgent(m)
	if err != nil {
		t.Fatal(err)
	}
	return a, m
}

func TestAgentSerializesEachAllocation(t *testing.T) {
	a, m := newMeteredAgent(t)
	one, two := contracttest.NewReference(), contracttest.NewReference()
	var wg sync.WaitGroup
	for i := range 16 {
		ref := one
		if i%2 == 1 {
			ref = two
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = a.GetInfo(context.Background(), ref)
		}()
	}
	wg.Wait()
	if m.max[one.AllocationID] != 1 || m.max[two.AllocationID] != 1 {
		t.Fatalf("calls on one allocation overlapped: %v", m.max)
	}
	if a.Active() != 0 {
		t.Fatalf("active operations after all returned: %d", a.Active())
	}
}

func TestAgentWaitEndsWithTheCallersDeadline(t *testing.T) {
	a, _ := newMeteredAgent(t)
	ref := contracttest.NewReference()
	release, err := a.acquire(context.Background(), ref.AllocationID)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := a.GetInfo(ctx, ref); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting past the deadline: %v", err)
	}
	// Another allocation is not held up by the busy one.
	other, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	if _, err := a.GetInfo(other, contracttest.NewReference()); !errdefs.IsNotFound(err) {
		t.Fatalf("another allocation while one is busy: %v", err)
	}
}

// withoutCheckpoints is the Docker adapter declaring no checkpoints; it
// counts the Suspend calls that reach it.
type withoutCheckpoints struct {
	*docker.Provider
	suspends int
}

func (w *withoutCheckpoints) ProviderOperations() providercontract.Operations {
	return sandbox.WithoutCheckpoints(docker.Operations(), "test_no_checkpoints")
}

func (w *withoutCheckpoints) Suspend(ctx context.Context, req sandbox.SuspendRequest) (sandbox.SuspendResult, error) {
	w.suspends++
	return w.Provider.Suspend(ctx, req)
}

// TestAgentAnswersUnsupportedBeforeTheAdapter: an operation the backend
// declares unsupported is answered with the typed error from the
// declaration, before the adapter (or the request's validation) is
// reached.
func TestAgentAnswersUnsupportedBeforeTheAdapter(t *testing.T) {
	_, p := fixtureProvider(t)
	w := &withoutCheckpoints{Provider: p}
	a, err := NewAgent(w)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Suspend(context.Background(), sandbox.SuspendRequest{}); !errdefs.IsUnsupported(err) || w.suspends != 0 {
		t.Fatalf("Suspend: %v (%d calls reached the adapter)", err, w.suspends)
	}
}

// gatedCreate holds each Create at a gate and records whether its context
// was cancelled when the gate opened.
type gatedCreate struct {
	*docker.Provider
	gate      chan struct{}
	cancelled chan error
	result    chan error
}

func (g *gatedCreate) Create(ctx context.Context, req sandbox.CreateRequest) (sandbox.Info, error) {
	<-g.gate
	g.cancelled <- ctx.Err()
	info, err := g.Provider.Create(ctx, req)
	g.result <- err
	return info, err
}

// TestCreateOutlivesItsCaller: a caller that goes away (Core killed, the
// connection cut) gets an unknown outcome at once, but the started Create
// runs to its end, and the next GetInfo waits for it and observes the
// settled, running result: nothing is left half done and nothing is
// replayed.
func TestCreateOutlivesItsCaller(t *testing.T) {
	srv, p := fixtureProvider(t)
	g := &gatedCreate{Provider: p, gate: make(chan struct{}), cancelled: make(chan error, 1), result: make(chan error, 1)}
	a, err := NewAgent(g)
	if err != nil {
		t.Fatal(err)
	}
	ref := contracttest.NewReference()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	returned := make(chan error, 1)
	go func() {
		_, err := a.Create(ctx, contracttest.CreateRequest(ref, sandbox.Resources{CPUMillis: 500, MemoryBytes: 256 << 20, DiskBytes: 1 << 30}))
		returned <- err
	}()
	time.Sleep(50 * time.Millisecond) // the Create is at the gate
	cancel()
	select {
	case err := <-returned:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("caller got %v, want its context's error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the caller waited for the mutation after it went away")
	}
	if a.Active() != 1 {
		t.Fatalf("active %d, want the Create still tracked", a.Active())
	}
	// GetInfo waits for the Create, which runs with a live context.
	infoc := make(chan sandbox.Info, 1)
	go func() {
		info, err := a.GetInfo(context.Background(), ref)
		if err != nil {
			t.Error(err)
		}
		infoc <- info
	}()
	close(g.gate)
	if err := <-g.cancelled; err != nil {
		t.Fatalf("the Create ran with a cancelled context: %v", err)
	}
	if err := <-g.result; err != nil {
		t.Fatalf("the Create failed: %v", err)
	}
	info := <-infoc
	if info.State != sandbox.StateRunning || !info.CreateSettled || !info.BootstrapComplete {
		t.Fatalf("GetInfo after the Create: %+v", info)
	}
	creates := 0
	for _, c := range srv.CallNames() {
		if c == dockertest.CallContainerCreate {
			creates++
		}
	}
	if creates != 1 {
		t.Fatalf("%d container creates, want 1", creates)
	}
}

// TestGetInfoBatchAnswersEachTargetInItsTurn: a target whose allocation
// is busy past the call's deadline answers its own context error, before
// the call's deadline, while the others answer; targets of one batch
// never overlap on one allocation.
func TestGetInfoBatchAnswersEachTargetInItsTurn(t *testing.T) {
	a, m := newMeteredAgent(t)
	busy, free, other := contracttest.NewReference(), contracttest.NewReference(), contracttest.NewReference()
	release, err := a.acquire(context.Background(), busy.AllocationID)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	deadline := time.Now().Add(400 * time.Millisecond)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	infos, errs := a.GetInfoBatch(ctx, []sandbox.Reference{free, busy, other})
	if !time.Now().Before(deadline) {
		t.Fatal("the batch answered after its call's deadline")
	}
	if !errors.Is(errs[1], context.DeadlineExceeded) || infos[1] != (sandbox.Info{}) {
		t.Fatalf("busy target: %+v, %v", infos[1], errs[1])
	}
	for _, i := range []int{0, 2} {
		if !errdefs.IsNotFound(errs[i]) {
			t.Fatalf("target %d: %v, want the adapter's not found", i, errs[i])
		}
	}
	if m.max[free.AllocationID] != 1 || m.max[other.AllocationID] != 1 || m.max[busy.AllocationID] != 0 {
		t.Fatalf("adapter reads %v", m.max)
	}
	if a.Active() != 0 {
		t.Fatalf("active operations after the batch: %d", a.Active())
	}
}
