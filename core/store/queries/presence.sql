-- name: RecordNodePresence :one
-- RecordNodePresence stores a health report received on a connection. A
-- Core with an older owner epoch than the recorded one changes nothing
-- (and gets no row back).
INSERT INTO node_presence (node_id, connection_id, owner_epoch, generation, ready, diagnostic_code,
                           cpu_millis, memory_bytes, disk_free_bytes, connected, reported_at)
VALUES (@node_id, @connection_id, @owner_epoch, @generation, @ready, @diagnostic_code,
        @cpu_millis, @memory_bytes, @disk_free_bytes, true, now())
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
    reported_at = now()
WHERE node_presence.owner_epoch <= EXCLUDED.owner_epoch
RETURNING *;

-- name: GetNodePresence :one
-- GetNodePresence returns the node's latest presence and whether it counts
-- as present now: its connection still held, reported within 45 seconds
-- by the database clock, under the owner epoch that holds the unexpired
-- execution lease (the same predicate ChoosePlacementNode applies).
SELECT p.*,
       (p.connected
        AND p.reported_at > now() - interval '45 seconds'
        AND EXISTS (SELECT 1 FROM execution_lease l
                    WHERE l.owner_epoch = p.owner_epoch AND l.expires_at > now()))::boolean AS present
FROM node_presence p
WHERE p.node_id = @node_id;

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
