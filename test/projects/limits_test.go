package projects

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	adminv1 "berth.dev/proto/berth/admin/v1"

	"berth.dev/test/internal/stack"
)

// TestLimitsHoldUnderConcurrentCreates is issue 31's "limits hold under 50
// concurrent creates across projects", with the real binaries and the
// real engine: project A's creates go through the administrator token
// (Session.project names A), B's and C's through each project's own key
// (no project named: the key's), so both credentials' admissions race. One node holds at most 11 Sandboxes; project A may hold 2
// (21 creates), B 3 (21 creates), C has no limit (8 creates). So the node
// fills (2 + 3 + 8 > 11), and B and C are served whatever the order (B
// gets at least 11 - 2 - 8 = 1).
//
// It checks that no project holds more than its limit (the creates'
// answers, the API's usage and the engine's containers agree), that every
// refusal is exactly FAILED_PRECONDITION project_active_limit of a project
// that ended at its limit or no_ready_node_with_capacity with the node
// full, and that after every Session is deleted the engine holds none of
// the installation's containers and every project's usage is zero.
func TestLimitsHoldUnderConcurrentCreates(t *testing.T) {
	began := time.Now()
	const capacity = 11
	spec := &adminv1.Specification{CpuMillis: 100, MemoryBytes: 128 << 20, DiskBytes: 1 << 30, MaxActive: capacity, MaxRetained: 1}
	cl := stack.OneNodeCluster(t, spec, stack.CoreOptions{}, stack.NodeOptions{})
	ctx, cc := cl.Ctx, cl.CC
	projectsAPI := adminv1.NewProjectServiceClient(cc)
	sessionsAPI := adminv1.NewSessionServiceClient(cc)

	ten, err := projectsAPI.CreateTenant(ctx, &adminv1.CreateTenantRequest{RequestId: uuid.NewString(), Tenant: &adminv1.Tenant{DisplayName: "limits"}})
	if err != nil {
		t.Fatal(err)
	}
	type project struct {
		name     string
		limit    *int32 // nil: none
		attempts int
		// ctx carries the credential its creates use; named: they name the
		// project (the administrator's), else the key's own.
		ctx   context.Context
		named bool
	}
	projects := []*project{{limit: proto.Int32(2), attempts: 21}, {limit: proto.Int32(3), attempts: 21}, {attempts: 8}}
	for i, p := range projects {
		resp, err := projectsAPI.CreateProject(ctx, &adminv1.CreateProjectRequest{
			Parent: ten.GetTenant().GetName(), RequestId: uuid.NewString(),
			Project: &adminv1.Project{DisplayName: string(rune('a' + i)), Limits: &adminv1.ProjectLimits{MaxActiveSessions: p.limit}},
		})
		if err != nil {
			t.Fatal(err)
		}
		p.name = resp.GetProject().GetName()
		if i == 0 {
			p.ctx, p.named = ctx, true
			continue
		}
		k, err := projectsAPI.CreateProjectKey(ctx, &adminv1.CreateProjectKeyRequest{
			Parent: p.name, RequestId: uuid.NewString(), Key: &adminv1.ProjectKey{DisplayName: "burst"},
		})
		if err != nil {
			t.Fatal(err)
		}
		p.ctx = metadata.NewOutgoingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+k.GetToken()))
	}

	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		created = map[string][]string{} // project -> Sessions
		refused = map[string][]string{} // project -> reasons
		other   []error
	)
	start := make(chan struct{})
	for _, p := range projects {
		for range p.attempts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				session := &adminv1.Session{DisplayName: "burst"}
				if p.named {
					session.Project = p.name
				}
				resp, err := sessionsAPI.CreateSession(p.ctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString(), Session: session})
				if err == nil && resp.GetSession().GetProject() != p.name {
					err = fmt.Errorf("created in %q, want %q", resp.GetSession().GetProject(), p.name)
				}
				mu.Lock()
				defer mu.Unlock()
				switch reason := stack.AdminReason(err); {
				case err == nil:
					created[p.name] = append(created[p.name], resp.GetSession().GetName())
				case reason == "project_active_limit" || reason == "no_ready_node_with_capacity":
					refused[p.name] = append(refused[p.name], reason)
				default:
					other = append(other, err)
				}
			}()
		}
	}
	burst := time.Now()
	close(start)
	wg.Wait()
	t.Logf("50 concurrent creates answered in %v", time.Since(burst))
	if len(other) != 0 {
		t.Fatalf("creates failed otherwise: %v", other)
	}
	total := 0
	for _, p := range projects {
		total += len(created[p.name])
	}
	if total != capacity {
		t.Errorf("%d Sessions created, want the node's %d", total, capacity)
	}
	for i, p := range projects {
		got := len(created[p.name])
		if p.limit != nil && got > int(*p.limit) {
			t.Errorf("project %d holds %d, over its limit %d", i, got, *p.limit)
		}
		if got+len(refused[p.name]) != p.attempts {
			t.Errorf("project %d: %d created and %d refused of %d", i, got, len(refused[p.name]), p.attempts)
		}
		for _, reason := range refused[p.name] {
			switch {
			case reason == "project_active_limit" && (p.limit == nil || got != int(*p.limit)):
				t.Errorf("project %d refused project_active_limit holding %d (limit %v)", i, got, p.limit)
			case reason == "no_ready_node_with_capacity" && total != capacity:
				t.Errorf("project %d refused no_ready_node_with_capacity with %d of %d held", i, total, capacity)
			}
		}
		if i > 0 && got == 0 {
			t.Errorf("project %d was not served", i)
		}
		usage := getUsage(t, projectsAPI, cl, p.name)
		if usage.GetHeld() != int64(got) || usage.GetRetained() != 0 {
			t.Errorf("project %d: usage %v, created %d", i, usage, got)
		}
		reasons := map[string]int{}
		for _, r := range refused[p.name] {
			reasons[r]++
		}
		limit := "none"
		if p.limit != nil {
			limit = fmt.Sprint(*p.limit)
		}
		t.Logf("project %d (limit %s, %d creates): %d created, refused %v", i, limit, p.attempts, got, reasons)
	}

	// The engine holds what was created: one container per Session.
	stack.WaitFor(t, 60*time.Second, "one container per created Session", func() bool {
		containers, _ := stack.Owned(t, cl.Engine, cl.Installation)
		return containers == total
	})

	for _, p := range projects {
		for _, name := range created[p.name] {
			if _, err := sessionsAPI.DeleteSession(ctx, &adminv1.DeleteSessionRequest{Name: name}); err != nil {
				t.Fatalf("DeleteSession %s: %v", name, err)
			}
		}
	}
	stack.WaitFor(t, 90*time.Second, "every Session DELETED, the engine empty and every usage zero", func() bool {
		for _, p := range projects {
			for _, name := range created[p.name] {
				got, err := sessionsAPI.GetSession(ctx, &adminv1.GetSessionRequest{Name: name})
				if err != nil {
					t.Fatalf("GetSession %s: %v", name, err)
				}
				if got.GetSession().GetState() != adminv1.Session_STATE_DELETED {
					return false
				}
			}
			if getUsage(t, projectsAPI, cl, p.name).GetHeld() != 0 {
				return false
			}
		}
		containers, volumes := stack.Owned(t, cl.Engine, cl.Installation)
		return containers+volumes == 0
	})
	t.Logf("the whole case took %v", time.Since(began))
}

// getUsage reads a project's usage through the admin API.
func getUsage(t *testing.T, api adminv1.ProjectServiceClient, cl *stack.Cluster, name string) *adminv1.ProjectUsage {
	t.Helper()
	resp, err := api.GetProject(cl.Ctx, &adminv1.GetProjectRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetProject().GetUsage()
}
