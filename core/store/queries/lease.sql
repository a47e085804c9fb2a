-- name: AcquireLease :one
-- AcquireLease takes the execution lease when no row exists or the lease
-- has expired by the database clock and the caller's epoch is newer than
-- the last holder's, or renews it when the same holder and epoch hold it.
-- The epoch must have been issued (no larger than the installation's).
-- No row comes back when the lease was not taken.
INSERT INTO execution_lease (holder, owner_epoch, expires_at)
SELECT @holder::uuid, @owner_epoch::bigint,
       now() + sqlc.arg(ttl_micros)::bigint * interval '1 microsecond'
FROM installation
WHERE @owner_epoch::bigint <= installation.owner_epoch
ON CONFLICT (singleton) DO UPDATE
SET holder      = excluded.holder,
    owner_epoch = excluded.owner_epoch,
    acquired_at = CASE
                      WHEN execution_lease.holder = excluded.holder
                       AND execution_lease.owner_epoch = excluded.owner_epoch
                      THEN execution_lease.acquired_at
                      ELSE now()
                  END,
    renewed_at  = now(),
    expires_at  = excluded.expires_at,
    locked      = false
WHERE (execution_lease.holder = excluded.holder AND execution_lease.owner_epoch = excluded.owner_epoch)
   OR (execution_lease.expires_at <= now() AND excluded.owner_epoch > execution_lease.owner_epoch)
RETURNING *;

-- name: AcquireLockedLease :one
-- AcquireLockedLease is AcquireLease run on the connection that holds the
-- owner lock (migration 0028): it takes or renews the lease only while
-- this session holds the lock, records the lease as locked, and may take
-- over an unexpired lease of an older epoch when that lease was locked
-- too (its holder's lock connection is gone: this session holds the
-- lock). No row comes back when the lease was not taken.
INSERT INTO execution_lease (holder, owner_epoch, expires_at, locked)
SELECT @holder::uuid, @owner_epoch::bigint,
       now() + sqlc.arg(ttl_micros)::bigint * interval '1 microsecond', true
FROM installation
WHERE @owner_epoch::bigint <= installation.owner_epoch
  AND owner_lock_held()
ON CONFLICT (singleton) DO UPDATE
SET holder      = excluded.holder,
    owner_epoch = excluded.owner_epoch,
    acquired_at = CASE
                      WHEN execution_lease.holder = excluded.holder
                       AND execution_lease.owner_epoch = excluded.owner_epoch
                      THEN execution_lease.acquired_at
                      ELSE now()
                  END,
    renewed_at  = now(),
    expires_at  = excluded.expires_at,
    locked      = true
WHERE (execution_lease.holder = excluded.holder AND execution_lease.owner_epoch = excluded.owner_epoch)
   OR (excluded.owner_epoch > execution_lease.owner_epoch
       AND (execution_lease.expires_at <= now() OR execution_lease.locked))
RETURNING *;

-- name: TryOwnerLock :one
-- TryOwnerLock takes the owner lock for this session when it is free.
SELECT pg_try_advisory_lock(1650815604, 1)::boolean AS locked;

-- name: WaitOwnerLock :exec
-- WaitOwnerLock waits until this session holds the owner lock.
SELECT pg_advisory_lock(1650815604, 1);

-- name: GetLease :one
SELECT holder, owner_epoch, acquired_at, renewed_at, expires_at, locked,
       (expires_at <= now())::boolean AS expired
FROM execution_lease;

-- name: ReleaseLease :execrows
-- ReleaseLease expires a lease the caller still holds. The row stays, so
-- the epoch that held it is remembered.
UPDATE execution_lease
SET expires_at = now(), renewed_at = now()
WHERE holder = @holder AND owner_epoch = @owner_epoch AND expires_at > now();

-- name: FenceOwner :one
-- FenceOwner is the per-call owner fence of every lifecycle write: a row
-- only while @owner_epoch holds the unexpired execution lease (by the
-- database clock). FOR SHARE keeps the lease row from changing hands until
-- the caller's transaction ends, so a takeover commits either before the
-- fence (no row: the caller is fenced) or after the caller's writes.
SELECT owner_epoch FROM execution_lease
WHERE owner_epoch = @owner_epoch AND expires_at > now()
FOR SHARE;
