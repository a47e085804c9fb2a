package store_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
	"berth.dev/sandbox/errdefs"
)

// newProject creates a tenant and its project "p" and returns both ids.
func newProject(t *testing.T, ctx context.Context, st *storetest.Owned) (tenant, project uuid.UUID) {
	t.Helper()
	ten, created, err := st.CreateTenant(ctx, newUUID(t), newUUID(t), "t-"+newUUID(t).String()[:8])
	must(t, err)
	if !created {
		t.Fatal("tenant not created")
	}
	p, created, err := st.CreateProject(ctx, newUUID(t), newUUID(t), ten.ID, "p")
	must(t, err)
	if !created || p.TenantID != ten.ID {
		t.Fatalf("project %+v created=%v", p, created)
	}
	return ten.ID, p.ID
}

// inProject is sessionParams in project of tenant.
func inProject(t *testing.T, tenant, project uuid.UUID) store.CreateSessionParams {
	p := sessionParams(t, 50)
	p.TenantID, p.ProjectID = tenant, project
	return p
}

// TestMigration0022BackfillsProjects: on a database at 0021 holding
// Sessions of the default tenant and of two other tenant ids, 0022 puts
// the default tenant's Sessions in the project …0002 and the others each
// in their own tenant's project "default", and changes no tenant_id.
func TestMigration0022BackfillsProjects(t *testing.T) {
	ctx := migrationContext(t)
	dsn := storetest.NewDatabase(t)
	mig := gooseOn(t, dsn, "migrations")
	if _, err := mig.UpTo(ctx, 21); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	must(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })

	other1, other2 := newUUID(t), newUUID(t)
	tenants := map[uuid.UUID]uuid.UUID{} // session -> tenant
	for _, tenant := range []uuid.UUID{store.DefaultTenantID, store.DefaultTenantID, other1, other2, other2} {
		sess := newUUID(t)
		tenants[sess] = tenant
		_, err := conn.Exec(ctx, `INSERT INTO sessions (id, tenant_id, display_name, request_id) VALUES ($1, $2, 's', $3)`,
			sess, tenant, newUUID(t))
		must(t, err)
		_, err = conn.Exec(ctx, `INSERT INTO environments (id, session_id, tenant_id) VALUES ($1, $2, $3)`,
			newUUID(t), sess, tenant)
		must(t, err)
	}
	if _, err := mig.Up(ctx); err != nil {
		t.Fatal(err)
	}

	rows, err := conn.Query(ctx, `
		SELECT s.id, s.tenant_id, e.tenant_id, p.id, p.tenant_id, p.display_name, t.display_name
		FROM sessions s JOIN environments e ON e.session_id = s.id
		JOIN projects p ON p.id = s.project_id JOIN tenants t ON t.id = p.tenant_id`)
	must(t, err)
	type row struct {
		sess, sessTenant, envTenant, project, projectTenant uuid.UUID
		projectName, tenantName                             string
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		err := r.Scan(&x.sess, &x.sessTenant, &x.envTenant, &x.project, &x.projectTenant, &x.projectName, &x.tenantName)
		return x, err
	})
	must(t, err)
	if len(got) != len(tenants) {
		t.Fatalf("%d Sessions in a project, want %d", len(got), len(tenants))
	}
	projectOf := map[uuid.UUID]uuid.UUID{}
	for _, r := range got {
		want := tenants[r.sess]
		switch {
		case r.sessTenant != want || r.envTenant != want:
			t.Errorf("Session %s: tenant_id %s, Environment's %s, want %s unchanged", r.sess, r.sessTenant, r.envTenant, want)
		case r.projectTenant != want || r.projectName != "default":
			t.Errorf("Session %s in project %s %q of tenant %s", r.sess, r.project, r.projectName, r.projectTenant)
		case want == store.DefaultTenantID && (r.project != store.DefaultProjectID || r.tenantName != "default"):
			t.Errorf("default tenant's Session %s in project %s of tenant %q", r.sess, r.project, r.tenantName)
		case want != store.DefaultTenantID && r.tenantName != "tenant-"+want.String():
			t.Errorf("tenant %s named %q", want, r.tenantName)
		}
		if p, ok := projectOf[want]; ok && p != r.project {
			t.Errorf("tenant %s's Sessions in two projects", want)
		}
		projectOf[want] = r.project
	}
	if len(projectOf) != 3 {
		t.Errorf("projects %v, want one per tenant", projectOf)
	}
	var n int
	must(t, conn.QueryRow(ctx, `SELECT count(*) FROM projects`).Scan(&n))
	if n != 3 {
		t.Errorf("%d projects, want 3", n)
	}
}

