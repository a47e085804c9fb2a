-- Issue 26, items 10 and 2.
--
-- Presence is one predicate (node_present): placement
-- (ChoosePlacementNode, ChoosePlacementNodeWait), GetNodePresence and what
-- the admin API reports (GetNode, ListNodes, GetDeployment, the
-- berth.node.connected gauge: ListNodePresence) all call it. A node is
-- present while the Core that holds its connection still holds it
-- (connected), under the owner epoch of the unexpired execution lease, and
-- its latest health report arrived less than 45 seconds ago by the
-- database clock. node_presence.reported_at is that arrival: Core records
-- a report with its age (RecordNodePresence: now() less the time since
-- the report arrived, measured on Core's monotonic clock), not the time of
-- the record, so a node whose health reports stop while its connection
-- lives is re-recorded every 5 seconds with the same, ageing reported_at
-- and stops counting as present 45 seconds after its last report (it was
-- re-stamped with now() before, and stayed placeable for ever).
--
-- A node is abandoned (item 2) only by an explicit operator action: the
-- removal of a retired node whose agent came back on another backend than
-- the one it is bound to (node_backends), naming that bound backend
-- (RemoveNode with abandon; core/nodes Registry.Abandon). In one
-- transaction every Environment the node holds is ended as failed
-- (node_abandoned) by the ordinary terminal cleanup, its allocations and
-- reservations are released without cleanup, and the node is removed.
--
-- allocations.abandoned_at marks such a release: the one release that
-- needs neither confirmed cleanup nor settled creation, so the two checks
-- of the release rule (0004's allocations_check8 and allocations_check10,
-- which PostgreSQL named in that table's order) and the leftovers' release
-- trigger (0016) admit it, and only it. An abandoned allocation is
-- released for every reader ("unreleased" excludes it): nothing scans,
-- counts or cleans it up again.
--
-- node_abandonments is the durable audit of the action (there is no audit
-- table yet): the node, the operator action, the abandoned backend, the
-- owner epoch that wrote it and the database time; at most one per node,
-- since removal is final. node_abandoned_resources names exactly what was
-- abandoned: each allocation (identity: its id; native_id: the native id
-- its Create settled with), each incarnation of one that cleanup still
-- owed or that it ran as (kind compute: the native name and id), each
-- snapshot (kind snapshot: the native id), and each reservation without
-- an allocation (identity: the Environment's id).
--
-- (0019 and 0020 belong to other branches; goose applies files in order.)

-- +goose Up

-- +goose StatementBegin
CREATE FUNCTION node_present(connected boolean, reported_at timestamptz, owner_epoch bigint) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT $1
       AND $2 > now() - interval '45 seconds'
       AND EXISTS (SELECT 1 FROM execution_lease l WHERE l.owner_epoch = $3 AND l.expires_at > now())
$$;
-- +goose StatementEnd

ALTER TABLE allocations
    ADD COLUMN abandoned_at timestamptz,
    DROP CONSTRAINT allocations_check8,
    DROP CONSTRAINT allocations_check10,
    ADD CONSTRAINT allocations_cleanup_confirmed
        CHECK (abandoned_at IS NOT NULL
               OR (state IN ('cleanup_confirmed', 'released')) = (cleanup_confirmed_at IS NOT NULL)),
    ADD CONSTRAINT allocations_release_rule
        CHECK (state <> 'released'
               OR create_settled OR absence_receipt OR create_dispatched_at IS NULL OR abandoned_at IS NOT NULL),
    ADD CONSTRAINT allocations_abandoned_released CHECK (abandoned_at IS NULL OR state = 'released');

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION allocation_release_check() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state = 'released' AND OLD.state <> 'released' AND NEW.abandoned_at IS NULL AND
       EXISTS (SELECT 1 FROM allocation_leftovers WHERE allocation_id = NEW.id AND deleted_at IS NULL) THEN
        RAISE EXCEPTION 'allocation % still owes the cleanup of a leftover', NEW.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'allocations_leftovers_owed';
    END IF;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

CREATE TABLE node_abandonments (
    node_id             uuid        PRIMARY KEY REFERENCES nodes (id),
    action              text        NOT NULL CHECK (action IN ('remove_node_abandon')),
    backend_fingerprint text        NOT NULL CHECK (length(backend_fingerprint) BETWEEN 1 AND 256),
    owner_epoch         bigint      NOT NULL CHECK (owner_epoch > 0),
    abandoned_at        timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE node_abandoned_resources (
    node_id        uuid NOT NULL REFERENCES node_abandonments (node_id),
    kind           text NOT NULL CHECK (kind IN ('allocation', 'compute', 'snapshot', 'reservation')),
    identity       text NOT NULL CHECK (length(identity) BETWEEN 1 AND 256 AND identity !~ '[[:cntrl:]]'),
    allocation_id  uuid REFERENCES allocations (id),
    environment_id uuid NOT NULL,
    session_id     uuid NOT NULL,
    native_id      text CHECK (length(native_id) BETWEEN 1 AND 256 AND native_id !~ '[[:cntrl:]]'),
    PRIMARY KEY (node_id, kind, identity),
    CHECK ((kind = 'reservation') = (allocation_id IS NULL))
);

-- +goose Down

DROP TABLE node_abandoned_resources;
DROP TABLE node_abandonments;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION allocation_release_check() RETURNS trigger LANGUAGE plpgsql AS $$
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

ALTER TABLE allocations
    DROP CONSTRAINT allocations_abandoned_released,
    DROP CONSTRAINT allocations_release_rule,
    DROP CONSTRAINT allocations_cleanup_confirmed,
    DROP COLUMN abandoned_at,
    ADD CONSTRAINT allocations_check8
        CHECK ((state IN ('cleanup_confirmed', 'released')) = (cleanup_confirmed_at IS NOT NULL)),
    ADD CONSTRAINT allocations_check10
        CHECK (state <> 'released' OR create_settled OR absence_receipt OR create_dispatched_at IS NULL);

DROP FUNCTION node_present(boolean, timestamptz, bigint);
