-- The audit trail (issue 31, docs/tenants-plan.md §2.6): one row per
-- mutating admin call (kind 'call': written after the handler, best
-- effort) and per lifecycle decision (kind 'decision': written in the
-- deciding transaction). Written only by core/audit (the store's
-- RecordAuditEvent and the helper recordAudit other store writes call in
-- their own transaction); swept by its retention. Who: the administrator,
-- a project key by id (never its secret or digest), or Core itself; when:
-- the database clock. No foreign keys: events outlive their subjects.
-- detail holds authored keys only (counts, generations, node names,
-- reasons), never a request body, configuration or credential.

-- +goose Up
CREATE TABLE audit_events (
    id           uuid        PRIMARY KEY
                             CHECK (id <> '00000000-0000-0000-0000-000000000000'),
    occurred_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    kind         text        NOT NULL CHECK (kind IN ('call', 'decision')),
    actor_kind   text        NOT NULL CHECK (actor_kind IN ('admin', 'project_key', 'core')),
    actor_key_id uuid,
    CHECK ((actor_kind = 'project_key') = (actor_key_id IS NOT NULL)),
    tenant_id    uuid,
    project_id   uuid,
    action       text        NOT NULL CHECK (action ~ '^[a-z][a-z0-9_.]{0,63}$'),
    resource     text        NOT NULL CHECK (length(resource) <= 256 AND resource !~ '[[:cntrl:]]'),
    request_id   uuid        NOT NULL
                             CHECK (request_id <> '00000000-0000-0000-0000-000000000000'),
    parent_id    uuid,
    outcome      text        NOT NULL CHECK (outcome ~ '^[a-z][a-z0-9_]{0,63}$'),
    detail       jsonb       CHECK (detail IS NULL OR (jsonb_typeof(detail) = 'object' AND octet_length(detail::text) <= 4096))
);
CREATE INDEX audit_events_occurred ON audit_events (occurred_at, id);
CREATE INDEX audit_events_project ON audit_events (project_id, occurred_at, id) WHERE project_id IS NOT NULL;
CREATE INDEX audit_events_resource ON audit_events (resource, occurred_at, id);

-- +goose Down
DROP TABLE audit_events;