// TestSessionProjectMustBeOfItsTenant: CreateSession refuses a project of
// another tenant (and a missing one) and writes nothing; under the store,
// the composite foreign key refuses such a row too.
func TestSessionProjectMustBeOfItsTenant(t *testing.T) {
	st, ctx := ownedStore(t)
	presentNode(t, ctx, st)
	_, project := newProject(t, ctx, st)

	wrong := inProject(t, store.DefaultTenantID, project)
	_, err := st.CreateSession(ctx, wrong)
	wantClass(t, err, store.ErrProjectNotFound)
	missing := inProject(t, store.DefaultTenantID, newUUID(t))
	_, err = st.CreateSession(ctx, missing)
	wantClass(t, err, errdefs.ErrNotFound)
	for _, id := range []uuid.UUID{wrong.SessionID, missing.SessionID} {
		_, err := st.GetSession(ctx, id)
		wantClass(t, err, errdefs.ErrNotFound)
	}

	_, err = st.Pool().Exec(ctx, `INSERT INTO sessions (id, tenant_id, project_id, display_name, request_id)
		VALUES ($1, $2, $3, 's', $4)`, newUUID(t), store.DefaultTenantID, project, newUUID(t))
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23503" || pgErr.ConstraintName != "sessions_project_tenant_fkey" {
		t.Fatalf("insert with another tenant's project: %v, want sessions_project_tenant_fkey violated", err)
	}
}

// TestRequestIDsAreScoped: the same request id in two projects makes two
// Sessions, and the same Turn request id in two Sessions makes two Turns;
// within one project (one Session) it is still a retry.
func TestRequestIDsAreScoped(t *testing.T) {
	st, ctx := ownedStore(t)
	presentNode(t, ctx, st)
	tenant, project := newProject(t, ctx, st)

	a := sessionParams(t, 50)
	b := inProject(t, tenant, project)
	b.RequestID = a.RequestID
	var bundles []store.SessionBundle
	for _, p := range []store.CreateSessionParams{a, b} {
		got, err := st.CreateSession(ctx, p)
		must(t, err)
		if !got.Created || got.Session.ID != p.SessionID || got.Session.ProjectID != p.ProjectID || got.Session.TenantID != p.TenantID {
			t.Fatalf("create in %s: %+v", p.ProjectID, got.Session)
		}
		bundles = append(bundles, got)
	}
	retry := inProject(t, tenant, project)
	retry.RequestID = a.RequestID
	again, err := st.CreateSession(ctx, retry)
	must(t, err)
	if again.Created || again.Session.ID != b.SessionID {
		t.Fatalf("retry in the second project: %+v", again.Session)
	}

	ta := turnParams(t, bundles[0].Session.ID, "echo")
	tb := turnParams(t, bundles[1].Session.ID, "echo")
	tb.RequestID = ta.RequestID
	for _, p := range []store.SubmitTurnParams{ta, tb} {
		got, created, err := st.SubmitTurn(ctx, p)
		must(t, err)
		if !created || got.ID != p.ID || got.SessionID != p.SessionID {
			t.Fatalf("submit in %s: %+v created=%v", p.SessionID, got, created)
		}
	}
	retryTurn := tb
	retryTurn.ID = newUUID(t)
	got, created, err := st.SubmitTurn(ctx, retryTurn)
	must(t, err)
	if created || got.ID != tb.ID {
		t.Fatalf("Turn retry: %+v created=%v", got, created)
	}
	other := tb
	other.ID, other.RequestDigest = newUUID(t), hash([]byte("other"))
	_, _, err = st.SubmitTurn(ctx, other)
	wantClass(t, err, errdefs.ErrExists)
}

// TestProjectScopedReads: GetSessionInProject answers ErrNotFound for
// another project's Session, as for a missing one, and
// ListProjectSessionsByAge pages only the project's Sessions.
func TestProjectScopedReads(t *testing.T) {
	st, ctx := ownedStore(t)
	presentNode(t, ctx, st)
	tenant, project := newProject(t, ctx, st)

	var mine []uuid.UUID
	for i := range 5 {
		p := sessionParams(t, 50)
		if i%2 == 0 {
			p = inProject(t, tenant, project)
			mine = append(mine, p.SessionID)
		}
		_, err := st.CreateSession(ctx, p)
		must(t, err)
	}
	other := sessionParams(t, 50)
	_, err := st.CreateSession(ctx, other)
	must(t, err)

	got, err := st.GetSessionInProject(ctx, project, mine[0])
	must(t, err)
	if got.Session.ID != mine[0] || got.Environment.SessionID != mine[0] {
		t.Fatalf("scoped get: %+v", got)
	}
	_, err = st.GetSessionInProject(ctx, project, other.SessionID)
	wantClass(t, err, errdefs.ErrNotFound)
	_, err = st.GetSessionInProject(ctx, store.DefaultProjectID, mine[0])
	wantClass(t, err, errdefs.ErrNotFound)

	ids, sizes := pagedIDs(t, 2, func(after store.AgeCursor) ([]store.SessionBundle, error) {
		return st.ListProjectSessionsByAge(ctx, project, 2, after, false)
	}, func(b store.SessionBundle) store.AgeCursor {
		return store.AgeCursor{CreatedAt: b.Session.CreatedAt, ID: b.Session.ID}
	}, func(bs []store.SessionBundle) []uuid.UUID {
		return idsOf(bs, func(b store.SessionBundle) uuid.UUID { return b.Session.ID })
	})
	if len(ids) != len(mine) {
		t.Fatalf("listed %v (pages %v), want %v", ids, sizes, mine)
	}
	for i := range ids {
		if ids[i] != mine[i] {
			t.Fatalf("listed %v, want %v in creation order", ids, mine)
		}
	}
}

