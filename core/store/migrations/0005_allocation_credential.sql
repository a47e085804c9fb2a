-- The allocation's dedicated device credential, sealed at rest under the
-- installation's master key (AES-256-GCM with additional data that binds it
-- to the installation and the allocation id), so the lifecycle worker can
-- hand the original credential to the one Create the create receipt
-- permits, also after a retried CreateSession or a Core restart. Only its
-- digest (credential_digest) authenticates the device.
--
-- Rows from before this migration have neither column; new rows always
-- carry both (the store writes them in CreateSession's transaction).

-- +goose Up

ALTER TABLE allocations
    ADD COLUMN credential_ciphertext bytea CHECK (octet_length(credential_ciphertext) BETWEEN 17 AND 1024),
    ADD COLUMN credential_nonce      bytea CHECK (octet_length(credential_nonce) = 12),
    ADD CONSTRAINT allocations_credential_sealed_together
        CHECK ((credential_ciphertext IS NULL) = (credential_nonce IS NULL));
