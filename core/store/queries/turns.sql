-- name: InsertTurn :one
-- InsertTurn queues a Turn; its queue deadline is on the database clock.
INSERT INTO turns (id, session_id, request_id, request_digest, argv, shell_script,
                   working_directory, input_ciphertext, input_nonce, timeout_ms,
                   queue_deadline, max_output_bytes)
VALUES (@id, @session_id, @request_id, @request_digest, sqlc.narg(argv)::text[], sqlc.narg(shell_script),
        @working_directory, @input_ciphertext, @input_nonce, @timeout_ms,
        now() + make_interval(secs => sqlc.arg(queue_timeout_ms)::bigint / 1000.0), @max_output_bytes)
RETURNING *;

-- name: GetTurn :one
SELECT * FROM turns WHERE id = @id;

-- name: GetTurnByRequestID :one
-- GetTurnByRequestID finds a Session's SubmitTurn request: request ids
-- are unique per Session (turns_session_request_id_key).
SELECT * FROM turns WHERE session_id = @session_id AND request_id = @request_id;

-- name: ListTurns :many
-- ListTurns pages a Session's Turns in submission order (keyset on seq).
SELECT * FROM turns
WHERE session_id = @session_id AND seq > @after_seq
ORDER BY seq
LIMIT @page_size;

-- name: ClaimNextTurn :one
-- ClaimNextTurn moves the Session's first queued Turn to running on the
-- connection: only while nothing else of the Session runs, the connection
-- is open and prepared under @owner_epoch, which holds the unexpired
-- execution lease, its device is not revoked (terminal cleanup), its
-- compute is running (no suspension armed or under way: the one
-- compute-phase check Turn claims and capture admission share) and the
-- Session is active. A Turn claimed once is never claimed again.
-- ClaimFileOperation (files.sql) repeats the connection's conditions:
-- change both.
UPDATE turns
SET state = 'running', connection_id = @connection_id, dispatched_at = now()
WHERE turns.id = (SELECT q.id FROM turns q
                  WHERE q.session_id = @session_id AND q.state = 'queued'
                    AND q.queue_deadline > now() AND q.cancel_requested_at IS NULL
                  ORDER BY q.seq LIMIT 1 FOR UPDATE)
  AND NOT EXISTS (SELECT 1 FROM turns r WHERE r.session_id = @session_id AND r.state = 'running')
  AND EXISTS (SELECT 1 FROM runtime_connections c
              JOIN execution_lease l ON l.owner_epoch = c.owner_epoch
              JOIN allocations a ON a.id = c.allocation_id AND a.device_revoked_at IS NULL
                                    AND a.compute_phase = 'running'
              WHERE c.id = @connection_id AND c.disconnected_at IS NULL
                AND c.prepared_at IS NOT NULL AND l.owner_epoch = @owner_epoch
                AND l.expires_at > now())
  AND EXISTS (SELECT 1 FROM sessions s WHERE s.id = @session_id AND s.state = 'active')
RETURNING *;

-- name: MarkTurnStarted :one
UPDATE turns SET started_at = coalesce(started_at, now())
WHERE id = @id AND connection_id = @connection_id AND state = 'running'
RETURNING *;

-- name: AdvanceTurnOutput :one
-- AdvanceTurnOutput accounts for one chunk of output: only at the exact
-- next offset of its stream, only within the Turn's output bound, only
-- from the connection the Turn runs on.
UPDATE turns
SET stdout_recorded = stdout_recorded + CASE WHEN @stream::smallint = 1 THEN @length::bigint ELSE 0 END,
    stderr_recorded = stderr_recorded + CASE WHEN @stream::smallint = 2 THEN @length::bigint ELSE 0 END
WHERE id = @id AND connection_id = @connection_id AND state = 'running'
  AND CASE WHEN @stream::smallint = 1 THEN stdout_recorded ELSE stderr_recorded END = @byte_offset::bigint
  AND CASE WHEN @stream::smallint = 1 THEN stdout_recorded ELSE stderr_recorded END + @length::bigint <= max_output_bytes
RETURNING *;

-- name: InsertTurnOutput :exec
INSERT INTO turn_output (turn_id, stream, byte_offset, data)
VALUES (@turn_id, @stream, @byte_offset, @data);

-- name: FinishTurn :one
-- FinishTurn records a Turn's result from the connection it runs on.
-- Output is truncated whenever less was recorded than the process
-- produced.
UPDATE turns
SET state = @state, exit_code = sqlc.narg(exit_code), signal = @signal,
    failure_code = sqlc.narg(failure_code),
    stdout_bytes = @stdout_bytes, stderr_bytes = @stderr_bytes,
    output_truncated = @truncated::boolean OR stdout_recorded < @stdout_bytes OR stderr_recorded < @stderr_bytes,
    ended_at = now()
