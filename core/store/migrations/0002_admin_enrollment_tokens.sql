-- What the admin API's NodeService needs of enrollment tokens and nodes:
-- the retry identity of CreateEnrollmentToken, and listings in creation
-- order.

-- +goose Up

-- request_id is the caller's UUID of the CreateEnrollmentToken request that
-- made the token; a retry with the same request_id finds this token instead
-- of making a second one. Tokens made before this column, or by other
-- paths, have none.
ALTER TABLE enrollment_tokens
    ADD COLUMN request_id uuid UNIQUE
        CHECK (request_id <> '00000000-0000-0000-0000-000000000000');

-- The keysets of the admin listings: oldest first, ties broken by id.
CREATE INDEX enrollment_tokens_created_at_id ON enrollment_tokens (created_at, id);
CREATE INDEX nodes_created_at_id ON nodes (created_at, id);
