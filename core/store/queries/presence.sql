-- name: RecordNodePresence :one
-- RecordNodePresence stores a health report received on a connection. A
-- Core with an older owner epoch than the recorded one changes nothing
-- (and gets no row back).
INSERT INTO node_presence (node_id, connection_id, owner_epoch, generation, ready, diagnostic_code, reported_at)
VALUES (@node_id, @connection_id, @owner_epoch, @generation, @ready, @diagnostic_code, now())
ON CONFLICT (node_id) DO UPDATE
SET connection_id = EXCLUDED.connection_id,
    owner_epoch = EXCLUDED.owner_epoch,
    generation = EXCLUDED.generation,
    ready = EXCLUDED.ready,
    diagnostic_code = EXCLUDED.diagnostic_code,
    reported_at = now()
WHERE node_presence.owner_epoch <= EXCLUDED.owner_epoch
RETURNING *;

-- name: GetNodePresence :one
-- GetNodePresence returns the node's latest presence and whether it counts
-- as present now: reported within 45 seconds by the database clock, under
-- the installation's current owner epoch.
SELECT p.*,
       (p.reported_at > now() - interval '45 seconds'
        AND p.owner_epoch = (SELECT owner_epoch FROM installation)) AS present
FROM node_presence p
WHERE p.node_id = @node_id;
