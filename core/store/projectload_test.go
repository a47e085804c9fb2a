package store_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
	"berth.dev/platform/errgrpc"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
)

// limit returns a pointer to n, for a project's limits.
func limit(n int32) *int32 { return &n }

// setLimits sets project's limits (nil: none).
func setLimits(t *testing.T, st *storetest.Owned, tenant, project uuid.UUID, active, retained *int32) {
	t.Helper()
	_, err := st.UpdateProjectFields(t.Context(), tenant, project, store.AnyRevision, store.ProjectChanges{
		SetMaxActiveSessions: true, MaxActiveSessions: active, SetMaxRetainedSessions: true, MaxRetainedSessions: retained,
	})
	must(t, err)
}

// wantProjectLoadExact checks project_holdings against the unreleased
// placements and allocations (any lane) and project_load against
// project_holdings, for every project.
func wantProjectLoadExact(t *testing.T, ctx context.Context, st *storetest.Store) {
	t.Helper()
	var diff int
	must(t, st.Pool().QueryRow(ctx, `
		WITH truth AS (
			SELECT s.project_id, h.environment_id, bool_or(h.suspended) AS retained
			FROM (SELECT environment_id, false AS suspended FROM placements WHERE state <> 'released'
			      UNION ALL
			      SELECT environment_id, compute_phase = 'suspended' FROM allocations WHERE state <> 'released') h
			JOIN environments en ON en.id = h.environment_id
			JOIN sessions s ON s.id = en.session_id
			GROUP BY s.project_id, h.environment_id)
		SELECT count(*) FROM (
			(SELECT project_id, environment_id, retained FROM project_holdings EXCEPT SELECT * FROM truth)
			UNION ALL
			(SELECT * FROM truth EXCEPT SELECT project_id, environment_id, retained FROM project_holdings)) d`).Scan(&diff))
	if diff != 0 {
		t.Errorf("project_holdings differs from the held placements and allocations in %d rows", diff)
	}
	var bad int
	must(t, st.Pool().QueryRow(ctx, `
		SELECT count(*) FROM projects p LEFT JOIN project_load l ON l.project_id = p.id
		WHERE l.project_id IS NULL
		   OR l.held <> (SELECT count(*) FROM project_holdings h WHERE h.project_id = p.id AND NOT h.retained)
		   OR l.retained <> (SELECT count(*) FROM project_holdings h WHERE h.project_id = p.id AND h.retained)`).Scan(&bad))
	if bad != 0 {
		t.Errorf("%d projects' project_load differs from their holdings (or is missing)", bad)
	}
}

// wantUsage checks what project holds as Project.Usage reports it.
func wantUsage(t *testing.T, st *storetest.Owned, project uuid.UUID, held, retained int64) {
	t.Helper()
	p, err := st.GetProject(t.Context(), project)
	must(t, err)
	if p.Usage != (store.ProjectUsage{Held: held, Retained: retained}) {
		t.Fatalf("project usage %+v, want held %d retained %d", p.Usage, held, retained)
	}
	wantProjectLoadExact(t, t.Context(), st.Store)
}

// TestProjectActiveLimitCrossesTheAdminAPI: the refusal names the limit
// in a message the admin API lets cross as it is.
func TestProjectActiveLimitCrossesTheAdminAPI(t *testing.T) {
	r, ok := errdefs.AsRefusal(store.ErrProjectActiveLimit)
	if !ok || r.Reason != "project_active_limit" || !errgrpc.SafeMessage(r.Message) || len(r.Message) >= 160 ||
		!strings.Contains(r.Message, "max_active_sessions") || !errors.Is(store.ErrProjectActiveLimit, errdefs.ErrFailedPrecondition) {
		t.Fatalf("%q does not cross as a failed precondition naming the limit", store.ErrProjectActiveLimit)
	}
}

