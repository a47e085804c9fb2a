-- The owner lock (issue 32, item 4): a faster, provable takeover.
--
-- The active Core holds a session-level advisory lock, (classid, objid) =
-- (1650815604, 1) ("bert", 1), on a connection of its own while it holds
-- the execution lease. PostgreSQL releases it when that connection ends:
-- when the Core's process dies, its host's connection is reset, or it
-- closes it after releasing the lease at a planned stop. A standby waits
-- on the lock itself, so it learns at once.
--
-- execution_lease.locked records that the holder acquired (or renewed) the
-- lease while its connection held the lock. Only then may a Core holding
-- the lock take over the lease before it expires: the lock proves that the
-- previous holder's lock connection is gone, and the newer owner epoch
-- fences every write the previous holder still tries (FenceOwner). A lease
-- written without the lock (a Core of an earlier version, or a test) is
-- taken over only once it expired, as before.

-- +goose Up
ALTER TABLE execution_lease ADD COLUMN locked boolean NOT NULL DEFAULT false;

-- owner_lock_held reports whether the calling session holds the owner
-- lock.
-- +goose StatementBegin
CREATE FUNCTION owner_lock_held() RETURNS boolean LANGUAGE sql VOLATILE AS $$
    SELECT EXISTS (SELECT 1 FROM pg_locks
                   WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted
                     AND classid = 1650815604 AND objid = 1 AND objsubid = 2)
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION owner_lock_held();
ALTER TABLE execution_lease DROP COLUMN locked;
