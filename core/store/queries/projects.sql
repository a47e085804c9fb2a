-- name: InsertTenant :one
-- InsertTenant creates a tenant for a create request; a request id that
-- already made one inserts nothing (no row: the caller reads it).
INSERT INTO tenants (id, display_name, request_id)
VALUES (@id, @display_name, @request_id)
ON CONFLICT (request_id) DO NOTHING
RETURNING *;

-- name: GetTenantByRequestID :one
SELECT * FROM tenants WHERE request_id = @request_id;

-- name: GetTenant :one
SELECT * FROM tenants WHERE id = @id;

-- name: InsertProject :one
-- InsertProject creates a project of a live tenant for a create request;
-- a request id that already made one, or a deleted or missing tenant,
-- inserts nothing (no row: the caller tells which). The tenant's share
-- lock orders it with DeleteTenant (LockTenant): a deletion that commits
-- first is seen (the row is read again after the wait), one that comes
-- second sees the new project.
INSERT INTO projects (id, tenant_id, display_name, request_id)
SELECT @id, t.id, @display_name, @request_id
FROM tenants t
WHERE t.id = @tenant_id AND t.deleted_at IS NULL
FOR SHARE OF t
ON CONFLICT (request_id) DO NOTHING
RETURNING *;

-- name: GetProjectByRequestID :one
SELECT * FROM projects WHERE request_id = @request_id;

-- name: GetProject :one
SELECT * FROM projects WHERE id = @id;

-- name: LockProjectShared :one
-- LockProjectShared reads a project and holds a share lock on its row
-- until the transaction ends, so a Session is never created in a project
-- whose deletion committed first.
SELECT * FROM projects WHERE id = @id FOR SHARE;

-- name: LockTenant :one
-- LockTenant reads a tenant and locks its row until the transaction ends:
-- UpdateTenant and DeleteTenant decide on the revision under it, and a
-- concurrent CreateProject (InsertProject's share lock) waits for it.
SELECT * FROM tenants WHERE id = @id FOR UPDATE;

-- name: UpdateTenantDisplayName :one
UPDATE tenants
SET display_name = @display_name, updated_at = now(), revision = revision + 1
WHERE id = @id
RETURNING *;

-- name: MarkTenantDeleted :one
UPDATE tenants
SET deleted_at = now(), updated_at = now(), revision = revision + 1
WHERE id = @id
RETURNING *;

-- name: TenantHasLiveProjects :one
-- TenantHasLiveProjects reports whether the tenant has a project that is
-- not deleted: DeleteTenant's refusal.
SELECT EXISTS (SELECT 1 FROM projects WHERE tenant_id = @tenant_id AND deleted_at IS NULL)::boolean;

-- name: ListTenantsByAge :many
-- ListTenantsByAge pages live tenants in creation order by (created_at,
-- id) (keyset): the rows after the cursor; the zero cursor (year 1, the
-- nil id) is before every row.
SELECT * FROM tenants
WHERE (created_at, id) > (sqlc.arg(after_created_at)::timestamptz, sqlc.arg(after_id)::uuid)
  AND deleted_at IS NULL
ORDER BY created_at, id
LIMIT @page_size;

-- name: LockProject :one
-- LockProject reads a project and locks its row until the transaction
-- ends: UpdateProject and DeleteProject decide on the revision under it,
-- and a concurrent CreateSession (LockProjectShared) waits for it, so a
-- deletion never commits beside a new Session of the project.
SELECT * FROM projects WHERE id = @id FOR UPDATE;

-- name: UpdateProjectDisplayName :one
UPDATE projects
SET display_name = @display_name, updated_at = now(), revision = revision + 1
WHERE id = @id
RETURNING *;

-- name: MarkProjectDeleted :one
UPDATE projects
SET deleted_at = now(), updated_at = now(), revision = revision + 1
WHERE id = @id
RETURNING *;

-- name: ProjectHasSessions :one
-- ProjectHasSessions reports whether the project has a Session that is not
-- deleted: one whose deletion was not requested, or whose Environment
-- still has an unreleased allocation (ListSessionsByAge's predicate of a
-- deleted Session). DeleteProject's refusal.
SELECT EXISTS (
    SELECT 1 FROM sessions s
    WHERE s.project_id = @project_id
      AND (s.state <> 'delete_requested'
           OR EXISTS (SELECT 1 FROM environments e
                      JOIN allocations a ON a.environment_id = e.id
                      WHERE e.session_id = s.id AND a.state <> 'released'))
)::boolean;

-- name: ListProjectsByAge :many
-- ListProjectsByAge pages a tenant's live projects in creation order by
-- (created_at, id) (keyset) on projects_tenant_created_at_id; the zero
-- cursor is before every row.
SELECT * FROM projects
WHERE tenant_id = @tenant_id
  AND (created_at, id) > (sqlc.arg(after_created_at)::timestamptz, sqlc.arg(after_id)::uuid)
  AND deleted_at IS NULL
ORDER BY created_at, id
LIMIT @page_size;