// TestProjectLimitsAreSetAndKept: limits are set on creation and by
// update (each path alone, in one revision), a retry with other limits is
// ErrExists, a negative limit is invalid, and lowering a limit below the
// usage evicts nothing.
func TestProjectLimitsAreSetAndKept(t *testing.T) {
	st, ctx := ownedStore(t)
	presentNode(t, ctx, st)
	tenant, _ := newProject(t, ctx, st)
	req, id := newUUID(t), newUUID(t)
	p, created, err := st.CreateProjectWithLimits(ctx, req, id, tenant, "limited", store.ProjectLimits{MaxActiveSessions: limit(3)})
	must(t, err)
	if !created || p.MaxActiveSessions == nil || *p.MaxActiveSessions != 3 || p.MaxRetainedSessions != nil {
		t.Fatalf("created %+v", p)
	}
	_, _, err = st.CreateProjectWithLimits(ctx, req, id, tenant, "limited", store.ProjectLimits{MaxActiveSessions: limit(4)})
	wantClass(t, err, errdefs.ErrExists)
	_, _, err = st.CreateProjectWithLimits(ctx, newUUID(t), newUUID(t), tenant, "neg", store.ProjectLimits{MaxRetainedSessions: limit(-1)})
	wantClass(t, err, errdefs.ErrInvalid)

	for range 3 {
		_, err := st.CreateSession(ctx, inProject(t, tenant, id))
		must(t, err)
	}
	_, err = st.CreateSession(ctx, inProject(t, tenant, id))
	wantRefusal(t, err, store.ErrProjectActiveLimit)
	wantUsage(t, st, id, 3, 0)

	up, err := st.UpdateProjectFields(ctx, tenant, id, p.Revision, store.ProjectChanges{SetMaxRetainedSessions: true, MaxRetainedSessions: limit(2)})
	must(t, err)
	if up.Revision != p.Revision+1 || *up.MaxActiveSessions != 3 || *up.MaxRetainedSessions != 2 || up.DisplayName != "limited" {
		t.Fatalf("updated %+v", up)
	}
	// Lower than the usage: nothing is evicted, new Sessions are refused.
	up, err = st.UpdateProjectFields(ctx, tenant, id, store.AnyRevision, store.ProjectChanges{SetMaxActiveSessions: true, MaxActiveSessions: limit(1)})
	must(t, err)
	if up.Usage.Held != 3 {
		t.Fatalf("usage after lowering the limit %+v", up.Usage)
	}
	_, err = st.CreateSession(ctx, inProject(t, tenant, id))
	wantRefusal(t, err, store.ErrProjectActiveLimit)
	// No limit again.
	_, err = st.UpdateProjectFields(ctx, tenant, id, store.AnyRevision, store.ProjectChanges{SetMaxActiveSessions: true})
	must(t, err)
	_, err = st.CreateSession(ctx, inProject(t, tenant, id))
	must(t, err)
	wantUsage(t, st, id, 4, 0)
}

// TestProjectLoadFollowsTheLifecycle: project_load and project_holdings
// are exact after create, suspend, restore, delete, cleanup and release,
// and after any number of extra syncs (the order of the triggers cannot
// double-count).
func TestProjectLoadFollowsTheLifecycle(t *testing.T) {
	st, ctx, epoch := owner(t)
	commitSuspensionGeneration(t, st, time.Hour, 8, 16)
	project := store.DefaultProjectID
	s := idleSession(t, st, epoch)
	wantUsage(t, st, project, 1, 0)
	other, err := st.CreateSession(ctx, sessionParams(t, 8))
	must(t, err)
	wantUsage(t, st, project, 2, 0)

	suspended, _ := suspend(t, st, s)
	wantUsage(t, st, project, 1, 1)
	// Extra syncs of every Environment change nothing.
	_, err = st.Pool().Exec(ctx, `SELECT project_hold_sync(id) FROM environments`)
	must(t, err)
	wantUsage(t, st, project, 1, 1)

	target := sandbox.Compute{Reference: suspended.Reference(), Generation: 2, Name: "g2"}
	rop := uuid.New()
	restoring, err := st.ArmRestore(ctx, suspended.ID, suspended.Revision, rop, target)
	must(t, err)
	wantUsage(t, st, project, 2, 0)
	_, err = st.ClaimRestore(ctx, restoring.ID, rop)
	must(t, err)
	_, err = st.RecordRestored(ctx, restoring.ID, rop, "native-g2")
	must(t, err)
	wantUsage(t, st, project, 2, 0)

	// A deleting Session counts until its cleanup is confirmed.
	_, err = st.RequestSessionDeletion(ctx, other.Session.ID)
	must(t, err)
	wantUsage(t, st, project, 2, 0)
	a, err := st.GetAllocation(ctx, other.Allocation.ID)
	must(t, err)
	storetest.Release(t, st, a)
	wantUsage(t, st, project, 1, 0)

	_, err = st.RequestSessionDeletion(ctx, s.b.Session.ID)
	must(t, err)
	a, err = st.GetAllocation(ctx, s.b.Allocation.ID)
	must(t, err)
	a, err = st.RecordCleanup(ctx, a.ID, a.Revision, true)
	must(t, err)
	_, err = st.Release(ctx, a.ID)
	must(t, err)
	wantUsage(t, st, project, 0, 0)
}

