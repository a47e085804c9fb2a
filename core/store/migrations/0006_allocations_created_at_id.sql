-- The admin API lists allocations in creation order (ListAllocations); this
-- index serves its keyset pagination by (created_at, id), as
-- sessions_created_at_id serves ListSessions.

-- +goose Up

CREATE INDEX allocations_created_at_id ON allocations (created_at, id);
