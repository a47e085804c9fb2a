-- Placement reads durable node presence, and a failed Create can end an
-- Environment.
--
-- node_presence gains what placement needs besides freshness: whether the
-- recording Core still holds the connection the report came on (connected;
-- cleared when that connection ends) and the capacity the node reported in
-- it (CPU, memory, free disk). Placement counts a node only when it is
-- connected, ready for the placement's generation, reported within 45
-- seconds by the database clock and recorded under the owner epoch that
-- holds the unexpired execution lease.
--
-- environments gain failure_code: the recorded reason of a failed
-- Environment (for example create_failed after repeated settled Create
-- failures). A failed Environment always names one; only a failed or
-- expired one may.
--
-- (0008 is reserved for another branch; goose applies files in order.)

-- +goose Up

ALTER TABLE node_presence
    ADD COLUMN connected       boolean NOT NULL DEFAULT true,
    ADD COLUMN cpu_millis      bigint  NOT NULL DEFAULT 0 CHECK (cpu_millis >= 0),
    ADD COLUMN memory_bytes    bigint  NOT NULL DEFAULT 0 CHECK (memory_bytes >= 0),
    ADD COLUMN disk_free_bytes bigint  NOT NULL DEFAULT 0 CHECK (disk_free_bytes >= 0);

ALTER TABLE environments
    ADD COLUMN failure_code text CHECK (failure_code ~ '^[a-z][a-z0-9_]{0,63}$'),
    ADD CONSTRAINT environments_failure_recorded
        CHECK ((state = 'failed') <= (failure_code IS NOT NULL)),
    ADD CONSTRAINT environments_failure_only_when_ended
        CHECK (failure_code IS NULL OR state IN ('failed', 'expired'));
