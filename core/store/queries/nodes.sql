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

-- name: NotifyEvent :exec
-- NotifyEvent queues the event "@kind:@id" on Core's events channel
-- (berth_events; core/events parses it), e.g. node_work for the node whose
-- lifecycle worker has work now. PostgreSQL delivers it to the listeners
-- when the transaction commits and drops it when it rolls back; the
-- workers' periodic scan remains the safety net.
SELECT pg_notify('berth_events', sqlc.arg(kind)::text || ':' || sqlc.arg(id)::text);

-- name: ListNodeLoads :many
-- ListNodeLoads returns what each of the nodes @ids holds (node_load, kept
-- exact by the database): active environments (placements and unreleased
-- allocations not suspended) and retained snapshots.
SELECT node_id, held, retained FROM node_load WHERE node_id = ANY(@ids::uuid[]);

-- name: LockNode :one
-- LockNode reads a node and locks its row until the transaction ends.
SELECT * FROM nodes WHERE id = @id FOR UPDATE;

-- name: ListNodeBackends :many
-- ListNodeBackends returns the bindings of those of the nodes @ids that
-- are bound.
SELECT node_id, backend_fingerprint FROM node_backends WHERE node_id = ANY(@ids::uuid[]);

-- name: LockNodePresenceDiagnostic :one
-- LockNodePresenceDiagnostic reads the node's latest recorded diagnostic
-- and locks its presence row (a presence record waits for the
-- transaction).
SELECT diagnostic_code FROM node_presence WHERE node_id = @node_id FOR UPDATE;

-- name: ListNodeHeldEnvironments :many
-- ListNodeHeldEnvironments lists the Environments node @node_id holds (an
-- unreleased placement or allocation on it), with their Sessions, in
-- Session order (the order their Session locks are taken in), and whether
-- the node holds an unreleased allocation of each.
SELECT e.id AS environment_id, e.session_id,
       EXISTS (SELECT 1 FROM allocations a
               WHERE a.environment_id = e.id AND a.node_id = @node_id::uuid AND a.state <> 'released')::boolean AS allocated
FROM environments e
WHERE e.id IN (SELECT p.environment_id FROM placements p WHERE p.node_id = @node_id::uuid AND p.state <> 'released'
               UNION
               SELECT a.environment_id FROM allocations a WHERE a.node_id = @node_id::uuid AND a.state <> 'released')
ORDER BY e.session_id, e.id;

-- name: ListNodeOwedLeftovers :many
-- ListNodeOwedLeftovers lists the leftovers that cleanup still owes of the
-- unreleased allocations of node @node_id.
SELECT l.* FROM allocation_leftovers l
JOIN allocations a ON a.id = l.allocation_id
WHERE a.node_id = @node_id::uuid AND a.state <> 'released' AND l.deleted_at IS NULL
ORDER BY l.allocation_id, l.id;

-- name: AbandonNodeAllocations :many
-- AbandonNodeAllocations releases every unreleased allocation of node
-- @node_id without cleanup (abandoned_at, migration 0019), returning them
-- as they were named.
UPDATE allocations
SET state = 'released', released_at = now(), abandoned_at = now(), revision = revision + 1, updated_at = now()
WHERE node_id = @node_id::uuid AND state <> 'released'
RETURNING *;

-- name: ReleaseNodePlacements :exec
-- ReleaseNodePlacements releases every unreleased placement on node
-- @node_id.
UPDATE placements SET state = 'released', released_at = coalesce(released_at, now())
WHERE node_id = @node_id::uuid AND state <> 'released';

-- name: InsertNodeAbandonment :one
INSERT INTO node_abandonments (node_id, action, backend_fingerprint, owner_epoch)
VALUES (@node_id, @action, @backend_fingerprint, @owner_epoch)
RETURNING *;

-- name: InsertNodeAbandonedResource :exec
INSERT INTO node_abandoned_resources (node_id, kind, identity, allocation_id, environment_id, session_id, native_id)
VALUES (@node_id, @kind, @identity, @allocation_id, @environment_id, @session_id, @native_id)
ON CONFLICT DO NOTHING;

-- name: GetNodeAbandonment :one
SELECT * FROM node_abandonments WHERE node_id = @node_id;

-- name: ListNodeAbandonedResources :many
-- ListNodeAbandonedResources lists what node @node_id's abandonment
-- named: each allocation's rows together (reservations last), then by
-- kind and identity.
SELECT * FROM node_abandoned_resources WHERE node_id = @node_id
ORDER BY allocation_id NULLS LAST, kind, identity;
