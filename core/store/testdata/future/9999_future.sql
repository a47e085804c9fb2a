-- A migration from a future binary, for tests that need a database newer
-- than the one this binary knows.
-- +goose Up
CREATE TABLE from_the_future (id bigint PRIMARY KEY);