// TestConcurrentCreatesLandWithinProjectLimits: 50 concurrent creates, 10
// in each of 5 projects with limits 3 to 12, on nodes with room for
// exactly what the limits admit: every project holds exactly
// min(limit, 10), every refusal is project_active_limit, and no node is
// over its bound.
func TestConcurrentCreatesLandWithinProjectLimits(t *testing.T) {
	st, ctx := ownedStore(t)
	limits := []int32{3, 5, 8, 10, 12}
	const perProject = 10
	want := 0
	for _, l := range limits {
		want += int(min(l, perProject))
	}
	const maxActive = 18 // two nodes: 36, exactly the sum
	nodes := []uuid.UUID{presentNode(t, ctx, st), presentNode(t, ctx, st)}
	type proj struct{ tenant, id uuid.UUID }
	projects := make([]proj, len(limits))
	for i, l := range limits {
		tenant, id := newProject(t, ctx, st)
		setLimits(t, st, tenant, id, limit(l), nil)
		projects[i] = proj{tenant, id}
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		created = map[uuid.UUID]int{}
		errs    []error
	)
	start := make(chan struct{})
	for _, p := range projects {
		for range perProject {
			params := inProject(t, p.tenant, p.id)
			params.MaxActive = maxActive
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, err := st.CreateSession(ctx, params)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
					return
				}
				created[params.ProjectID]++
			}()
		}
	}
	close(start)
	wg.Wait()
	total := 0
	for i, p := range projects {
		if created[p.id] != int(min(limits[i], perProject)) {
			t.Errorf("project with limit %d created %d, want %d", limits[i], created[p.id], min(limits[i], perProject))
		}
		wantUsage(t, st, p.id, int64(created[p.id]), 0)
		total += created[p.id]
	}
	if total != want || len(errs) != len(projects)*perProject-want {
		t.Errorf("%d created and %d refused, want %d and %d", total, len(errs), want, len(projects)*perProject-want)
	}
	for _, err := range errs {
		wantRefusal(t, err, store.ErrProjectActiveLimit)
	}
	for _, n := range nodes {
		held, err := st.NodeHeld(ctx, n)
		must(t, err)
		if held > maxActive {
			t.Errorf("node %s holds %d, over %d", n, held, maxActive)
		}
	}
}

// ownedPair returns two stores over one fresh database acting for one
// lease-holding owner epoch: main, and tagged, whose connections carry
// application_name tag, so pg_stat_activity tells their backends apart.
func ownedPair(t *testing.T, tag string) (main, tagged *storetest.Owned) {
	t.Helper()
	main, tagged, _ = ownedPairDSN(t, tag)
	return main, tagged
}

// ownedPairDSN is ownedPair that also returns the database's URL.
func ownedPairDSN(t *testing.T, tag string) (main, tagged *storetest.Owned, dsn string) {
	t.Helper()
	ctx := t.Context()
	dsn = storetest.NewDatabase(t)
	must(t, store.Migrate(ctx, dsn))
	open := func(dsn string) *storetest.Store {
		st, err := store.Open(ctx, dsn)
		must(t, err)
		t.Cleanup(st.Close)
		return storetest.Wrap(st)
	}
	u, err := url.Parse(dsn)
	must(t, err)
	q := u.Query()
	q.Set("application_name", tag)
	u.RawQuery = q.Encode()
	main = storetest.Owner(t, open(dsn))
	return main, storetest.As(open(u.String()), main.Epoch()), dsn
}

