// Package store is Core's durable state in PostgreSQL: the installation
// identity and owner epoch, the execution lease, the installation CA,
// deployments and their generations, enrollment tokens, nodes and their
// presence, Sessions with their Environments, placements and allocations,
// Runtime connections and Turns.
//
// Rules:
//   - One file per resource. SQL lives only in queries/*.sql and
//     migrations/*.sql; sqlc compiles the queries into package db (pgx/v5),
//     which is generated and committed (`make generate`).
//   - Migrations are embedded and applied by Migrate (`berth-core
//     migrate`) with goose under a PostgreSQL advisory lock; CheckSchema
//     refuses a database whose schema this binary does not know.
//   - The store never makes ids or reads the Go clock: callers pass ids in,
//     and every lifecycle time (expiry, lease) is written and compared by
//     the database clock, now() in SQL, so Cores with skewed clocks agree.
//   - Every error leaving the store is an errdefs class (or pgerr's
//     ErrRetryable), classified once by package pgerr and wrapped with a
//     short operation name. Errors never carry secrets, hashes or row
//     values; rejections of credentials use one fixed phrase.
//   - The store keeps bytes it is given: token secrets arrive hashed and the
//     CA key arrives encrypted; hashing, encryption and their keys are the
//     caller's.
//   - Placement and capacity changes serialize on one transaction-scoped
//     advisory lock (LockPlacement in queries/sessions.sql), so concurrent
//     Session creations never place past a node's max_active.
//   - Methods that create are idempotent where a lost response must be
//     retryable (ClaimInstallation, CreateNode, ConsumeEnrollmentToken,
//     CreateRequestedEnrollmentToken, SaveCA, CreateSession): a write whose outcome is unknown (ErrObservationUnavailable)
//     is resolved by calling again with the same input, never by guessing.
package store
