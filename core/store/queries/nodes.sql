-- name: InsertNode :one
-- InsertNode creates an enrolled node unless its id or public key hash is
-- taken, in which case it returns no row and changes nothing.
INSERT INTO nodes (id, advertise_address, certificate_der, certificate_fingerprint, public_key_hash)
VALUES (@id, @advertise_address, @certificate_der, @certificate_fingerprint, @public_key_hash)
ON CONFLICT DO NOTHING
RETURNING *;

-- name: GetNode :one
SELECT * FROM nodes WHERE id = @id;

-- name: GetNodeByPublicKeyHash :one
SELECT * FROM nodes WHERE public_key_hash = @public_key_hash;

-- name: ListNodes :many
-- ListNodes pages by id (keyset): the rows after @after, in id order.
SELECT * FROM nodes
WHERE id > @after
ORDER BY id
LIMIT @page_size;

-- name: SetNodeState :one
-- SetNodeState is a compare-and-swap: it moves the node to @to_state only
-- when its state is @from_state, and returns no row otherwise.
UPDATE nodes
SET state = @to_state, updated_at = now()
WHERE id = @id AND state = @from_state
RETURNING *;

-- name: ListNodesByAge :many
-- ListNodesByAge pages in enrollment order by (created_at, id) (keyset):
-- the rows after the cursor, or from the start when @first_page. Removed
-- nodes are listed only with @include_removed.
SELECT * FROM nodes
WHERE (sqlc.arg(first_page)::boolean
       OR (created_at, id) > (sqlc.arg(after_created_at)::timestamptz, sqlc.arg(after_id)::uuid))
  AND (sqlc.arg(include_removed)::boolean OR state <> 'removed')
ORDER BY created_at, id
LIMIT @page_size;

-- name: NotifyNodeWork :exec
-- NotifyNodeWork tells the lifecycle worker of node @node_id that it has
-- work now (a Session committed on it, a cleanup requested). PostgreSQL
-- delivers it to the listeners when the transaction commits and drops it
-- when it rolls back; the workers' periodic scan remains the safety net.
SELECT pg_notify('berth_node_work', sqlc.arg(node_id)::text);

-- name: ListNodeLoads :many
-- ListNodeLoads returns what each of the nodes @ids holds (node_load, kept
-- exact by the database): active environments (placements and unreleased
-- allocations not suspended) and retained snapshots.
SELECT node_id, held, retained FROM node_load WHERE node_id = ANY(@ids::uuid[]);
