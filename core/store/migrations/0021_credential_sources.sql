-- Issue 30, step 7 of docs/direct-lifecycle-plan.md: replacing a direct
-- provider's credential.
--
-- Generations are immutable and each seals its own credential, bound to
-- its number (secrets.DeploymentCredential). A key replacement commits
-- the new key as a new generation and points every retained generation
-- of the same kind that was verified with it at that generation:
-- deployment_credential_sources says whose sealed credential a
-- generation uses now. No ciphertext is rewritten; a generation without
-- a row uses its own. The source is always a later generation (the one
-- that brought the key), so a chain never loops, and a generation is
-- pointed at most once at a time (its row is replaced by the next key
-- replacement).

-- +goose Up
CREATE TABLE deployment_credential_sources (
    generation        bigint      PRIMARY KEY REFERENCES deployment_generations (generation),
    source_generation bigint      NOT NULL REFERENCES deployment_generations (generation),
    owner_epoch       bigint      NOT NULL CHECK (owner_epoch > 0),
    replaced_at       timestamptz NOT NULL DEFAULT now(),
    CHECK (source_generation > generation)
);

-- +goose Down
DROP TABLE deployment_credential_sources;
