-- name: ChoosePlacementNode :one
-- ChoosePlacementNode picks the node for a new placement, reading durable
-- presence only. A node qualifies when it is enabled, ready for
-- generation @generation and present (node_present, migration 0019: its
-- connection is still held, its latest health report arrived less than 45
-- seconds ago by the database clock, and it was recorded under the owner
-- epoch that holds the unexpired execution lease; the one predicate the
-- admin API reports too). Among those it takes the one
-- holding the fewest environments (unreleased placements or unreleased
-- allocations, so reservations and unresolved resources both count),
-- provided it holds fewer than @max_active and fewer than its reported
-- capacity fits: reported CPU / @cpu_millis, memory / @memory_bytes and
-- free disk / @disk_bytes sandboxes (a zero need bounds nothing). Ties go
-- to the lowest id. No row when none has room.
--
-- What a node holds is node_load.held, which the database keeps exact in
-- every transaction that inserts or releases a placement or an allocation
-- (migration 0013): one row per node is read, not every held Environment
-- of the installation. The chosen node's node_load row stays locked until
-- the transaction ends (FOR UPDATE), and the placement's own insert
-- raises its count in the same transaction, so two concurrent placements
-- never both take a node's last free slot. Nodes whose row another
-- placement holds locked right now are skipped (SKIP LOCKED), so
-- concurrent creations spread over nodes instead of queueing on one;
-- when that leaves no row, ChoosePlacementNodeWait decides.
--
-- max_retained is not counted here: nothing is retained (suspended with
-- its storage kept) before suspension exists, so there is no retained row
-- to count. When suspension lands, the retained allocations of a node
-- (compute_phase recording a suspended incarnation, still unreleased) get
-- their own count compared with the deployment's max_retained, both here
-- and in the suspended-to-restoring transition, under the same row lock.
SELECT n.id, h.held
FROM nodes n
JOIN node_presence p ON p.node_id = n.id
JOIN node_load h ON h.node_id = n.id
WHERE n.state = 'enabled'
  AND p.ready AND p.generation = @generation::bigint
  AND node_present(p.connected, p.reported_at, p.owner_epoch)
  AND h.held < @max_active::bigint
  AND h.held < coalesce(p.cpu_millis / nullif(@cpu_millis::bigint, 0), @max_active::bigint)
  AND h.held < coalesce(p.memory_bytes / nullif(@memory_bytes::bigint, 0), @max_active::bigint)
  AND h.held < coalesce(p.disk_free_bytes / nullif(@disk_bytes::bigint, 0), @max_active::bigint)
ORDER BY h.held, n.id
LIMIT 1
FOR UPDATE OF h SKIP LOCKED;

-- name: ChoosePlacementNodeWait :one
-- ChoosePlacementNodeWait is ChoosePlacementNode waiting for the rows
-- concurrent placements hold instead of skipping them: when every node
-- with room is being placed on, it waits for them and re-checks each
-- locked row's count once it is free (READ COMMITTED re-evaluates the
-- conditions on the row's new version), so a node that filled up meanwhile
-- is passed over and no creation is refused while a node still has room.
SELECT n.id, h.held
FROM nodes n
JOIN node_presence p ON p.node_id = n.id
JOIN node_load h ON h.node_id = n.id
WHERE n.state = 'enabled'
  AND p.ready AND p.generation = @generation::bigint
  AND node_present(p.connected, p.reported_at, p.owner_epoch)
  AND h.held < @max_active::bigint
  AND h.held < coalesce(p.cpu_millis / nullif(@cpu_millis::bigint, 0), @max_active::bigint)
  AND h.held < coalesce(p.memory_bytes / nullif(@memory_bytes::bigint, 0), @max_active::bigint)
  AND h.held < coalesce(p.disk_free_bytes / nullif(@disk_bytes::bigint, 0), @max_active::bigint)
ORDER BY h.held, n.id
LIMIT 1
FOR UPDATE OF h;

-- name: CountNodeHeld :one
-- CountNodeHeld counts the environments node @node_id holds actively:
-- unreleased placements or unreleased allocations, except those whose
-- unreleased allocation on the node is suspended (CountNodeRetained).
SELECT count(*)::bigint FROM (
    SELECT p.environment_id FROM placements p WHERE p.node_id = @node_id::uuid AND p.state <> 'released'
    UNION
    SELECT a.environment_id FROM allocations a WHERE a.node_id = @node_id::uuid AND a.state <> 'released'
) h
WHERE NOT EXISTS (SELECT 1 FROM allocations s
                  WHERE s.environment_id = h.environment_id AND s.node_id = @node_id::uuid
                    AND s.state <> 'released' AND s.compute_phase = 'suspended');

-- name: CountNodeRetained :one
-- CountNodeRetained counts the environments node @node_id holds only as a
-- snapshot: their unreleased allocation on it is suspended.
SELECT count(*)::bigint FROM allocations a
WHERE a.node_id = @node_id::uuid AND a.state <> 'released' AND a.compute_phase = 'suspended';

-- name: InsertPlacement :one
INSERT INTO placements (environment_id, node_id, generation)
VALUES (@environment_id, @node_id, @generation)
RETURNING *;

-- name: GetPlacement :one
SELECT * FROM placements WHERE environment_id = @environment_id;

