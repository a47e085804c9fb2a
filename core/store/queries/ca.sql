-- name: InsertCA :one
-- InsertCA stores the installation CA unless one is stored, in which case
-- it returns no row and changes nothing.
INSERT INTO installation_ca (certificate_pem, key_ciphertext, key_nonce)
VALUES (@certificate_pem, @key_ciphertext, @key_nonce)
ON CONFLICT (singleton) DO NOTHING
RETURNING *;

-- name: GetCA :one
SELECT * FROM installation_ca;
