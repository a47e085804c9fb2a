-- name: InsertAllocation :one
INSERT INTO allocations (id, environment_id, tenant_id, node_id, generation,
                         credential_digest, device_id, create_receipt,
                         credential_ciphertext, credential_nonce)
VALUES (@id, @environment_id, @tenant_id, @node_id, @generation,
        @credential_digest, @device_id, @create_receipt,
        @credential_ciphertext, @credential_nonce)
RETURNING *;

-- name: GetAllocationCredential :one
-- GetAllocationCredential reads the allocation's sealed device credential
-- (both NULL for an allocation from before it was kept).
SELECT credential_ciphertext, credential_nonce FROM allocations WHERE id = @id;

-- name: GetAllocation :one
SELECT * FROM allocations WHERE id = @id;

-- name: GetAllocationAddresses :many
-- GetAllocationAddresses reads what addresses a provider call (ids, lane,
-- generation) of the allocations of @ids that exist, in id order.
SELECT id, environment_id, tenant_id, node_id, generation
FROM allocations WHERE id = ANY (@ids::uuid[]) ORDER BY id;

-- name: GetUnreleasedAllocationForEnvironment :one
SELECT * FROM allocations WHERE environment_id = @environment_id AND state <> 'released';

-- name: LockAllocation :one
-- LockAllocation reads an allocation and locks its row until the
-- transaction ends.
SELECT * FROM allocations WHERE id = @id FOR UPDATE;

-- name: ClaimCreate :one
-- ClaimCreate consumes the create receipt: a compare-and-swap from
-- allocated to create_dispatched that only the matching receipt wins, and
-- only once. No row when the receipt does not match or is spent.
UPDATE allocations
SET state = 'create_dispatched', create_dispatched_at = now(),
    revision = revision + 1, updated_at = now()
WHERE id = @id AND create_receipt = @create_receipt AND state = 'allocated'
RETURNING *;

-- name: AbandonCreate :one
-- AbandonCreate gives up an unknown Create: a compare-and-swap at
-- @revision from create_unknown or create_dispatched to
-- cleanup_requested, only when the Create was dispatched at least
-- @after_seconds ago by the database clock. It revokes the allocation's
-- device and records the abandonment (first values kept). No row when the
-- revision moved, the state is another or the Create is younger.
UPDATE allocations
SET state                = 'cleanup_requested',
    create_abandoned_at  = coalesce(create_abandoned_at, now()),
    device_revoked_at    = coalesce(device_revoked_at, now()),
    cleanup_requested_at = coalesce(cleanup_requested_at, now()),
    revision             = revision + 1,
    updated_at           = now()
WHERE id = @id AND revision = @revision
  AND state IN ('create_unknown', 'create_dispatched')
  AND create_dispatched_at <= now() - make_interval(secs => @after_seconds::integer)
RETURNING *;

-- name: UpdateAllocation :one
-- UpdateAllocation writes one lifecycle transition decided by the store at
-- revision @revision; no row when the revision moved. Cleanup and release
-- times come from the database clock and keep their first value.
UPDATE allocations
SET state                = @state,
    create_settled       = @create_settled,
    absence_receipt      = @absence_receipt,
    bootstrap_complete   = @bootstrap_complete,
    provider_id          = sqlc.narg(provider_id),
    cleanup_requested_at = CASE WHEN @state IN ('cleanup_requested', 'cleanup_unknown', 'cleanup_confirmed', 'released')
                                THEN coalesce(cleanup_requested_at, now()) END,
    cleanup_confirmed_at = CASE WHEN @state IN ('cleanup_confirmed', 'released')
                                THEN coalesce(cleanup_confirmed_at, now()) END,
    released_at          = CASE WHEN @state = 'released' THEN now() END,
    revision             = revision + 1,
    updated_at           = now()
WHERE id = @id AND revision = @revision
RETURNING *;

-- name: ListAllocationWorkForNode :many
-- ListAllocationWorkForNode pages, by id (keyset), the allocations of one
-- node the allocation scan acts on: creation dispatched, unknown or failed,
-- cleanup requested, unknown or confirmed (allocations_node_work, migration
-- 0030). The node filter applies before the limit.
-- ProbeNodeWork repeats its predicate without the cursor: change both.
SELECT * FROM allocations
WHERE node_id = @node_id::uuid AND id > @after
  AND state IN ('create_dispatched', 'create_unknown', 'create_failed',
                'cleanup_requested', 'cleanup_unknown', 'cleanup_confirmed')
