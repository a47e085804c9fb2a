-- The Runtime side of a Session: authenticated Runtime connections (with
-- durable generations) and Turns with their recorded output.
--
-- The four readiness facts stay apart: compute available is the
-- allocation's observation (allocations.state), Runtime connected is an
-- open connection accepted under the current owner epoch, capabilities
-- prepared is its prepared_at, and execution admitted is a prepared
-- connection of a Session that is not being deleted.

-- +goose Up

-- runtime_connections: one row per connection the gateway accepted for an
-- allocation's device. generation increases per allocation and survives
-- Core restarts; at most one connection of an allocation is open. A row
-- accepted under an older owner epoch is not a connection any more (its
-- Core is gone), whatever disconnected_at says.
CREATE TABLE runtime_connections (
    id              uuid        PRIMARY KEY
                                CHECK (id <> '00000000-0000-0000-0000-000000000000'),
    allocation_id   uuid        NOT NULL REFERENCES allocations (id),
    generation      bigint      NOT NULL CHECK (generation > 0),
    owner_epoch     bigint      NOT NULL CHECK (owner_epoch > 0),
    runtime_version text        NOT NULL
                                CHECK (length(runtime_version) <= 64 AND runtime_version !~ '[[:cntrl:]]'),
    connected_at    timestamptz NOT NULL DEFAULT now(),
    prepared_at     timestamptz,
    last_seen_at    timestamptz NOT NULL DEFAULT now(),
    disconnected_at timestamptz,
    UNIQUE (allocation_id, generation)
);

CREATE UNIQUE INDEX runtime_connections_one_open ON runtime_connections (allocation_id)
    WHERE disconnected_at IS NULL;

-- turns: commands run in a Session's Environment, in seq order, at most
-- once. request_id makes SubmitTurn idempotent (request_digest tells a
-- retry from a different Turn). The environment variables and stdin are
-- sealed under the installation key (input_*), bound to the Turn id: they
-- may be secrets.
--
-- state:
--   queued       waits for a prepared Runtime connection
--   running      delivered on connection_id; never delivered again
--   completed    the process exited (exit_code, signal)
--   failed       could not run (failure_code)
--   cancelled    cancelled before or while running
--   timed_out    the Runtime killed it when its timeout passed
--   unconfirmed  delivered, but its connection ended before its result
CREATE TABLE turns (
    id                  uuid        PRIMARY KEY
                                    CHECK (id <> '00000000-0000-0000-0000-000000000000'),
    seq                 bigint      NOT NULL GENERATED ALWAYS AS IDENTITY UNIQUE,
    session_id          uuid        NOT NULL REFERENCES sessions (id),
    request_id          uuid        NOT NULL UNIQUE
                                    CHECK (request_id <> '00000000-0000-0000-0000-000000000000'),
    request_digest      bytea       NOT NULL CHECK (octet_length(request_digest) = 32),
    state               text        NOT NULL DEFAULT 'queued'
                                    CHECK (state IN ('queued', 'running', 'completed', 'failed',
                                                     'cancelled', 'timed_out', 'unconfirmed')),
    argv                text[],
    shell_script        text,
    working_directory   text        NOT NULL CHECK (length(working_directory) BETWEEN 1 AND 4096),
    input_ciphertext    bytea       NOT NULL,
    input_nonce         bytea       NOT NULL CHECK (octet_length(input_nonce) = 12),
    timeout_ms          bigint      NOT NULL CHECK (timeout_ms > 0),
    queue_deadline      timestamptz NOT NULL,
    max_output_bytes    bigint      NOT NULL CHECK (max_output_bytes > 0),
    connection_id       uuid        REFERENCES runtime_connections (id),
    exit_code           integer,
    signal              integer     NOT NULL DEFAULT 0,
    failure_code        text        CHECK (failure_code ~ '^[a-z][a-z_]{0,63}$'),
    stdout_bytes        bigint      NOT NULL DEFAULT 0 CHECK (stdout_bytes >= 0),
    stderr_bytes        bigint      NOT NULL DEFAULT 0 CHECK (stderr_bytes >= 0),
    stdout_recorded     bigint      NOT NULL DEFAULT 0 CHECK (stdout_recorded >= 0),
    stderr_recorded     bigint      NOT NULL DEFAULT 0 CHECK (stderr_recorded >= 0),
    output_truncated    boolean     NOT NULL DEFAULT false,
    created_at          timestamptz NOT NULL DEFAULT now(),
    dispatched_at       timestamptz,
    started_at          timestamptz,
    ended_at            timestamptz,
    cancel_requested_at timestamptz,
    CHECK ((argv IS NULL) <> (shell_script IS NULL)),
    CHECK (state NOT IN ('running', 'completed', 'timed_out', 'unconfirmed') OR dispatched_at IS NOT NULL),
    CHECK (state <> 'queued' OR dispatched_at IS NULL),
    CHECK ((state IN ('queued', 'running')) = (ended_at IS NULL)),
    CHECK (state NOT IN ('running', 'completed', 'timed_out', 'unconfirmed') OR connection_id IS NOT NULL),
    CHECK (state <> 'completed' OR exit_code IS NOT NULL),
    CHECK (state NOT IN ('failed', 'unconfirmed') OR failure_code IS NOT NULL),
    CHECK (stdout_recorded <= max_output_bytes AND stderr_recorded <= max_output_bytes)
);

-- One running Turn per Session; the queue in order.
CREATE UNIQUE INDEX turns_one_running_per_session ON turns (session_id) WHERE state = 'running';
CREATE INDEX turns_session_seq ON turns (session_id, seq);
CREATE INDEX turns_queued ON turns (queue_deadline) WHERE state = 'queued';

-- turn_output: a Turn's recorded output, chunk by chunk, contiguous per
-- stream (1 stdout, 2 stderr); seq keeps the order chunks arrived in
-- across both streams.
CREATE TABLE turn_output (
    seq         bigint   GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    turn_id     uuid     NOT NULL REFERENCES turns (id),
    stream      smallint NOT NULL CHECK (stream IN (1, 2)),
    byte_offset bigint   NOT NULL CHECK (byte_offset >= 0),
    data        bytea    NOT NULL CHECK (octet_length(data) BETWEEN 1 AND 65536),
    UNIQUE (turn_id, stream, byte_offset)
);

CREATE INDEX turn_output_turn_seq ON turn_output (turn_id, seq);
