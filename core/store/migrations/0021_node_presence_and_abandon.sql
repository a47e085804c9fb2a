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

-- +goose Down

DROP FUNCTION node_present(boolean, timestamptz, bigint);
