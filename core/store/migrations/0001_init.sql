-- The first schema: Core's identity, its owner epoch and execution lease,
-- the installation CA, enrollment tokens and nodes. Deployments and their
-- generations, Sessions, Environments, allocations, placements and Turns
-- arrive in later migrations; nothing here assumes they do not exist.
--
-- Conventions: every time is timestamptz written by the database clock
-- (now()), and no constraint orders two of them, since that clock may step
-- back; singleton tables carry a boolean primary key that can only be
-- true; CHECK constraints hold the shape of every row, so a row that breaks
-- it never lands whatever code wrote it. There are no down migrations: a
-- schema only moves forward.

-- +goose Up

-- installation is Core's stable identity: one row, created by the first
-- Core that starts. owner_epoch grows by one for every Core start, so each
-- Core (and every node call it makes) carries an epoch no earlier Core had.
CREATE TABLE installation (
    singleton   boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    id          uuid        NOT NULL UNIQUE
                            CHECK (id <> '00000000-0000-0000-0000-000000000000'),
    public_url  text        NOT NULL
                            CHECK (public_url ~ '^https?://[^[:space:]]+$' AND length(public_url) <= 2048),
    created_at  timestamptz NOT NULL DEFAULT now(),
    owner_epoch bigint      NOT NULL DEFAULT 0 CHECK (owner_epoch >= 0)
);

-- execution_lease names the single active Core. The row stays once written:
-- releasing expires it instead of deleting it, so the highest epoch that
-- ever held the lease is remembered and an older Core can never take it
-- back.
CREATE TABLE execution_lease (
    singleton   boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    holder      uuid        NOT NULL,
    owner_epoch bigint      NOT NULL CHECK (owner_epoch > 0),
    acquired_at timestamptz NOT NULL DEFAULT now(),
    renewed_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);

-- installation_ca is the installation CA. The store keeps bytes only: the
-- private key arrives already encrypted (AES-GCM, 12-byte nonce) by the
-- caller, which also binds it to the installation; the key never reaches
-- the database in the clear.
CREATE TABLE installation_ca (
    singleton       boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    certificate_pem text        NOT NULL
                                CHECK (certificate_pem LIKE '-----BEGIN CERTIFICATE-----%' AND length(certificate_pem) <= 65536),
    key_ciphertext  bytea       NOT NULL CHECK (octet_length(key_ciphertext) BETWEEN 1 AND 65536),
    key_nonce       bytea       NOT NULL CHECK (octet_length(key_nonce) = 12),
    created_at      timestamptz NOT NULL DEFAULT now()
);

-- enrollment_tokens holds the SHA-256 of each token's secret, never the
-- token. A token is used at most once; used_at, node_id and public_key_hash
-- are set together by the one enrollment that consumed it, so a node whose
-- response was lost can prove it is the same enrollment (same key) and
-- retry.
CREATE TABLE enrollment_tokens (
    id              text        PRIMARY KEY CHECK (id ~ '^[0-9a-f]{32}$'),
    secret_hash     bytea       NOT NULL CHECK (octet_length(secret_hash) = 32),
    created_at      timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz NOT NULL,
    revoked_at      timestamptz,
    used_at         timestamptz,
    node_id         uuid        CHECK (node_id <> '00000000-0000-0000-0000-000000000000'),
    public_key_hash bytea       CHECK (octet_length(public_key_hash) = 32),
    CHECK (expires_at > created_at),
    CHECK ((used_at IS NULL) = (node_id IS NULL) AND (used_at IS NULL) = (public_key_hash IS NULL))
);

-- nodes are the enrolled compute hosts. A node is identified by its id and
-- by the hash of its public key (one key, one node). state moves enrolled
-- -> enabled <-> retired -> removed; removed is final and the row stays as
-- a tombstone, so a removed node's id and key never come back (enforced by
-- nodes_state_guard below, whatever statement tries).
CREATE TABLE nodes (
    id                      uuid        PRIMARY KEY
                                        CHECK (id <> '00000000-0000-0000-0000-000000000000'),
    advertise_address       text        NOT NULL
                                        CHECK (advertise_address ~ '^[^[:space:]/]+:[0-9]{1,5}$' AND length(advertise_address) <= 300),
    certificate_der         bytea       NOT NULL CHECK (octet_length(certificate_der) BETWEEN 1 AND 65536),
    certificate_fingerprint text        NOT NULL CHECK (certificate_fingerprint ~ '^sha256:[0-9a-f]{64}$'),
    public_key_hash         bytea       NOT NULL UNIQUE CHECK (octet_length(public_key_hash) = 32),
    state                   text        NOT NULL DEFAULT 'enrolled'
                                        CHECK (state IN ('enrolled', 'enabled', 'retired', 'removed')),
    created_at              timestamptz NOT NULL DEFAULT now(),
    updated_at              timestamptz NOT NULL DEFAULT now()
);

-- nodes_state_guard keeps removed final and enrolled initial for every
-- writer, not only the store's compare-and-swap.
-- +goose StatementBegin
CREATE FUNCTION nodes_state_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.state = 'removed' AND NEW.state <> 'removed' THEN
        RAISE EXCEPTION 'a removed node is final' USING ERRCODE = 'check_violation', CONSTRAINT = 'nodes_removed_final';
    END IF;
    IF NEW.state = 'enrolled' AND OLD.state <> 'enrolled' THEN
        RAISE EXCEPTION 'a node never returns to enrolled' USING ERRCODE = 'check_violation', CONSTRAINT = 'nodes_enrolled_initial';
    END IF;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER nodes_state_guard BEFORE UPDATE OF state ON nodes
    FOR EACH ROW EXECUTE FUNCTION nodes_state_guard();
