-- The allocation scan's own index (issue 32): the lifecycle worker's
-- allocation scan acts only on allocations whose creation is unsettled or
-- failed or whose cleanup is under way (ListAllocationWorkForNode). It
-- used to page every unreleased allocation of the node, 32 whole rows a
-- pass, to find them: on a node of running Sessions, every row it read
-- was one it passed over (a profile of Core at 1,000 nodes put 8% of its
-- CPU there). This index holds only the rows the scan acts on, so an idle
-- node's page is an empty index range.
-- +goose Up
CREATE INDEX allocations_node_work ON allocations (node_id, id)
    WHERE state IN ('create_dispatched', 'create_unknown', 'create_failed',
                    'cleanup_requested', 'cleanup_unknown', 'cleanup_confirmed');

-- +goose Down
DROP INDEX allocations_node_work;
