-- The load of each node, kept by the database as placements and
-- allocations change, so that placement reads one row per node instead of
-- counting every unreleased placement and allocation of the installation
-- under the placement lock (measured by the scale simulator, test/scale:
-- at 20,000 held Environments over 200 nodes ChoosePlacementNode made
-- CreateSession take about 2 s at 32 concurrent callers, 14 per second).
-- It also lets placement lock only the chosen node's node_load row
-- instead of one advisory lock for the whole installation.
--
-- node_holdings has one row per (node, Environment) the node holds: an
-- unreleased placement of the Environment on the node, or an unreleased
-- allocation of it on the node (the same union ChoosePlacementNode
-- counted). node_load.held is the number of those rows per node. Both are
-- written only by node_hold_sync, which the triggers below call for every
-- inserted placement or allocation and for every change of a row's state
-- or node, in the writer's transaction: so they are exact at every commit
-- and nothing in Go writes them. node_hold_sync is idempotent (it
-- recomputes whether the node holds the Environment from the two tables),
-- so the order of the triggers within a transaction does not matter.
-- Placements and allocations are never deleted (they end released), so
-- no delete trigger is needed.

-- +goose Up

CREATE TABLE node_holdings (
    node_id        uuid NOT NULL REFERENCES nodes (id),
    environment_id uuid NOT NULL,
    PRIMARY KEY (node_id, environment_id)
);

-- Every node has its node_load row from its creation on (the trigger on
-- nodes below), so placement can lock the row of the node it chooses.
CREATE TABLE node_load (
    node_id uuid   PRIMARY KEY REFERENCES nodes (id),
    held    bigint NOT NULL DEFAULT 0 CHECK (held >= 0)
);

-- +goose StatementBegin
CREATE FUNCTION node_hold_sync(n uuid, e uuid) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    holds boolean;
BEGIN
    IF n IS NULL OR e IS NULL THEN
        RETURN;
    END IF;
    -- The node's load row is locked first, so the syncs of one node run
    -- one at a time: each EXISTS below is a new statement, which under
    -- READ COMMITTED sees what the sync before it committed. Without the
    -- lock, one transaction releasing an Environment's placement and
    -- another releasing its allocation at once would each still see the
    -- other's row unreleased, both keep the holding, and the node would
    -- count an Environment it no longer holds for ever.
    PERFORM 1 FROM node_load WHERE node_id = n FOR UPDATE;
    holds := EXISTS (SELECT 1 FROM placements WHERE environment_id = e AND node_id = n AND state <> 'released')
          OR EXISTS (SELECT 1 FROM allocations WHERE environment_id = e AND node_id = n AND state <> 'released');
    IF holds THEN
        INSERT INTO node_holdings (node_id, environment_id) VALUES (n, e) ON CONFLICT DO NOTHING;
        IF FOUND THEN
            INSERT INTO node_load (node_id, held) VALUES (n, 1)
            ON CONFLICT (node_id) DO UPDATE SET held = node_load.held + 1;
        END IF;
    ELSE
        DELETE FROM node_holdings WHERE node_id = n AND environment_id = e;
        IF FOUND THEN
            UPDATE node_load SET held = held - 1 WHERE node_id = n;
        END IF;
    END IF;
END;
$$;

CREATE FUNCTION node_load_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO node_load (node_id) VALUES (NEW.id) ON CONFLICT DO NOTHING;
    RETURN NULL;
END;
$$;

CREATE FUNCTION node_hold_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.node_id IS DISTINCT FROM NEW.node_id THEN
        PERFORM node_hold_sync(OLD.node_id, OLD.environment_id);
    END IF;
    PERFORM node_hold_sync(NEW.node_id, NEW.environment_id);
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER nodes_node_load AFTER INSERT ON nodes
    FOR EACH ROW EXECUTE FUNCTION node_load_row();
CREATE TRIGGER placements_node_hold AFTER INSERT ON placements
    FOR EACH ROW EXECUTE FUNCTION node_hold_trigger();
CREATE TRIGGER placements_node_hold_update AFTER UPDATE OF state, node_id ON placements
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state OR OLD.node_id IS DISTINCT FROM NEW.node_id)
    EXECUTE FUNCTION node_hold_trigger();
CREATE TRIGGER allocations_node_hold AFTER INSERT ON allocations
    FOR EACH ROW EXECUTE FUNCTION node_hold_trigger();
CREATE TRIGGER allocations_node_hold_update AFTER UPDATE OF state, node_id ON allocations
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state OR OLD.node_id IS DISTINCT FROM NEW.node_id)
    EXECUTE FUNCTION node_hold_trigger();

-- What the installation holds today.
INSERT INTO node_holdings (node_id, environment_id)
SELECT node_id, environment_id FROM placements WHERE state <> 'released'
UNION
SELECT node_id, environment_id FROM allocations WHERE state <> 'released';

INSERT INTO node_load (node_id, held)
SELECT n.id, (SELECT count(*) FROM node_holdings h WHERE h.node_id = n.id) FROM nodes n;
