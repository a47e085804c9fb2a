package store

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"berth.dev/core/store/db"
	"berth.dev/sandbox/errdefs"
)

// DefaultTenantID is the tenant migration 0022 made of the installation's
// one fixed tenant (core/daemon's DefaultTenant): the tenant "default".
var DefaultTenantID = uuid.MustParse("00000000-0000-4000-8000-000000000001")

// DefaultProjectID is the default tenant's project "default", made by
// migration 0022; every Session that existed before it belongs to it.
var DefaultProjectID = uuid.MustParse("00000000-0000-4000-8000-000000000002")

// maxTenantNameLen bounds a tenant's or project's display name
// (characters), as the tables' CHECK does.
const maxTenantNameLen = 63

// Tenant is the ownership unit the engine sees: its id is the TenantID of
// every Reference and of the engine's ownership labels.
type Tenant struct {
	ID          uuid.UUID
	DisplayName string
	RequestID   uuid.UUID
	CreatedAt   time.Time
	UpdatedAt   time.Time
	DeletedAt   *time.Time
	Revision    int64
}

// Project is a tenant's unit of scope: every Session belongs to one, and
// its tenant is the Session's tenant.
type Project struct {
	ID          uuid.UUID
	TenantID    uuid.UUID
	DisplayName string
	RequestID   uuid.UUID
	CreatedAt   time.Time
	UpdatedAt   time.Time
	DeletedAt   *time.Time
	Revision    int64
	// MaxActiveSessions and MaxRetainedSessions are the project's limits;
	// nil is no limit.
	MaxActiveSessions   *int32
	MaxRetainedSessions *int32
	// Usage is what the project holds now (project_load, migration 0024).
	Usage ProjectUsage
}

// ProjectLimits are a project's limits; nil is no limit. They bound what
// the project holds (ProjectUsage): CreateSession and ArmRestore refuse
// an active Environment past MaxActiveSessions, ArmSuspension a snapshot
// past MaxRetainedSessions. A limit lowered below the usage evicts
// nothing.
type ProjectLimits struct {
	MaxActiveSessions   *int32
	MaxRetainedSessions *int32
}

// ProjectUsage is what a project holds, counted as a node counts
// (node_load): Held its Environments held actively (a deleting Session
// counts until its cleanup is confirmed), Retained those held only as a
// suspended snapshot.
type ProjectUsage struct {
	Held     int64
	Retained int64
}

// ErrProjectActiveLimit refuses a new Session of a project that holds
// max_active_sessions Sessions actively: nothing was written, and no node
// was read or locked. The same request may succeed once the project holds
// fewer.
var ErrProjectActiveLimit error = errdefs.Refuse(errdefs.ErrFailedPrecondition, "project_active_limit",
	"the project holds max_active_sessions Sessions (deleting ones count until cleanup): delete Sessions or raise the project's limit")

func (l ProjectLimits) validate() error {
	if l.MaxActiveSessions != nil && *l.MaxActiveSessions < 0 {
		return errdefs.Invalid("max_active_sessions", "must not be negative")
	}
	if l.MaxRetainedSessions != nil && *l.MaxRetainedSessions < 0 {
		return errdefs.Invalid("max_retained_sessions", "must not be negative")
	}
	return nil
}

func projectLimitParam(v *int32) pgtype.Int4 {
	if v == nil {
		return pgtype.Int4{}
	}
	return pgtype.Int4{Int32: *v, Valid: true}
}

func sameLimit(a *int32, b pgtype.Int4) bool {
	if a == nil {
		return !b.Valid
	}
	return b.Valid && b.Int32 == *a
}

// ErrProjectNotFound is the class (errdefs.ErrNotFound) of a CreateSession
// naming a project that does not exist or was deleted, or that belongs to
// another tenant than the one named: nothing was written.
var ErrProjectNotFound = fmt.Errorf("project not found: %w", errdefs.ErrNotFound)

