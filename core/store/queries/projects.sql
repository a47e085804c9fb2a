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
INSERT INTO projects (id, tenant_id, display_name, request_id, max_active_sessions, max_retained_sessions)
SELECT @id, t.id, @display_name, @request_id,
       sqlc.narg(max_active_sessions)::integer, sqlc.narg(max_retained_sessions)::integer
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

-- name: LockProjectLoad :one
-- LockProjectLoad locks project @project_id's project_load row (the
-- project's placement lock, taken before any node's) until the
-- transaction ends and reads what the project holds (migration 0024).
SELECT held, retained FROM project_load WHERE project_id = @project_id FOR UPDATE;

-- name: GetProjectLoad :one
SELECT held, retained FROM project_load WHERE project_id = @project_id;

-- name: LockNodeProjectLoads :exec
-- LockNodeProjectLoads locks the project_load rows of every project whose
-- Sessions' Environments node @node_id holds, in project order, so a
-- statement that changes several projects' Environments takes them all
-- before any node row (AbandonNode).
SELECT l.project_id FROM project_load l
WHERE l.project_id IN (
    SELECT s.project_id FROM sessions s
    JOIN environments en ON en.session_id = s.id
    WHERE en.id IN (SELECT p.environment_id FROM placements p WHERE p.node_id = @node_id::uuid AND p.state <> 'released'
                    UNION
                    SELECT a.environment_id FROM allocations a WHERE a.node_id = @node_id::uuid AND a.state <> 'released'))
ORDER BY l.project_id
FOR UPDATE OF l;

-- name: UpdateProjectFields :one
-- UpdateProjectFields sets the project's display name and limits
-- (@max_active_sessions, @max_retained_sessions; NULL: none) and moves its
-- revision on once. A limit lowered below what the project holds evicts
-- nothing.
UPDATE projects
SET display_name = @display_name,
    max_active_sessions = sqlc.narg(max_active_sessions)::integer,
    max_retained_sessions = sqlc.narg(max_retained_sessions)::integer,
    updated_at = now(), revision = revision + 1
WHERE id = @id
RETURNING *;

-- name: ListProjectLoads :many
SELECT project_id, held, retained FROM project_load WHERE project_id = ANY(@ids::uuid[]);