// TestMigration0024BackfillsProjectLoad: on a database holding active,
// deleted and suspended Sessions of two projects, 0024 down and up again
// rebuilds project_holdings and project_load exactly from the placements
// and allocations, and the triggers keep them so afterwards.
func TestMigration0024BackfillsProjectLoad(t *testing.T) {
	st, _, dsn := ownedPairDSN(t, "berth_migration")
	ctx := t.Context()
	epoch := st.Epoch()
	commitSuspensionGeneration(t, st, time.Hour, 8, 16)
	s := idleSession(t, st, epoch)
	suspend(t, st, s)
	tenant, project := newProject(t, ctx, st)
	var last store.SessionBundle
	for range 3 {
		b, err := st.CreateSession(ctx, inProject(t, tenant, project))
		must(t, err)
		last = b
	}
	_, err := st.RequestSessionDeletion(ctx, last.Session.ID)
	must(t, err)
	wantUsage(t, st, store.DefaultProjectID, 0, 1)
	wantUsage(t, st, project, 3, 0)

	a, err := st.GetAllocation(ctx, last.Allocation.ID)
	must(t, err)
	storetest.Release(t, st, a)
	wantUsage(t, st, project, 2, 0)

	mig := gooseOn(t, dsn, "migrations")
	// Down to 23, through the migrations after 0024 (the store's code
	// reads their columns, so nothing of it runs at 23), then up to the
	// newest: 0024 rebuilds the counters from the rows as they are.
	if _, err := mig.DownTo(ctx, 23); err != nil {
		t.Fatal(err)
	}
	if v, err := mig.GetDBVersion(ctx); err != nil || v != 23 {
		t.Fatalf("version %d after down, %v", v, err)
	}
	if _, err := mig.Up(ctx); err != nil {
		t.Fatal(err)
	}
	wantUsage(t, st, store.DefaultProjectID, 0, 1)
	wantUsage(t, st, project, 2, 0)
	_, err = st.CreateSession(ctx, inProject(t, tenant, project))
	must(t, err)
	wantUsage(t, st, project, 3, 0)
}

// TestProjectAtItsLimitNeverTakesANodeLock is the fairness test of
// docs/tenants-plan.md §2.3: project A at its limit, 25 creates of A and
// 25 of B at once. Every B create succeeds; every A create is refused
// project_active_limit. Sampled from a second connection throughout, no
// backend of A's creates holds a lock on node_load; and one A create held
// open on purpose (waiting on A's project_load row, which the test holds)
// holds no node_load lock while B's creates all succeed meanwhile.
func TestProjectAtItsLimitNeverTakesANodeLock(t *testing.T) {
	st, stA := ownedPair(t, "berth_project_a")
	ctx := t.Context()
	presentNode(t, ctx, st)
	presentNode(t, ctx, st)
	tenantA, projA := newProject(t, ctx, st)
	tenantB, projB := newProject(t, ctx, st)
	setLimits(t, st, tenantA, projA, limit(2), nil)
	for range 2 {
		_, err := st.CreateSession(ctx, inProject(t, tenantA, projA))
		must(t, err)
	}

	// A's node_load locks, sampled by pg_locks (relation locks: a row
	// lock on node_load takes RowShareLock on the table).
	nodeLocksOfA := func() int {
		var n int
		must(t, st.Pool().QueryRow(ctx, `
			SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
			WHERE a.application_name = 'berth_project_a' AND l.granted
			  AND l.relation = 'node_load'::regclass`).Scan(&n))
		return n
	}

	// One A create held open on purpose: the test holds A's load row.
	hold, err := st.Pool().Begin(ctx)
	must(t, err)
	defer func() { _ = hold.Rollback(ctx) }()
	_, err = hold.Exec(ctx, `SELECT 1 FROM project_load WHERE project_id = $1 FOR UPDATE`, projA)
	must(t, err)
	heldOpen := make(chan error, 1)
	go func() {
		_, err := stA.CreateSession(ctx, inProject(t, tenantA, projA))
		heldOpen <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting int
		must(t, st.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = 'berth_project_a' AND wait_event_type = 'Lock'`).Scan(&waiting))
		if waiting == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the held-open A create never waited on its project's row")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := nodeLocksOfA(); n != 0 {
		t.Fatalf("the waiting A create holds %d node_load locks", n)
	}
	// B is served while A waits.
	for range 3 {
		_, err := st.CreateSession(ctx, inProject(t, tenantB, projB))
		must(t, err)
	}
	must(t, hold.Rollback(ctx))
	wantRefusal(t, <-heldOpen, store.ErrProjectActiveLimit)

	// 25 of each at once, sampled throughout.
	var (
		wg       sync.WaitGroup
		stop     atomic.Bool
		sampled  atomic.Int64
		violated atomic.Int64
		mu       sync.Mutex
		bTimes   []time.Duration
		aErrs    []error
		bErrs    []error
	)
	// The probe sees node_load locks when they are there: B's creates,
	// sampled alike, are counted (reported, not asserted: timing).
	var seenOthers atomic.Int64
	sampler := make(chan struct{})
	go func() {
		defer close(sampler)
		for !stop.Load() {
			if n := nodeLocksOfA(); n != 0 {
				violated.Add(1)
			}
			var others int
			must(t, st.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_locks
				WHERE granted AND relation = 'node_load'::regclass AND pid <> pg_backend_pid()`).Scan(&others))
			if others > 0 {
				seenOthers.Add(1)
			}
			sampled.Add(1)
		}
	}()
	start := make(chan struct{})
	for i := range 50 {
		a := i%2 == 0
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if a {
				_, err := stA.CreateSession(ctx, inProject(t, tenantA, projA))
				mu.Lock()
				aErrs = append(aErrs, err)
				mu.Unlock()
				return
			}
			began := time.Now()
			_, err := st.CreateSession(ctx, inProject(t, tenantB, projB))
			mu.Lock()
			bTimes = append(bTimes, time.Since(began))
			if err != nil {
				bErrs = append(bErrs, err)
			}
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	stop.Store(true)
	<-sampler
	for _, err := range aErrs {
		wantRefusal(t, err, store.ErrProjectActiveLimit)
	}
	if len(bErrs) != 0 {
		t.Errorf("B creates failed: %v", bErrs)
	}
	if violated.Load() != 0 {
		t.Errorf("%d of %d samples saw an A create holding a node_load lock", violated.Load(), sampled.Load())
	}
	wantUsage(t, st, projA, 2, 0)
	wantUsage(t, st, projB, 28, 0)

	// B alone, for the report: the same 25 concurrent creates.
	var alone []time.Duration
	start = make(chan struct{})
	for range 25 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			began := time.Now()
			_, err := st.CreateSession(ctx, inProject(t, tenantB, projB))
			mu.Lock()
			defer mu.Unlock()
			alone = append(alone, time.Since(began))
			if err != nil {
				t.Errorf("B alone: %v", err)
			}
		}()
	}
	close(start)
	wg.Wait()
	t.Logf("pg_locks samples: %d, %d of them saw another create's node_load lock; B's median create with A saturating %v, alone %v",
		sampled.Load(), seenOthers.Load(), median(bTimes), median(alone))
}

