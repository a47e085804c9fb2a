-- Issue 30, step 3 of docs/direct-lifecycle-plan.md: the direct lane.
--
-- A direct provider (Core calls the adapter itself, no node agent) places
-- its Environments on no node: placements.node_id and allocations.node_id
-- become nullable, and NULL is "the direct lane" (uuid.Nil in Go; a node
-- id is never the nil UUID, 0001's nodes check). One lane serves every
-- direct allocation.
--
-- deployment_generations.mode is the registration's generic Mode
-- ('nodes' or 'direct'), not a vendor column. Adding it with a default
-- fires no UPDATE trigger, so the generations stay immutable, and every
-- existing generation is 'nodes', which all earlier kinds are.
--
-- The lane triggers make the lane a database invariant for every writer:
-- a placement's lane is its generation's mode (placement_lane_check), and
-- an allocation's lane and generation are its Environment's placement's
-- (allocation_lane_check; a composite foreign key cannot say this, since
-- MATCH SIMPLE skips NULLs).
--
-- direct_load counts the lane's held Environments as node_load counts a
-- node's (0013, 0016): one row, kept exact at every commit by
-- direct_hold_sync, which node_hold_trigger now calls for a row on the
-- lane (node_hold_sync returned at once on a NULL node, so a direct row
-- would have counted nowhere). retained stays 0 (direct providers have no
-- checkpoints) and keeps the two shapes alike.
--
-- direct_readiness is one row per served direct generation: the probe's
-- result, recorded by the Core holding the lease (owner_epoch), with its
-- diagnostic code and the backend fingerprint, in the shape of
-- node_presence. Placement reads it under node_present's 45-second and
-- owner-epoch rule.
--
-- No new index: the btree indexes on node_id (placements_node_unreleased,
-- allocations_node_unreleased, allocations_node_phase) index NULLs too and
-- serve node_id IS NULL.

-- +goose Up

ALTER TABLE deployment_generations
    ADD COLUMN mode text NOT NULL DEFAULT 'nodes' CHECK (mode IN ('nodes', 'direct'));

ALTER TABLE placements ALTER COLUMN node_id DROP NOT NULL;
ALTER TABLE allocations ALTER COLUMN node_id DROP NOT NULL;

-- +goose StatementBegin
CREATE FUNCTION placement_lane_check() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    direct boolean;
BEGIN
    -- placements.generation has no foreign key (0004): a generation not
    -- stored counts as a node generation, as every placement did before.
    direct := coalesce((SELECT g.mode = 'direct' FROM deployment_generations g
                        WHERE g.generation = NEW.generation), false);
    IF (NEW.node_id IS NULL) <> direct THEN
        RAISE EXCEPTION 'placement of environment % is not on the lane of generation %', NEW.environment_id, NEW.generation
            USING ERRCODE = 'check_violation', CONSTRAINT = 'placements_lane';
    END IF;
    RETURN NEW;
END;
$$;

CREATE FUNCTION allocation_lane_check() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM placements p
                   WHERE p.environment_id = NEW.environment_id
                     AND p.node_id IS NOT DISTINCT FROM NEW.node_id
                     AND p.generation = NEW.generation) THEN
        RAISE EXCEPTION 'allocation % does not agree with its environment''s placement', NEW.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'allocations_lane';
    END IF;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER placements_lane_check BEFORE INSERT OR UPDATE OF node_id, generation ON placements
    FOR EACH ROW EXECUTE FUNCTION placement_lane_check();
CREATE TRIGGER allocations_lane_check BEFORE INSERT OR UPDATE OF node_id, generation, environment_id ON allocations
    FOR EACH ROW EXECUTE FUNCTION allocation_lane_check();

CREATE TABLE direct_load (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    held      bigint  NOT NULL DEFAULT 0 CHECK (held >= 0),
    retained  bigint  NOT NULL DEFAULT 0 CHECK (retained >= 0)
);
INSERT INTO direct_load DEFAULT VALUES;

