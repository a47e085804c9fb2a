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
-- ended, only those on node @node_id when it is set: a failed fork ends
-- them all, a failed seed its node's.
SELECT a.environment_id
FROM allocations a
JOIN environments e ON e.id = a.environment_id
WHERE a.fork_id = @fork_id AND a.state = 'allocated' AND e.terminal_cause IS NULL
  AND (sqlc.narg('node_id')::uuid IS NULL OR a.node_id = sqlc.narg('node_id')::uuid)
ORDER BY a.environment_id;

-- name: UpdateForkPlaced :one
-- UpdateForkPlaced records, in the fork's transaction, how many children
-- were placed and the refusal reason that stopped the rest.
UPDATE forks SET placed = @placed, unplaced_reason = @unplaced_reason
WHERE id = @id
RETURNING *;

-- name: InsertForkSeed :exec
-- InsertForkSeed owes fork @fork_id a seed on node @node_id (once).
INSERT INTO fork_seeds (fork_id, node_id, operation) VALUES (@fork_id, @node_id, @operation)
ON CONFLICT (fork_id, node_id) DO NOTHING;

-- name: GetForkSeed :one
SELECT * FROM fork_seeds WHERE fork_id = @fork_id AND node_id = @node_id;

-- name: ListSeedWorkForNode :many
-- ListSeedWorkForNode pages, by fork id, node @node_id's seed work: a seed
-- to import (owed or importing) of a ready fork, and any seed not yet
-- discarded of a fork that has ended; with a child of the fork on the
-- node (via_allocation_id), which addresses the node's calls.
-- ProbeNodeWork repeats its predicate without the cursor: change both.
SELECT s.*, f.state AS fork_state, f.source_allocation_id, f.snapshot_id AS fork_snapshot_id,
       f.snapshot_provenance AS fork_snapshot_provenance, f.node_id AS source_node_id,
       (SELECT a.id FROM allocations a WHERE a.fork_id = f.id AND a.node_id = s.node_id
        ORDER BY a.fork_index LIMIT 1)::uuid AS via_allocation_id
FROM fork_seeds s
JOIN forks f ON f.id = s.fork_id
WHERE s.node_id = @node_id::uuid AND s.state <> 'discarded' AND s.fork_id > @after
  AND ((s.state IN ('owed', 'importing') AND f.state = 'ready') OR f.state IN ('settled', 'failed'))
ORDER BY s.fork_id
LIMIT @page_size;

-- name: ClaimForkSeed :one
-- ClaimForkSeed records an import attempt of the seed of fork @fork_id on
-- node @node_id while its fork is ready. No row when the seed is not owed
-- or importing, or its fork not ready.
UPDATE fork_seeds s SET state = 'importing', attempts = attempts + 1
FROM forks f
WHERE s.fork_id = @fork_id AND s.node_id = @node_id AND s.state IN ('owed', 'importing')
  AND f.id = s.fork_id AND f.state = 'ready'
RETURNING s.*;

-- name: RecordForkSeedReady :one
UPDATE fork_seeds SET state = 'ready', snapshot_id = @snapshot_id, snapshot_provenance = @snapshot_provenance, ready_at = now()
WHERE fork_id = @fork_id AND node_id = @node_id AND state = 'importing'
RETURNING *;

-- name: FailForkSeed :one
UPDATE fork_seeds SET state = 'failed', ended_at = now()
WHERE fork_id = @fork_id AND node_id = @node_id AND state IN ('owed', 'importing')
RETURNING *;

-- name: DiscardForkSeed :one
UPDATE fork_seeds SET state = 'discarded', ended_at = coalesce(ended_at, now())
WHERE fork_id = @fork_id AND node_id = @node_id AND state <> 'discarded'
RETURNING *;


-- name: ListForkSeedNodes :many
-- ListForkSeedNodes reads the nodes fork @fork_id owes a seed.
SELECT node_id FROM fork_seeds WHERE fork_id = @fork_id ORDER BY node_id;
