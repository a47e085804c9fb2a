-- name: InsertProjectKey :one
-- InsertProjectKey creates a key of a live project for a create request,
-- with the project's tenant; a request id that already made one, or a
-- deleted or missing project, inserts nothing (no row: the caller tells
-- which).
INSERT INTO project_keys (id, project_id, tenant_id, digest, display_name, request_id, expire_at)
SELECT @id, p.id, p.tenant_id, @digest, @display_name, @request_id, sqlc.narg(expire_at)::timestamptz
FROM projects p
WHERE p.id = @project_id AND p.deleted_at IS NULL
ON CONFLICT (request_id) DO NOTHING
RETURNING sqlc.embed(project_keys), (expire_at IS NOT NULL AND expire_at <= now())::boolean AS expired;

-- name: GetProjectKeyByRequestID :one
SELECT sqlc.embed(project_keys), (expire_at IS NOT NULL AND expire_at <= now())::boolean AS expired
FROM project_keys WHERE request_id = @request_id;

-- name: GetProjectKey :one
SELECT sqlc.embed(project_keys), (expire_at IS NOT NULL AND expire_at <= now())::boolean AS expired
FROM project_keys WHERE id = @id;

-- name: ListProjectKeysByAge :many
-- ListProjectKeysByAge pages a project's keys in creation order by
-- (created_at, id) (keyset), revoked and expired ones included.
SELECT sqlc.embed(project_keys), (expire_at IS NOT NULL AND expire_at <= now())::boolean AS expired
FROM project_keys
WHERE project_id = @project_id
  AND (created_at, id) > (sqlc.arg(after_created_at)::timestamptz, sqlc.arg(after_id)::uuid)
ORDER BY created_at, id
LIMIT @page_size;

-- name: RevokeProjectKey :one
-- RevokeProjectKey revokes a key of the project; revoking again keeps the
-- first revocation time.
UPDATE project_keys SET revoked_at = coalesce(revoked_at, now())
WHERE id = @id AND project_id = @project_id
RETURNING sqlc.embed(project_keys), (expire_at IS NOT NULL AND expire_at <= now())::boolean AS expired;

-- name: LiveProjectKeys :many
-- LiveProjectKeys lists every key that may authenticate now, on the
-- database clock: not revoked, not expired, of a live project.
SELECT k.id, k.project_id, k.tenant_id, k.digest, k.expire_at
FROM project_keys k
JOIN projects p ON p.id = k.project_id
WHERE k.revoked_at IS NULL AND (k.expire_at IS NULL OR k.expire_at > now()) AND p.deleted_at IS NULL;

-- name: VerifyProjectKey :one
-- VerifyProjectKey reads key id if it may authenticate now (LiveProjectKeys'
-- predicate): no row otherwise.
SELECT k.id, k.project_id, k.tenant_id, k.digest, k.expire_at
FROM project_keys k
JOIN projects p ON p.id = k.project_id
WHERE k.id = @id AND k.revoked_at IS NULL AND (k.expire_at IS NULL OR k.expire_at > now()) AND p.deleted_at IS NULL;

-- name: DatabaseNow :one
-- DatabaseNow is the transaction's database clock: a key's expiry is
-- checked against it, never against Core's.
SELECT now()::timestamptz;