ORDER BY id
LIMIT @page_size;

-- name: ProbeNodeWork :one
-- ProbeNodeWork says, in one statement, which of a node's lifecycle scans
-- have a row anywhere: each flag is its scan's own predicate without the
-- cursor (ListPendingForNode, ListAllocationWorkForNode,
-- ListSuspensionWorkForNode, ListSuspensionCandidatesForNode,
-- ListAllocationsOwingLeftovers, ListForkWorkForNode, ListSeedWorkForNode),
-- so a flag is false exactly when that
-- scan's first page would be empty. A change to one of those predicates
-- is made here too (store test TestProbeNodeWorkFlagsMatchFirstPages).
SELECT
    EXISTS (
        SELECT 1
        FROM placements p
        JOIN environments e ON e.id = p.environment_id
        JOIN sessions s ON s.id = e.session_id
        LEFT JOIN allocations a ON a.environment_id = p.environment_id AND a.state <> 'released'
        WHERE p.node_id = @node_id::uuid AND p.state = 'reserved'
          AND e.state = 'pending'
          AND (a.id IS NULL OR (a.state = 'allocated' AND a.node_id = p.node_id
                                AND (a.fork_id IS NULL
                                     OR EXISTS (SELECT 1 FROM forks f WHERE f.id = a.fork_id AND f.state = 'ready'
                                                AND (f.node_id = a.node_id
                                                     OR EXISTS (SELECT 1 FROM fork_seeds fs
                                                                WHERE fs.fork_id = f.id AND fs.node_id = a.node_id
                                                                  AND fs.state = 'ready'))))))
    )::boolean AS pending,
    EXISTS (
        SELECT 1 FROM allocations
        WHERE node_id = @node_id::uuid
          AND state IN ('create_dispatched', 'create_unknown', 'create_failed',
                        'cleanup_requested', 'cleanup_unknown', 'cleanup_confirmed')
    )::boolean AS allocation_work,
    EXISTS (
        SELECT 1
        FROM allocations a
        JOIN environments e ON e.id = a.environment_id
        WHERE a.node_id = @node_id::uuid AND a.state = 'running' AND a.compute_phase <> 'running'
    )::boolean AS suspension_work,
    EXISTS (
        SELECT 1
        FROM allocations a
        JOIN environments e ON e.id = a.environment_id
        JOIN sessions s ON s.id = e.session_id
        JOIN deployment_generations g ON g.generation = a.generation
        CROSS JOIN LATERAL (SELECT session_idle_since(s.id) AS since) i
        WHERE a.node_id = @node_id::uuid AND a.state = 'running' AND a.create_settled
          AND a.compute_phase = 'running' AND a.device_revoked_at IS NULL
          AND e.state NOT IN ('failed', 'expired') AND s.state = 'active'
          AND g.suspension_idle_seconds IS NOT NULL
          AND EXISTS (SELECT 1 FROM turns t WHERE t.session_id = s.id AND t.ended_at IS NOT NULL)
          AND ((a.suspend_requested_at IS NOT NULL AND i.since IS NOT NULL)
               OR (i.since <= now() - g.suspension_idle_seconds * interval '1 second'
                   AND (a.restored_at IS NULL OR a.restored_at <= now() - g.suspension_idle_seconds * interval '1 second')
                   AND (a.suspension_aborted_at IS NULL
                        OR a.suspension_aborted_at <= now() - g.suspension_idle_seconds * interval '1 second')))
    )::boolean AS suspension_candidates,
    EXISTS (
        SELECT 1
        FROM allocations a
        JOIN allocation_leftovers l ON l.allocation_id = a.id AND l.deleted_at IS NULL
        WHERE a.node_id = @node_id::uuid AND a.state = 'running'
    )::boolean AS leftovers,
    EXISTS (
        SELECT 1
        FROM forks f
        WHERE f.node_id = @node_id::uuid AND f.state IN ('capturing', 'ready')
          AND (f.state = 'capturing'
               OR NOT EXISTS (SELECT 1 FROM allocations a
                              WHERE a.fork_id = f.id AND a.state IN ('allocated', 'create_dispatched', 'create_unknown')))
    )::boolean AS forks,
    EXISTS (
        SELECT 1
        FROM fork_seeds s
        JOIN forks f ON f.id = s.fork_id
        WHERE s.node_id = @node_id::uuid AND s.state <> 'discarded'
          AND ((s.state IN ('owed', 'importing') AND f.state = 'ready') OR f.state IN ('settled', 'failed'))
    )::boolean AS seeds;