// median is the middle of ds (sorted in place).
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// TestRestoreWithoutProjectRoomWritesNothing: a restore of a project at
// its max_active_sessions is ErrNoRoom although the node has room, and
// nothing changes; a suspension past max_retained_sessions likewise.
func TestRestoreWithoutProjectRoomWritesNothing(t *testing.T) {
	st, ctx, epoch := owner(t)
	commitSuspensionGeneration(t, st, time.Hour, 8, 16)
	s := idleSession(t, st, epoch)
	node := s.b.Allocation.NodeID
	second := sessionOnNode(t, st, epoch, node)
	suspended, _ := suspend(t, st, s)
	setLimits(t, st, store.DefaultTenantID, store.DefaultProjectID, limit(1), limit(1))
	wantUsage(t, st, store.DefaultProjectID, 1, 1)

	// The second Session may not be suspended: the project retains one.
	_, err := st.ArmSuspension(ctx, second.b.Allocation.ID, second.b.Allocation.Revision, uuid.New())
	wantClass(t, err, store.ErrNoRoom)
	wantPhase(t, st, second.b.Allocation.ID, store.PhaseRunning)

	before := snapshot(t, ctx, st.Store)
	target := sandbox.Compute{Reference: suspended.Reference(), Generation: 2, Name: "g2"}
	_, err = st.ArmRestore(ctx, suspended.ID, suspended.Revision, uuid.New(), target)
	wantClass(t, err, store.ErrNoRoom)
	if after := snapshot(t, ctx, st.Store); after != before {
		t.Fatal("a restore refused for the project's room wrote something")
	}
	wantPhase(t, st, suspended.ID, store.PhaseSuspended)
	wantLoad(t, st, node, 1, 1)
	wantUsage(t, st, store.DefaultProjectID, 1, 1)

	// With room again, the same restore is armed.
	setLimits(t, st, store.DefaultTenantID, store.DefaultProjectID, limit(2), limit(1))
	_, err = st.ArmRestore(ctx, suspended.ID, suspended.Revision, uuid.New(), target)
	must(t, err)
	wantUsage(t, st, store.DefaultProjectID, 2, 0)
}