func validTenantName(field, name string) error {
	n := utf8.RuneCountInString(name)
	if !utf8.ValidString(name) || n < 1 || n > maxTenantNameLen {
		return errdefs.Invalid(field, fmt.Sprintf("must be valid UTF-8 of 1 to %d characters", maxTenantNameLen))
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return errdefs.Invalid(field, "must not hold control characters")
		}
	}
	return nil
}

// CreateTenant creates a tenant. It is idempotent by requestID: a retry
// returns the tenant the first call made (created false) and writes
// nothing; the same request id with another display name is ErrExists, and
// so is the display name of another live tenant.
func (s *Admin) CreateTenant(ctx context.Context, requestID, id uuid.UUID, displayName string) (t Tenant, created bool, err error) {
	const op = "create tenant"
	switch {
	case requestID == uuid.Nil:
		return Tenant{}, false, fmt.Errorf("%s: %w", op, errdefs.Invalid("request_id", "must not be the nil UUID"))
	case id == uuid.Nil:
		return Tenant{}, false, fmt.Errorf("%s: %w", op, errdefs.Invalid("id", "must not be the nil UUID"))
	}
	if err := validTenantName("display_name", displayName); err != nil {
		return Tenant{}, false, fmt.Errorf("%s: %w", op, err)
	}
	err = s.inTx(ctx, func(q *db.Queries) error {
		row, err := q.InsertTenant(ctx, db.InsertTenantParams{ID: id, DisplayName: displayName, RequestID: requestID})
		if err == nil {
			t, created = tenantFromRow(row), true
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		prev, err := q.GetTenantByRequestID(ctx, requestID)
		if err != nil {
			return err
		}
		if prev.DisplayName != displayName {
			return fmt.Errorf("request id already used by another request: %w", errdefs.ErrExists)
		}
		t = tenantFromRow(prev)
		return nil
	})
	if err != nil {
		return Tenant{}, false, wrap(op, err)
	}
	return t, created, nil
}

// CreateProject creates a project of a live tenant (ErrNotFound for a
// missing or deleted one). It is idempotent by requestID as CreateTenant
// is: another tenant or display name under the same request id is
// ErrExists, and so is the display name of another live project of the
// tenant.
func (s *Admin) CreateProject(ctx context.Context, requestID, id, tenantID uuid.UUID, displayName string) (p Project, created bool, err error) {
	return s.CreateProjectWithLimits(ctx, requestID, id, tenantID, displayName, ProjectLimits{})
}

// CreateProjectWithLimits is CreateProject with the project's limits; a
// retry with other limits is ErrExists, as one with another display name.
func (s *Admin) CreateProjectWithLimits(ctx context.Context, requestID, id, tenantID uuid.UUID, displayName string, limits ProjectLimits) (p Project, created bool, err error) {
	const op = "create project"
	if err := limits.validate(); err != nil {
		return Project{}, false, fmt.Errorf("%s: %w", op, err)
	}
	switch {
	case requestID == uuid.Nil:
		return Project{}, false, fmt.Errorf("%s: %w", op, errdefs.Invalid("request_id", "must not be the nil UUID"))
	case id == uuid.Nil:
		return Project{}, false, fmt.Errorf("%s: %w", op, errdefs.Invalid("id", "must not be the nil UUID"))
	case tenantID == uuid.Nil:
		return Project{}, false, fmt.Errorf("%s: %w", op, errdefs.Invalid("tenant_id", "must not be the nil UUID"))
	}
	if err := validTenantName("display_name", displayName); err != nil {
		return Project{}, false, fmt.Errorf("%s: %w", op, err)
	}
	err = s.inTx(ctx, func(q *db.Queries) error {
		row, err := q.InsertProject(ctx, db.InsertProjectParams{
			ID: id, TenantID: tenantID, DisplayName: displayName, RequestID: requestID,
			MaxActiveSessions: projectLimitParam(limits.MaxActiveSessions), MaxRetainedSessions: projectLimitParam(limits.MaxRetainedSessions),
		})
		if err == nil {
			p, created = projectFromRow(row), true
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		prev, err := q.GetProjectByRequestID(ctx, requestID)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("tenant %s: %w", tenantID, errdefs.ErrNotFound)
		}
		if err != nil {
			return err
		}
		if prev.TenantID != tenantID || prev.DisplayName != displayName ||
			!sameLimit(limits.MaxActiveSessions, prev.MaxActiveSessions) || !sameLimit(limits.MaxRetainedSessions, prev.MaxRetainedSessions) {
			return fmt.Errorf("request id already used by another request: %w", errdefs.ErrExists)
		}
		p = projectFromRow(prev)
		return withUsage(ctx, q, &p)
	})
	if err != nil {
		return Project{}, false, wrap(op, err)
	}
	return p, created, nil
}

// GetTenant returns a tenant, also a deleted one; ErrNotFound when there
// is none.
func (s *Reader) GetTenant(ctx context.Context, id uuid.UUID) (Tenant, error) {
	row, err := s.q.GetTenant(ctx, id)
	if err != nil {
		return Tenant{}, wrap("get tenant", err)
	}
	return tenantFromRow(row), nil
}

// GetProject returns a project, also a deleted one; ErrNotFound when there
// is none.
func (s *Reader) GetProject(ctx context.Context, id uuid.UUID) (Project, error) {
	row, err := s.q.GetProject(ctx, id)
	if err != nil {
		return Project{}, wrap("get project", err)
	}
	p := projectFromRow(row)
	if err := withUsage(ctx, s.q, &p); err != nil {
		return Project{}, wrap("get project", err)
	}
	return p, nil
}

// withUsage reads what project p holds into p.Usage.
func withUsage(ctx context.Context, q *db.Queries, p *Project) error {
	l, err := q.GetProjectLoad(ctx, p.ID)
	if err != nil {
		return err
	}
	p.Usage = ProjectUsage{Held: l.Held, Retained: l.Retained}
	return nil
}

// admitProjectLoad locks project p's project_load row for a new Session,
// before any node row (the lock order of migration 0024), and refuses
// ErrProjectActiveLimit when p holds its max_active_sessions actively. A
// refused create has locked only its own project's row, so a project at
// its limit never holds or waits for a node's lock, and only its own
// creates queue on its row.
func admitProjectLoad(ctx context.Context, q *db.Queries, p db.Project) error {
	l, err := q.LockProjectLoad(ctx, p.ID)
	if err != nil {
		return err
	}
	if p.MaxActiveSessions.Valid && l.Held >= int64(p.MaxActiveSessions.Int32) {
		return ErrProjectActiveLimit
	}
	return nil
}

// admitProject holds the Session's project for a new Session: it must be
// live and belong to tenantID (else ErrProjectNotFound). The share lock
// keeps it live until the transaction ends.
func admitProject(ctx context.Context, q *db.Queries, projectID, tenantID uuid.UUID) (db.Project, error) {
	p, err := q.LockProjectShared(ctx, projectID)
	if errors.Is(err, pgx.ErrNoRows) {
		return db.Project{}, ErrProjectNotFound
	}
	if err != nil {
		return db.Project{}, err
	}
	if p.DeletedAt != nil || p.TenantID != tenantID {
		return db.Project{}, ErrProjectNotFound
	}
	return p, nil
}

func tenantFromRow(r db.Tenant) Tenant {
	return Tenant{
		ID: r.ID, DisplayName: r.DisplayName, RequestID: r.RequestID,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, DeletedAt: r.DeletedAt, Revision: r.Revision,
	}
}

func projectFromRow(r db.Project) Project {
	p := Project{
		ID: r.ID, TenantID: r.TenantID, DisplayName: r.DisplayName, RequestID: r.RequestID,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, DeletedAt: r.DeletedAt, Revision: r.Revision,
	}
	if r.MaxActiveSessions.Valid {
		v := r.MaxActiveSessions.Int32
		p.MaxActiveSessions = &v
	}
	if r.MaxRetainedSessions.Valid {
		v := r.MaxRetainedSessions.Int32
		p.MaxRetainedSessions = &v
	}
	return p
}

// AnyRevision is the revision argument of an update or deletion that acts
// whatever the current revision is (the request carried no etag).
const AnyRevision int64 = 0

// The refusals of tenant and project writes. Their messages cross the
// admin API as they are (errgrpc.SafeMessage).
var (
	// ErrRevisionMismatch refuses an update or deletion whose revision (the
	// API's etag) is no longer the current one: nothing was written.
	ErrRevisionMismatch error = errdefs.Refuse(errdefs.ErrFailedPrecondition, "etag_mismatch",
		"the etag is stale: read the resource again, then retry")
	// ErrProjectHasSessions refuses DeleteProject while a Session of the
	// project is not deleted with its allocation released.
	ErrProjectHasSessions error = errdefs.Refuse(errdefs.ErrFailedPrecondition, "project_has_sessions",
		"the project still has Sessions: delete them, then retry")
	// ErrTenantHasProjects refuses DeleteTenant while it has live projects.
	ErrTenantHasProjects error = errdefs.Refuse(errdefs.ErrFailedPrecondition, "tenant_has_projects",
		"the tenant still has projects: delete them, then retry")
)

// liveTenant locks tenant id for the rest of the transaction and checks
// revision (AnyRevision: any): a missing or deleted tenant is
// ErrNotFound, another revision ErrRevisionMismatch.
func liveTenant(ctx context.Context, q *db.Queries, id uuid.UUID, revision int64) error {
	t, err := q.LockTenant(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && t.DeletedAt != nil) {
		return fmt.Errorf("tenant %s: %w", id, errdefs.ErrNotFound)
	}
	if err != nil {
		return err
	}
	if revision != AnyRevision && t.Revision != revision {
		return ErrRevisionMismatch
	}
	return nil
}

// liveProject is liveTenant for project id of tenantID: a project of
// another tenant is ErrNotFound too, as a missing one.
func liveProject(ctx context.Context, q *db.Queries, tenantID, id uuid.UUID, revision int64) error {
	p, err := q.LockProject(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && (p.DeletedAt != nil || p.TenantID != tenantID)) {
		return fmt.Errorf("project %s: %w", id, errdefs.ErrNotFound)
	}
	if err != nil {
		return err
	}
	if revision != AnyRevision && p.Revision != revision {
		return ErrRevisionMismatch
	}
	return nil
}

func validRevision(revision int64) error {
	if revision < 0 {
		return errdefs.Invalid("revision", "must not be negative")
	}
	return nil
}

// UpdateTenant sets live tenant id's display name when its revision is
// still revision (AnyRevision: whatever it is), and moves the revision on.
// A missing or deleted tenant is ErrNotFound, a stale revision
// ErrRevisionMismatch, another live tenant's display name ErrExists;
// none of them writes anything.
func (s *Admin) UpdateTenant(ctx context.Context, id uuid.UUID, revision int64, displayName string) (t Tenant, err error) {
	const op = "update tenant"
	if err := validRevision(revision); err != nil {
		return Tenant{}, fmt.Errorf("%s: %w", op, err)
	}
	if err := validTenantName("display_name", displayName); err != nil {
		return Tenant{}, fmt.Errorf("%s: %w", op, err)
	}
	err = s.inTx(ctx, func(q *db.Queries) error {
		if err := liveTenant(ctx, q, id, revision); err != nil {
			return err
		}
		row, err := q.UpdateTenantDisplayName(ctx, db.UpdateTenantDisplayNameParams{ID: id, DisplayName: displayName})
		t = tenantFromRow(row)
		return err
	})
	if err != nil {
		return Tenant{}, wrap(op, err)
	}
	return t, nil
}

// DeleteTenant deletes live tenant id (soft: its row stays, with
// deleted_at, since Sessions keep their foreign keys to it) when its
// revision is still revision (AnyRevision: whatever it is). It is refused
// ErrTenantHasProjects while the tenant has a live project; a missing or
// deleted tenant is ErrNotFound, a stale revision ErrRevisionMismatch. The
// tenant's row lock orders it with CreateProject (InsertProject's share
// lock), so no project is created in a deleted tenant. The default tenant
// is deleted like any other.
func (s *Admin) DeleteTenant(ctx context.Context, id uuid.UUID, revision int64) (t Tenant, err error) {
	const op = "delete tenant"
	if err := validRevision(revision); err != nil {
		return Tenant{}, fmt.Errorf("%s: %w", op, err)
	}
	err = s.inTx(ctx, func(q *db.Queries) error {
		if err := liveTenant(ctx, q, id, revision); err != nil {
			return err
		}
		has, err := q.TenantHasLiveProjects(ctx, id)
		if err != nil {
			return err
		}
		if has {
			return ErrTenantHasProjects
		}
		row, err := q.MarkTenantDeleted(ctx, id)
		t = tenantFromRow(row)
		return err
	})
	if err != nil {
		return Tenant{}, wrap(op, err)
	}
	return t, nil
}

// TenantCursor is a position in ListTenantsByAge; the zero cursor is the
// start.
type TenantCursor = AgeCursor

// ListTenantsByAge returns up to limit (1 to MaxPageSize+1) live tenants
// after cursor after (the zero cursor for the start) in creation order
// (ties by id).
func (s *Reader) ListTenantsByAge(ctx context.Context, limit int, after TenantCursor) ([]Tenant, error) {
	return listPage("list tenants by age", limit, func(n int32) ([]db.Tenant, error) {
		return s.q.ListTenantsByAge(ctx, db.ListTenantsByAgeParams{
			AfterCreatedAt: after.CreatedAt, AfterID: after.ID, PageSize: n,
		})
	}, tenantFromRow)
}

// UpdateProject sets live project id's display name, as UpdateTenant does
// for a tenant. A project of another tenant than tenantID is ErrNotFound,
// as a missing one; another live project of the tenant with the display
// name is ErrExists.
func (s *Admin) UpdateProject(ctx context.Context, tenantID, id uuid.UUID, revision int64, displayName string) (p Project, err error) {
	return s.UpdateProjectFields(ctx, tenantID, id, revision, ProjectChanges{DisplayName: &displayName})
}

// ProjectChanges are the fields UpdateProjectFields changes: a nil
// DisplayName keeps the name; a limit changes only when its Set flag is
// true (to its value; nil is no limit).
type ProjectChanges struct {
	DisplayName            *string
	SetMaxActiveSessions   bool
	MaxActiveSessions      *int32
	SetMaxRetainedSessions bool
	MaxRetainedSessions    *int32
}

// UpdateProjectFields is UpdateProject for any of the project's display
// name and limits, in one revision. Lowering a limit below what the
// project holds evicts nothing: only new holdings are refused.
func (s *Admin) UpdateProjectFields(ctx context.Context, tenantID, id uuid.UUID, revision int64, c ProjectChanges) (p Project, err error) {
	const op = "update project"
	if err := validRevision(revision); err != nil {
		return Project{}, fmt.Errorf("%s: %w", op, err)
	}
	if c.DisplayName != nil {
		if err := validTenantName("display_name", *c.DisplayName); err != nil {
			return Project{}, fmt.Errorf("%s: %w", op, err)
		}
	}
	if err := (ProjectLimits{MaxActiveSessions: c.MaxActiveSessions, MaxRetainedSessions: c.MaxRetainedSessions}).validate(); err != nil {
		return Project{}, fmt.Errorf("%s: %w", op, err)
	}
	err = s.inTx(ctx, func(q *db.Queries) error {
		if err := liveProject(ctx, q, tenantID, id, revision); err != nil {
			return err
		}
		cur, err := q.GetProject(ctx, id)
		if err != nil {
			return err
		}
		set := db.UpdateProjectFieldsParams{ID: id, DisplayName: cur.DisplayName,
			MaxActiveSessions: cur.MaxActiveSessions, MaxRetainedSessions: cur.MaxRetainedSessions}
		if c.DisplayName != nil {
			set.DisplayName = *c.DisplayName
		}
		if c.SetMaxActiveSessions {
			set.MaxActiveSessions = projectLimitParam(c.MaxActiveSessions)
		}
		if c.SetMaxRetainedSessions {
			set.MaxRetainedSessions = projectLimitParam(c.MaxRetainedSessions)
		}
		row, err := q.UpdateProjectFields(ctx, set)
		if err != nil {
			return err
		}
		p = projectFromRow(row)
		return withUsage(ctx, q, &p)
	})
	if err != nil {
		return Project{}, wrap(op, err)
	}
	return p, nil
}

// DeleteProject deletes live project id of tenantID (soft, as
// DeleteTenant) when its revision is still revision (AnyRevision: whatever
// it is). It is refused ErrProjectHasSessions while any Session of the
// project is not deleted with its allocation released (a deleted Session
// whose compute is not confirmed gone still counts). The project's row
// lock (FOR UPDATE) orders it with CreateSession, which holds the row's
// share lock until it commits: a Session committed first is counted, one
// that comes second finds the project deleted (ErrProjectNotFound). A
// missing or deleted project, or one of another tenant, is ErrNotFound; a
// stale revision ErrRevisionMismatch. The default project is deleted like
// any other.
func (s *Admin) DeleteProject(ctx context.Context, tenantID, id uuid.UUID, revision int64) (p Project, err error) {
	const op = "delete project"
	if err := validRevision(revision); err != nil {
		return Project{}, fmt.Errorf("%s: %w", op, err)
	}
	err = s.inTx(ctx, func(q *db.Queries) error {
		if err := liveProject(ctx, q, tenantID, id, revision); err != nil {
			return err
		}
		has, err := q.ProjectHasSessions(ctx, id)
		if err != nil {
			return err
		}
		if has {
			return ErrProjectHasSessions
		}
		row, err := q.MarkProjectDeleted(ctx, id)
		p = projectFromRow(row)
		return err
	})
	if err != nil {
		return Project{}, wrap(op, err)
	}
	return p, nil
}

// ProjectCursor is a position in ListProjectsByAge; the zero cursor is the
// start.
type ProjectCursor = AgeCursor

// ListProjectsByAge returns up to limit (1 to MaxPageSize+1) live projects
// of tenantID after cursor after (the zero cursor for the start) in
// creation order (ties by id). It does not check the tenant: a missing or
// deleted tenant has no live projects.
func (s *Reader) ListProjectsByAge(ctx context.Context, tenantID uuid.UUID, limit int, after ProjectCursor) ([]Project, error) {
	page, err := listPage("list projects by age", limit, func(n int32) ([]db.Project, error) {
		return s.q.ListProjectsByAge(ctx, db.ListProjectsByAgeParams{
			TenantID: tenantID, AfterCreatedAt: after.CreatedAt, AfterID: after.ID, PageSize: n,
		})
	}, projectFromRow)
	if err != nil || len(page) == 0 {
		return page, err
	}
	ids := make([]uuid.UUID, len(page))
	for i, p := range page {
		ids[i] = p.ID
	}
	loads, err := s.q.ListProjectLoads(ctx, ids)
	if err != nil {
		return nil, wrap("list projects by age", err)
	}
	byID := make(map[uuid.UUID]ProjectUsage, len(loads))
	for _, l := range loads {
		byID[l.ProjectID] = ProjectUsage{Held: l.Held, Retained: l.Retained}
	}
	for i := range page {
		page[i].Usage = byID[page[i].ID]
	}
	return page, nil
}
