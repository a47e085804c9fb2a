package daemon

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/structpb"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox"
	"berth.dev/sandbox/e2b"
	"berth.dev/sandbox/e2b/e2btest"
)

// adminConn dials s's admin API with the admin token Core wrote into
// cfg's state directory.
func adminConn(t *testing.T, ctx context.Context, cfg Config, s *started) (context.Context, *grpc.ClientConn) {
	t.Helper()
	token, err := os.ReadFile(filepath.Join(cfg.StateDir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(s.ready.AdminAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+strings.TrimSpace(string(token))), conn
}

// TestDirectDeploymentServesSessions: berth-core built with the default
// provider registry commits an E2B deployment pointed at the loopback E2B
// fixture through the admin API, builds and probes the real adapter
// (GetDeployment's direct_generations says ready, the serving pin moves
// to it), places a Session on the direct lane (no node), and the lane's
// worker creates one sandbox at the fixture carrying the allocation's
// berth_* metadata and runs it; the key is replaced through
// ReplaceDeployment with another key of the same team and the old one
// revoked, and deleting the Session still leaves the fixture holding
// nothing. No node agent exists, and no log line of Core carries either
// key.
func TestDirectDeploymentServesSessions(t *testing.T) {
	f := e2btest.Start(t)
	key2 := f.AddKey("team-a")
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
	_, err = deployments.CommitDeployment(actx, &adminv1.CommitDeploymentRequest{Candidate: &adminv1.DeploymentCandidate{
		ProviderKind: e2b.Kind, Configuration: pub, Credential: cred,
		Specification: &adminv1.Specification{CpuMillis: 500, MemoryBytes: 256 << 20, DiskBytes: 1 << 30, MaxActive: 4, MaxRetained: 4,
			Suspension: &adminv1.SuspensionPolicy{Disabled: true}},
	}})
	if err != nil {
		t.Fatal(err)
	}

	var d *adminv1.Deployment
	waitUntil(t, "the direct generation is ready and served", func() bool {
		r, err := deployments.GetDeployment(actx, &adminv1.GetDeploymentRequest{Name: "deployment"})
		if err != nil {
			t.Fatal(err)
		}
		d = r.GetDeployment()
		g := d.GetDirectGenerations()
		return len(g) == 1 && g[0].GetGeneration() == 1 && g[0].GetReady() && d.GetServingGeneration() == 1
	})
	if len(d.GetNodes()) != 0 {
		t.Fatalf("nodes %v", d.GetNodes())
	}

	r, err := sessions.CreateSession(actx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString()})
	if err != nil {
		t.Fatal(err)
	}
	if r.GetSession().GetNode() != "" {
		t.Fatalf("a direct Session names node %q", r.GetSession().GetNode())
	}
	alloc := strings.TrimPrefix(r.GetSession().GetAllocation(), "allocations/")
	waitUntil(t, "the fixture holds the Session's sandbox", func() bool {
		sbs := f.Sandboxes()
		return len(sbs) == 1 && sbs[0].Metadata[e2b.MetaAllocation] == alloc
	})
	waitUntil(t, "the allocation runs", func() bool {
		a, err := adminv1.NewAllocationServiceClient(conn).GetAllocation(actx, &adminv1.GetAllocationRequest{Name: r.GetSession().GetAllocation()})
		if err != nil {
			t.Fatal(err)
		}
		return a.GetAllocation().GetState() == adminv1.Allocation_STATE_ACTIVE
	})

	// The key is replaced through the admin API (inside the direct lane's
	// drain gate), and the old key revoked at E2B: the Session's deletion
	// still reaches its sandbox, with the new key.
	newKey, err := structpb.NewStruct(map[string]any{"api_key": key2})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := deployments.ReplaceDeployment(actx, &adminv1.ReplaceDeploymentRequest{
		Candidate:  &adminv1.DeploymentCandidate{ProviderKind: e2b.Kind, Credential: newKey},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"provider_kind", "credential"}}, ExpectedGeneration: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.GetChanged() || rep.GetDeployment().GetGeneration() != 2 {
		t.Fatalf("key replacement: %v", rep)
	}
	f.RevokeKey(f.Key)

	if _, err := sessions.DeleteSession(actx, &adminv1.DeleteSessionRequest{Name: r.GetSession().GetName()}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the fixture holds nothing", func() bool { return len(f.Sandboxes()) == 0 })
	cancel()
	if err := s.wait(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, key := range []string{f.Key, key2} {
		if strings.Contains(logs.String(), key) {
			t.Fatal("a log line of Core carries an API key")
		}
	}
	if !strings.Contains(logs.String(), "serving") {
		t.Fatal("no log captured")
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(50 * time.Millisecond)
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