-- name: ListPendingForNode :many
-- ListPendingForNode pages, by environment id, the pending Environments
-- whose placement on node @node_id is reserved (no compute observed, or
-- its allocation released while the Environment still waits: see
-- ReservePlacement) and whose compute has not been asked for: no
-- unreleased allocation, or one whose create receipt is still fresh
-- (allocated) and, for a fork's child, whose fork's snapshot is ready,
-- on its node (the source's, or the node's ready seed: forks.sql). An allocated allocation's placement is always reserved
-- (only a running outcome activates it), and a released allocation's is
-- reserved again while its Session is active; so the rows an active
-- placement leaves out are those of a Session being deleted or archived,
-- which get no Create. The reserved placements of a node are their own
-- index range (placements_node_reserved, migration 0032): an idle node's
-- page reads none of its running Sessions' placements.
-- ProbeNodeWork repeats its predicate without the cursor: change both.
SELECT p.environment_id, p.generation, e.session_id, e.tenant_id,
       s.state AS session_state,
       a.id AS allocation_id
FROM placements p
JOIN environments e ON e.id = p.environment_id
JOIN sessions s ON s.id = e.session_id
LEFT JOIN allocations a ON a.environment_id = p.environment_id AND a.state <> 'released'
WHERE p.node_id = @node_id::uuid AND p.state = 'reserved' AND p.environment_id > @after
  AND e.state = 'pending'
  AND (a.id IS NULL OR (a.state = 'allocated' AND a.node_id = p.node_id
                        AND (a.fork_id IS NULL
                             OR EXISTS (SELECT 1 FROM forks f WHERE f.id = a.fork_id AND f.state = 'ready'
                                        AND (f.node_id = a.node_id
                                             OR EXISTS (SELECT 1 FROM fork_seeds fs
                                                        WHERE fs.fork_id = f.id AND fs.node_id = a.node_id
                                                          AND fs.state = 'ready'))))))
ORDER BY p.environment_id
LIMIT @page_size;

-- name: ListAllocationsByAge :many
-- ListAllocationsByAge pages allocations in creation order by
-- (created_at, id) (keyset), each with the Session its Environment serves
-- and that Session's project and tenant (only @project_id's, when set):
-- the rows after the cursor (the zero cursor is before every row, as in
-- ListSessionsByAge). Released
-- allocations are listed only with @include_released.
SELECT sqlc.embed(a), e.session_id, s.project_id, s.tenant_id
FROM allocations a
JOIN environments e ON e.id = a.environment_id
JOIN sessions s ON s.id = e.session_id
WHERE (a.created_at, a.id) > (sqlc.arg(after_created_at)::timestamptz, sqlc.arg(after_id)::uuid)
  AND (sqlc.arg(include_released)::boolean OR a.state <> 'released')
  AND (sqlc.narg(project_id)::uuid IS NULL OR s.project_id = sqlc.narg(project_id)::uuid)
ORDER BY a.created_at, a.id
LIMIT @page_size;

-- name: GetAllocationWithSession :one
SELECT sqlc.embed(a), e.session_id, s.project_id, s.tenant_id
FROM allocations a
JOIN environments e ON e.id = a.environment_id
JOIN sessions s ON s.id = e.session_id
WHERE a.id = @id;

-- name: CountCreateFailures :one
-- CountCreateFailures counts the Environment's allocations whose Create
-- was sent and then settled by an explicit absence receipt or abandoned
-- (AbandonCreate): the attempts that ended without compute.
SELECT count(*)::bigint FROM allocations
WHERE environment_id = @environment_id AND create_dispatched_at IS NOT NULL
  AND (absence_receipt OR create_abandoned_at IS NOT NULL);

