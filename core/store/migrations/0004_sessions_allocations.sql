-- Sessions and their compute: the Session, its Environment, the
-- Environment's placement on a node (the capacity reservation) and the
-- allocation (private compute ownership with its daemon credential digest
-- and its one-shot create receipt).
--
-- The deployment generation appears as a plain bigint: the deployment
-- tables arrive in their own migration and a foreign key to them follows
-- once both exist.

-- +goose Up

-- sessions are tenant-owned. request_id is the caller's id of the
-- CreateSession request: a retry with the same request_id finds this
-- Session instead of making another. delete_requested_at is set exactly
-- when deletion was requested.
CREATE TABLE sessions (
    id                  uuid        PRIMARY KEY
                                    CHECK (id <> '00000000-0000-0000-0000-000000000000'),
    tenant_id           uuid        NOT NULL
                                    CHECK (tenant_id <> '00000000-0000-0000-0000-000000000000'),
    display_name        text        NOT NULL
                                    CHECK (length(display_name) <= 200 AND display_name !~ '[[:cntrl:]]'),
    state               text        NOT NULL DEFAULT 'active'
                                    CHECK (state IN ('active', 'delete_requested')),
    request_id          uuid        NOT NULL UNIQUE
                                    CHECK (request_id <> '00000000-0000-0000-0000-000000000000'),
    created_at          timestamptz NOT NULL DEFAULT now(),
    delete_requested_at timestamptz,
    -- (id, tenant_id) is the target of the tenant-preserving foreign keys
    -- below: an Environment always belongs to its Session's tenant.
    UNIQUE (id, tenant_id),
    CHECK ((state = 'delete_requested') = (delete_requested_at IS NOT NULL))
);

CREATE INDEX sessions_created_at_id ON sessions (created_at, id);

-- environments: one per Session. state is the public Environment state;
-- allocation state (private compute ownership) is separate.
CREATE TABLE environments (
    id         uuid        PRIMARY KEY
                           CHECK (id <> '00000000-0000-0000-0000-000000000000'),
    session_id uuid        NOT NULL UNIQUE,
    tenant_id  uuid        NOT NULL,
    state      text        NOT NULL DEFAULT 'pending'
                           CHECK (state IN ('pending', 'ready', 'failed', 'expired')),
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (id, tenant_id),
    FOREIGN KEY (session_id, tenant_id) REFERENCES sessions (id, tenant_id)
);

-- placements bind an Environment to a node; an unreleased placement is a
-- capacity reservation on that node. reserved: committed with the Session,
-- no compute confirmed yet; active: compute observed running; released:
-- cleanup confirmed and creation settled (final).
CREATE TABLE placements (
    environment_id uuid        PRIMARY KEY REFERENCES environments (id),
    node_id        uuid        NOT NULL REFERENCES nodes (id),
    generation     bigint      NOT NULL CHECK (generation > 0),
    state          text        NOT NULL DEFAULT 'reserved'
                               CHECK (state IN ('reserved', 'active', 'released')),
    created_at     timestamptz NOT NULL DEFAULT now(),
    released_at    timestamptz,
    CHECK ((state = 'released') = (released_at IS NOT NULL))
);

CREATE INDEX placements_node_unreleased ON placements (node_id, environment_id)
    WHERE state <> 'released';

