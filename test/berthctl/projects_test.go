package berthctl

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	adminv1 "berth.dev/proto/berth/admin/v1"

	"berth.dev/core/store/storetest"
	"berth.dev/test/internal/stack"
)

// TestTenantsAndProjectsWithBerthctl is an operator's path through
// tenants and projects against a real Core (no node or engine needed):
// create a tenant and a project in it, list both, rename the project at
// its etag (a stale etag refused with its fixed reason), a project holding
// a Session refused deletion, then the project and the tenant deleted and
// gone. Each step is checked against the admin API.
func TestTenantsAndProjectsWithBerthctl(t *testing.T) {
	core := stack.StartCore(t, storetest.NewDatabase(t), stack.CoreStateDir(t), true)
	cc, ctx := core.AdminClient(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("berth-core log:\n%s", core.Logs())
		}
	})
	api := adminv1.NewProjectServiceClient(cc)
	c := newCtl(t, core.AdminToken(t))
	c.ok("login", "--address", core.AdminAddr(), "--token-file", core.StateDir+"/admin-token")

	r := c.ok("tenant", "create", "team-a")
	tenant := value(t, r.stdout, "NAME")
	if value(t, r.stdout, "DISPLAY NAME") != "team-a" || value(t, r.stdout, "ETAG") != "1" {
		t.Fatalf("tenant create: %v", r)
	}
	got, err := api.GetTenant(ctx, &adminv1.GetTenantRequest{Name: tenant})
	if err != nil || got.GetTenant().GetDisplayName() != "team-a" {
		t.Fatalf("the API's tenant %s: %v, %v", tenant, got, err)
	}
	if row := tableRow(t, c.ok("tenant", "list").stdout, []string{"NAME", "DISPLAY NAME", "CREATED", "ETAG"}, tenant); row[1] != "team-a" {
		t.Fatalf("tenant list row %q", row)
	}
	c.fails(1, "error: exists: ", "tenant", "create", "team-a")

	r = c.ok("project", "create", "--tenant", id(tenant), "app")
	project := value(t, r.stdout, "NAME")
	if !strings.HasPrefix(project, tenant+"/projects/") {
		t.Fatalf("project create: %v", r)
	}
	var listed adminv1.ListProjectsResponse
	c.json(&listed, "project", "list", "--tenant", tenant)
	if len(listed.GetProjects()) != 1 || listed.GetProjects()[0].GetName() != project {
		t.Fatalf("project list -o json: %v", &listed)
	}

	// A project key: its token printed once, on stdout; berthctl logged in
	// with it manages the project's Sessions only, until it is revoked.
	r = c.ok("key", "create", project, "--display-name", "ci")
	key, token := value(t, r.stdout, "NAME"), value(t, r.stdout, "TOKEN")
	if !strings.HasPrefix(key, project+"/keys/") || !strings.HasPrefix(token, "berth-key-v1.") ||
		value(t, r.stdout, "STATE") != "ACTIVE" || !strings.Contains(r.stderr, "shown only now") {
		t.Fatalf("key create: %v", r)
	}
	tokenFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	k := newCtl(t, token)
	if r := k.ok("login", "--address", core.AdminAddr(), "--token-file", tokenFile); !strings.Contains(r.stdout, "with a project key") {
		t.Fatalf("login with a key: %v", r)
	}
	var mine adminv1.ListSessionsResponse
	k.json(&mine, "session", "list")
	if len(mine.GetSessions()) != 0 {
		t.Fatalf("the key lists %v", &mine)
	}
	k.fails(1, "error: project_key_method_denied: project keys may call only Session, Turn and File methods of their own project: use the administrator token\n", "node", "list")
	if row := tableRow(t, c.ok("key", "list", project).stdout, []string{"NAME", "STATE", "CREATED", "EXPIRES", "DISPLAY NAME"}, key); row[1] != "ACTIVE" || row[4] != "ci" {
		t.Fatalf("key list row %q", row)
	}
	if r := c.ok("key", "revoke", key); value(t, r.stdout, "STATE") != "REVOKED" {
		t.Fatalf("key revoke: %v", r)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		r := k.run("session", "list")
		if r.code == 1 && strings.HasPrefix(r.stderr, "error: unauthenticated: invalid project key") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a revoked key still works: %v", r)
		}
	}

	r = c.ok("project", "update", project, "--display-name", "web", "--etag", "1")
	if value(t, r.stdout, "ETAG") != "2" {
		t.Fatalf("project update: %v", r)
	}
	p, err := api.GetProject(ctx, &adminv1.GetProjectRequest{Name: project})
	if err != nil || p.GetProject().GetDisplayName() != "web" {
		t.Fatalf("the API's project after the rename: %v, %v", p, err)
	}
	c.fails(1, "error: etag_mismatch: the etag is stale: read the resource again, then retry\n",
		"project", "update", project, "--display-name", "late", "--etag", "1")

	// A Session of the project (a row as CreateSession leaves it, before
	// any placement) holds the project; the tenant holds its project.
	sess := uuid.New()
	if _, err := core.Store(t).Pool().Exec(context.Background(),
		`INSERT INTO sessions (id, tenant_id, project_id, display_name, request_id) VALUES ($1, $2, $3, 's', $4)`,
		sess, id(tenant), id(project), uuid.New()); err != nil {
		t.Fatal(err)
	}
	c.fails(1, "error: project_has_sessions: the project still has Sessions: delete them, then retry\n",
		"project", "delete", "--tenant", id(tenant), id(project))
	c.fails(1, "error: tenant_has_projects: the tenant still has projects: delete them, then retry\n",
		"tenant", "delete", id(tenant))
	if _, err := core.Store(t).Pool().Exec(context.Background(), `DELETE FROM sessions WHERE id = $1`, sess); err != nil {
		t.Fatal(err)
	}

	c.ok("project", "delete", "--tenant", id(tenant), id(project), "--etag", "2")
	c.ok("tenant", "delete", tenant)
	c.fails(1, "error: not_found: ", "project", "get", project)
	c.fails(1, "error: not_found: ", "tenant", "get", tenant)
	if _, err := api.GetTenant(ctx, &adminv1.GetTenantRequest{Name: tenant}); err == nil {
		t.Fatal("the API still has the deleted tenant")
	}
	if out := c.ok("tenant", "list").stdout; strings.Contains(out, tenant) {
		t.Fatalf("tenant list shows the deleted tenant:\n%s", out)
	}
}
