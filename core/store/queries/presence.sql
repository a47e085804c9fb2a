-- name: RecordNodePresence :one
-- RecordNodePresence stores a health report received on a connection.
-- reported_at is when the report arrived by the database clock: now()
-- less @report_age_micros, the time since its arrival as Core measured it
-- (so a report recorded again, with no newer one, keeps ageing). A Core
-- with an older owner epoch than the recorded one changes nothing (and
-- gets no row back).
INSERT INTO node_presence (node_id, connection_id, owner_epoch, generation, ready, diagnostic_code,
                           cpu_millis, memory_bytes, disk_free_bytes, connected, reported_at)
VALUES (@node_id, @connection_id, @owner_epoch, @generation, @ready, @diagnostic_code,
        @cpu_millis, @memory_bytes, @disk_free_bytes, true,
        now() - (sqlc.arg(report_age_micros)::bigint * interval '1 microsecond'))
ON CONFLICT (node_id) DO UPDATE
SET connection_id = EXCLUDED.connection_id,
    owner_epoch = EXCLUDED.owner_epoch,
    generation = EXCLUDED.generation,
    ready = EXCLUDED.ready,
    diagnostic_code = EXCLUDED.diagnostic_code,
    cpu_millis = EXCLUDED.cpu_millis,
    memory_bytes = EXCLUDED.memory_bytes,
    disk_free_bytes = EXCLUDED.disk_free_bytes,
    connected = true,
    reported_at = EXCLUDED.reported_at
WHERE node_presence.owner_epoch <= EXCLUDED.owner_epoch
RETURNING *;

-- name: GetNodePresence :one
-- GetNodePresence returns the node's latest presence and whether it counts
-- as present now (node_present, migration 0019: the predicate placement
-- applies).
SELECT p.*, node_present(p.connected, p.reported_at, p.owner_epoch)::boolean AS present
FROM node_presence p
WHERE p.node_id = @node_id;

-- name: ListNodePresence :many
-- ListNodePresence is GetNodePresence of each of the nodes @ids that has a
-- record.
SELECT p.*, node_present(p.connected, p.reported_at, p.owner_epoch)::boolean AS present
FROM node_presence p
WHERE p.node_id = ANY(@ids::uuid[]);

-- name: MarkNodeDisconnected :execrows
-- MarkNodeDisconnected records that connection @connection_id to the node
-- ended: the node stops counting as present at once instead of after 45
-- seconds. A record of a newer connection is left alone.
UPDATE node_presence SET connected = false
WHERE node_id = @node_id AND connection_id = @connection_id;

-- name: BindNodeBackend :one
-- BindNodeBackend binds the node to @backend_fingerprint unless it is bound
-- already (the first binding stays), and returns the bound fingerprint. The
-- caller has passed the owner fence in the same transaction.
INSERT INTO node_backends (node_id, backend_fingerprint, owner_epoch)
VALUES (@node_id, @backend_fingerprint, @owner_epoch)
ON CONFLICT (node_id) DO UPDATE SET node_id = node_backends.node_id
RETURNING backend_fingerprint;

-- name: GetNodeBackend :one
-- GetNodeBackend returns the backend the node is bound to (no row while it
-- is unbound).
SELECT backend_fingerprint FROM node_backends WHERE node_id = @node_id;