-- name: LockPlacementRow :one
-- LockPlacementRow reads an Environment's placement and locks its row
-- until the transaction ends.
SELECT * FROM placements WHERE environment_id = @environment_id FOR UPDATE;

-- name: ReservePlacement :exec
-- ReservePlacement turns an active placement back into a reservation: its
-- allocation was released while the Environment still waits for compute
-- on the same node.
UPDATE placements SET state = 'reserved'
WHERE environment_id = @environment_id AND state = 'active';

-- name: ActivatePlacement :exec
-- ActivatePlacement marks a reserved placement active (compute observed).
UPDATE placements SET state = 'active'
WHERE environment_id = @environment_id AND state = 'reserved';

-- name: ReleasePlacement :exec
UPDATE placements SET state = 'released', released_at = coalesce(released_at, now())
WHERE environment_id = @environment_id;

-- name: NodeHolds :one
-- NodeHolds reports whether node @node_id holds anything: an unreleased
-- placement (reservation), an unreleased allocation (including unknown
-- creations and pending cleanup; its snapshots are its own), or a fork's
-- seed not yet discarded (migration 0035).
SELECT (EXISTS (SELECT 1 FROM placements p WHERE p.node_id = @node_id::uuid AND p.state <> 'released')
     OR EXISTS (SELECT 1 FROM allocations a WHERE a.node_id = @node_id::uuid AND a.state <> 'released')
     OR EXISTS (SELECT 1 FROM fork_seeds s WHERE s.node_id = @node_id::uuid AND s.state <> 'discarded'))::boolean AS holds;

-- name: ChooseDirectLane :one
-- ChooseDirectLane reads, for a new placement of direct generation
-- @generation on the direct lane (migration 0020), what the lane holds
-- (direct_load.held, kept exact by the hold trigger) and whether the
-- generation's readiness is fresh: ready, recorded under the owner epoch
-- that holds the unexpired execution lease, less than 45 seconds ago (the
-- node_present rule, 0019, with ready for connected), with its
-- diagnostic code. The lane's one direct_load row stays locked until the
-- transaction ends, so concurrent direct placements run one at a time and
-- never both take the last free slot.
SELECT l.held,
       coalesce((SELECT node_present(r.ready, r.checked_at, r.owner_epoch)
                 FROM direct_readiness r WHERE r.generation = @generation::bigint), false)::boolean AS ready,
       coalesce((SELECT r.diagnostic_code
                 FROM direct_readiness r WHERE r.generation = @generation::bigint), '')::text AS diagnostic_code
FROM direct_load l
FOR UPDATE OF l;

-- name: GetDirectHeld :one
-- GetDirectHeld returns how many Environments the direct lane holds.
SELECT held, retained FROM direct_load;

-- name: GetGenerationMode :one
-- GetGenerationMode returns generation @generation's mode ('nodes' or
-- 'direct'); no row when it is not stored.
SELECT mode FROM deployment_generations WHERE generation = @generation;

-- name: RecordDirectReadiness :one
-- RecordDirectReadiness stores the probe result of direct generation
-- @generation, checked now. The backend fingerprint is bound once: the
-- first non-null one stays. A Core with an older owner epoch than the
-- recorded one changes nothing (and gets no row back).
INSERT INTO direct_readiness (generation, owner_epoch, ready, diagnostic_code, backend_fingerprint, checked_at)
VALUES (@generation, @owner_epoch, @ready, @diagnostic_code, sqlc.narg(backend_fingerprint), now())
ON CONFLICT (generation) DO UPDATE
SET owner_epoch = EXCLUDED.owner_epoch,
    ready = EXCLUDED.ready,
    diagnostic_code = EXCLUDED.diagnostic_code,
    backend_fingerprint = coalesce(direct_readiness.backend_fingerprint, EXCLUDED.backend_fingerprint),
    checked_at = EXCLUDED.checked_at
WHERE direct_readiness.owner_epoch <= EXCLUDED.owner_epoch
RETURNING *;

-- name: GetDirectReadiness :one
-- GetDirectReadiness returns direct generation @generation's readiness
-- and whether it is fresh now (the ChooseDirectLane rule).
SELECT r.*, node_present(r.ready, r.checked_at, r.owner_epoch)::boolean AS fresh
FROM direct_readiness r
WHERE r.generation = @generation;

-- name: ListDirectGenerations :many
-- ListDirectGenerations returns the direct generations Core's direct lane
-- serves, ascending: the current generation when it is a direct one, and
-- every direct generation an unreleased placement or allocation on the
-- lane is bound to (a retained generation keeps its adapter until it
-- holds nothing).
SELECT g.generation
FROM deployment_generations g
WHERE g.mode = 'direct'
  AND (g.generation = (SELECT d.current_generation FROM deployment d)
       OR EXISTS (SELECT 1 FROM placements p
                  WHERE p.node_id IS NULL AND p.generation = g.generation AND p.state <> 'released')
       OR EXISTS (SELECT 1 FROM allocations a
                  WHERE a.node_id IS NULL AND a.generation = g.generation AND a.state <> 'released'))
ORDER BY g.generation;

-- name: ListDirectReadiness :many
-- ListDirectReadiness returns every direct generation's recorded
-- readiness with whether it is fresh now (the ChooseDirectLane rule),
-- ascending.
SELECT r.*, node_present(r.ready, r.checked_at, r.owner_epoch)::boolean AS fresh
FROM direct_readiness r
ORDER BY r.generation;