// isDeadlock reports whether err is PostgreSQL's deadlock_detected.
func isDeadlock(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == "40P01"
}

// TestNoDeadlockBetweenProjectAndNodeRows: 200 rounds, each of four
// concurrent random operations (create in a random project, delete and
// release a Session, arm a restore, and give a restore up back to
// suspended) over three projects with limits and two nodes. No operation
// may end in PostgreSQL's deadlock_detected, every other answer is one of
// the expected refusals, and the counters are exact at the end.
func TestNoDeadlockBetweenProjectAndNodeRows(t *testing.T) {
	st, ctx, epoch := owner(t)
	commitSuspensionGeneration(t, st, time.Hour, 12, 30)
	nodes := []uuid.UUID{presentNode(t, ctx, st), presentNode(t, ctx, st)}
	_ = nodes
	type proj struct{ tenant, id uuid.UUID }
	var projects []proj
	for i, l := range []*int32{limit(5), limit(7), nil} {
		tenant, id := newProject(t, ctx, st)
		setLimits(t, st, tenant, id, l, nil)
		projects = append(projects, proj{tenant, id})
		_ = i
	}
	// Three suspended Sessions per project.
	type restorable struct {
		a    store.Allocation
		gen  uint64
		op   uuid.UUID
		busy bool
	}
	var running []suspendable
	for _, p := range projects {
		for range 3 {
			params := inProject(t, p.tenant, p.id)
			params.MaxActive = 12
			cred := randomBytes(t, 32)
			params.CredentialDigest = hash(cred)
			b, err := st.CreateSession(ctx, params)
			must(t, err)
			a, err := st.ClaimCreate(ctx, b.Allocation.ID, b.Allocation.CreateReceipt)
			must(t, err)
			a, err = st.RecordCreateOutcome(ctx, a.CreateAttempt(), store.CreateOutcome{Kind: store.CreateRunning, ProviderID: "c-" + a.ID.String(), BootstrapComplete: true})
			must(t, err)
			b.Allocation = a
			s := suspendable{b: b, cred: cred}
			s.finishTurn(t, st, epoch)
			running = append(running, s)
		}
	}
	time.Sleep(suspensionIdle + 100*time.Millisecond)
	var mu sync.Mutex
	var pool []*restorable
	for _, s := range running {
		a, err := st.GetAllocation(ctx, s.b.Allocation.ID)
		must(t, err)
		s.b.Allocation = a
		sa, _ := suspend(t, st, s)
		pool = append(pool, &restorable{a: sa, gen: 1})
	}
	var created []store.SessionBundle
	expected := func(err error) bool {
		return err == nil || errors.Is(err, store.ErrNoCapacity) || errors.Is(err, store.ErrProjectActiveLimit) ||
			errors.Is(err, store.ErrNoRoom) || errors.Is(err, errdefs.ErrFenced)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var deadlocks, unexpected atomic.Int64
	var okOps [4]atomic.Int64
	var firstUnexpected atomic.Value
	for round := range 200 {
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 4 {
			kind := rng.IntN(4)
			p := projects[rng.IntN(len(projects))]
			seed := rng.Uint64()
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				r := rand.New(rand.NewPCG(seed, uint64(round)))
				var err error
				switch kind {
				case 0: // create
					params := inProject(t, p.tenant, p.id)
					params.MaxActive = 12
					var b store.SessionBundle
					if b, err = st.CreateSession(ctx, params); err == nil {
						mu.Lock()
						created = append(created, b)
						mu.Unlock()
					}
				case 1: // delete and release
					mu.Lock()
					if len(created) == 0 {
						mu.Unlock()
						return
					}
					i := r.IntN(len(created))
					b := created[i]
					created = append(created[:i], created[i+1:]...)
					mu.Unlock()
					if _, err = st.RequestSessionDeletion(ctx, b.Session.ID); err == nil {
						var a store.Allocation
						if a, err = st.GetAllocation(ctx, b.Allocation.ID); err == nil {
							if a, err = st.RecordCleanup(ctx, a.ID, a.Revision, true); err == nil {
								_, err = st.Release(ctx, a.ID)
							}
						}
					}
				case 2, 3: // arm a restore, or give one up
					mu.Lock()
					var pick *restorable
					for _, i := range r.Perm(len(pool)) {
						if !pool[i].busy && (pool[i].op == uuid.Nil) == (kind == 2) {
							pick = pool[i]
							break
						}
					}
					if pick == nil {
						mu.Unlock()
						return
					}
					pick.busy = true
					mu.Unlock()
					var a store.Allocation
					if kind == 2 {
						op := uuid.New()
						target := sandbox.Compute{Reference: pick.a.Reference(), Generation: pick.gen + 1, Name: fmt.Sprintf("g%d", pick.gen+1)}
						if a, err = st.ArmRestore(ctx, pick.a.ID, pick.a.Revision, op, target); err == nil {
							pick.a, pick.op, pick.gen = a, op, pick.gen+1
						}
					} else if a, err = st.AbandonRestoreOnReceipt(ctx, pick.a.ID, pick.op); err == nil {
						pick.a, pick.op = a, uuid.Nil
					}
					mu.Lock()
					pick.busy = false
					mu.Unlock()
				}
				if err == nil {
					okOps[kind].Add(1)
				}
				switch {
				case isDeadlock(err):
					deadlocks.Add(1)
				case !expected(err):
					unexpected.Add(1)
					firstUnexpected.CompareAndSwap(nil, err.Error())
				}
			}()
		}
		close(start)
		wg.Wait()
	}
	if deadlocks.Load() != 0 || unexpected.Load() != 0 {
		t.Fatalf("%d deadlocks and %d unexpected errors (first: %v)", deadlocks.Load(), unexpected.Load(), firstUnexpected.Load())
	}
	t.Logf("succeeded: %d creates, %d releases, %d restores armed, %d given up", okOps[0].Load(), okOps[1].Load(), okOps[2].Load(), okOps[3].Load())
	if okOps[0].Load() == 0 || okOps[1].Load() == 0 || okOps[2].Load() == 0 || okOps[3].Load() == 0 {
		t.Error("an operation kind never succeeded: the interleavings did not cover it")
	}
	wantProjectLoadExact(t, ctx, st.Store)
	wantNodeLoadExact(t, ctx, st.Store)
	for i, p := range projects[:2] {
		got, err := st.GetProject(ctx, p.id)
		must(t, err)
		if got.Usage.Held > int64(*got.MaxActiveSessions) {
			t.Errorf("project %d holds %d, over its limit %d", i, got.Usage.Held, *got.MaxActiveSessions)
		}
	}
}

