-- Observation marks (issue 32, item 1): the observation of running
-- compute found as last recorded costs one row per page, not a write per
-- allocation.
--
-- The observation scan records a change (a stop, a missing or unavailable
-- observation, a keepalive) on the allocation's row, as before, so
-- observed_compute, observed_reason and, for such rows, observed_at keep
-- their meaning for the Session API and the Turn sweep. A page's
-- allocations found running exactly as recorded get no write: the page's
-- one observation_marks row lists their ids with the database time the
-- page was read, which precedes every one of their observations. A mark
-- claims only what was true when it was written, so it is never wrong
-- later: a row that changes afterwards gets a newer observed_at, which
-- observation_time prefers.
--
-- observation_time(observed_at, node_id, id) is the time of an
-- allocation's last observation: the later of its row's observed_at and its newest
-- mark. The scan's due flag and the scale benchmark's age read it. Marks
-- older than the scan's prune horizon are deleted as new ones are
-- written (then the time falls back to an older one: an age is only ever
-- over-stated).

-- +goose Up
CREATE TABLE observation_marks (
    -- lane is the node's id, or the nil UUID for the direct lane.
    lane        uuid        NOT NULL,
    -- observed_at is the database time the page was read.
    observed_at timestamptz NOT NULL,
    -- first_id is the first of ids, which keeps two pages read in one
    -- instant apart (their ids are disjoint).
    first_id    uuid        NOT NULL,
    ids         uuid[]      NOT NULL CHECK (cardinality(ids) BETWEEN 1 AND 64),
    PRIMARY KEY (lane, observed_at, first_id)
);

-- +goose StatementBegin
CREATE FUNCTION observation_time(observed_at timestamptz, node_id uuid, id uuid)
RETURNS timestamptz LANGUAGE sql STABLE AS $$
    SELECT greatest($1, (SELECT max(m.observed_at) FROM observation_marks m
                         WHERE m.lane = coalesce($2, '00000000-0000-0000-0000-000000000000'::uuid)
                           AND $3 = ANY (m.ids)))
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION observation_time(timestamptz, uuid, uuid);
DROP TABLE observation_marks;
