-- File operations (issue 33): an upload into or a download from a
-- Session's /workspace through its Runtime ("live file access"). The
-- bytes never pass through the database; a row records the operation's
-- intent and outcome, so that it counts as activity, blocks suspension
-- while it is pending or running, and wakes a suspended Session.
--
-- A row is pending when admitted, running once a Runtime connection
-- claimed it (the same compute-phase check a Turn claim makes), and done
-- or failed at the end. It is never replayed. owner_epoch is the Core
-- that admitted it: the admin call lives in that process, so a pending or
-- running operation of another epoch is orphaned and the owner's sweep
-- fails it.
--
-- session_idle_since gains the rule: NULL while a file operation is
-- pending or running, and an ended operation's ended_at is activity. An
-- ended file operation is not "a Turn ended": the first-Turn rule stays.

-- +goose Up
CREATE TABLE file_operations (
    id            uuid PRIMARY KEY,
    session_id    uuid NOT NULL REFERENCES sessions (id),
    request_id    uuid NOT NULL,
    direction     text NOT NULL CHECK (direction IN ('upload', 'download')),
    state         text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'running', 'done', 'failed')),
    failure_code  text CHECK (failure_code IS NULL OR failure_code ~ '^[a-z][a-z0-9_]{0,63}$'),
    owner_epoch   bigint NOT NULL,
    connection_id uuid REFERENCES runtime_connections (id),
    created_at    timestamptz NOT NULL DEFAULT now(),
    claimed_at    timestamptz,
    ended_at      timestamptz,
    files         bigint NOT NULL DEFAULT 0,
    directories   bigint NOT NULL DEFAULT 0,
    symlinks      bigint NOT NULL DEFAULT 0,
    hardlinks     bigint NOT NULL DEFAULT 0,
    bytes         bigint NOT NULL DEFAULT 0,
    UNIQUE (session_id, request_id),
    CHECK ((state IN ('done', 'failed')) = (ended_at IS NOT NULL)),
    CHECK ((state = 'failed') = (failure_code IS NOT NULL))
);
CREATE INDEX file_operations_open ON file_operations (session_id, created_at)
    WHERE state IN ('pending', 'running');
CREATE INDEX file_operations_ended ON file_operations (session_id, ended_at)
    WHERE ended_at IS NOT NULL;

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

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION session_idle_since(s uuid) RETURNS timestamptz LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN bool_or(t.state IN ('queued', 'running')) THEN NULL
        WHEN bool_or(t.ended_at IS NOT NULL) THEN max(greatest(t.created_at, t.ended_at))
    END
    FROM turns t
    WHERE t.session_id = s
$$;
-- +goose StatementEnd
DROP TABLE file_operations;
