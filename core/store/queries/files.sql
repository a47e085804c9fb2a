-- name: InsertFileOperation :one
-- InsertFileOperation admits a file operation as pending (the caller holds
-- the Session share lock and checked the Session and the bound).
INSERT INTO file_operations (id, session_id, request_id, direction, owner_epoch)
VALUES (@id, @session_id, @request_id, @direction, @owner_epoch)
RETURNING *;

-- name: LockFileAdmission :exec
-- LockFileAdmission takes the transaction-scoped advisory lock of one
-- Session's file admission (class: the ASCII of "bsfo"; key: the hash of
-- the Session id), so that the count of its open operations and the
-- insert that follows are one step: two admissions racing cannot both
-- pass the per-Session bound. Other Sessions' admissions do not wait.
SELECT pg_advisory_xact_lock(1651730031, hashtext(CAST(sqlc.arg(session_id)::uuid AS text)));

-- name: CountOpenFileOperations :one
-- CountOpenFileOperations counts the Session's pending and running file
-- operations (the per-Session bound).
SELECT count(*) FROM file_operations
WHERE session_id = @session_id AND state IN ('pending', 'running');

-- name: GetFileOperation :one
SELECT * FROM file_operations WHERE id = @id;

-- name: ClaimFileOperation :one
-- ClaimFileOperation moves the Session's oldest pending file operation to
-- running on the connection, under ClaimNextTurn's conditions except that
-- a Turn may run beside it: the connection is open and prepared under
-- @owner_epoch, which holds the unexpired execution lease, its device is
-- not revoked, its compute is running (the one compute-phase check Turn
-- claims, file operations and capture admission share) and the Session is
-- active. An operation claimed once is never claimed again. The
-- connection's conditions repeat ClaimNextTurn's (turns.sql): change both.
UPDATE file_operations
SET state = 'running', connection_id = @connection_id, claimed_at = now()
WHERE file_operations.id = (SELECT f.id FROM file_operations f
                            WHERE f.session_id = @session_id AND f.state = 'pending'
                            ORDER BY f.created_at, f.id LIMIT 1 FOR UPDATE SKIP LOCKED)
  AND EXISTS (SELECT 1 FROM runtime_connections c
              JOIN execution_lease l ON l.owner_epoch = c.owner_epoch
              JOIN allocations a ON a.id = c.allocation_id AND a.device_revoked_at IS NULL
                                    AND a.compute_phase = 'running'
              WHERE c.id = @connection_id AND c.disconnected_at IS NULL
                AND c.prepared_at IS NOT NULL AND l.owner_epoch = @owner_epoch
                AND l.expires_at > now())
  AND EXISTS (SELECT 1 FROM sessions s WHERE s.id = @session_id AND s.state = 'active')
RETURNING *;

-- name: GetTransferOperation :one
-- GetTransferOperation reads a running file operation for a Transfer
-- stream of device @device_id, with the device's credential digest: only
-- when it is claimed by that device's open connection, accepted under the
-- unexpired lease's owner epoch, whose device is not revoked.
SELECT sqlc.embed(f), a.credential_digest FROM file_operations f
JOIN runtime_connections c ON c.id = f.connection_id
JOIN allocations a ON a.id = c.allocation_id
JOIN execution_lease l ON l.owner_epoch = c.owner_epoch AND l.expires_at > now()
WHERE f.id = @id AND f.state = 'running' AND a.device_id = @device_id
  AND a.device_revoked_at IS NULL AND c.disconnected_at IS NULL;

-- name: FinishFileOperation :one
-- FinishFileOperation ends a pending or running file operation with its
-- outcome (the first end stays).
UPDATE file_operations
SET state = @state, failure_code = sqlc.narg('failure_code'), ended_at = now(),
    files = @files, directories = @directories, symlinks = @symlinks,
    hardlinks = @hardlinks, bytes = @bytes
WHERE id = @id AND state IN ('pending', 'running')
RETURNING *;

-- name: FailFileOperationsOfSession :many
-- FailFileOperationsOfSession ends the Session's pending and running file
-- operations in terminal cleanup, with the cause's code.
UPDATE file_operations
SET state = 'failed', failure_code = @failure_code::text, ended_at = now()
WHERE session_id = @session_id AND state IN ('pending', 'running')
RETURNING id;

-- name: FailFileOperationsOfConnection :many
-- FailFileOperationsOfConnection ends the file operations running on a
-- closed connection: their bytes can no longer flow.
UPDATE file_operations
SET state = 'failed', failure_code = 'runtime_disconnected', ended_at = now()
WHERE connection_id = @connection_id AND state = 'running'
RETURNING id;

-- name: FailOrphanedFileOperations :many
-- FailOrphanedFileOperations ends the pending and running file operations
-- admitted by another owner epoch (their admin call died with that Core)
-- or running on a closed connection. Only the lease holder
-- (@owner_epoch) does this.
UPDATE file_operations f
SET state = 'failed', ended_at = now(),
    failure_code = CASE WHEN f.owner_epoch <> l.owner_epoch THEN 'core_restarted' ELSE 'runtime_disconnected' END
FROM execution_lease l
WHERE f.state IN ('pending', 'running')
  AND l.owner_epoch = @owner_epoch AND l.expires_at > now()
  AND (f.owner_epoch <> l.owner_epoch
       OR (f.state = 'running' AND NOT EXISTS (
           SELECT 1 FROM runtime_connections c
           WHERE c.id = f.connection_id AND c.disconnected_at IS NULL)))
RETURNING f.id;
