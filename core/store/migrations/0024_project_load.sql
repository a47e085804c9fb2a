-- Limits per project (issue 31, docs/tenants-plan.md §2.3): what each
-- project holds, kept by the database as node_load is (0013, 0016, 0020),
-- so CreateSession, ArmSuspension and ArmRestore read and lock one row per
-- project instead of counting its Sessions.
--
-- project_holdings has one row per (project, Environment) the project
-- holds: an unreleased placement or allocation of the Environment on any
-- lane (a node or the direct lane). retained says the Environment holds
-- only its snapshot: an unreleased allocation of it is suspended.
-- project_load.held counts the other (active) holdings and
-- project_load.retained the retained ones. A deleting Session counts until
-- its cleanup is confirmed, as on a node. Both are written only by
-- project_hold_sync, in the writer's transaction, so they are exact at
-- every commit; it is idempotent, so the order of the triggers within a
-- transaction does not matter.
--
-- Lock order: project row before node row, everywhere. node_hold_trigger
-- (the one function every placement and allocation trigger runs) now calls
-- project_hold_sync before node_hold_sync or direct_hold_sync, so a
-- trigger takes the project's load row before the node's whatever the
-- trigger names are. CreateSession, ArmSuspension and ArmRestore lock the
-- project's row before the node's in Go (core/store); AbandonNode, the one
-- statement that changes Environments of several projects, locks their
-- rows in project order before its first write.
--
-- The limits themselves are projects.max_active_sessions and
-- max_retained_sessions (0022; NULL: no limit). Lowering one below what
-- the project holds evicts nothing: only new holdings are refused.

-- +goose Up
CREATE TABLE project_load (
    project_id uuid   PRIMARY KEY REFERENCES projects (id),
    held       bigint NOT NULL DEFAULT 0 CHECK (held >= 0),
    retained   bigint NOT NULL DEFAULT 0 CHECK (retained >= 0)
);

CREATE TABLE project_holdings (
    project_id     uuid    NOT NULL REFERENCES projects (id),
    environment_id uuid    NOT NULL,
    retained       boolean NOT NULL DEFAULT false,
    PRIMARY KEY (project_id, environment_id)
);

-- +goose StatementBegin
CREATE FUNCTION project_hold_sync(e uuid) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    p        uuid;
    holds    boolean;
    retains  boolean;
    was      boolean;
BEGIN
    IF e IS NULL THEN
        RETURN;
    END IF;
    SELECT s.project_id INTO p
    FROM environments en JOIN sessions s ON s.id = en.session_id
    WHERE en.id = e;
    IF p IS NULL THEN
        RETURN;
    END IF;
    -- One project's syncs run one at a time (0013 says why).
    PERFORM 1 FROM project_load WHERE project_id = p FOR UPDATE;
    holds := EXISTS (SELECT 1 FROM placements WHERE environment_id = e AND state <> 'released')
          OR EXISTS (SELECT 1 FROM allocations WHERE environment_id = e AND state <> 'released');
    retains := EXISTS (SELECT 1 FROM allocations WHERE environment_id = e
                       AND state <> 'released' AND compute_phase = 'suspended');
    SELECT retained INTO was FROM project_holdings WHERE project_id = p AND environment_id = e;
    IF NOT FOUND THEN
        was := NULL;
    END IF;
    IF holds THEN
        IF was IS NULL THEN
            INSERT INTO project_holdings (project_id, environment_id, retained) VALUES (p, e, retains);
            UPDATE project_load SET held = held + (NOT retains)::int, retained = retained + retains::int
            WHERE project_id = p;
        ELSIF was <> retains THEN
            UPDATE project_holdings SET retained = retains WHERE project_id = p AND environment_id = e;
            UPDATE project_load SET held = held + (CASE WHEN retains THEN -1 ELSE 1 END),
                                    retained = retained + (CASE WHEN retains THEN 1 ELSE -1 END)
            WHERE project_id = p;
        END IF;
    ELSIF was IS NOT NULL THEN
        DELETE FROM project_holdings WHERE project_id = p AND environment_id = e;
        UPDATE project_load SET held = held - (NOT was)::int, retained = retained - was::int
        WHERE project_id = p;
    END IF;
END;
$$;

CREATE FUNCTION project_load_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO project_load (project_id) VALUES (NEW.id) ON CONFLICT DO NOTHING;
    RETURN NULL;
END;
$$;

-- The project first (the lock order above), then the lane or lanes. A
-- row's Environment never changes, so one project sync covers OLD and NEW.
CREATE OR REPLACE FUNCTION node_hold_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM project_hold_sync(NEW.environment_id);
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

CREATE TRIGGER projects_project_load AFTER INSERT ON projects
    FOR EACH ROW EXECUTE FUNCTION project_load_row();

-- What the projects hold today.
INSERT INTO project_holdings (project_id, environment_id, retained)
SELECT s.project_id, h.environment_id, bool_or(h.suspended)
FROM (SELECT environment_id, false AS suspended FROM placements WHERE state <> 'released'
      UNION ALL
      SELECT environment_id, compute_phase = 'suspended' FROM allocations WHERE state <> 'released') h
JOIN environments en ON en.id = h.environment_id
JOIN sessions s ON s.id = en.session_id
GROUP BY s.project_id, h.environment_id;

INSERT INTO project_load (project_id, held, retained)
SELECT p.id,
       (SELECT count(*) FROM project_holdings h WHERE h.project_id = p.id AND NOT h.retained),
       (SELECT count(*) FROM project_holdings h WHERE h.project_id = p.id AND h.retained)
FROM projects p;

-- +goose Down
-- +goose StatementBegin
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
DROP TRIGGER projects_project_load ON projects;
DROP FUNCTION project_load_row();
DROP FUNCTION project_hold_sync(uuid);
DROP TABLE project_holdings;
DROP TABLE project_load;