-- name: ListObservableForNode :many
-- ListObservableForNode pages, by id (keyset), the running allocations of
-- node @node_id whose creation settled and whose current incarnation
-- runs (no capture or restore under way, not suspended): the ones the
-- observation scan reads. The node filter applies before the limit. Each row says, by the
-- database clock, whether its observation and its keepalive are due,
-- whether its keepalive lapsed (none confirmed for an hour, counted from
-- the last keepalive or, before the first, from its last lifecycle
-- transition), whether an open Runtime connection of the lease holder's
-- epoch serves it and whether one of its Session's Turns is running. An
-- observation is due by observation_time (migration 0029), which counts
-- the page marks of running compute found as recorded; read_at is the
-- database time of the read, the time such a mark records. The lane's
-- marks are read once per page (lane_marks: each id's newest mark), not
-- by observation_time per row, which costs a function call and a scan of
-- the lane's marks for every row (3.3x the page's database time at 1,000
-- nodes, issue 32); observation_due is observation_time's value.
WITH lane_marks AS MATERIALIZED (
    SELECT u.id, max(m.observed_at) AS marked_at
    FROM observation_marks m CROSS JOIN LATERAL unnest(m.ids) AS u(id)
    WHERE m.lane = @node_id::uuid
    GROUP BY u.id
)
SELECT sqlc.embed(a),
       (a.observed_at IS NULL
        OR greatest(a.observed_at, k.marked_at)
           <= now() - sqlc.arg(observe_after_micros)::bigint * interval '1 microsecond')::boolean AS observation_due,
       (a.keepalive_at IS NULL
        OR a.keepalive_at <= now() - sqlc.arg(keepalive_after_micros)::bigint * interval '1 microsecond')::boolean AS keepalive_due,
       (coalesce(a.keepalive_at, a.updated_at) <= now() - interval '1 hour')::boolean AS keepalive_lapsed,
       EXISTS (SELECT 1 FROM runtime_connections c
               JOIN execution_lease l ON l.owner_epoch = c.owner_epoch AND l.expires_at > now()
               WHERE c.allocation_id = a.id AND c.disconnected_at IS NULL)::boolean AS runtime_connected,
       EXISTS (SELECT 1 FROM turns t JOIN environments e ON e.session_id = t.session_id
               WHERE e.id = a.environment_id AND t.state = 'running')::boolean AS turn_running,
       now()::timestamptz AS read_at
FROM allocations a
LEFT JOIN lane_marks k ON k.id = a.id
WHERE a.node_id = @node_id::uuid AND a.state = 'running' AND a.create_settled AND a.id > @after
  AND a.compute_phase IN ('running', 'quiescing')
ORDER BY a.id
LIMIT @page_size;

