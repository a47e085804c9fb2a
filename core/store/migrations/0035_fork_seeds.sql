-- Fork seeds (issue 33, step K3): a fork places its children on any node
-- with room; a child on a node other than the source's is created from a
-- local copy of the fork's snapshot, its node's seed. A seed row is owed
-- when the fork is committed (one per such node), imported by that node's
-- lifecycle worker (ExportSnapshot on the source's node relayed by Core
-- into ImportSnapshot there, under the seed's operation id, idempotent by
-- operation), ready once imported, failed after seed_attempts, and
-- discarded (ImportSnapshot's Discard confirmed) once the fork has ended.
--
--   owed       not yet tried;
--   importing  an attempt was made (attempts counts them) and its outcome
--              is not recorded: the next pass imports again under the
--              same operation, which completes or redoes the same import;
--   ready      the children on the node may be created from it;
--   failed     its children not yet created end FAILED fork_seed_failed;
--   discarded  the node holds nothing of it any more.

-- +goose Up
CREATE TABLE fork_seeds (
    fork_id             uuid NOT NULL REFERENCES forks (id),
    node_id             uuid NOT NULL REFERENCES nodes (id),
    operation           uuid NOT NULL,
    state               text NOT NULL DEFAULT 'owed'
                        CHECK (state IN ('owed', 'importing', 'ready', 'failed', 'discarded')),
    attempts            integer NOT NULL DEFAULT 0,
    snapshot_id         text,
    snapshot_provenance text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    ready_at            timestamptz,
    ended_at            timestamptz,
    PRIMARY KEY (fork_id, node_id),
    CHECK ((snapshot_id IS NULL) = (snapshot_provenance IS NULL)),
    CHECK (state <> 'ready' OR snapshot_id IS NOT NULL)
);
CREATE INDEX fork_seeds_open ON fork_seeds (node_id, fork_id) WHERE state <> 'discarded';

-- +goose Down
DROP TABLE fork_seeds;
