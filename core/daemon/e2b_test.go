package daemon

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/structpb"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox"
	"berth.dev/sandbox/e2b/e2btest"
)

// TestE2BDeploymentThroughTheFixture: berth-core built with the default
// provider registry commits an E2B deployment pointed at the loopback E2B
// fixture (the real adapter over HTTP), builds and probes it, places a
// Session on the direct lane, and the lane's worker creates one sandbox
// at the fixture carrying the allocation's berth_* metadata; deleting the
// Session leaves the fixture with none, and no log line of Core carries
// the API key.
func TestE2BDeploymentThroughTheFixture(t *testing.T) {
	f := e2btest.Start(t)
	cfg := testConfig(t)
	cfg.ProcessPaths = sandbox.ProcessPaths{Root: "/usr/lib/berth", State: filepath.Join(t.TempDir(), "providers")}
	cfg.LifecycleInterval = 50 * time.Millisecond
	cfg.LeaseTTL = 0
	logs := &lockedBuffer{}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	s := startLogging(t, ctx, cfg, logs)
	actx, conn := adminConn(t, ctx, cfg, s)
	deployments := adminv1.NewDeploymentServiceClient(conn)
	sessions := adminv1.NewSessionServiceClient(conn)

	pub, err := structpb.NewStruct(map[string]any{"api_url": f.URL, "sandbox_url": f.URL, "template": e2btest.Template})
	if err != nil {
		t.Fatal(err)
	}
	cred, err := structpb.NewStruct(map[string]any{"api_key": f.Key})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := deployments.CommitDeployment(actx, &adminv1.CommitDeploymentRequest{Candidate: &adminv1.DeploymentCandidate{
		ProviderKind: "e2b", Configuration: pub, Credential: cred,
		Specification: &adminv1.Specification{CpuMillis: 500, MemoryBytes: 256 << 20, DiskBytes: 1 << 30, MaxActive: 4, MaxRetained: 4,
			Suspension: &adminv1.SuspensionPolicy{Disabled: true}},
	}}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the E2B generation is ready", func() bool {
		r, err := deployments.GetDeployment(actx, &adminv1.GetDeploymentRequest{Name: "deployment"})
		if err != nil {
			t.Fatal(err)
		}
		g := r.GetDeployment().GetDirectGenerations()
		return len(g) == 1 && g[0].GetReady()
	})
	r, err := sessions.CreateSession(actx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString()})
	if err != nil {
		t.Fatal(err)
	}
	alloc := strings.TrimPrefix(r.GetSession().GetAllocation(), "allocations/")
	waitUntil(t, "the fixture holds the Session's sandbox", func() bool {
		sbs := f.Sandboxes()
		return len(sbs) == 1 && sbs[0].Metadata["berth_allocation"] == alloc
	})
	waitUntil(t, "the allocation runs", func() bool {
		a, err := adminv1.NewAllocationServiceClient(conn).GetAllocation(actx, &adminv1.GetAllocationRequest{Name: r.GetSession().GetAllocation()})
		if err != nil {
			t.Fatal(err)
		}
		return a.GetAllocation().GetState() == adminv1.Allocation_STATE_ACTIVE
	})
	if _, err := sessions.DeleteSession(actx, &adminv1.DeleteSessionRequest{Name: r.GetSession().GetName()}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the fixture holds nothing", func() bool { return len(f.Sandboxes()) == 0 })
	cancel()
	if err := s.wait(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if strings.Contains(logs.String(), f.Key) {
		t.Fatal("a log line of Core carries the API key")
	}
	if !strings.Contains(logs.String(), "serving") {
		t.Fatal("no log captured")
	}
}

// lockedBuffer is a log sink several goroutines write to.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
