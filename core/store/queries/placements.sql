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
-- placement (reservation) or an unreleased allocation (including unknown
-- creations and pending cleanup).
SELECT (EXISTS (SELECT 1 FROM placements p WHERE p.node_id = @node_id::uuid AND p.state <> 'released')
     OR EXISTS (SELECT 1 FROM allocations a WHERE a.node_id = @node_id::uuid AND a.state <> 'released'))::boolean AS holds;
