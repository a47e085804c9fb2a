-- name: LockDeployment :one
-- LockDeployment takes the deployment row's lock for the rest of the
-- transaction and returns the current generation, 0 before the first.
SELECT coalesce(current_generation, 0)::bigint AS current_generation
FROM deployment
FOR UPDATE;

-- name: InsertDeploymentGeneration :one
INSERT INTO deployment_generations (
    generation, provider_kind, public_config, observations,
    credential_ciphertext, credential_nonce,
    cpu_millis, memory_bytes, disk_bytes, max_active, max_retained,
    suspension_idle_seconds, suspension_retention_seconds)
VALUES (
    @generation, @provider_kind, @public_config, @observations,
    @credential_ciphertext, @credential_nonce,
    @cpu_millis, @memory_bytes, @disk_bytes, @max_active, @max_retained,
    @suspension_idle_seconds, @suspension_retention_seconds)
RETURNING *;

-- name: SetCurrentGeneration :execrows
-- SetCurrentGeneration moves the pointer from @expected (0: none) to
-- @generation; it changes no row when the current generation is another.
UPDATE deployment
SET current_generation = @generation, updated_at = now()
WHERE coalesce(current_generation, 0) = @expected::bigint;

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
-- LockProviderSwitchShared reads whether the provider is disabled and
-- holds a share lock on the deployment row, so a concurrent
-- SetProviderDisabled waits for the transaction: an admission that saw the
-- provider enabled commits before the switch does.
SELECT provider_disabled FROM deployment FOR SHARE;

-- name: SetProviderDisabled :one
-- SetProviderDisabled sets or clears the provider switch; disabling again
-- keeps the first time.
UPDATE deployment
SET provider_disabled = @disabled::boolean,
    provider_disabled_at = CASE WHEN @disabled::boolean THEN coalesce(provider_disabled_at, now()) END,
    updated_at = now()
RETURNING provider_disabled, provider_disabled_at;
