package nodeagent

import (
	"context"
	"sync"
	"testing"
	"time"

	"berth.dev/sandbox"
	"berth.dev/sandbox/contracttest"
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/docker/dockertest"
	"berth.dev/sandbox/errdefs"
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

func newMeteredAgent(t *testing.T) (*Agent, *overlapMeter) {
	srv := dockertest.Start(t)
	srv.PutImage(fixtureImage)
	cli, err := docker.NewClient(srv.Host())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	p := docker.New(cli, docker.Options{InstallationID: "inst", Config: docker.NodeConfig{Image: fixtureImage, Network: "none"}, Seccomp: []byte(`{}`)})
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
	if _, err := a.GetInfo(ctx, ref); err != context.DeadlineExceeded {
		t.Fatalf("waiting past the deadline: %v", err)
	}
	// Another allocation is not held up by the busy one.
	other, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	if _, err := a.GetInfo(other, contracttest.NewReference()); !errdefs.IsNotFound(err) {
		t.Fatalf("another allocation while one is busy: %v", err)
	}
}

func TestAgentAnswersUnsupportedBeforeTheAdapter(t *testing.T) {
	a, _ := newMeteredAgent(t)
	_, err := a.Suspend(context.Background(), sandbox.SuspendRequest{})
	if !errdefs.IsUnsupported(err) {
		t.Fatalf("Suspend: %v", err)
	}
}
