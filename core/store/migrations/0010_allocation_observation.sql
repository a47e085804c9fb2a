-- What the lifecycle worker last observed of a running allocation's
-- compute, and when it last sent a service keepalive (Renew) to it.
--
-- observed_compute is the last observation (GetInfo, or the Info of a
-- keepalive, which for Docker only reads state):
--   running      the provider observed the owned compute running
--   stopped      the owned compute exists and is not running
--   missing      the provider answered ErrNotFound: only a missing
--                observation, never proof of absence
--   unavailable  the observation failed (timeout, node unreachable,
--                ownership mismatch): nothing was observed
-- observed_reason is the fixed code the API reports with it and
-- observed_at its time by the database clock; the three are written
-- together. None of them authorizes cleanup or moves the allocation's
-- state: they are evidence for the Session API and the Turn sweep only.
--
-- keepalive_at is the database time of the last keepalive the provider
-- confirmed. A keepalive is sent only while it is less than an hour old (a
-- lapse is never revived); a node allocation never expires because of it.
--
-- (0011 and 0012 belong to other branches; goose applies files in order.)

-- +goose Up

ALTER TABLE allocations
    ADD COLUMN observed_at      timestamptz,
    ADD COLUMN observed_compute text CHECK (observed_compute IN ('running', 'stopped', 'missing', 'unavailable')),
    ADD COLUMN observed_reason  text CHECK (observed_reason ~ '^[a-z][a-z0-9_]{0,63}$'),
    ADD COLUMN keepalive_at     timestamptz,
    ADD CONSTRAINT allocations_observation_together
        CHECK ((observed_at IS NULL) = (observed_compute IS NULL)
               AND (observed_at IS NULL) = (observed_reason IS NULL));