WHERE id = @id AND connection_id = @connection_id AND state = 'running'
RETURNING *;

-- name: RequestTurnCancel :one
-- RequestTurnCancel records a cancellation request (first time kept). A
-- queued Turn is cancelled at once; a running one is cancelled by its
-- Runtime. No row for a terminal Turn.
UPDATE turns
SET cancel_requested_at = coalesce(cancel_requested_at, now()),
    state = CASE WHEN state = 'queued' THEN 'cancelled' ELSE state END,
    ended_at = CASE WHEN state = 'queued' THEN now() ELSE ended_at END
WHERE id = @id AND state IN ('queued', 'running')
RETURNING *;

-- name: ExpireQueuedTurns :many
-- ExpireQueuedTurns fails queued Turns whose queue deadline passed, and
-- those of Sessions being deleted, on the database clock, only for the
-- owner epoch holding the unexpired execution lease.
UPDATE turns t
SET state = 'failed', ended_at = now(),
    failure_code = CASE WHEN s.state = 'active' THEN 'runtime_not_ready' ELSE 'session_deleted' END
FROM sessions s, execution_lease l
WHERE t.session_id = s.id AND t.state = 'queued'
  AND l.owner_epoch = @owner_epoch AND l.expires_at > now()
  AND (t.queue_deadline <= now() OR s.state <> 'active')
RETURNING t.id, t.session_id;

-- name: UnconfirmOrphanedTurns :many
-- UnconfirmOrphanedTurns ends running Turns whose connection is closed or
-- belongs to another owner epoch: their results can no longer arrive, and
-- they never run again. Only the lease holder (@owner_epoch) does this.
UPDATE turns t
SET state = 'unconfirmed', failure_code = 'runtime_disconnected', ended_at = now()
FROM runtime_connections c, execution_lease l
WHERE t.connection_id = c.id AND t.state = 'running'
  AND l.owner_epoch = @owner_epoch AND l.expires_at > now()
  AND (c.disconnected_at IS NOT NULL OR c.owner_epoch <> l.owner_epoch)
RETURNING t.id, t.session_id;

-- name: ReadTurnOutput :many
-- ReadTurnOutput returns chunks in arrival order after @after_seq.
SELECT seq, stream, byte_offset, data FROM turn_output
WHERE turn_id = @turn_id AND seq > @after_seq
ORDER BY seq
LIMIT @page_size;

-- name: UnconfirmTurnsOfConnection :many
-- UnconfirmTurnsOfConnection ends the Turn running on a closed connection:
-- its result can no longer arrive, and it never runs again.
UPDATE turns
SET state = 'unconfirmed', failure_code = 'runtime_disconnected', ended_at = now()
WHERE connection_id = @connection_id AND state = 'running'
RETURNING id;

-- name: EndTurnsOnLostCompute :many
-- EndTurnsOnLostCompute ends running Turns whose Session's running
-- allocation was observed stopped or missing after the Turn was
-- dispatched: their result can no longer arrive. The failure code is the
-- observation's fixed reason. Only the lease holder (@owner_epoch) does
-- this.
UPDATE turns t
SET state = 'unconfirmed', failure_code = a.observed_reason, ended_at = now()
FROM environments e, allocations a, execution_lease l
WHERE t.session_id = e.session_id AND a.environment_id = e.id AND t.state = 'running'
  AND a.state = 'running' AND a.observed_compute IN ('stopped', 'missing')
  AND a.observed_at >= t.dispatched_at
  AND l.owner_epoch = @owner_epoch AND l.expires_at > now()
RETURNING t.id, t.session_id;
-- name: SettleQueuedTurnsOfSession :many
-- SettleQueuedTurnsOfSession ends the Session's queued Turns in terminal
-- cleanup with @failure_code, keeping what their deadlines meant: a Turn
-- whose queue deadline had already passed ends runtime_not_ready, as the
-- expiry sweep would have ended it.
UPDATE turns
SET state = 'failed', ended_at = now(),
    failure_code = CASE WHEN queue_deadline <= now() THEN 'runtime_not_ready' ELSE @failure_code::text END
WHERE session_id = @session_id AND state = 'queued'
RETURNING id;

-- name: RequestCancelRunningTurnsOfSession :many
-- RequestCancelRunningTurnsOfSession records a cancellation request (the
-- first time kept) for the Session's running Turn in terminal cleanup;
-- the gateway forwards it and the Turn keeps running until its Runtime
-- reports (or its connection ends: unconfirmed).
UPDATE turns
SET cancel_requested_at = coalesce(cancel_requested_at, now())
WHERE session_id = @session_id AND state = 'running'
RETURNING id;
