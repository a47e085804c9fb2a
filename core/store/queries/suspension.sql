-- name: NodeRetainedRoom :one
-- NodeRetainedRoom locks node @node_id's node_load row (the placement
-- lock) and reads whether it can take one more retained snapshot under
-- @max_retained: its retained count plus the suspensions in flight
-- (quiescing or suspending) of its unreleased allocations.
SELECT (l.retained + (SELECT count(*) FROM allocations a
                      WHERE a.node_id = l.node_id AND a.state <> 'released'
                        AND a.compute_phase IN ('quiescing', 'suspending')) < @max_retained::bigint)::boolean AS room
FROM node_load l
WHERE l.node_id = @node_id
FOR UPDATE;

-- name: NodeActiveRoom :one
-- NodeActiveRoom locks node @node_id's node_load row (the placement lock)
-- and reads whether it can hold one more Environment actively under
-- @max_active.
SELECT (l.held < @max_active::bigint)::boolean AS room
FROM node_load l
WHERE l.node_id = @node_id
FOR UPDATE;

-- name: ArmSuspension :one
-- ArmSuspension records the quiesce intent at @revision: running compute
-- of a running allocation moves to quiescing under operation @operation
-- (also the Runtime's suspension token), with the database clock of the
-- arming. No row when the revision moved or the allocation is not so.
-- A suspension an admin requested (suspend_requested_at) waits for no
-- quiet time (the caller checked the idle predicate without an idle
-- time); otherwise a restore or an aborted attempt less than
-- @quiet_seconds ago keeps it running. Arming consumes the request.
UPDATE allocations
SET compute_phase = 'quiescing', suspend_operation = @operation, quiesce_armed_at = now(),
    quiesce_acked_at = NULL, suspend_requested_at = NULL, revision = revision + 1, updated_at = now()
WHERE id = @id AND revision = @revision AND state = 'running' AND compute_phase = 'running'
  AND device_revoked_at IS NULL
  AND (suspend_requested_at IS NOT NULL
       OR ((restored_at IS NULL OR restored_at <= now() - make_interval(secs => @quiet_seconds::integer))
           AND (suspension_aborted_at IS NULL
                OR suspension_aborted_at <= now() - make_interval(secs => @quiet_seconds::integer))))
RETURNING *;

-- name: RecordQuiesceAck :one
-- RecordQuiesceAck records the Runtime's acknowledgement of operation
-- @operation (the first time kept). No row unless the allocation is
-- quiescing under that operation.
UPDATE allocations
SET quiesce_acked_at = coalesce(quiesce_acked_at, now()), updated_at = now()
WHERE id = @id AND suspend_operation = @operation AND compute_phase = 'quiescing'
RETURNING *;

-- name: AbortQuiesce :one
-- AbortQuiesce ends the armed suspension @operation before any capture:
-- quiescing back to running. No row unless the allocation is quiescing
-- under that operation.
UPDATE allocations
SET compute_phase = 'running', suspend_operation = NULL, quiesce_armed_at = NULL,
    quiesce_acked_at = NULL, suspension_aborted_at = now(), revision = revision + 1, updated_at = now()
WHERE id = @id AND suspend_operation = @operation AND compute_phase = 'quiescing'
RETURNING *;

-- name: ClaimCapture :one
-- ClaimCapture consumes the capture receipt of operation @operation: a
-- compare-and-swap from an acknowledged quiescing to suspending that only
-- the operation wins, and only once.
UPDATE allocations
SET compute_phase = 'suspending', capture_dispatched_at = now(), revision = revision + 1, updated_at = now()
WHERE id = @id AND suspend_operation = @operation AND compute_phase = 'quiescing'
  AND quiesce_acked_at IS NOT NULL AND state = 'running' AND device_revoked_at IS NULL
RETURNING *;

-- name: RecordSuspended :one
-- RecordSuspended records the capture of operation @operation: the
-- snapshot as the provider named it, the source incarnation gone, and the
-- retention deadline anchored to the arming observation. No row unless
-- the allocation is suspending under that operation.
UPDATE allocations a
SET compute_phase = 'suspended', snapshot_id = @snapshot_id, snapshot_provenance = @snapshot_provenance,
    suspended_at = now(),
    retention_deadline = a.quiesce_armed_at + g.suspension_retention_seconds * interval '1 second',
    compute_id = NULL, suspend_operation = NULL, quiesce_armed_at = NULL, quiesce_acked_at = NULL,
    capture_dispatched_at = NULL, revision = a.revision + 1, updated_at = now()
FROM deployment_generations g
WHERE a.id = @id AND a.suspend_operation = @operation AND a.compute_phase = 'suspending'
  AND g.generation = a.generation AND g.suspension_retention_seconds IS NOT NULL
RETURNING a.*;

-- name: RollBackCapture :one
-- RollBackCapture records that the capture of operation @operation left
-- the source running (thawed, or never paused): suspending back to
-- running, with the source's native id when the provider confirmed it.
UPDATE allocations
SET compute_phase = 'running', suspend_operation = NULL, quiesce_armed_at = NULL, quiesce_acked_at = NULL,
    capture_dispatched_at = NULL, compute_id = coalesce(sqlc.narg(compute_id), compute_id),
    suspension_aborted_at = now(), revision = revision + 1, updated_at = now()
WHERE id = @id AND suspend_operation = @operation AND compute_phase = 'suspending'
RETURNING *;

-- name: ArmRestore :one
-- ArmRestore records the restore intent: suspended to restoring into
-- incarnation @compute_generation named @compute_name, under operation
-- @operation. The caller holds the node's placement lock and checked its
-- active room. No row when the revision moved, it is not suspended, or
-- its retention passed (expiry wins over wake).
UPDATE allocations
SET compute_phase = 'restoring', restore_operation = @operation, restore_dispatched_at = NULL,
    compute_generation = @compute_generation, compute_name = @compute_name,
    revision = revision + 1, updated_at = now()
WHERE id = @id AND revision = @revision AND compute_phase = 'suspended' AND state = 'running'
  AND device_revoked_at IS NULL AND retention_deadline > now()
RETURNING *;

-- name: AllocationOwesCompute :one
-- AllocationOwesCompute reads whether allocation @id still owes the
-- cleanup of an incarnation (an abandoned restore's target) not yet
-- confirmed absent.
SELECT EXISTS (SELECT 1 FROM allocation_leftovers
               WHERE allocation_id = @id AND kind = 'compute' AND deleted_at IS NULL)::boolean;

-- name: RetentionPassed :one
-- RetentionPassed reads, by the database clock, whether allocation @id is
-- suspended, or restoring and not yet recorded restored, with its
-- snapshot's retention deadline passed: expiry wins over a wake up to the
-- restore's final write (RecordRestored).
SELECT (compute_phase IN ('suspended', 'restoring') AND state = 'running' AND retention_deadline <= now())::boolean
FROM allocations WHERE id = @id;

-- name: ClaimRestore :one
-- ClaimRestore consumes the restore receipt of operation @operation, once,
-- while the allocation is running, its device not revoked and its
-- snapshot's retention deadline not passed (database clock).
UPDATE allocations
SET restore_dispatched_at = now(), revision = revision + 1, updated_at = now()
WHERE id = @id AND restore_operation = @operation AND compute_phase = 'restoring'
  AND restore_dispatched_at IS NULL AND state = 'running' AND device_revoked_at IS NULL
  AND retention_deadline > now()
RETURNING *;

-- name: RecordRestored :one
-- RecordRestored records the restore of operation @operation: the target
-- incarnation runs with native id @compute_id; the consumed snapshot
-- leaves the allocation (the caller records it as a leftover). It is the
-- restore's final write, and deletion, device revocation and retention
-- expiry win over it: no row unless the allocation is still running, its
-- device not revoked and its retention deadline not passed, by the
-- database clock of this compare-and-swap. The new incarnation's
-- keepalive lapse counts from the restore (keepalive_at cleared, like a
-- first incarnation's before its first keepalive).
UPDATE allocations
SET compute_phase = 'running', compute_id = @compute_id, snapshot_id = NULL, snapshot_provenance = NULL,
    suspended_at = NULL, retention_deadline = NULL, restore_operation = NULL, restore_dispatched_at = NULL,
    wake_requested_at = NULL, restored_at = now(), keepalive_at = NULL, revision = revision + 1, updated_at = now()
WHERE id = @id AND restore_operation = @operation AND compute_phase = 'restoring'
  AND state = 'running' AND device_revoked_at IS NULL AND retention_deadline > now()
RETURNING *;

-- name: AbandonRestore :one
-- AbandonRestore gives up the restore of operation @operation, whose target
-- (the exact instance the attempt made, observed) the caller records as a
-- leftover: restoring back to suspended. The target's generation stays the
-- allocation's, so the next restore uses a new incarnation, armed only
-- once the target is confirmed absent (AllocationOwesCompute).
UPDATE allocations
SET compute_phase = 'suspended', compute_id = NULL, restore_operation = NULL, restore_dispatched_at = NULL,
    revision = revision + 1, updated_at = now()
WHERE id = @id AND restore_operation = @operation AND compute_phase = 'restoring'
RETURNING *;

-- name: RequestWake :one
-- RequestWake records an admin's resume-now on compute in a suspension
-- phase (the first time kept); a queued Turn wakes without it.
UPDATE allocations
SET wake_requested_at = coalesce(wake_requested_at, now()), updated_at = now()
WHERE id = @id AND state = 'running' AND compute_phase <> 'running' AND device_revoked_at IS NULL
RETURNING *;

-- name: ListSuspensionWorkForNode :many
-- ListSuspensionWorkForNode pages, by id (keyset), the unreleased
-- allocations of node @node_id in a suspension phase, with what the
-- database clock says about each: whether the Session has work waiting
-- (a queued Turn, a pending file operation, or an explicit wake), whether the arming is older than
-- @quiesce_seconds, whether a dispatched restore is older than
-- @restore_seconds, and whether the retention deadline passed. The node
-- filter applies before the limit.
-- ProbeNodeWork repeats its predicate without the cursor: change both.
SELECT sqlc.embed(a),
       (a.wake_requested_at IS NOT NULL OR EXISTS (
           SELECT 1 FROM turns t WHERE t.session_id = e.session_id AND t.state = 'queued')
        OR EXISTS (
           SELECT 1 FROM file_operations f WHERE f.session_id = e.session_id AND f.state = 'pending'))::boolean AS work_waiting,
       (a.quiesce_armed_at IS NOT NULL
        AND a.quiesce_armed_at <= now() - make_interval(secs => @quiesce_seconds::integer))::boolean AS quiesce_overdue,
       (a.restore_dispatched_at IS NOT NULL
        AND a.restore_dispatched_at <= now() - make_interval(secs => @restore_seconds::integer))::boolean AS restore_overdue,
       (a.retention_deadline IS NOT NULL AND a.retention_deadline <= now())::boolean AS retention_expired
FROM allocations a
JOIN environments e ON e.id = a.environment_id
WHERE a.node_id = @node_id::uuid AND a.state = 'running' AND a.compute_phase <> 'running' AND a.id > @after
ORDER BY a.id
LIMIT @page_size;

-- name: InsertLeftover :exec
-- InsertLeftover records a leftover cleanup owes (once per identity).
INSERT INTO allocation_leftovers (allocation_id, kind, identity, provenance, generation, native_id)
VALUES (@allocation_id, @kind, @identity, @provenance, sqlc.narg(generation), sqlc.narg(native_id))
ON CONFLICT (allocation_id, kind, identity) DO NOTHING;

-- name: ListOwedLeftovers :many
-- ListOwedLeftovers reads the leftovers of allocation @allocation_id not
-- yet confirmed deleted, oldest first, except a suspension snapshot an
-- open fork borrowed: its children are seeded from it, so its deletion
-- waits for the fork to settle (forks.sql).
SELECT * FROM allocation_leftovers l
WHERE l.allocation_id = @allocation_id AND l.deleted_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM forks f
                  WHERE f.source_allocation_id = l.allocation_id AND f.borrowed
                    AND f.snapshot_id = l.identity AND f.state IN ('capturing', 'ready'))
ORDER BY id
LIMIT 32;

-- name: MarkLeftoverDeleted :execrows
-- MarkLeftoverDeleted records that the provider confirmed leftover @id
-- absent.
UPDATE allocation_leftovers SET deleted_at = now() WHERE id = @id AND deleted_at IS NULL;

-- name: MarkLeftoversOfAllocationDeleted :execrows
-- MarkLeftoversOfAllocationDeleted records that a confirmed Kill of
-- allocation @allocation_id removed all of its retained resources.
UPDATE allocation_leftovers SET deleted_at = now()
WHERE allocation_id = @allocation_id AND deleted_at IS NULL;

-- name: ListAllocationsOwingLeftovers :many
-- ListAllocationsOwingLeftovers pages the running allocations of node @node_id
-- that owe a leftover, by id.
-- ProbeNodeWork repeats its predicate without the cursor: change both.
SELECT DISTINCT a.id
FROM allocations a
JOIN allocation_leftovers l ON l.allocation_id = a.id AND l.deleted_at IS NULL
WHERE a.node_id = @node_id::uuid AND a.state = 'running' AND a.id > @after
ORDER BY a.id
LIMIT @page_size;

-- name: SessionHasEndedTurn :one
-- SessionHasEndedTurn reads whether a Turn of Session @session_id ended.
-- It decides nothing: session_idle_since is the one suspension predicate;
-- this only tells a refused SuspendSession what to wait for.
SELECT EXISTS (SELECT 1 FROM turns WHERE session_id = @session_id AND ended_at IS NOT NULL)::boolean;

-- name: InsertComputeRequest :one
-- InsertComputeRequest records request @request_id; no row when the id
-- was used before (GetComputeRequest reads it).
INSERT INTO session_compute_requests (request_id, session_id, kind)
VALUES (@request_id, @session_id, @kind)
ON CONFLICT (request_id) DO NOTHING
RETURNING *;

-- name: GetComputeRequest :one
SELECT * FROM session_compute_requests WHERE request_id = @request_id;

-- name: RequestSuspend :one
-- RequestSuspend records an admin's suspend-now on running compute (the
-- first time kept).
UPDATE allocations
SET suspend_requested_at = coalesce(suspend_requested_at, now()), updated_at = now()
WHERE id = @id AND state = 'running' AND compute_phase = 'running' AND device_revoked_at IS NULL
RETURNING *;

-- name: ProjectRetainedRoom :one
-- ProjectRetainedRoom locks project @project_id's project_load row (taken
-- before the node's) and reads whether it may retain one more snapshot
-- under its max_retained_sessions (NULL: always): its retained count plus
-- the suspensions in flight (quiescing or suspending) of what it holds.
SELECT (pr.max_retained_sessions IS NULL
        OR l.retained + (SELECT count(*) FROM project_holdings h
                         JOIN allocations a ON a.environment_id = h.environment_id
                         WHERE h.project_id = l.project_id AND NOT h.retained AND a.state <> 'released'
                           AND a.compute_phase IN ('quiescing', 'suspending')) < pr.max_retained_sessions)::boolean AS room
FROM project_load l
JOIN projects pr ON pr.id = l.project_id
WHERE l.project_id = @project_id
FOR UPDATE OF l;

-- name: ProjectActiveRoom :one
-- ProjectActiveRoom locks project @project_id's project_load row (taken
-- before the node's) and reads whether it may hold one more Environment
-- actively under its max_active_sessions (NULL: always).
SELECT (pr.max_active_sessions IS NULL OR l.held < pr.max_active_sessions)::boolean AS room
FROM project_load l
JOIN projects pr ON pr.id = l.project_id
WHERE l.project_id = @project_id
FOR UPDATE OF l;
