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
-- inserts nothing (no row: the caller tells which).
INSERT INTO projects (id, tenant_id, display_name, request_id)
SELECT @id, t.id, @display_name, @request_id
FROM tenants t
WHERE t.id = @tenant_id AND t.deleted_at IS NULL
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
