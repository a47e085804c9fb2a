-- Suspension and wake (issue 16): compute phases, intents and receipts on
-- the allocation, the retained count of each node, and the leftovers of
-- past incarnations and snapshots that cleanup still owes.
--
-- compute_phase (it only means something while the allocation is running
-- or in cleanup; it was 'none' until now and never written):
--   running     the current incarnation is the compute (the Create's, or
--               the one the last restore made)
--   quiescing   a suspension is armed (suspend_operation, the Runtime's
--               suspension token, and quiesce_armed_at, the database
--               observation that armed it): the Runtime is asked to close
--               admission; quiesce_acked_at records its acknowledgement.
--               No Turn is claimed. Nothing is captured yet.
--   suspending  the capture receipt was consumed (capture_dispatched_at):
--               Suspend may have been sent, and is never sent again for
--               the operation; recovery only observes it (ObserveOnly)
--   suspended   the snapshot (snapshot_id, snapshot_provenance, exactly as
--               the provider returned them) holds the Environment; the
--               source incarnation is gone; retention_deadline (the arming
--               observation plus the generation's retention) bounds it
--   restoring   a restore is armed into incarnation compute_generation
--               (restore_operation); restore_dispatched_at set: Resume may
--               have been sent, and is never sent again for the operation
--
-- suspension_aborted_at is when the last suspension ended without a
-- snapshot (aborted before its capture, or rolled back): the next one is
-- armed only an idle time later, so a Runtime that never acknowledges is
-- not asked again on every pass.
--
-- suspend_requested_at is an admin's "suspend now" (SuspendSession): the
-- next candidate scan arms it without waiting for the idle time (nothing
-- may be queued or running still); arming consumes it. restored_at is the
-- last restore: a restored Session is idle again only an idle time after
-- it (the restore is activity). wake_requested_at is an admin's "resume
-- now" (ResumeSession) or nothing; a restore consumes it.
--
-- compute_generation, compute_name and compute_id name the current
-- incarnation (the target while restoring). compute_name NULL means the
-- Create's incarnation, named by the provider's Initial, with provider_id
-- its native id.
--
-- Capacity: a node's held count (node_load.held, migration 0013) counts
-- the Environments it holds actively; an Environment whose unreleased
-- allocation is suspended counts in node_load.retained instead, so a
-- suspension frees a max_active slot and a restore takes one back (under
-- the node_load row lock that placement takes too).

-- +goose Up

ALTER TABLE allocations ALTER COLUMN compute_phase SET DEFAULT 'running';
UPDATE allocations SET compute_phase = 'running' WHERE compute_phase = 'none';

ALTER TABLE allocations
    ADD COLUMN compute_generation    bigint NOT NULL DEFAULT 1 CHECK (compute_generation > 0),
    ADD COLUMN compute_name          text CHECK (length(compute_name) BETWEEN 1 AND 256 AND compute_name !~ '[[:cntrl:]]'),
    ADD COLUMN compute_id            text CHECK (length(compute_id) BETWEEN 1 AND 256 AND compute_id !~ '[[:cntrl:]]'),
    ADD COLUMN suspend_operation     uuid UNIQUE,
    ADD COLUMN quiesce_armed_at      timestamptz,
    ADD COLUMN quiesce_acked_at      timestamptz,
    ADD COLUMN capture_dispatched_at timestamptz,
    ADD COLUMN snapshot_id           text CHECK (length(snapshot_id) BETWEEN 1 AND 256 AND snapshot_id !~ '[[:cntrl:]]'),
    ADD COLUMN snapshot_provenance   text CHECK (length(snapshot_provenance) <= 1024 AND snapshot_provenance !~ '[[:cntrl:]]'),
    ADD COLUMN suspended_at          timestamptz,
    ADD COLUMN retention_deadline    timestamptz,
    ADD COLUMN restore_operation     uuid UNIQUE,
    ADD COLUMN restore_dispatched_at timestamptz,
    ADD COLUMN wake_requested_at     timestamptz,
    ADD COLUMN suspension_aborted_at timestamptz,
    ADD COLUMN suspend_requested_at  timestamptz,
    ADD COLUMN restored_at           timestamptz,
    DROP CONSTRAINT allocations_compute_phase_check,
    ADD CONSTRAINT allocations_compute_phase
        CHECK (compute_phase IN ('running', 'quiescing', 'suspending', 'suspended', 'restoring')),
    ADD CONSTRAINT allocations_phase_running
        CHECK (compute_phase = 'running' OR state IN ('running', 'cleanup_requested', 'cleanup_unknown',
                                                      'cleanup_confirmed', 'released')),
    ADD CONSTRAINT allocations_phase_suspension
        CHECK ((compute_phase IN ('quiescing', 'suspending')) =
               (suspend_operation IS NOT NULL AND quiesce_armed_at IS NOT NULL)),
    ADD CONSTRAINT allocations_phase_capture
        CHECK ((compute_phase = 'suspending') = (capture_dispatched_at IS NOT NULL)),
    ADD CONSTRAINT allocations_phase_ack
        CHECK (compute_phase IN ('quiescing', 'suspending') OR quiesce_acked_at IS NULL),
    ADD CONSTRAINT allocations_phase_capture_acked
        CHECK (capture_dispatched_at IS NULL OR quiesce_acked_at IS NOT NULL),
    ADD CONSTRAINT allocations_phase_snapshot
        CHECK ((compute_phase IN ('suspended', 'restoring')) =
               (snapshot_id IS NOT NULL AND snapshot_provenance IS NOT NULL AND
                suspended_at IS NOT NULL AND retention_deadline IS NOT NULL)),
    ADD CONSTRAINT allocations_phase_restore
        CHECK ((compute_phase = 'restoring') = (restore_operation IS NOT NULL)),
    ADD CONSTRAINT allocations_phase_restore_dispatched
        CHECK (restore_dispatched_at IS NULL OR restore_operation IS NOT NULL),
    ADD CONSTRAINT allocations_phase_compute_id
        CHECK (compute_phase NOT IN ('suspended', 'restoring') OR compute_id IS NULL),
    ADD CONSTRAINT allocations_compute_named
        CHECK ((compute_generation = 1) OR compute_name IS NOT NULL);

-- session_compute_requests make SuspendSession and ResumeSession
-- idempotent by their request id: a retry finds its request and changes
-- nothing.
CREATE TABLE session_compute_requests (
    request_id uuid        PRIMARY KEY CHECK (request_id <> '00000000-0000-0000-0000-000000000000'),
    session_id uuid        NOT NULL REFERENCES sessions (id),
    kind       text        NOT NULL CHECK (kind IN ('suspend', 'resume')),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- allocation_leftovers are past incarnations and snapshots of an
-- allocation that cleanup still owes: a consumed snapshot after its
-- restore, a snapshot completed by a capture a rollback overtook, an
-- incomplete capture's identity, an abandoned restore's target. kind
-- 'snapshot' names a snapshot (identity, provenance as the provider gave
-- them; provenance may be empty for an incomplete capture); kind 'compute'
-- names an incarnation (identity its name, generation its generation,
-- native_id its id when known). deleted_at is set once the provider
-- confirmed it absent. An allocation is released only without an
-- undeleted leftover.
CREATE TABLE allocation_leftovers (
    id            bigserial   PRIMARY KEY,
    allocation_id uuid        NOT NULL REFERENCES allocations (id),
    kind          text        NOT NULL CHECK (kind IN ('snapshot', 'compute')),
    identity      text        NOT NULL CHECK (length(identity) BETWEEN 1 AND 256 AND identity !~ '[[:cntrl:]]'),
    provenance    text        NOT NULL DEFAULT '' CHECK (length(provenance) <= 1024 AND provenance !~ '[[:cntrl:]]'),
    generation    bigint      CHECK (generation > 0),
    native_id     text        CHECK (length(native_id) BETWEEN 1 AND 256 AND native_id !~ '[[:cntrl:]]'),
    created_at    timestamptz NOT NULL DEFAULT now(),
    deleted_at    timestamptz,
    CHECK ((kind = 'compute') = (generation IS NOT NULL)),
    UNIQUE (allocation_id, kind, identity)
);

CREATE INDEX allocation_leftovers_owed ON allocation_leftovers (allocation_id, id) WHERE deleted_at IS NULL;

-- The release rule gains the leftovers: no release while one is owed.
-- +goose StatementBegin
CREATE FUNCTION allocation_release_check() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state = 'released' AND OLD.state <> 'released' AND
       EXISTS (SELECT 1 FROM allocation_leftovers WHERE allocation_id = NEW.id AND deleted_at IS NULL) THEN
        RAISE EXCEPTION 'allocation % still owes the cleanup of a leftover', NEW.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'allocations_leftovers_owed';
    END IF;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER allocations_release_check BEFORE UPDATE OF state ON allocations
    FOR EACH ROW EXECUTE FUNCTION allocation_release_check();

-- node_load.retained and the holdings' kind.
ALTER TABLE node_load ADD COLUMN retained bigint NOT NULL DEFAULT 0 CHECK (retained >= 0);
ALTER TABLE node_holdings ADD COLUMN retained boolean NOT NULL DEFAULT false;

-- node_hold_sync now also decides whether the node holds the Environment
-- actively (held) or only its snapshot (retained): retained when its
-- unreleased allocation on the node is suspended.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION node_hold_sync(n uuid, e uuid) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    holds    boolean;
    retains  boolean;
    was      boolean;
BEGIN
    IF n IS NULL OR e IS NULL THEN
        RETURN;
    END IF;
    -- One node's syncs run one at a time (migration 0013 says why).
    PERFORM 1 FROM node_load WHERE node_id = n FOR UPDATE;
    holds := EXISTS (SELECT 1 FROM placements WHERE environment_id = e AND node_id = n AND state <> 'released')
          OR EXISTS (SELECT 1 FROM allocations WHERE environment_id = e AND node_id = n AND state <> 'released');
    retains := EXISTS (SELECT 1 FROM allocations WHERE environment_id = e AND node_id = n
                       AND state <> 'released' AND compute_phase = 'suspended');
    SELECT retained INTO was FROM node_holdings WHERE node_id = n AND environment_id = e;
    IF NOT FOUND THEN
        was := NULL;
    END IF;
    IF holds THEN
        IF was IS NULL THEN
            INSERT INTO node_holdings (node_id, environment_id, retained) VALUES (n, e, retains);
            UPDATE node_load SET held = held + (NOT retains)::int, retained = retained + retains::int
            WHERE node_id = n;
        ELSIF was <> retains THEN
            UPDATE node_holdings SET retained = retains WHERE node_id = n AND environment_id = e;
            UPDATE node_load SET held = held + (CASE WHEN retains THEN -1 ELSE 1 END),
                                 retained = retained + (CASE WHEN retains THEN 1 ELSE -1 END)
            WHERE node_id = n;
        END IF;
    ELSIF was IS NOT NULL THEN
        DELETE FROM node_holdings WHERE node_id = n AND environment_id = e;
        UPDATE node_load SET held = held - (NOT was)::int, retained = retained - was::int WHERE node_id = n;
    END IF;
END;
$$;
-- +goose StatementEnd

DROP TRIGGER allocations_node_hold_update ON allocations;
CREATE TRIGGER allocations_node_hold_update AFTER UPDATE OF state, node_id, compute_phase ON allocations
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state OR OLD.node_id IS DISTINCT FROM NEW.node_id
                       OR OLD.compute_phase IS DISTINCT FROM NEW.compute_phase)
    EXECUTE FUNCTION node_hold_trigger();

-- The worker's suspension scans: a node's allocations by phase.
CREATE INDEX allocations_node_phase ON allocations (node_id, compute_phase, id) WHERE state <> 'released';
