-- Abandoned Creates.
--
-- A Create whose outcome stayed unknown (its answer lost: the node agent
-- or the engine died mid-call, the connection was cut) left its Session
-- waiting for ever: Core only observes such a creation, and nothing but a
-- settled running resource or an absence receipt ends the wait. Now the
-- lifecycle worker abandons the attempt once it has been unknown, and not
-- observed running, for store.CreateAbandonAfter by the database clock:
-- the allocation's device is revoked and its cleanup requested, so Kill
-- settles the attempt the way it settles a deleted Session's (the Docker
-- adapter removes what the attempt made and claims its names with a
-- tombstone), and once it is released the Environment, still pending,
-- gets a new allocation, or is recorded failed after
-- store.MaxCreateAttempts attempts that ended without compute.
--
-- allocations gain create_abandoned_at: when the worker abandoned the
-- attempt (database clock). It counts as a failed attempt.

-- +goose Up

ALTER TABLE allocations
    ADD COLUMN create_abandoned_at timestamptz,
    ADD CONSTRAINT allocations_abandoned_dispatched
        CHECK (create_abandoned_at IS NULL OR create_dispatched_at IS NOT NULL);
