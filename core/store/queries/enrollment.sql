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

-- name: CreateRequestedEnrollmentToken :one
-- CreateRequestedEnrollmentToken creates the token of admin request
-- @request_id unless that request already made one, in which case it
-- returns no row and changes nothing.
INSERT INTO enrollment_tokens (id, secret_hash, expires_at, request_id)
VALUES (@id, @secret_hash, now() + sqlc.arg(ttl_micros)::bigint * interval '1 microsecond',
        sqlc.arg(request_id)::uuid)
ON CONFLICT (request_id) DO NOTHING
RETURNING id, created_at, expires_at, revoked_at, used_at, node_id, public_key_hash,
          (expires_at <= now())::boolean AS expired;

-- name: GetEnrollmentTokenByRequest :one
SELECT id, created_at, expires_at, revoked_at, used_at, node_id, public_key_hash,
       (expires_at <= now())::boolean AS expired
FROM enrollment_tokens
WHERE request_id = sqlc.arg(request_id)::uuid;

-- name: ReissueEnrollmentToken :one
-- ReissueEnrollmentToken replaces the secret hash of the token admin
-- request @request_id made, only while the token is neither used nor
-- revoked; otherwise it returns no row and changes nothing. Expiry and
-- creation time stay: it is the same token.
UPDATE enrollment_tokens
SET secret_hash = @secret_hash
WHERE id = @id
  AND request_id = sqlc.arg(request_id)::uuid
  AND used_at IS NULL
  AND revoked_at IS NULL
RETURNING id, created_at, expires_at, revoked_at, used_at, node_id, public_key_hash,
          (expires_at <= now())::boolean AS expired;

-- name: RevokeActiveEnrollmentToken :one
-- RevokeActiveEnrollmentToken revokes a token that is unused, unrevoked
-- and unexpired (by the database clock); otherwise it returns no row and
-- changes nothing.
UPDATE enrollment_tokens
SET revoked_at = now()
WHERE id = @id
  AND used_at IS NULL
  AND revoked_at IS NULL
  AND expires_at > now()
RETURNING id, created_at, expires_at, revoked_at, used_at, node_id, public_key_hash,
          (expires_at <= now())::boolean AS expired;

-- name: ListEnrollmentTokensByAge :many
-- ListEnrollmentTokensByAge pages oldest first by (created_at, id)
-- (keyset): the rows after the cursor, or from the start when @first_page.
-- Without @include_inactive only usable tokens (unused, unrevoked,
-- unexpired by the database clock) are listed. It never returns the
-- secret hash.
SELECT id, created_at, expires_at, revoked_at, used_at, node_id, public_key_hash,
       (expires_at <= now())::boolean AS expired
FROM enrollment_tokens
WHERE (sqlc.arg(first_page)::boolean
       OR (created_at, id) > (sqlc.arg(after_created_at)::timestamptz, sqlc.arg(after_id)::text))
  AND (sqlc.arg(include_inactive)::boolean
       OR (used_at IS NULL AND revoked_at IS NULL AND expires_at > now()))
ORDER BY created_at, id
LIMIT @page_size;

-- name: EnrollmentTokensOfNodes :many
-- EnrollmentTokensOfNodes returns, for each of @node_ids that a token
-- enrolled, the id of that token (the first used, should there be more).
SELECT DISTINCT ON (node_id) node_id::uuid AS node_id, id
FROM enrollment_tokens
WHERE node_id = ANY(sqlc.arg(node_ids)::uuid[])
ORDER BY node_id, used_at, id;
