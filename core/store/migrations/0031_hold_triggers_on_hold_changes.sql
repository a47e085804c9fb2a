-- The hold triggers fire only when a row's hold can change (issue 32).
--
-- node_hold_trigger syncs an Environment's holdings on its project's and
-- its lane's load rows (0013, 0016, 0020, 0024), locking each row FOR
-- UPDATE. What it computes depends, for the row that changed, only on
-- whether the row is released, whether an allocation is suspended, and on
-- which lane it is (its Environment never changes). The update triggers
-- fired on every change of state, so a creation's claim (allocated to
-- create_dispatched), its outcome (to running) and its placement's
-- activation each took the project's load row, queueing behind every
-- CreateSession of the project, to change nothing: pg_stat_activity
-- sampled every second during make bench-scale's 5,000 creations in one
-- project found ClaimCreate waiting on a lock in 29 of the 213 active
-- samples, as often as CreateSession's own LockProjectLoad. Now a change
-- that keeps the row's released-ness, its suspended-ness and its lane
-- runs no sync: the counts stay exact, as such a sync wrote nothing.

-- +goose Up
DROP TRIGGER placements_node_hold_update ON placements;
CREATE TRIGGER placements_node_hold_update AFTER UPDATE OF state, node_id ON placements
    FOR EACH ROW WHEN ((OLD.state = 'released') IS DISTINCT FROM (NEW.state = 'released')
                       OR OLD.node_id IS DISTINCT FROM NEW.node_id)
    EXECUTE FUNCTION node_hold_trigger();

DROP TRIGGER allocations_node_hold_update ON allocations;
CREATE TRIGGER allocations_node_hold_update AFTER UPDATE OF state, node_id, compute_phase ON allocations
    FOR EACH ROW WHEN ((OLD.state = 'released') IS DISTINCT FROM (NEW.state = 'released')
                       OR OLD.node_id IS DISTINCT FROM NEW.node_id
                       OR (OLD.compute_phase = 'suspended') IS DISTINCT FROM (NEW.compute_phase = 'suspended'))
    EXECUTE FUNCTION node_hold_trigger();

-- +goose Down
DROP TRIGGER placements_node_hold_update ON placements;
CREATE TRIGGER placements_node_hold_update AFTER UPDATE OF state, node_id ON placements
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state OR OLD.node_id IS DISTINCT FROM NEW.node_id)
    EXECUTE FUNCTION node_hold_trigger();

DROP TRIGGER allocations_node_hold_update ON allocations;
CREATE TRIGGER allocations_node_hold_update AFTER UPDATE OF state, node_id, compute_phase ON allocations
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state OR OLD.node_id IS DISTINCT FROM NEW.node_id
                       OR OLD.compute_phase IS DISTINCT FROM NEW.compute_phase)
    EXECUTE FUNCTION node_hold_trigger();
