-- Deployment reset (issue 31, docs/tenants-plan.md §2.5; the guide's
-- "Reset and archive"). A reset is durable execution state the owner's
-- reset runner (core/reset) advances outside the lifecycle's counted work:
--
--   archiving   every Session created at or before requested_at is
--               archived, a keyset page at a time, the cursor
--               (cursor_created_at, cursor_id) advanced in each archive's
--               own Session-first transaction;
--   draining    the runner waits for zero held resources: unreleased
--               placements and allocations (an allocation owing a leftover
--               stays unreleased), partitioned by their node's presence
--               (node_present) into held and held_offline, as last seen at
--               progress_at;
--   finalizing  at zero the lifecycle lanes drain, and one transaction
--               rechecks zero under the deployment row's lock and clears
--               the deployment;
--   done        cleared: no current generation, empty_generation the
--               generation number the empty provider bears;
--   failed      the absolute deadline passed first (failure_code); the
--               committed provider stays and admission reopens.
--
-- deployment.reset_id is the admission fence while a reset is active: new
-- Sessions, Creates, restores and deployment changes are refused
-- (deployment_resetting); deletion, archive, cleanup and reads are not.
-- deployment.generation_floor is the empty generation after a reset: the
-- next commit is generation_floor + 1 (generation numbers are never
-- reused) and expects generation_floor as the current one.
--
-- The provenance is validated by the schema: a reset is an
-- administrator's act (actor 'admin'), with its request id; the runner's
-- archives record it with the reset as their parent.

-- +goose Up
CREATE TABLE deployment_resets (
    id                uuid        PRIMARY KEY,
    request_id        uuid        NOT NULL UNIQUE,
    actor             text        NOT NULL CHECK (actor = 'admin'),
    generation        bigint      REFERENCES deployment_generations (generation),
    requested_at      timestamptz NOT NULL DEFAULT now(),
    deadline          timestamptz NOT NULL,
    phase             text        NOT NULL DEFAULT 'archiving'
                                  CHECK (phase IN ('archiving', 'draining', 'finalizing', 'done', 'failed')),
    cursor_created_at timestamptz,
    cursor_id         uuid,
    sessions_archived bigint      NOT NULL DEFAULT 0 CHECK (sessions_archived >= 0),
    held              bigint      NOT NULL DEFAULT 0 CHECK (held >= 0),
    held_offline      bigint      NOT NULL DEFAULT 0 CHECK (held_offline >= 0 AND held_offline <= held),
    progress_at       timestamptz,
    empty_generation  bigint      UNIQUE CHECK (empty_generation > 0),
    failure_code      text        CHECK (failure_code ~ '^[a-z][a-z0-9_]{0,63}$'),
    ended_at          timestamptz,
    CHECK (deadline > requested_at AND deadline <= requested_at + interval '24 hours'),
    CHECK ((cursor_created_at IS NULL) = (cursor_id IS NULL)),
    CHECK ((phase IN ('done', 'failed')) = (ended_at IS NOT NULL)),
    CHECK ((phase = 'failed') = (failure_code IS NOT NULL)),
    CHECK ((phase = 'done') = (empty_generation IS NOT NULL))
);

-- At most one reset is active.
CREATE UNIQUE INDEX deployment_resets_one_active ON deployment_resets ((true))
    WHERE phase NOT IN ('done', 'failed');
CREATE INDEX deployment_resets_requested_at ON deployment_resets (requested_at DESC, id DESC);

ALTER TABLE deployment
    ADD COLUMN reset_id         uuid   REFERENCES deployment_resets (id),
    ADD COLUMN generation_floor bigint NOT NULL DEFAULT 0 CHECK (generation_floor >= 0);

-- +goose Down
ALTER TABLE deployment DROP COLUMN generation_floor, DROP COLUMN reset_id;
DROP TABLE deployment_resets;
