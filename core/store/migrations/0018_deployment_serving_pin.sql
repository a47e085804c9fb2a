-- The deployment's durable serving pin (issue 17): the generation a node
-- last reported ready for while it was the current one, and since when.
-- It is promoted only for the then-current generation, in one statement
-- that takes the deployment row's lock (PromoteServingPin), so a late
-- readiness report for a superseded generation never acquires it.
-- +goose Up
ALTER TABLE deployment
    ADD COLUMN serving_generation bigint REFERENCES deployment_generations (generation),
    ADD COLUMN serving_since      timestamptz,
    ADD CONSTRAINT deployment_serving_pin CHECK ((serving_generation IS NULL) = (serving_since IS NULL));
