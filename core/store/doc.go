// Package store is Core's durable state in PostgreSQL: the installation
// identity and owner epoch, the execution lease, the installation CA,
// enrollment tokens and nodes, deployment generations, node presence,
// Sessions with their Environments, placements and allocations, Runtime
// connections and Turns.
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
//     A caller that must compare a returned timestamp itself (the gateway's
//     Turn timeout backstop and revocation drain) takes "now" from the same
//     read (GetRuntimeConnection), never from Core's clock: a 10-minute
//     skew once ended every running Turn (issue 14).
//   - Every error leaving the store is an errdefs class (or pgerr's
//     ErrRetryable), classified once by package pgerr and wrapped with a
//     short operation name. Errors never carry secrets, hashes or row
//     values; rejections of credentials use one fixed phrase.
//   - The store keeps bytes it is given: token secrets arrive hashed and the
//     CA key arrives encrypted; hashing, encryption and their keys are the
//     caller's.
//   - A placement locks its project's load row, then the chosen node's
//     (project_load, node_load: triggers keep them exact, project first;
//     migrations 0013, 0024) until it commits, and its own insert raises
//     the counts, so creations never pass a project's or node's limit,
//     while other projects' creations on other nodes run side by side.
//   - node_id NULL is the direct lane, DirectLane in Go (docs/store.md).
//   - Authority is in the types. Store has only the start-up writes that
//     make the others' authority (installation, owner epoch, lease, CA)
//     and hands out the views: Reader (reads only, unfenced), Owner
//     (AsOwner: the fenced writes, each checking in its own transaction
//     that the epoch holds the execution lease; no reads, no embedded
//     Store), Admin (an operator's or a client's intent, compare-and-set
//     on the rows it names, valid whichever Core carries it) and Runtime
//     (a Runtime connection's writes, refused once it is closed). Writes
//     that change what the owner's workers serve (SetNodeState,
//     ReplaceGeneration, presence) are Owner's. authority_test.go checks
//     the method sets by their names.
//   - Tokens, not numbers: a connection's writes and Owner.ClaimNextTurn
//     take its RuntimeConn (made only by AcceptRuntime), a deployment
//     commit the GenerationSeen of the read it decided on
//     (SeenGeneration); their zero values are ErrNoRuntimeConn and
//     ErrGenerationNotSeen.
//   - Consumers name the narrow interface they use (their package's
//     Store); Core's daemon gives each a struct embedding only the views
//     it needs, observed by storeobs (generated: go generate here;
//     telemetry around the views, never inside a query). storetest
//     composes every view, for tests only.
//   - Methods that create are idempotent where a lost response must be
//     retryable (ClaimInstallation, CreateNode, ConsumeEnrollmentToken,
//     CreateRequestedEnrollmentToken, SaveCA, CreateSession): a write of
//     unknown outcome (ErrObservationUnavailable) is resolved by calling
//     again with the same input, never by guessing.
package store