// TestListProjectSessionsByAgeSeeksIndex: with many Sessions in other
// projects, the scoped list's plan reads sessions_project_created_at_id
// with the project and the cursor as index conditions (a seek), never the
// whole table or the unscoped index.
func TestListProjectSessionsByAgeSeeksIndex(t *testing.T) {
	st, ctx := ownedStore(t)
	_, project := newProject(t, ctx, st)
	_, err := st.Pool().Exec(ctx, `
		INSERT INTO sessions (id, tenant_id, project_id, display_name, request_id)
		SELECT gen_random_uuid(), $1, $2, 's', gen_random_uuid() FROM generate_series(1, 5000)`,
		store.DefaultTenantID, store.DefaultProjectID)
	must(t, err)
	_, err = st.Pool().Exec(ctx, `ANALYZE sessions`)
	must(t, err)

	// The query as sqlc compiles it, from its source, with its arguments
	// numbered as sqlc numbers them.
	src, err := os.ReadFile("queries/sessions.sql")
	must(t, err)
	query := string(src)
	query = query[strings.Index(query, "-- name: ListProjectSessionsByAge"):]
	query = query[:strings.Index(query, ";")]
	var body []string
	for _, l := range strings.Split(query, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "--") {
			body = append(body, l)
		}
	}
	query = strings.NewReplacer("@project_id", "$1", "sqlc.arg(after_created_at)", "$2", "sqlc.arg(after_id)", "$3",
		"sqlc.arg(include_deleted)", "$4", "@page_size", "$5").Replace(strings.Join(body, "\n"))
	rows, err := st.Pool().Query(ctx, "EXPLAIN "+query, project, store.AgeCursor{}.CreatedAt, uuid.Nil, false, int32(100))
	must(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	must(t, err)
	var plan strings.Builder
	for _, l := range lines {
		plan.WriteString(l + "\n")
	}
	p := plan.String()
	if !strings.Contains(p, "Index Scan using sessions_project_created_at_id") ||
		!strings.Contains(p, "Index Cond: ((project_id = ") || !strings.Contains(p, "ROW(created_at, id) > ROW(") {
		t.Fatalf("plan does not seek sessions_project_created_at_id by project and cursor:\n%s", p)
	}
	if strings.Contains(p, "Seq Scan on sessions") || strings.Contains(p, "sessions_created_at_id") {
		t.Fatalf("plan scans beyond the project:\n%s", p)
	}
}

// TestCreateTenantAndProjectAreIdempotent: a retry returns the first row
// and writes nothing; another request under the same id, or another live
// tenant's (project's) name, is ErrExists; a project of a missing tenant
// is ErrNotFound.
func TestCreateTenantAndProjectAreIdempotent(t *testing.T) {
	st, ctx := ownedStore(t)
	req, id := newUUID(t), newUUID(t)
	first, created, err := st.CreateTenant(ctx, req, id, "team")
	must(t, err)
	again, created2, err := st.CreateTenant(ctx, req, newUUID(t), "team")
	must(t, err)
	if !created || created2 || again.ID != first.ID {
		t.Fatalf("tenant retry: %+v (created %v, %v)", again, created, created2)
	}
	_, _, err = st.CreateTenant(ctx, req, newUUID(t), "other")
	wantClass(t, err, errdefs.ErrExists)
	_, _, err = st.CreateTenant(ctx, newUUID(t), newUUID(t), "team")
	wantClass(t, err, errdefs.ErrExists)
	_, _, err = st.CreateTenant(ctx, newUUID(t), newUUID(t), "default")
	wantClass(t, err, errdefs.ErrExists)

	preq := newUUID(t)
	p, created, err := st.CreateProject(ctx, preq, newUUID(t), id, "app")
	must(t, err)
	pa, created2, err := st.CreateProject(ctx, preq, newUUID(t), id, "app")
	must(t, err)
	if !created || created2 || pa.ID != p.ID {
		t.Fatalf("project retry: %+v (created %v, %v)", pa, created, created2)
	}
	_, _, err = st.CreateProject(ctx, preq, newUUID(t), store.DefaultTenantID, "app")
	wantClass(t, err, errdefs.ErrExists)
	_, _, err = st.CreateProject(ctx, newUUID(t), newUUID(t), id, "app")
	wantClass(t, err, errdefs.ErrExists)
	_, _, err = st.CreateProject(ctx, newUUID(t), newUUID(t), newUUID(t), "app")
	wantClass(t, err, errdefs.ErrNotFound)
	got, err := st.GetProject(ctx, store.DefaultProjectID)
	must(t, err)
	if got.TenantID != store.DefaultTenantID || got.DisplayName != "default" || got.MaxActiveSessions != nil {
		t.Fatalf("default project %+v", got)
	}
	ten, err := st.GetTenant(ctx, store.DefaultTenantID)
	must(t, err)
	if ten.DisplayName != "default" {
		t.Fatalf("default tenant %+v", ten)
	}
}