-- name: InsertObservationMark :exec
-- InsertObservationMark records that the allocations @ids of lane @lane
-- (a node's id, or the nil UUID for the direct lane) were observed running
-- as recorded after @observed_at, the database time their page was read,
-- and deletes the lane's marks older than @horizon_micros. A second mark
-- of the same page and instant adds nothing: the first is kept.
WITH pruned AS (
    DELETE FROM observation_marks
    WHERE lane = @lane
      AND observed_at < now() - sqlc.arg(horizon_micros)::bigint * interval '1 microsecond'
)
INSERT INTO observation_marks (lane, observed_at, first_id, ids)
VALUES (@lane, @observed_at, (@ids::uuid[])[1], @ids::uuid[])
ON CONFLICT (lane, observed_at, first_id) DO NOTHING;

-- name: RecordObservation :one
-- RecordObservation records an observation of a running allocation's
-- compute at the database time, and with @keepalive also the keepalive the
-- provider confirmed; no row unless the allocation is still running at
-- revision @revision. It changes neither the state nor the revision: an
-- observation is evidence, not a lifecycle transition.
UPDATE allocations
SET observed_at      = now(),
    observed_compute = sqlc.arg(observed_compute)::text,
    observed_reason  = sqlc.arg(observed_reason)::text,
    keepalive_at     = CASE WHEN sqlc.arg(keepalive)::boolean THEN now() ELSE keepalive_at END
WHERE id = @id AND revision = @revision AND state = 'running'
RETURNING *;
-- name: RevokeEnvironmentDevice :many
-- RevokeEnvironmentDevice revokes the device of the Environment's
-- unreleased allocation (terminal cleanup); the first time is kept.
UPDATE allocations
SET device_revoked_at = coalesce(device_revoked_at, now()),
    updated_at = CASE WHEN device_revoked_at IS NULL THEN now() ELSE updated_at END
WHERE environment_id = @environment_id AND state <> 'released'
RETURNING id;

-- name: AllocationCancelDraining :one
-- AllocationCancelDraining reports whether the Session of the allocation
-- has a running Turn whose cancellation was requested less than
-- drain_seconds ago by the database clock: terminal cleanup asked its
-- Runtime to cancel, and the result may still arrive (CancelDrain).
SELECT EXISTS (
    SELECT 1
    FROM allocations a
    JOIN environments e ON e.id = a.environment_id
    JOIN turns t ON t.session_id = e.session_id
    WHERE a.id = @id
      AND t.state = 'running'
      AND t.cancel_requested_at > now() - make_interval(secs => @drain_seconds::integer)
);

-- name: ListSuspensionCandidatesForNode :many
-- ListSuspensionCandidatesForNode pages, by id (keyset), the running
-- allocations of node @node_id whose creation settled and whose compute is
-- in no suspension phase, of an active Session whose Environment has not
-- ended and whose device is not revoked, under a generation with a suspension policy,
-- whose Session has been idle (session_idle_since) for at least that
-- policy's idle time by the database clock, and whose last restore and
-- last suspension attempt that ended without a snapshot are that old too;
-- or whose suspension an admin requested (SuspendSession) and whose
-- Session is idle by the same predicate, whatever the idle time. The node
-- filter applies before the limit. A Session is idle only once one of
-- its Turns ended (session_idle_since), so Sessions without an ended Turn
-- are passed over by an index probe before the function is called for
-- the others.
-- ProbeNodeWork repeats its predicate without the cursor: change both.
SELECT sqlc.embed(a), coalesce(i.since, now())::timestamptz AS idle_since
FROM allocations a
JOIN environments e ON e.id = a.environment_id
JOIN sessions s ON s.id = e.session_id
JOIN deployment_generations g ON g.generation = a.generation
CROSS JOIN LATERAL (SELECT session_idle_since(s.id) AS since) i
WHERE a.node_id = @node_id::uuid AND a.state = 'running' AND a.create_settled AND a.id > @after
  AND a.compute_phase = 'running' AND a.device_revoked_at IS NULL
  AND e.state NOT IN ('failed', 'expired') AND s.state = 'active'
  AND g.suspension_idle_seconds IS NOT NULL
  AND EXISTS (SELECT 1 FROM turns t WHERE t.session_id = s.id AND t.ended_at IS NOT NULL)
  AND ((a.suspend_requested_at IS NOT NULL AND i.since IS NOT NULL)
       OR (i.since <= now() - g.suspension_idle_seconds * interval '1 second'
           AND (a.restored_at IS NULL OR a.restored_at <= now() - g.suspension_idle_seconds * interval '1 second')
           AND (a.suspension_aborted_at IS NULL
                OR a.suspension_aborted_at <= now() - g.suspension_idle_seconds * interval '1 second')))
ORDER BY a.id
LIMIT @page_size;

-- name: SessionIdleSince :one
-- SessionIdleSince reads session_idle_since of Session @id (idle false:
-- not idle, and idle_since is then the read's time) with the database
-- clock of the same read.
SELECT (session_idle_since(@id::uuid) IS NOT NULL)::boolean AS idle,
       coalesce(session_idle_since(@id::uuid), now())::timestamptz AS idle_since,
       now()::timestamptz AS read_at;

-- name: CountUnreleasedAllocations :many
-- CountUnreleasedAllocations counts the unreleased allocations by state
-- (released ones are history and grow without bound): the partial index
-- allocations_node_unreleased finds them.
SELECT state, count(*)::bigint AS allocations
FROM allocations
WHERE state <> 'released'
GROUP BY state;

-- name: ListAllocationWorkForDirect :many
-- ListAllocationWorkForDirect is ListAllocationWorkForNode for the direct
-- lane (node_id NULL, migration 0020). The lane's three scans are copies of
-- the node ones rather than one query on node_id IS NOT DISTINCT FROM
-- @node_id, which the planner cannot serve from the node_id indexes: each
-- copy's node_id IS NULL (like the node's node_id = @node_id) is an index
-- range.
SELECT * FROM allocations
WHERE node_id IS NULL AND id > @after
  AND state IN ('create_dispatched', 'create_unknown', 'create_failed',
                'cleanup_requested', 'cleanup_unknown', 'cleanup_confirmed')
ORDER BY id
LIMIT @page_size;

-- name: ListPendingForDirect :many
-- ListPendingForDirect is ListPendingForNode for the direct lane (node_id
-- NULL, migration 0020).
SELECT p.environment_id, p.generation, e.session_id, e.tenant_id,
       s.state AS session_state,
       a.id AS allocation_id
FROM placements p
JOIN environments e ON e.id = p.environment_id
JOIN sessions s ON s.id = e.session_id
LEFT JOIN allocations a ON a.environment_id = p.environment_id AND a.state <> 'released'
WHERE p.node_id IS NULL AND p.state = 'reserved' AND p.environment_id > @after
  AND e.state = 'pending'
  AND (a.id IS NULL OR (a.state = 'allocated' AND a.node_id IS NOT DISTINCT FROM p.node_id))
ORDER BY p.environment_id
LIMIT @page_size;

-- name: ListObservableForDirect :many
-- ListObservableForDirect is ListObservableForNode for the direct lane
-- (node_id NULL, migration 0020); its marks' lane is the nil UUID.
WITH lane_marks AS MATERIALIZED (
    SELECT u.id, max(m.observed_at) AS marked_at
    FROM observation_marks m CROSS JOIN LATERAL unnest(m.ids) AS u(id)
    WHERE m.lane = '00000000-0000-0000-0000-000000000000'::uuid
    GROUP BY u.id
)
SELECT sqlc.embed(a),
       (a.observed_at IS NULL
        OR greatest(a.observed_at, k.marked_at)
           <= now() - sqlc.arg(observe_after_micros)::bigint * interval '1 microsecond')::boolean AS observation_due,
       (a.keepalive_at IS NULL
        OR a.keepalive_at <= now() - sqlc.arg(keepalive_after_micros)::bigint * interval '1 microsecond')::boolean AS keepalive_due,
       (coalesce(a.keepalive_at, a.updated_at) <= now() - interval '1 hour')::boolean AS keepalive_lapsed,
       EXISTS (SELECT 1 FROM runtime_connections c
               JOIN execution_lease l ON l.owner_epoch = c.owner_epoch AND l.expires_at > now()
               WHERE c.allocation_id = a.id AND c.disconnected_at IS NULL)::boolean AS runtime_connected,
       EXISTS (SELECT 1 FROM turns t JOIN environments e ON e.session_id = t.session_id
               WHERE e.id = a.environment_id AND t.state = 'running')::boolean AS turn_running,
       now()::timestamptz AS read_at
FROM allocations a
LEFT JOIN lane_marks k ON k.id = a.id
WHERE a.node_id IS NULL AND a.state = 'running' AND a.create_settled AND a.id > @after
  AND a.compute_phase IN ('running', 'quiescing')
ORDER BY a.id
LIMIT @page_size;

-- name: ListDirectAllocationsOfGeneration :many
-- ListDirectAllocationsOfGeneration returns the unreleased allocations on
-- the direct lane bound to generation @generation whose Create settled
-- with a native id and whose cleanup is not confirmed: what still owns
-- something at the vendor, and so what a key replacement must see with
-- the new key. Bounded by max_active.
SELECT a.*
FROM allocations a
WHERE a.node_id IS NULL AND a.generation = @generation
  AND a.state NOT IN ('cleanup_confirmed', 'released') AND a.provider_id IS NOT NULL
ORDER BY a.id;

-- name: RecordArchiveCancelTurn :exec
-- RecordArchiveCancelTurn records the running Turn whose cancellation the
-- archive that first revoked the allocation's device requested; a value
-- already recorded stays.
UPDATE allocations
SET archive_cancel_turn_id = coalesce(archive_cancel_turn_id, @turn_id)
WHERE id = @id AND device_revoked_at IS NOT NULL;
