-- name: GetDeviceAllocation :one
-- GetDeviceAllocation reads the allocation a Runtime device authenticates
-- as, with its Session, and locks the allocation row so connection
-- changes of one device serialize.
SELECT a.id, a.environment_id, a.state, a.credential_digest, a.create_settled,
       a.bootstrap_complete, a.device_revoked_at, a.compute_phase, a.quiesce_acked_at, e.session_id, s.state AS session_state
FROM allocations a
JOIN environments e ON e.id = a.environment_id
JOIN sessions s ON s.id = e.session_id
WHERE a.device_id = @device_id
FOR UPDATE OF a;

-- name: CloseOpenRuntimeConnections :many
-- CloseOpenRuntimeConnections ends the allocation's open connection (a
-- replaced or stale one) and returns the ids it closed.
UPDATE runtime_connections
SET disconnected_at = now()
WHERE allocation_id = @allocation_id AND disconnected_at IS NULL
RETURNING id;

-- name: NextRuntimeConnectionGeneration :one
SELECT (coalesce(max(generation), 0) + 1)::bigint FROM runtime_connections
WHERE allocation_id = @allocation_id;

-- name: InsertRuntimeConnection :one
-- InsertRuntimeConnection records an accepted connection, only while
-- @owner_epoch holds the unexpired execution lease (database clock).
INSERT INTO runtime_connections (id, allocation_id, generation, owner_epoch, runtime_version)
SELECT @id, @allocation_id, @generation, @owner_epoch, @runtime_version
FROM execution_lease WHERE owner_epoch = @owner_epoch AND expires_at > now()
RETURNING *;

-- name: MarkRuntimePrepared :one
UPDATE runtime_connections c
SET prepared_at = coalesce(c.prepared_at, now()), last_seen_at = now()
FROM execution_lease l
WHERE c.id = @id AND c.disconnected_at IS NULL AND l.owner_epoch = c.owner_epoch AND l.expires_at > now()
RETURNING c.*;

-- name: TouchRuntimeConnection :execrows
UPDATE runtime_connections SET last_seen_at = now()
WHERE id = @id AND disconnected_at IS NULL;

-- name: CloseRuntimeConnection :execrows
UPDATE runtime_connections SET disconnected_at = now()
WHERE id = @id AND disconnected_at IS NULL;

-- name: GetRuntimeConnection :one
-- GetRuntimeConnection also reads the database clock, the one clock the
-- gateway compares the Turns' database timestamps with.
SELECT sqlc.embed(runtime_connections), now()::timestamptz AS read_at
FROM runtime_connections WHERE id = @id;

-- name: ListRuntimeReadiness :many
-- ListRuntimeReadiness returns, for the given allocations, the open
-- connection accepted under the owner epoch that holds the execution lease
-- (a connection of another epoch belongs to a Core that is gone).
SELECT c.* FROM runtime_connections c
JOIN execution_lease l ON l.owner_epoch = c.owner_epoch AND l.expires_at > now()
WHERE c.allocation_id = ANY(@allocation_ids::uuid[]) AND c.disconnected_at IS NULL;
