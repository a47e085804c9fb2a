-- name: InsertReset :one
-- InsertReset starts a reset bound to the current generation (NULL when
-- none is committed) and the database clock: its request time is the
-- clock when the insert runs, after the caller took the deployment row's
-- lock, so every Session an admission committed before it (each holds the
-- row shared) was created before it; its deadline is @timeout after.
WITH t AS (SELECT clock_timestamp() AS at)
INSERT INTO deployment_resets (id, request_id, actor, generation, requested_at, deadline)
SELECT @id, @request_id, @actor,
       (SELECT current_generation FROM deployment),
       t.at, t.at + make_interval(secs => @timeout_seconds::bigint)
FROM t
RETURNING *;

-- name: GetReset :one
SELECT * FROM deployment_resets WHERE id = @id;

-- name: GetResetByRequest :one
SELECT * FROM deployment_resets WHERE request_id = @request_id;

-- name: GetLatestReset :one
-- GetLatestReset returns the reset requested last.
SELECT * FROM deployment_resets ORDER BY requested_at DESC, id DESC LIMIT 1;

-- name: GetActiveReset :one
-- GetActiveReset returns the active reset, if any, and whether its
-- deadline passed on the database clock.
SELECT r.*, (r.deadline <= now())::boolean AS expired
FROM deployment_resets r
WHERE r.phase NOT IN ('done', 'failed');

-- name: GetDeploymentFence :one
-- GetDeploymentFence reads the admission fence (the active reset) and the
-- generation floor.
SELECT reset_id, generation_floor FROM deployment;

-- name: SetDeploymentReset :exec
-- SetDeploymentReset sets (a reset starts) or clears (it fails) the
-- admission fence.
UPDATE deployment SET reset_id = @reset_id, updated_at = now();

-- name: ListResetSessions :many
-- ListResetSessions is one keyset page of the Sessions a reset archives:
-- active, created at or before its request time, after the cursor.
SELECT id, created_at
FROM sessions
WHERE state = 'active'
  AND created_at <= @requested_at::timestamptz
  AND (created_at, id) > (@after_created_at::timestamptz, @after_id::uuid)
ORDER BY created_at, id
LIMIT @page_size;

-- name: AdvanceResetCursor :execrows
-- AdvanceResetCursor moves an archiving reset's cursor past Session
-- (@created_at, @session_id), counting it when the reset archived it.
UPDATE deployment_resets
SET cursor_created_at = @created_at, cursor_id = @session_id,
    sessions_archived = sessions_archived + @archived::bigint
WHERE id = @id AND phase = 'archiving';

-- name: MoveReset :execrows
-- MoveReset moves reset @id from phase @from_phase to @to_phase.
UPDATE deployment_resets SET phase = @to_phase WHERE id = @id AND phase = @from_phase;

-- name: RecordResetProgress :execrows
-- RecordResetProgress records the held snapshot of an active reset when
-- it changed.
UPDATE deployment_resets
SET held = @held, held_offline = @held_offline, progress_at = now()
WHERE id = @id AND phase NOT IN ('done', 'failed')
  AND (held, held_offline) IS DISTINCT FROM (@held::bigint, @held_offline::bigint);

-- name: ListHeld :many
-- ListHeld is the held resources in one snapshot and one now(): each
-- unreleased allocation (one owing a leftover stays unreleased) and each
-- unreleased placement without one, by the lane that holds it (the
-- allocation's or placement's node; NULL is Core's direct lane), with the
-- lane's presence by the node_present rule (for the direct lane: any
-- direct generation's readiness recorded fresh under the lease, ready or
-- not: presence is not provider readiness).
WITH held AS (
    SELECT a.node_id FROM allocations a WHERE a.state <> 'released'
    UNION ALL
    SELECT p.node_id FROM placements p
    WHERE p.state <> 'released'
      AND NOT EXISTS (SELECT 1 FROM allocations a
                      WHERE a.environment_id = p.environment_id AND a.state <> 'released'))
SELECT h.node_id, count(*)::bigint AS held,
       (CASE WHEN h.node_id IS NULL
             THEN EXISTS (SELECT 1 FROM direct_readiness r WHERE node_present(true, r.checked_at, r.owner_epoch))
             ELSE coalesce((SELECT node_present(pr.connected, pr.reported_at, pr.owner_epoch)
                            FROM node_presence pr WHERE pr.node_id = h.node_id), false)
        END)::boolean AS present
FROM held h
GROUP BY h.node_id
ORDER BY h.node_id NULLS FIRST;

-- name: ClearDeployment :one
-- ClearDeployment clears the deployment at a reset's end, in its
-- finalization transaction (the deployment row locked): no current
-- generation, no serving pin, no fence, and the floor at the empty
-- generation, above every committed one. It returns the empty generation.
UPDATE deployment
SET current_generation = NULL, serving_generation = NULL, serving_since = NULL, reset_id = NULL,
    generation_floor = greatest(generation_floor,
                                (SELECT coalesce(max(generation), 0) FROM deployment_generations)) + 1,
    updated_at = now()
RETURNING generation_floor;

-- name: FinishReset :one
UPDATE deployment_resets
SET phase = 'done', empty_generation = @empty_generation, held = 0, held_offline = 0,
    progress_at = now(), ended_at = now()
WHERE id = @id AND phase = 'finalizing'
RETURNING *;

-- name: FailExpiredReset :one
-- FailExpiredReset ends active reset @id failed when its deadline passed
-- on the database clock.
UPDATE deployment_resets
SET phase = 'failed', failure_code = @failure_code, ended_at = now()
WHERE id = @id AND phase NOT IN ('done', 'failed') AND deadline <= now()
RETURNING *;
