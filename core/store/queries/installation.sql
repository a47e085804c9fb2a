-- name: InsertInstallation :one
-- InsertInstallation creates the installation row unless one exists, in
-- which case it returns no row and changes nothing.
INSERT INTO installation (id, public_url)
VALUES (@id, @public_url)
ON CONFLICT (singleton) DO NOTHING
RETURNING *;

-- name: GetInstallation :one
SELECT * FROM installation;

-- name: NextOwnerEpoch :one
-- NextOwnerEpoch increments the owner epoch under the row lock, so
-- concurrent callers each get a distinct, larger epoch.
UPDATE installation
SET owner_epoch = owner_epoch + 1
RETURNING owner_epoch;
