-- A node's native backend, bound durably.
--
-- node_backends holds the backend fingerprint (the native resource
-- namespace, for Docker the engine's id) a node reported when it first
-- served the committed deployment generation. The node's allocations
-- resolve to that backend; a node that later reports another fingerprint
-- (its engine was replaced or it points at another one) is connected but
-- not ready (backend_fingerprint_mismatch), never repointed. The binding
-- is written once, by the Core that holds the execution lease, and lasts
-- as long as the node's identity (a re-enrolled node is a new node).
--
-- (0010 and 0012 are reserved for other branches; goose applies files in
-- order.)

-- +goose Up

CREATE TABLE node_backends (
    node_id             uuid        PRIMARY KEY REFERENCES nodes (id),
    backend_fingerprint text        NOT NULL CHECK (length(backend_fingerprint) BETWEEN 1 AND 256),
    owner_epoch         bigint      NOT NULL CHECK (owner_epoch > 0),
    bound_at            timestamptz NOT NULL DEFAULT now()
);

-- +goose Down

DROP TABLE node_backends;
