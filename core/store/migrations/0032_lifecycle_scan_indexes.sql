-- The lifecycle scans' own index ranges (issue 32). A worker's idle
-- pass probes which scans have a row (ProbeNodeWork); measured at 1,000
-- nodes and 100,000 running allocations, its pending and suspension-work
-- tests read every unreleased placement or allocation of the node (about
-- a hundred) to find none. Each now reads an index range holding only
-- what its scan acts on: reserved placements (ListPendingForNode; an
-- active placement's Environment has running compute) and allocations in
-- a suspension phase (ListSuspensionWorkForNode).

-- +goose Up
CREATE INDEX placements_node_reserved ON placements (node_id, environment_id)
    WHERE state = 'reserved';
CREATE INDEX allocations_node_suspension ON allocations (node_id, id)
    WHERE state = 'running' AND compute_phase <> 'running';

-- +goose Down
DROP INDEX allocations_node_suspension;
DROP INDEX placements_node_reserved;
