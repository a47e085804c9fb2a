-- Tenants and projects (issue 31, docs/tenants-plan.md §2.1). A tenant is
-- the ownership unit the engine sees: its id is the TenantID of every
-- Reference and of the io.berth.tenant / berth_tenant labels. A project
-- belongs to one tenant and is the unit of scope. Every Session belongs to
-- one project, and its tenant_id is that project's tenant: the composite
-- foreign key (project_id, tenant_id) -> projects (id, tenant_id) enforces
-- it, the pattern of environments -> sessions (0004).
--
-- Both are soft-deleted (deleted_at): Sessions keep their rows for ever,
-- so the foreign keys to a project must stay satisfiable. request_id is
-- the create request's retry identity; revision is the update etag.
--
-- Existing data: the tenant 00000000-0000-4000-8000-000000000001 (the
-- daemon's DefaultTenant) becomes the tenant "default" with the project
-- "default" of the fixed id 00000000-0000-4000-8000-000000000002. Every
-- other tenant id found in sessions (test databases) gets its own tenant,
-- named "tenant-" and its id, with a project "default". Every Session
-- moves into its tenant's default project. No tenant_id is rewritten
-- anywhere: it is part of live allocations' References and engine labels.
--
-- Request identities become scoped, so a request id used elsewhere tells
-- nothing: a Session's per project, a Turn's per Session.

-- +goose Up
CREATE TABLE tenants (
    id           uuid        PRIMARY KEY
                             CHECK (id <> '00000000-0000-0000-0000-000000000000'),
    display_name text        NOT NULL
                             CHECK (length(display_name) BETWEEN 1 AND 63 AND display_name !~ '[[:cntrl:]]'),
    request_id   uuid        NOT NULL UNIQUE
                             CHECK (request_id <> '00000000-0000-0000-0000-000000000000'),
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    deleted_at   timestamptz,
    revision     bigint      NOT NULL DEFAULT 1 CHECK (revision > 0)
);
CREATE UNIQUE INDEX tenants_live_name ON tenants (display_name) WHERE deleted_at IS NULL;
CREATE INDEX tenants_created_at_id ON tenants (created_at, id);

CREATE TABLE projects (
    id                    uuid        PRIMARY KEY
                                      CHECK (id <> '00000000-0000-0000-0000-000000000000'),
    tenant_id             uuid        NOT NULL REFERENCES tenants (id),
    display_name          text        NOT NULL
                                      CHECK (length(display_name) BETWEEN 1 AND 63 AND display_name !~ '[[:cntrl:]]'),
    request_id            uuid        NOT NULL UNIQUE
                                      CHECK (request_id <> '00000000-0000-0000-0000-000000000000'),
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now(),
    deleted_at            timestamptz,
    revision              bigint      NOT NULL DEFAULT 1 CHECK (revision > 0),
    -- NULL: no limit. The columns arrive here; their counters later.
    max_active_sessions   integer     CHECK (max_active_sessions >= 0),
    max_retained_sessions integer     CHECK (max_retained_sessions >= 0),
    -- (id, tenant_id) is the target of sessions' composite foreign key.
    UNIQUE (id, tenant_id)
);
CREATE UNIQUE INDEX projects_live_name ON projects (tenant_id, display_name) WHERE deleted_at IS NULL;
CREATE INDEX projects_tenant_created_at_id ON projects (tenant_id, created_at, id);

INSERT INTO tenants (id, display_name, request_id)
VALUES ('00000000-0000-4000-8000-000000000001', 'default', '00000000-0000-4000-8000-000000000001');
INSERT INTO projects (id, tenant_id, display_name, request_id)
VALUES ('00000000-0000-4000-8000-000000000002', '00000000-0000-4000-8000-000000000001', 'default',
        '00000000-0000-4000-8000-000000000002');

-- The full id keeps the names unique (tenants_live_name): a prefix could
-- repeat.
INSERT INTO tenants (id, display_name, request_id)
SELECT t.tenant_id, 'tenant-' || t.tenant_id::text, gen_random_uuid()
FROM (SELECT DISTINCT tenant_id FROM sessions
      WHERE tenant_id <> '00000000-0000-4000-8000-000000000001') t;
INSERT INTO projects (id, tenant_id, display_name, request_id)
SELECT gen_random_uuid(), t.id, 'default', gen_random_uuid()
FROM tenants t
WHERE t.id <> '00000000-0000-4000-8000-000000000001';

ALTER TABLE sessions ADD COLUMN project_id uuid;
UPDATE sessions s SET project_id = p.id
FROM projects p
WHERE p.tenant_id = s.tenant_id AND p.display_name = 'default';
ALTER TABLE sessions
    ALTER COLUMN project_id SET NOT NULL,
    ADD CONSTRAINT sessions_tenant_fkey FOREIGN KEY (tenant_id) REFERENCES tenants (id),
    ADD CONSTRAINT sessions_project_tenant_fkey
        FOREIGN KEY (project_id, tenant_id) REFERENCES projects (id, tenant_id),
    DROP CONSTRAINT sessions_request_id_key,
    ADD CONSTRAINT sessions_project_request_id_key UNIQUE (project_id, request_id);

-- The scoped list's keyset index (ListProjectSessionsByAge).
CREATE INDEX sessions_project_created_at_id ON sessions (project_id, created_at, id);

ALTER TABLE turns
    DROP CONSTRAINT turns_request_id_key,
    ADD CONSTRAINT turns_session_request_id_key UNIQUE (session_id, request_id);

-- +goose Down
ALTER TABLE turns
    DROP CONSTRAINT turns_session_request_id_key,
    ADD CONSTRAINT turns_request_id_key UNIQUE (request_id);
DROP INDEX sessions_project_created_at_id;
ALTER TABLE sessions
    DROP CONSTRAINT sessions_project_request_id_key,
    ADD CONSTRAINT sessions_request_id_key UNIQUE (request_id),
    DROP CONSTRAINT sessions_project_tenant_fkey,
    DROP CONSTRAINT sessions_tenant_fkey,
    DROP COLUMN project_id;
DROP TABLE projects;
DROP TABLE tenants;