// TestCreationStepsChangingNoHoldTakeNoLoadRow: a creation's claim and its
// running outcome keep the allocation unreleased and unsuspended on its
// node, so they sync no holding (migration 0031) and run while another
// transaction holds the project's and the node's load rows; a step that
// does change a hold (the cleanup's release) waits for them.
func TestCreationStepsChangingNoHoldTakeNoLoadRow(t *testing.T) {
	st, ctx := ownedStore(t)
	presentNode(t, ctx, st)
	b, err := st.CreateSession(ctx, sessionParams(t, 1000))
	must(t, err)
	tx, err := st.Pool().Begin(ctx)
	must(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `SELECT 1 FROM project_load WHERE project_id = $1 FOR UPDATE`, b.Session.ProjectID)
	must(t, err)
	_, err = tx.Exec(ctx, `SELECT 1 FROM node_load WHERE node_id = $1 FOR UPDATE`, b.Allocation.NodeID)
	must(t, err)

	bounded, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	a, err := st.ClaimCreate(bounded, b.Allocation.ID, b.Allocation.CreateReceipt)
	must(t, err)
	a, err = st.RecordCreateOutcome(bounded, a.CreateAttempt(), store.CreateOutcome{Kind: store.CreateRunning, ProviderID: "c", BootstrapComplete: true})
	must(t, err)
	a, err = st.RequestCleanup(bounded, a.ID)
	must(t, err)
	a, err = st.RecordCleanup(bounded, a.ID, a.Revision, true)
	must(t, err)

	// The release ends the Environment's holding: it waits for the rows.
	short, cancelShort := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancelShort()
	if _, err := st.Release(short, a.ID); !errors.Is(err, context.DeadlineExceeded) && short.Err() == nil {
		t.Fatalf("the release while the load rows were held: %v, want it to wait past its deadline", err)
	}
	must(t, tx.Rollback(ctx))
	_, err = st.Release(ctx, a.ID)
	must(t, err)
	wantProjectLoadExact(t, ctx, st.Store)
	wantNodeLoadExact(t, ctx, st.Store)
}
