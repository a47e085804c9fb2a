-- Project API keys (issue 31, docs/tenants-plan.md §2.2). A key is
-- "berth-key-v1.<id>.<secret>": its id (the row's) in unpadded base64url,
-- and 32 random bytes. Only the SHA-256 of the whole token is kept
-- (digest): the token is shown once, at creation, and a retried create
-- returns the key without it. A key acts in its project only; its
-- tenant_id is the project's (the composite foreign key, as for
-- sessions). Revocation is final (revoked_at); expiry is decided on the
-- database clock (expire_at > now()).

-- +goose Up
CREATE TABLE project_keys (
    id           uuid        PRIMARY KEY
                             CHECK (id <> '00000000-0000-0000-0000-000000000000'),
    project_id   uuid        NOT NULL,
    tenant_id    uuid        NOT NULL,
    FOREIGN KEY (project_id, tenant_id) REFERENCES projects (id, tenant_id),
    digest       bytea       NOT NULL UNIQUE CHECK (octet_length(digest) = 32),
    display_name text        NOT NULL
                             CHECK (length(display_name) <= 63 AND display_name !~ '[[:cntrl:]]'),
    request_id   uuid        NOT NULL UNIQUE
                             CHECK (request_id <> '00000000-0000-0000-0000-000000000000'),
    created_at   timestamptz NOT NULL DEFAULT now(),
    expire_at    timestamptz CHECK (expire_at > created_at),
    revoked_at   timestamptz
);
CREATE INDEX project_keys_project_created_at_id ON project_keys (project_id, created_at, id);

-- +goose Down
DROP TABLE project_keys;
