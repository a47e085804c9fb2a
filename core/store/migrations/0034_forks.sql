-- Forks (issue 33): N new Sessions from the current filesystem of one
-- running or suspended Session. A fork row records the admission (how
-- many were asked for and placed, and why not more), the snapshot the
-- children are seeded from and its life:
--
--   capturing  a running source owes its Capture (capture_op; the receipt
--              is spent when capture_claimed_at is set, and the Capture is
--              sent only then, once; an unknown outcome is only observed);
--   ready      the snapshot is recorded: the children's Creates may go,
--              each seeded from it (CreateSeeded);
--   settled    every child's Create is settled: the snapshot is handed to
--              the source allocation's leftovers (a captured one) or
--              released (a borrowed one: a suspended source's own
--              suspension snapshot, which its suspension owns);
--   failed     the capture failed or the source ended first: the children
--              not created end FAILED with failure_code.
--
-- A child is an ordinary Session whose first allocation carries fork_id
-- (and fork_index, its place in the fork's order):
-- its Create waits for the fork to be ready and is then a CreateSeeded.
-- Children are placed on the source's node (the snapshot lives there;
-- relaying it to other nodes is a later step).
--
-- session_idle_since gains the rule: NULL while a fork of the Session is
-- capturing, so no suspension is armed (and an admin's suspend-now is
-- refused session_busy) while Capture needs the source's compute.

-- +goose Up
CREATE TABLE forks (
    id                   uuid PRIMARY KEY,
    source_session_id    uuid NOT NULL REFERENCES sessions (id),
    source_allocation_id uuid NOT NULL REFERENCES allocations (id),
    node_id              uuid NOT NULL REFERENCES nodes (id),
    request_id           uuid NOT NULL,
    requested            integer NOT NULL CHECK (requested BETWEEN 1 AND 128),
    placed               integer NOT NULL CHECK (placed BETWEEN 1 AND requested),
    unplaced_reason      text NOT NULL DEFAULT '' CHECK (unplaced_reason ~ '^([a-z][a-z0-9_]{0,63})?$'),
    state                text NOT NULL CHECK (state IN ('capturing', 'ready', 'settled', 'failed')),
    capture_op           uuid,
    capture_claimed_at   timestamptz,
    borrowed             boolean NOT NULL,
    snapshot_id          text,
    snapshot_provenance  text,
    failure_code         text CHECK (failure_code IS NULL OR failure_code ~ '^[a-z][a-z0-9_]{0,63}$'),
    created_at           timestamptz NOT NULL DEFAULT now(),
    captured_at          timestamptz,
    ended_at             timestamptz,
    UNIQUE (source_session_id, request_id),
    CHECK (borrowed = (capture_op IS NULL)),
    CHECK ((snapshot_id IS NULL) = (snapshot_provenance IS NULL)),
    CHECK (state NOT IN ('ready', 'settled') OR snapshot_id IS NOT NULL),
    CHECK ((state = 'failed') = (failure_code IS NOT NULL)),
    CHECK ((state IN ('settled', 'failed')) = (ended_at IS NOT NULL))
);
CREATE INDEX forks_open ON forks (node_id, id) WHERE state IN ('capturing', 'ready');
CREATE INDEX forks_capturing ON forks (source_session_id) WHERE state = 'capturing';

ALTER TABLE allocations ADD COLUMN fork_id uuid REFERENCES forks (id),
                        ADD COLUMN fork_index integer CHECK ((fork_id IS NULL) = (fork_index IS NULL));
CREATE INDEX allocations_fork ON allocations (fork_id) WHERE fork_id IS NOT NULL;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION session_idle_since(s uuid) RETURNS timestamptz LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN EXISTS (SELECT 1 FROM file_operations f
                     WHERE f.session_id = s AND f.state IN ('pending', 'running')) THEN NULL
        WHEN EXISTS (SELECT 1 FROM forks k WHERE k.source_session_id = s AND k.state = 'capturing') THEN NULL
        WHEN bool_or(t.state IN ('queued', 'running')) THEN NULL
        WHEN bool_or(t.ended_at IS NOT NULL) THEN greatest(
            max(greatest(t.created_at, t.ended_at)),
            (SELECT max(f.ended_at) FROM file_operations f WHERE f.session_id = s AND f.ended_at IS NOT NULL))
    END
    FROM turns t
    WHERE t.session_id = s
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION session_idle_since(s uuid) RETURNS timestamptz LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN EXISTS (SELECT 1 FROM file_operations f
                     WHERE f.session_id = s AND f.state IN ('pending', 'running')) THEN NULL
        WHEN bool_or(t.state IN ('queued', 'running')) THEN NULL
        WHEN bool_or(t.ended_at IS NOT NULL) THEN greatest(
            max(greatest(t.created_at, t.ended_at)),
            (SELECT max(f.ended_at) FROM file_operations f WHERE f.session_id = s AND f.ended_at IS NOT NULL))
    END
    FROM turns t
    WHERE t.session_id = s
$$;
-- +goose StatementEnd
DROP INDEX allocations_fork;
ALTER TABLE allocations DROP COLUMN fork_index, DROP COLUMN fork_id;
DROP TABLE forks;
