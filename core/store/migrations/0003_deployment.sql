-- The deployment: the selected sandbox provider, its public configuration,
-- its sealed credential and the sandbox specification, as immutable
-- generations, and the pointer to the current one.
--
-- The schema holds no provider names or provider-specific columns: only the
-- provider's registered configuration adapter interprets public_config and
-- observations, and the constraints check object structure, never the
-- registration list.

-- +goose Up

-- deployment_generations holds every committed generation. A generation is
-- never changed or deleted (deployment_generations_immutable below): owned
-- allocations keep resolving to the generation they were created under.
-- The credential arrives already sealed (AES-GCM, 12-byte nonce) by the
-- caller, bound to the installation and the generation number; the store
-- never sees it in the clear. The suspension policy is in whole seconds,
-- both set or both null (null: no suspension).
CREATE TABLE deployment_generations (
    generation                   bigint      PRIMARY KEY CHECK (generation > 0),
    provider_kind                text        NOT NULL CHECK (provider_kind ~ '^[a-z][a-z0-9-]{1,30}[a-z0-9]$'),
    public_config                jsonb       NOT NULL
                                             CHECK (jsonb_typeof(public_config) = 'object' AND octet_length(public_config::text) <= 65536),
    observations                 jsonb       NOT NULL
                                             CHECK (jsonb_typeof(observations) = 'object' AND octet_length(observations::text) <= 65536),
    credential_ciphertext        bytea       CHECK (octet_length(credential_ciphertext) BETWEEN 17 AND 65552),
    credential_nonce             bytea       CHECK (octet_length(credential_nonce) = 12),
    cpu_millis                   bigint      NOT NULL CHECK (cpu_millis > 0),
    memory_bytes                 bigint      NOT NULL CHECK (memory_bytes > 0),
    disk_bytes                   bigint      NOT NULL CHECK (disk_bytes > 0),
    max_active                   integer     NOT NULL CHECK (max_active > 0),
    max_retained                 integer     NOT NULL CHECK (max_retained >= 0),
    suspension_idle_seconds      bigint      CHECK (suspension_idle_seconds > 0),
    suspension_retention_seconds bigint      CHECK (suspension_retention_seconds > 0),
    created_at                   timestamptz NOT NULL DEFAULT now(),
    CHECK ((credential_ciphertext IS NULL) = (credential_nonce IS NULL)),
    CHECK ((suspension_idle_seconds IS NULL) = (suspension_retention_seconds IS NULL))
);

-- deployment_generations_immutable refuses every UPDATE and DELETE of a
-- generation, whatever statement tries.
-- +goose StatementBegin
CREATE FUNCTION deployment_generations_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'a deployment generation is immutable'
        USING ERRCODE = 'check_violation', CONSTRAINT = 'deployment_generations_immutable';
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER deployment_generations_immutable BEFORE UPDATE OR DELETE ON deployment_generations
    FOR EACH ROW EXECUTE FUNCTION deployment_generations_immutable();

-- deployment is the singleton pointer to the current generation, null
-- before the first commit. The row exists from this migration on, so a
-- commit always locks it (SELECT ... FOR UPDATE) and compares the current
-- generation with the one the caller expects, even the very first time.
CREATE TABLE deployment (
    singleton          boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    current_generation bigint      REFERENCES deployment_generations (generation),
    updated_at         timestamptz NOT NULL DEFAULT now()
);

INSERT INTO deployment (singleton) VALUES (true);
