-- name: CreateEnrollmentToken :one
INSERT INTO enrollment_tokens (id, secret_hash, expires_at)
VALUES (@id, @secret_hash, now() + sqlc.arg(ttl_micros)::bigint * interval '1 microsecond')
RETURNING id, created_at, expires_at, revoked_at, used_at, node_id, public_key_hash,
          (expires_at <= now())::boolean AS expired;

-- name: GetEnrollmentToken :one
SELECT id, created_at, expires_at, revoked_at, used_at, node_id, public_key_hash,
       (expires_at <= now())::boolean AS expired
FROM enrollment_tokens
WHERE id = @id;

-- name: ListEnrollmentTokens :many
-- ListEnrollmentTokens pages by id (keyset): the rows after @after, in id
-- order. It never returns the secret hash.
SELECT id, created_at, expires_at, revoked_at, used_at, node_id, public_key_hash,
       (expires_at <= now())::boolean AS expired
FROM enrollment_tokens
WHERE id > @after::text
ORDER BY id
LIMIT @page_size;

-- name: RevokeEnrollmentToken :one
-- RevokeEnrollmentToken keeps the first revocation time when called again.
UPDATE enrollment_tokens
SET revoked_at = coalesce(revoked_at, now())
WHERE id = @id
RETURNING id, created_at, expires_at, revoked_at, used_at, node_id, public_key_hash,
          (expires_at <= now())::boolean AS expired;

-- name: LockEnrollmentToken :one
-- LockEnrollmentToken reads a token for consumption and locks its row
-- until the transaction ends, so two enrollments with one token serialize.
SELECT secret_hash, used_at, node_id, public_key_hash,
       (revoked_at IS NOT NULL)::boolean AS revoked,
       (expires_at <= now())::boolean AS expired
FROM enrollment_tokens
WHERE id = @id
FOR UPDATE;

-- name: MarkEnrollmentTokenUsed :execrows
-- MarkEnrollmentTokenUsed repeats every check of the database's own, so a
-- token is never marked used unless it was usable.
UPDATE enrollment_tokens
SET used_at = now(), node_id = @node_id::uuid, public_key_hash = @public_key_hash
WHERE id = @id
  AND used_at IS NULL
  AND revoked_at IS NULL
  AND expires_at > now();
