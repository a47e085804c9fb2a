package scale

import (
	"context"
	crand "crypto/rand"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"berth.dev/sandbox"
)

// openPool opens a small pool on Core's database for the harness's own
// reads and the seeding; the test's cleanup closes it.
func openPool(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// seeded is the background population: the seeded Sessions, for the
// GetSession samples.
type seeded struct {
	sessions []uuid.UUID
}

// seed writes total running allocations, spread evenly over the simulated
// nodes, straight into Core's tables with COPY: for each, a Session, its
// Environment (ready), an active placement on the node and a running
// allocation whose Create settled (dispatched, settled, bootstrap complete,
// a provider id), last observed running at a time spread over the last
// ten seconds so that the observation scan's due times spread too. Each
// row is what CreateSession and a settled Create write, less the sealed
// device credential (NULL, as for allocations from before it was kept:
// nothing here connects a Runtime). The node's in-memory adapter adopts
// each allocation's Reference, so GetInfo finds it running.
// The default tenant and project of migration 0022: every seeded Session
// belongs to them.
var (
	tenant         = uuid.MustParse("00000000-0000-4000-8000-000000000001")
	defaultProject = uuid.MustParse("00000000-0000-4000-8000-000000000002")
)

func seed(t testing.TB, ctx context.Context, pool *pgxpool.Pool, s *sim, total int, generation int64) seeded {
	t.Helper()
	now := time.Now()
	var out seeded
	var sessions, envs, placements, allocs [][]any
	for i := range total {
		nd := s.nodes[i%len(s.nodes)]
		sess, env, alloc := uuid.New(), uuid.New(), uuid.New()
		digest := make([]byte, 32)
		_, _ = crand.Read(digest)
		created := now.Add(-time.Duration(total-i) * time.Millisecond)
		observed := now.Add(-time.Duration(rand.Int64N(int64(10 * time.Second))))
		providerID := "mem-" + alloc.String()
		sessions = append(sessions, []any{sess, tenant, defaultProject, "", uuid.New(), created})
		envs = append(envs, []any{env, sess, tenant, "ready", created})
		placements = append(placements, []any{env, nd.ID, generation, "active", created})
		allocs = append(allocs, []any{alloc, env, tenant, nd.ID, generation, digest, uuid.New(), "running", uuid.New(),
			created, true, true, providerID, created, created, observed, "running", "compute_running"})
		nd.Provider.Adopt(sandbox.Reference{TenantID: tenant.String(), EnvironmentID: env.String(), AllocationID: alloc.String()}, providerID)
		out.sessions = append(out.sessions, sess)
	}
	// One transaction per seedChunk Sessions: every placement and
	// allocation row's trigger updates (or locks) its project's one
	// project_load row, and inside one transaction each such access walks
	// the chain of that row's versions written earlier in it, so a single
	// transaction of 100,000 rows takes time quadratic in their number
	// (it did not end in 25 minutes). CreateSession writes one Session per
	// transaction; chunks keep the seeding linear.
	for lo := 0; lo < total; lo += seedChunk {
		hi := min(lo+seedChunk, total)
		seedChunkRows(t, ctx, pool, sessions[lo:hi], envs[lo:hi], placements[lo:hi], allocs[lo:hi])
	}
	// Fresh statistics, as autovacuum would give a table of this size.
	if _, err := pool.Exec(ctx, `ANALYZE sessions, environments, placements, allocations`); err != nil {
		t.Fatal(err)
	}
	return out
}

// seedChunk is how many Sessions one seeding transaction writes.
const seedChunk = 500

// seedChunkRows writes one chunk of the population in one transaction.
func seedChunkRows(t testing.TB, ctx context.Context, pool *pgxpool.Pool, sessions, envs, placements, allocs [][]any) {
	t.Helper()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, c := range []struct {
		table string
		cols  []string
		rows  [][]any
	}{
		{"sessions", []string{"id", "tenant_id", "project_id", "display_name", "request_id", "created_at"}, sessions},
		{"environments", []string{"id", "session_id", "tenant_id", "state", "created_at"}, envs},
		{"placements", []string{"environment_id", "node_id", "generation", "state", "created_at"}, placements},
		{"allocations", []string{"id", "environment_id", "tenant_id", "node_id", "generation", "credential_digest",
			"device_id", "state", "create_receipt", "create_dispatched_at", "create_settled", "bootstrap_complete",
			"provider_id", "created_at", "updated_at", "observed_at", "observed_compute", "observed_reason"}, allocs},
	} {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{c.table}, c.cols, pgx.CopyFromRows(c.rows)); err != nil {
			t.Fatalf("seed %s: %v", c.table, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}
