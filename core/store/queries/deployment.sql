-- name: LockDeployment :one
-- LockDeployment takes the deployment row's lock for the rest of the
-- transaction and returns the current generation: 0 before the first,
-- the generation floor (the empty generation) after a reset.
SELECT coalesce(current_generation, generation_floor)::bigint AS current_generation
FROM deployment
FOR UPDATE;

-- name: InsertDeploymentGeneration :one
INSERT INTO deployment_generations (
    generation, provider_kind, public_config, observations,
    credential_ciphertext, credential_nonce,
    cpu_millis, memory_bytes, disk_bytes, max_active, max_retained,
    suspension_idle_seconds, suspension_retention_seconds, mode)
VALUES (
    @generation, @provider_kind, @public_config, @observations,
    @credential_ciphertext, @credential_nonce,
    @cpu_millis, @memory_bytes, @disk_bytes, @max_active, @max_retained,
    @suspension_idle_seconds, @suspension_retention_seconds, @mode)
RETURNING *;

-- name: SetCurrentGeneration :execrows
-- SetCurrentGeneration moves the pointer from @expected (0 or the
-- generation floor: none) to @generation; it changes no row when the
-- current generation is another.
UPDATE deployment
SET current_generation = @generation, updated_at = now()
WHERE coalesce(current_generation, generation_floor) = @expected::bigint;

-- name: GetCurrentGeneration :one
SELECT g.*
FROM deployment d
JOIN deployment_generations g ON g.generation = d.current_generation;

-- name: GetDeploymentGeneration :one
SELECT * FROM deployment_generations WHERE generation = @generation;

-- name: GetProviderSwitch :one
-- GetProviderSwitch reads whether the provider is disabled.
SELECT provider_disabled, provider_disabled_at FROM deployment;

-- name: LockProviderSwitchShared :one
-- LockProviderSwitchShared reads whether the provider is disabled and the
-- current generation (0 before the first commit), and holds a share lock
-- on the deployment row, so a concurrent SetProviderDisabled or a commit
-- of another generation waits for the transaction: an admission that saw
-- the provider enabled, or a generation current, commits before the switch
-- or the replacement does. reset_id is the admission fence of an active
-- deployment reset. With none current the generation is the floor: 0
-- before the first commit, the empty generation after a reset (an
-- admission prepared for an earlier generation is refused).
SELECT provider_disabled, coalesce(current_generation, generation_floor)::bigint AS current_generation, reset_id
FROM deployment FOR SHARE;

-- name: LockProviderSwitch :one
-- LockProviderSwitch reads the provider switch and locks the deployment
-- row until the transaction ends (SetProviderDisabled's decision).
SELECT provider_disabled, provider_disabled_at FROM deployment FOR UPDATE;

-- name: SetProviderDisabled :one
-- SetProviderDisabled sets or clears the provider switch; disabling again
-- keeps the first time.
UPDATE deployment
SET provider_disabled = @disabled::boolean,
    provider_disabled_at = CASE WHEN @disabled::boolean THEN coalesce(provider_disabled_at, now()) END,
    updated_at = now()
RETURNING provider_disabled, provider_disabled_at;

-- name: ListNodeGenerations :many
-- ListNodeGenerations returns the generations node @node_id must serve, in
-- ascending order: the current one while the node is enabled and it is a
-- node generation (mode 'nodes': a direct generation is served by Core's
-- direct lane, never published to a node), and every
-- generation an unreleased placement or allocation on the node is bound
-- to (a retired node keeps serving what it holds, and an allocation keeps
-- its generation after a newer one is committed).
SELECT g.*
FROM deployment_generations g
WHERE g.generation IN (
    SELECT d.current_generation
    FROM deployment d
    JOIN nodes n ON n.id = @node_id::uuid AND n.state = 'enabled'
    JOIN deployment_generations c ON c.generation = d.current_generation AND c.mode = 'nodes'
    WHERE d.current_generation IS NOT NULL
    UNION
    SELECT p.generation FROM placements p
    WHERE p.node_id = @node_id::uuid AND p.state <> 'released'
    UNION
    SELECT a.generation FROM allocations a
    WHERE a.node_id = @node_id::uuid AND a.state <> 'released')
ORDER BY g.generation;

-- name: ListEnabledNodeIDs :many
-- ListEnabledNodeIDs lists the enabled nodes, in id order: the nodes a
-- replacement with another provider kind retires, read before its commit
-- so their lifecycle workers are drained first.
SELECT id FROM nodes WHERE state = 'enabled' ORDER BY id;

-- name: RetireNodesForReplacement :many
-- RetireNodesForReplacement retires every enabled node, in the
-- replacement's transaction (a replacement with another provider kind):
-- they keep serving and cleaning up what they hold, and nothing new is
-- placed on them.
UPDATE nodes SET state = 'retired', updated_at = now()
WHERE state = 'enabled'
RETURNING id;

-- name: RevokeUnusedEnrollmentTokens :execrows
-- RevokeUnusedEnrollmentTokens revokes every enrollment token not used
-- yet, in the replacement's transaction: a token made for a host of the
-- old provider kind enrolls nothing afterwards.
UPDATE enrollment_tokens SET revoked_at = now()
WHERE used_at IS NULL AND revoked_at IS NULL;

-- name: PromoteServingPin :execrows
-- PromoteServingPin records that generation @generation is served (a node
-- reported ready for it) when it is the current generation and not already
-- pinned. The update takes the deployment row's lock, so it serializes
-- with a commit: a late report for a superseded generation matches no row.
UPDATE deployment
SET serving_generation = @generation::bigint, serving_since = now(), updated_at = now()
WHERE current_generation = @generation::bigint
  AND serving_generation IS DISTINCT FROM @generation::bigint;

-- name: GetServingPin :one
SELECT serving_generation, serving_since FROM deployment;

-- name: ListRetainedGenerations :many
-- ListRetainedGenerations returns each generation that unreleased
-- allocations are bound to, with how many, ascending.
SELECT generation, count(*)::bigint AS allocations
FROM allocations
WHERE state <> 'released'
GROUP BY generation
ORDER BY generation;

-- name: GetCredentialSource :one
-- GetCredentialSource returns the generation whose sealed credential
-- generation @generation uses: the one a key replacement pointed it at,
-- or itself.
SELECT coalesce((SELECT s.source_generation FROM deployment_credential_sources s
                 WHERE s.generation = @generation::bigint), @generation::bigint)::bigint AS source;

-- name: SetCredentialSource :exec
-- SetCredentialSource points generation @generation at
-- @source_generation's sealed credential (a key replacement).
INSERT INTO deployment_credential_sources (generation, source_generation, owner_epoch)
VALUES (@generation, @source_generation, @owner_epoch)
ON CONFLICT (generation) DO UPDATE
SET source_generation = EXCLUDED.source_generation, owner_epoch = EXCLUDED.owner_epoch, replaced_at = now();

-- name: ListHeldDirectGenerationsOfKind :many
-- ListHeldDirectGenerationsOfKind returns the direct generations of
-- provider kind @provider_kind that an unreleased placement or
-- allocation on the direct lane is bound to, ascending: what a key
-- replacement of that kind must have verified.
SELECT g.generation
FROM deployment_generations g
WHERE g.mode = 'direct' AND g.provider_kind = @provider_kind
  AND (EXISTS (SELECT 1 FROM placements p
               WHERE p.node_id IS NULL AND p.generation = g.generation AND p.state <> 'released')
       OR EXISTS (SELECT 1 FROM allocations a
                  WHERE a.node_id IS NULL AND a.generation = g.generation AND a.state <> 'released'))
ORDER BY g.generation;
