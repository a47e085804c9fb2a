package daemon

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/structpb"

	"berth.dev/core/internal/memdirect"
	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox"
	"berth.dev/sandbox/providers"
)

const (
	directTestKey  = "e2b_daemondirectkey0123456789abcdef01"
	directTestKey2 = "e2b_daemondirectkeytwo0123456789abcd"
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

// TestDirectDeploymentServesSessions: a Core whose registry holds a
// direct provider commits it through the admin API, builds and probes it
// (GetDeployment's direct_generations says ready, the serving pin moves
// to it), places a Session on the direct lane (no node), and the lane's
// worker creates its sandbox at the vendor; the key is replaced through
// ReplaceDeployment and the old one revoked, and deleting the Session
// still leaves the vendor holding nothing. No node agent exists.
func TestDirectDeploymentServesSessions(t *testing.T) {
	v := memdirect.NewVendor()
	v.AddKey(directTestKey, "team-a")
	v.AddKey(directTestKey2, "team-a")
	reg, err := providers.NewRegistry(memdirect.Registration(v))
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	cfg.Providers = reg
	cfg.ProcessPaths = sandbox.ProcessPaths{Root: "/usr/lib/berth", State: filepath.Join(t.TempDir(), "providers")}
	cfg.LifecycleInterval = 50 * time.Millisecond
	cfg.LeaseTTL = 0
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	s := start(t, ctx, cfg)
	actx, conn := adminConn(t, ctx, cfg, s)
	deployments := adminv1.NewDeploymentServiceClient(conn)
	sessions := adminv1.NewSessionServiceClient(conn)

	pub, err := structpb.NewStruct(map[string]any{"template": "berth-runtime"})
	if err != nil {
		t.Fatal(err)
	}
	cred, err := structpb.NewStruct(map[string]any{"api_key": directTestKey})
	if err != nil {
		t.Fatal(err)
	}
	_, err = deployments.CommitDeployment(actx, &adminv1.CommitDeploymentRequest{Candidate: &adminv1.DeploymentCandidate{
		ProviderKind: memdirect.Kind, Configuration: pub, Credential: cred,
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
	waitUntil(t, "the vendor holds the Session's sandbox", func() bool { return v.Len() == 1 })
	sb := v.Sandboxes()[0]
	if sb.Metadata[memdirect.MetaAllocation] != strings.TrimPrefix(r.GetSession().GetAllocation(), "allocations/") {
		t.Fatalf("the sandbox's metadata %v names another allocation than %s", sb.Metadata, r.GetSession().GetAllocation())
	}

	// The key is replaced through the admin API (inside the direct lane's
	// drain gate), and the old key revoked at the vendor: the Session's
	// deletion still reaches its sandbox, with the new key.
	newKey, err := structpb.NewStruct(map[string]any{"api_key": directTestKey2})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := deployments.ReplaceDeployment(actx, &adminv1.ReplaceDeploymentRequest{
		Candidate:  &adminv1.DeploymentCandidate{ProviderKind: memdirect.Kind, Credential: newKey},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"provider_kind", "credential"}}, ExpectedGeneration: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.GetChanged() || rep.GetDeployment().GetGeneration() != 2 {
		t.Fatalf("key replacement: %v", rep)
	}
	v.RemoveKey(directTestKey)

	if _, err := sessions.DeleteSession(actx, &adminv1.DeleteSessionRequest{Name: r.GetSession().GetName()}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the vendor holds nothing", func() bool { return v.Len() == 0 })
	cancel()
	if err := s.wait(t); err != nil {
		t.Fatalf("Run: %v", err)
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
