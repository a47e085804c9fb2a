-- name: ChoosePlacementNode :one
-- ChoosePlacementNode picks, among the candidate nodes that are enabled,
-- the one holding the fewest environments (unreleased placements or
-- unreleased allocations, so reservations and unresolved resources both
-- count) provided it holds fewer than @max_active and fewer than its own
-- limit (@limits, parallel to @candidates: what its reported capacity fits;
-- a negative limit means none); ties go to the lowest id. No row when none
-- has room. Run it under LockPlacement.
SELECT n.id, count(h.environment_id)::bigint AS held
FROM nodes n
LEFT JOIN (
    SELECT node_id, environment_id FROM placements WHERE state <> 'released'
    UNION
    SELECT node_id, environment_id FROM allocations WHERE state <> 'released'
) h ON h.node_id = n.id
WHERE n.id = ANY(@candidates::uuid[]) AND n.state = 'enabled'
GROUP BY n.id
HAVING count(h.environment_id) < @max_active::bigint
   AND count(h.environment_id) < coalesce(nullif((@limits::bigint[])[array_position(@candidates::uuid[], n.id)], -1), @max_active::bigint)
ORDER BY count(h.environment_id), n.id
LIMIT 1;

-- name: CountNodeHeld :one
-- CountNodeHeld counts the environments node @node_id holds: unreleased
-- placements or unreleased allocations.
SELECT count(*)::bigint FROM (
    SELECT p.environment_id FROM placements p WHERE p.node_id = @node_id::uuid AND p.state <> 'released'
    UNION
    SELECT a.environment_id FROM allocations a WHERE a.node_id = @node_id::uuid AND a.state <> 'released'
) h;

-- name: InsertPlacement :one
INSERT INTO placements (environment_id, node_id, generation)
VALUES (@environment_id, @node_id, @generation)
RETURNING *;

-- name: GetPlacement :one
SELECT * FROM placements WHERE environment_id = @environment_id;

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
