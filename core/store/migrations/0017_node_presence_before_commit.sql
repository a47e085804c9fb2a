-- A node's presence is recorded from its first health report, before any
-- deployment generation is committed (issue 17: a node serves only what
-- Core publishes, so before the first commit it serves nothing). Such a
-- record has generation 0 and is never ready; placement, which requires
-- the committed generation and readiness, never chooses it.
-- +goose Up
ALTER TABLE node_presence DROP CONSTRAINT node_presence_generation_check;
ALTER TABLE node_presence ADD CONSTRAINT node_presence_generation_check
    CHECK (generation > 0 OR (generation = 0 AND NOT ready));