-- allocations are private compute ownership: the exact Reference (tenant,
-- environment, allocation id, which is never the environment id), the node
-- and generation, the digest of the dedicated daemon credential and the
-- device it authenticates.
--
-- state:
--   allocated          committed; the create receipt is fresh, Create not sent
--   create_dispatched  the receipt was consumed (ClaimCreate): Create may have
--                      been sent, and is never sent again
--   create_unknown     Create's outcome is unknown
--   running            a matching resource was observed
--   create_failed      an explicit absence receipt settled Create with no
--                      resource
--   cleanup_requested  owned cleanup was requested
--   cleanup_unknown    a cleanup attempt's outcome is unknown (or a late
--                      resource appeared after confirmation)
--   cleanup_confirmed  owned compute and volumes were confirmed absent
--   released           final; only after confirmed cleanup and settled
--                      creation
--
-- Creation settlement is kept apart from state, so cleanup can proceed
-- while Create is still unsettled: create_settled (a matching resource with
-- completed bootstrap was observed) and absence_receipt (the provider's
-- explicit receipt that Create settled without a resource) never hold
-- together. A Create never claimed (create_dispatched_at NULL) was never
-- sent and needs no settlement.
CREATE TABLE allocations (
    id                   uuid        PRIMARY KEY
                                     CHECK (id <> '00000000-0000-0000-0000-000000000000'),
    environment_id       uuid        NOT NULL,
    tenant_id            uuid        NOT NULL,
    node_id              uuid        NOT NULL REFERENCES nodes (id),
    generation           bigint      NOT NULL CHECK (generation > 0),
    credential_digest    bytea       NOT NULL CHECK (octet_length(credential_digest) = 32),
    device_id            uuid        NOT NULL UNIQUE
                                     CHECK (device_id <> '00000000-0000-0000-0000-000000000000'),
    state                text        NOT NULL DEFAULT 'allocated'
                                     CHECK (state IN ('allocated', 'create_dispatched', 'create_unknown',
                                                      'running', 'create_failed', 'cleanup_requested',
                                                      'cleanup_unknown', 'cleanup_confirmed', 'released')),
    create_receipt       uuid        NOT NULL UNIQUE
                                     CHECK (create_receipt <> '00000000-0000-0000-0000-000000000000'),
    create_dispatched_at timestamptz,
    create_settled       boolean     NOT NULL DEFAULT false,
    absence_receipt      boolean     NOT NULL DEFAULT false,
    bootstrap_complete   boolean     NOT NULL DEFAULT false,
    provider_id          text        CHECK (length(provider_id) BETWEEN 1 AND 256 AND provider_id !~ '[[:cntrl:]]'),
    compute_phase        text        NOT NULL DEFAULT 'none'
                                     CHECK (compute_phase ~ '^[a-z][a-z_]{0,31}$'),
    revision             bigint      NOT NULL DEFAULT 1 CHECK (revision > 0),
    cleanup_requested_at timestamptz,
    cleanup_confirmed_at timestamptz,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    released_at          timestamptz,
    FOREIGN KEY (environment_id, tenant_id) REFERENCES environments (id, tenant_id),
    CHECK (id <> environment_id),
    CHECK (NOT (create_settled AND absence_receipt)),
    CHECK (NOT create_settled OR bootstrap_complete),
    CHECK ((state = 'allocated') <= (create_dispatched_at IS NULL)),
    CHECK (state NOT IN ('create_dispatched', 'create_unknown', 'running', 'create_failed')
           OR create_dispatched_at IS NOT NULL),
    CHECK (state <> 'running' OR provider_id IS NOT NULL),
    CHECK (state <> 'create_failed' OR absence_receipt),
    CHECK ((state IN ('cleanup_requested', 'cleanup_unknown', 'cleanup_confirmed', 'released'))
           = (cleanup_requested_at IS NOT NULL)),
    CHECK ((state IN ('cleanup_confirmed', 'released')) = (cleanup_confirmed_at IS NOT NULL)),
    CHECK ((state = 'released') = (released_at IS NOT NULL)),
    -- The release rule, for every writer: confirmed cleanup and settled
    -- (or never sent) creation.
    CHECK (state <> 'released'
           OR create_settled OR absence_receipt OR create_dispatched_at IS NULL)
);

-- One unreleased allocation per Environment.
CREATE UNIQUE INDEX allocations_one_unreleased_per_environment ON allocations (environment_id)
    WHERE state <> 'released';

-- The per-node worker scans: unreleased allocations of one node in id order.
CREATE INDEX allocations_node_unreleased ON allocations (node_id, id)
    WHERE state <> 'released';