CREATE TABLE direct_holdings (
    environment_id uuid    PRIMARY KEY,
    retained       boolean NOT NULL DEFAULT false
);

-- direct_hold_sync is node_hold_sync (0016) for the lane: the lane's one
-- load row is locked first, so its syncs run one at a time.
-- +goose StatementBegin
CREATE FUNCTION direct_hold_sync(e uuid) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    holds    boolean;
    retains  boolean;
    was      boolean;
BEGIN
    IF e IS NULL THEN
        RETURN;
    END IF;
    PERFORM 1 FROM direct_load FOR UPDATE;
    holds := EXISTS (SELECT 1 FROM placements WHERE environment_id = e AND node_id IS NULL AND state <> 'released')
          OR EXISTS (SELECT 1 FROM allocations WHERE environment_id = e AND node_id IS NULL AND state <> 'released');
    retains := EXISTS (SELECT 1 FROM allocations WHERE environment_id = e AND node_id IS NULL
                       AND state <> 'released' AND compute_phase = 'suspended');
    SELECT retained INTO was FROM direct_holdings WHERE environment_id = e;
    IF NOT FOUND THEN
        was := NULL;
    END IF;
    IF holds THEN
        IF was IS NULL THEN
            INSERT INTO direct_holdings (environment_id, retained) VALUES (e, retains);
            UPDATE direct_load SET held = held + (NOT retains)::int, retained = retained + retains::int;
        ELSIF was <> retains THEN
            UPDATE direct_holdings SET retained = retains WHERE environment_id = e;
            UPDATE direct_load SET held = held + (CASE WHEN retains THEN -1 ELSE 1 END),
                                   retained = retained + (CASE WHEN retains THEN 1 ELSE -1 END);
        END IF;
    ELSIF was IS NOT NULL THEN
        DELETE FROM direct_holdings WHERE environment_id = e;
        UPDATE direct_load SET held = held - (NOT was)::int, retained = retained - was::int;
    END IF;
END;
$$;

CREATE OR REPLACE FUNCTION node_hold_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.node_id IS DISTINCT FROM NEW.node_id THEN
        IF OLD.node_id IS NULL THEN
            PERFORM direct_hold_sync(OLD.environment_id);
        ELSE
            PERFORM node_hold_sync(OLD.node_id, OLD.environment_id);
        END IF;
    END IF;
    IF NEW.node_id IS NULL THEN
        PERFORM direct_hold_sync(NEW.environment_id);
    ELSE
        PERFORM node_hold_sync(NEW.node_id, NEW.environment_id);
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TABLE direct_readiness (
    generation          bigint      PRIMARY KEY REFERENCES deployment_generations (generation),
    owner_epoch         bigint      NOT NULL CHECK (owner_epoch > 0),
    ready               boolean     NOT NULL,
    diagnostic_code     text        NOT NULL DEFAULT '' CHECK (diagnostic_code ~ '^[a-z0-9_]{0,64}$'),
    backend_fingerprint text        CHECK (length(backend_fingerprint) BETWEEN 1 AND 256),
    checked_at          timestamptz NOT NULL DEFAULT now(),
    CHECK (ready = (diagnostic_code = ''))
);

-- +goose Down

DROP TABLE direct_readiness;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION node_hold_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.node_id IS DISTINCT FROM NEW.node_id THEN
        PERFORM node_hold_sync(OLD.node_id, OLD.environment_id);
    END IF;
    PERFORM node_hold_sync(NEW.node_id, NEW.environment_id);
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

DROP FUNCTION direct_hold_sync(uuid);
DROP TABLE direct_holdings;
DROP TABLE direct_load;
DROP TRIGGER allocations_lane_check ON allocations;
DROP TRIGGER placements_lane_check ON placements;
DROP FUNCTION allocation_lane_check();
DROP FUNCTION placement_lane_check();
ALTER TABLE allocations ALTER COLUMN node_id SET NOT NULL;
ALTER TABLE placements ALTER COLUMN node_id SET NOT NULL;
ALTER TABLE deployment_generations DROP COLUMN mode;
