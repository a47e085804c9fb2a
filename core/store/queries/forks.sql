-- name: GetForkByRequest :one
-- GetForkByRequest reads the fork of Session @source_session_id under
-- request @request_id: a retry finds the first call's fork.
SELECT * FROM forks WHERE source_session_id = @source_session_id AND request_id = @request_id;

-- name: GetFork :one
SELECT * FROM forks WHERE id = @id;

-- name: InsertFork :one
-- InsertFork records an admitted fork with the count it placed.
INSERT INTO forks (id, source_session_id, source_allocation_id, node_id, request_id, requested, placed,
                   unplaced_reason, state, capture_op, borrowed, snapshot_id, snapshot_provenance)
VALUES (@id, @source_session_id, @source_allocation_id, @node_id, @request_id, @requested, @placed,
        @unplaced_reason, @state, sqlc.narg('capture_op'), @borrowed, sqlc.narg('snapshot_id'), sqlc.narg('snapshot_provenance'))
RETURNING *;

-- name: SetAllocationFork :exec
-- SetAllocationFork marks a fork child's first allocation, in the fork's
-- transaction: its Create waits for the fork's snapshot and is seeded
-- from it.
UPDATE allocations SET fork_id = @fork_id, fork_index = @fork_index WHERE id = @id AND state = 'allocated' AND fork_id IS NULL;

-- name: ChooseForkPlacementNode :one
-- ChooseForkPlacementNode is ChoosePlacementNode for one node, @node_id
-- (a fork's child goes where the fork's snapshot is): the node's row when
-- it qualifies and has room, locked FOR UPDATE (waiting for concurrent
-- placements on it, as ChoosePlacementNodeWait does); no row otherwise.
SELECT n.id, h.held
FROM nodes n
JOIN node_presence p ON p.node_id = n.id
JOIN node_load h ON h.node_id = n.id
WHERE n.id = @node_id::uuid AND n.state = 'enabled'
  AND p.ready AND p.generation = @generation::bigint
  AND node_present(p.connected, p.reported_at, p.owner_epoch)
  AND h.held < @max_active::bigint
  AND h.held < coalesce(p.cpu_millis / nullif(@cpu_millis::bigint, 0), @max_active::bigint)
  AND h.held < coalesce(p.memory_bytes / nullif(@memory_bytes::bigint, 0), @max_active::bigint)
  AND h.held < coalesce(p.disk_free_bytes / nullif(@disk_bytes::bigint, 0), @max_active::bigint)
FOR UPDATE OF h;

-- name: ListForkChildSessions :many
-- ListForkChildSessions reads the Sessions of fork @fork_id's children,
-- in the order they were placed.
SELECT s.*
FROM allocations a
JOIN environments e ON e.id = a.environment_id
JOIN sessions s ON s.id = e.session_id
WHERE a.fork_id = @fork_id
ORDER BY a.fork_index;

-- name: ListForkWorkForNode :many
-- ListForkWorkForNode pages, by id, the forks of node @node_id its worker
-- has work for: a capture owed or unconfirmed (capturing), and a ready
-- fork whose every child's Create is settled (to settle).
-- ProbeNodeWork repeats its predicate without the cursor: change both.
SELECT f.*
FROM forks f
WHERE f.node_id = @node_id::uuid AND f.state IN ('capturing', 'ready') AND f.id > @after
  AND (f.state = 'capturing'
       OR NOT EXISTS (SELECT 1 FROM allocations a
                      WHERE a.fork_id = f.id AND a.state IN ('allocated', 'create_dispatched', 'create_unknown')))
ORDER BY f.id
LIMIT @page_size;

-- name: ClaimForkCapture :one
-- ClaimForkCapture spends the capture receipt of capturing fork @id under
-- operation @capture_op: the one Capture may be sent. No row when it was
-- spent or the fork moved on.
UPDATE forks SET capture_claimed_at = now()
WHERE id = @id AND capture_op = @capture_op AND state = 'capturing' AND capture_claimed_at IS NULL
RETURNING *;

-- name: RecordForkCaptured :one
-- RecordForkCaptured records the snapshot of fork @id's claimed capture:
-- the fork is ready, and its children's Creates may go.
UPDATE forks SET state = 'ready', snapshot_id = @snapshot_id, snapshot_provenance = @snapshot_provenance, captured_at = now()
WHERE id = @id AND capture_op = @capture_op AND state = 'capturing' AND capture_claimed_at IS NOT NULL
RETURNING *;

-- name: FailFork :one
-- FailFork ends open fork @id with @failure_code.
UPDATE forks SET state = 'failed', failure_code = @failure_code, ended_at = now()
WHERE id = @id AND state IN ('capturing', 'ready')
RETURNING *;

-- name: SettleFork :one
-- SettleFork ends ready fork @id once every child's Create is settled.
UPDATE forks f SET state = 'settled', ended_at = now()
WHERE f.id = @id AND f.state = 'ready'
  AND NOT EXISTS (SELECT 1 FROM allocations a
                  WHERE a.fork_id = f.id AND a.state IN ('allocated', 'create_dispatched', 'create_unknown'))
RETURNING *;

-- name: ListForkChildrenUncreated :many
-- ListForkChildrenUncreated reads the Environments of fork @fork_id's
-- children whose Create was never sent (receipt fresh) and which have not
-- ended: a failed fork ends them.
SELECT a.environment_id
FROM allocations a
JOIN environments e ON e.id = a.environment_id
WHERE a.fork_id = @fork_id AND a.state = 'allocated' AND e.terminal_cause IS NULL
ORDER BY a.environment_id;

-- name: UpdateForkPlaced :one
-- UpdateForkPlaced records, in the fork's transaction, how many children
-- were placed and the refusal reason that stopped the rest.
UPDATE forks SET placed = @placed, unplaced_reason = @unplaced_reason
WHERE id = @id
RETURNING *;
