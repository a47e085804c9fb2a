-- Session archive (issue 31, docs/tenants-plan.md §2.4; guide "Reset and
-- archive"). An administrator's ArchiveSession ends a live Session in one
-- Session-first transaction: the Environment ends with terminal cause
-- 'archived' (state expired), the device is revoked (no new Runtime
-- authority), queued Turns fail session_archived, the running Turn is
-- asked to cancel, cleanup is requested. The Session keeps its rows, its
-- Turns and their output: state 'archived', archived_at. It may be deleted
-- later ('archived' -> 'delete_requested' keeps archived_at).
--
-- allocations.archive_cancel_turn_id is the running Turn whose
-- cancellation the archive that first revoked the allocation's device
-- requested: only that archive records it, repeated cleanup keeps it, and
-- a revocation that is not an archive's leaves it NULL.

-- +goose Up
ALTER TABLE sessions
    DROP CONSTRAINT sessions_state_check,
    ADD CONSTRAINT sessions_state_check CHECK (state IN ('active', 'delete_requested', 'archived')),
    ADD COLUMN archived_at timestamptz,
    ADD CONSTRAINT sessions_archived_recorded CHECK (state <> 'archived' OR archived_at IS NOT NULL);

ALTER TABLE environments
    DROP CONSTRAINT environments_terminal_cause_check,
    ADD CONSTRAINT environments_terminal_cause_check
        CHECK (terminal_cause IN ('deleted', 'failed', 'expired', 'archived'));

ALTER TABLE allocations
    ADD COLUMN archive_cancel_turn_id uuid REFERENCES turns (id),
    ADD CONSTRAINT allocations_archive_cancel_revoked
        CHECK (archive_cancel_turn_id IS NULL OR device_revoked_at IS NOT NULL);

-- +goose Down
ALTER TABLE allocations
    DROP CONSTRAINT allocations_archive_cancel_revoked,
    DROP COLUMN archive_cancel_turn_id;
ALTER TABLE environments
    DROP CONSTRAINT environments_terminal_cause_check,
    ADD CONSTRAINT environments_terminal_cause_check
        CHECK (terminal_cause IN ('deleted', 'failed', 'expired'));
ALTER TABLE sessions
    DROP CONSTRAINT sessions_archived_recorded,
    DROP COLUMN archived_at,
    DROP CONSTRAINT sessions_state_check,
    ADD CONSTRAINT sessions_state_check CHECK (state IN ('active', 'delete_requested'));
