-- +goose Up
-- Node presence, recorded by the Core that holds the node's connection: the
-- connection id, that Core's owner epoch, the node's deployment generation
-- and its readiness, with the database time of the latest health report.
-- A node is present when its latest report is younger than 45 seconds (by
-- the database clock) and was recorded under the current owner epoch.
CREATE TABLE node_presence (
    node_id         uuid PRIMARY KEY REFERENCES nodes (id),
    connection_id   uuid NOT NULL,
    owner_epoch     bigint NOT NULL CHECK (owner_epoch > 0),
    generation      bigint NOT NULL CHECK (generation > 0),
    ready           boolean NOT NULL,
    diagnostic_code text NOT NULL DEFAULT '' CHECK (diagnostic_code ~ '^[a-z0-9_]{0,64}$'),
    reported_at     timestamptz NOT NULL DEFAULT now(),
    CHECK (ready = (diagnostic_code = ''))
);
