-- name: InsertAuditEvent :exec
-- InsertAuditEvent records one event at the database clock
-- (clock_timestamp(): the moment of the insert, not the transaction's
-- start, so a decision's event orders after what its transaction read).
INSERT INTO audit_events (id, kind, actor_kind, actor_key_id, tenant_id, project_id,
                          action, resource, request_id, parent_id, outcome, detail)
VALUES (@id, @kind, @actor_kind, sqlc.narg(actor_key_id)::uuid, sqlc.narg(tenant_id)::uuid,
        sqlc.narg(project_id)::uuid, @action, @resource, @request_id, sqlc.narg(parent_id)::uuid,
        @outcome, sqlc.narg(detail)::jsonb);

-- name: ListAuditEvents :many
-- ListAuditEvents pages events in (occurred_at, id) order (keyset) after
-- a position, from start_time (inclusive) to end_time (exclusive; NULL is
-- now() - 5 s, so a transaction that commits late with an earlier
-- clock_timestamp() is not skipped by a reader tailing the trail). Each
-- filter is optional (NULL): the actor (kind, and the key id of a
-- project key), the project, an action prefix, the resource and the
-- outcome.
SELECT * FROM audit_events
WHERE (occurred_at, id) > (sqlc.arg(after_occurred_at)::timestamptz, sqlc.arg(after_id)::uuid)
  AND occurred_at >= coalesce(sqlc.narg(start_time)::timestamptz, '-infinity')
  AND occurred_at < coalesce(sqlc.narg(end_time)::timestamptz, now() - interval '5 seconds')
  AND (sqlc.narg(actor_kind)::text IS NULL OR actor_kind = sqlc.narg(actor_kind)::text)
  AND (sqlc.narg(actor_key_id)::uuid IS NULL OR actor_key_id = sqlc.narg(actor_key_id)::uuid)
  AND (sqlc.narg(project_id)::uuid IS NULL OR project_id = sqlc.narg(project_id)::uuid)
  AND (sqlc.narg(action_prefix)::text IS NULL
       OR left(action, length(sqlc.narg(action_prefix)::text)) = sqlc.narg(action_prefix)::text)
  AND (sqlc.narg(resource)::text IS NULL OR resource = sqlc.narg(resource)::text)
  AND (sqlc.narg(outcome)::text IS NULL OR outcome = sqlc.narg(outcome)::text)
ORDER BY occurred_at, id
LIMIT @page_size;

-- name: DeleteExpiredAuditEvents :execrows
-- DeleteExpiredAuditEvents deletes up to batch events older than the
-- retention, on the database clock, oldest first.
DELETE FROM audit_events
WHERE id IN (SELECT id FROM audit_events
             WHERE occurred_at < now() - sqlc.arg(retention_micros)::bigint * interval '1 microsecond'
             ORDER BY occurred_at, id
             LIMIT sqlc.arg(batch)::int);
