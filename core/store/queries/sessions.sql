-- name: LockSessionRequest :exec
-- LockSessionRequest takes the transaction-scoped advisory lock of one
-- CreateSession request (class: the ASCII of "bsrq"; key: the hash of
-- the project and the request id: request ids are unique per project), so a retry that races the original waits for it and then finds
-- its rows. Requests with other ids do not wait: placement itself locks
-- only the chosen node's node_load row (ChoosePlacementNode).
SELECT pg_advisory_xact_lock(1651733105,
    hashtext(CAST(sqlc.arg(project_id)::uuid AS text) || '/' || CAST(sqlc.arg(request_id)::uuid AS text)));

-- name: GetSessionByRequestID :one
-- GetSessionByRequestID finds a project's CreateSession request: request
-- ids are unique per project (sessions_project_request_id_key).
SELECT * FROM sessions WHERE project_id = @project_id AND request_id = @request_id;

-- name: GetSessionInProject :one
-- GetSessionInProject reads a Session only when it belongs to the project:
-- another project's Session is no row, as a missing one is.
SELECT * FROM sessions WHERE id = @id AND project_id = @project_id;

-- name: GetSession :one
SELECT * FROM sessions WHERE id = @id;

-- name: LockSession :one
-- LockSession reads a Session and locks its row until the transaction
-- ends: the Session lock that orders a new allocation against deletion.
SELECT * FROM sessions WHERE id = @id FOR UPDATE;

-- name: InsertSession :one
INSERT INTO sessions (id, tenant_id, project_id, display_name, request_id)
VALUES (@id, @tenant_id, @project_id, @display_name, @request_id)
RETURNING *;

-- name: RequestSessionDeletion :one
-- RequestSessionDeletion keeps the first request time when called again.
UPDATE sessions
SET state = 'delete_requested', delete_requested_at = coalesce(delete_requested_at, now())
WHERE id = @id
RETURNING *;

-- name: InsertEnvironment :one
INSERT INTO environments (id, session_id, tenant_id)
VALUES (@id, @session_id, @tenant_id)
RETURNING *;

-- name: GetEnvironment :one
SELECT * FROM environments WHERE id = @id;

-- name: GetEnvironmentBySession :one
SELECT * FROM environments WHERE session_id = @session_id;

-- name: ListSessionsByAge :many
-- ListSessionsByAge pages Sessions in creation order by (created_at, id)
-- (keyset): the rows after the cursor; the zero cursor (year 1, the nil
-- id) is before every row, so the first page needs no other condition,
-- which would keep the planner from seeking the index to the cursor (an
-- OR here made every page scan the index from its start).
-- A deleted Session (deletion requested and no unreleased allocation left
-- for its Environment) is listed only with @include_deleted.
SELECT s.* FROM sessions s
WHERE (s.created_at, s.id) > (sqlc.arg(after_created_at)::timestamptz, sqlc.arg(after_id)::uuid)
  AND (sqlc.arg(include_deleted)::boolean
       OR s.state <> 'delete_requested'
       OR EXISTS (SELECT 1 FROM environments e
                  JOIN allocations a ON a.environment_id = e.id
                  WHERE e.session_id = s.id AND a.state <> 'released'))
ORDER BY s.created_at, s.id
LIMIT @page_size;

-- name: ListProjectSessionsByAge :many
-- ListProjectSessionsByAge is ListSessionsByAge within one project: its
-- own query rather than an optional filter on that one, so the planner
-- seeks sessions_project_created_at_id (project, then the keyset cursor)
-- on every page (TestListProjectSessionsByAgeSeeksIndex).
SELECT s.* FROM sessions s
WHERE s.project_id = @project_id
  AND (s.created_at, s.id) > (sqlc.arg(after_created_at)::timestamptz, sqlc.arg(after_id)::uuid)
  AND (sqlc.arg(include_deleted)::boolean
       OR s.state <> 'delete_requested'
       OR EXISTS (SELECT 1 FROM environments e
                  JOIN allocations a ON a.environment_id = e.id
                  WHERE e.session_id = s.id AND a.state <> 'released'))
ORDER BY s.created_at, s.id
LIMIT @page_size;

-- name: LockSessionShared :one
-- LockSessionShared reads a Session and holds a share lock on its row, so
-- its deletion waits for the transaction (a Turn is never queued to a
-- Session whose deletion committed first).
SELECT * FROM sessions WHERE id = @id FOR SHARE;

-- name: LockEnvironment :one
-- LockEnvironment reads an Environment and locks its row until the
-- transaction ends.
SELECT * FROM environments WHERE id = @id FOR UPDATE;

-- name: RecordEnvironmentTerminal :one
-- RecordEnvironmentTerminal writes an Environment's end as terminal
-- cleanup decided it: its state, failure code and terminal cause, the
-- time on the database clock (the first one kept).
UPDATE environments
SET state = @state, failure_code = sqlc.narg(failure_code),
    terminal_cause = @terminal_cause, terminated_at = coalesce(terminated_at, now())
WHERE id = @id
RETURNING *;

-- name: ListEnvironmentsBySessions :many
-- ListEnvironmentsBySessions reads the Environments of a page of Sessions
-- at once (ListSessionsByAge's bundles), instead of one query per Session.
SELECT * FROM environments WHERE session_id = ANY(@session_ids::uuid[]);

-- name: ListPlacementsByEnvironments :many
SELECT * FROM placements WHERE environment_id = ANY(@environment_ids::uuid[]);

-- name: ListUnreleasedAllocationsByEnvironments :many
SELECT * FROM allocations WHERE environment_id = ANY(@environment_ids::uuid[]) AND state <> 'released';

-- name: CountLiveSessions :many
-- CountLiveSessions counts the Sessions whose deletion has not completed
-- (active, or deletion requested while an allocation is still owned),
-- grouped by what sessions.StateOf reads of each: a handful of rows
-- whatever the number of Sessions. It reads every Session row once (no
-- index on state), so the metrics that use it run it at most once per
-- refresh interval, never per request.
SELECT s.state AS session_state, e.state AS environment_state,
       coalesce(a.state, '')::text AS allocation_state,
       coalesce(a.create_settled, false)::boolean AS create_settled,
       count(*)::bigint AS sessions
FROM sessions s
JOIN environments e ON e.session_id = s.id
LEFT JOIN allocations a ON a.environment_id = e.id AND a.state <> 'released'
WHERE s.state IN ('active', 'archived') OR a.id IS NOT NULL
GROUP BY s.state, e.state, a.state, a.create_settled;

-- name: ArchiveSessionRow :one
-- ArchiveSessionRow records an active Session archived; the first
-- archive time stays.
UPDATE sessions
SET state = 'archived', archived_at = coalesce(archived_at, now())
WHERE id = @id AND state IN ('active', 'archived')
RETURNING *;
