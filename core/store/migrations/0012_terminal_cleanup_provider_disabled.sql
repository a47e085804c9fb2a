-- Terminal cleanup and the provider switch.
--
-- allocations gain device_revoked_at: the time terminal cleanup revoked
-- the allocation's device (database clock, first value kept). From then on
-- the gateway refuses the device (store.Owner.AcceptRuntime) and claims no
-- new Turn for it; only a Turn already running on its open connection may
-- still report its result while its cancellation drains.
--
-- environments gain terminal_cause and terminated_at: why the
-- Environment's life ended (deleted by the admin, failed, expired) and
-- when, recorded once by terminal cleanup in the same transaction that
-- revokes the device, settles pending input, requests cancellation of
-- running Turns and requests cleanup of the allocation.
--
-- deployment gains provider_disabled (and the time it was set): while it
-- is set Core admits no new hosted Session and sends no new Create;
-- deletion, cleanup, Turn cancellation and results are never blocked.
--
-- (0010 and 0011 are reserved for other branches; goose applies files in
-- order.)

-- +goose Up

ALTER TABLE allocations
    ADD COLUMN device_revoked_at timestamptz;

ALTER TABLE environments
    ADD COLUMN terminal_cause text CHECK (terminal_cause IN ('deleted', 'failed', 'expired')),
    ADD COLUMN terminated_at  timestamptz,
    ADD CONSTRAINT environments_terminal_recorded
        CHECK ((terminal_cause IS NULL) = (terminated_at IS NULL));

ALTER TABLE deployment
    ADD COLUMN provider_disabled    boolean NOT NULL DEFAULT false,
    ADD COLUMN provider_disabled_at timestamptz,
    ADD CONSTRAINT deployment_provider_disabled_recorded
        CHECK (provider_disabled = (provider_disabled_at IS NOT NULL));
