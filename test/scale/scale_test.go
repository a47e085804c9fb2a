package scale

import (
	"berth.dev/test/internal/benchstat"

	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/testenv"

	"berth.dev/core/store"
	"berth.dev/core/store/storetest"

	"berth.dev/nodeagent"
	"berth.dev/test/internal/stack"
)

func TestMain(m *testing.M) { stack.Main(m) }

// config sizes one run.
type config struct {
	Nodes       int
	Allocations int
	Creates     int
	Clients     int
	// Projects spreads the creates round-robin over this many projects of
	// one tenant (0 or 1: the default project), each without limits.
	Projects int
	// Reads is the number of samples of each admin read.
	Reads int
	// Settle is how long Core runs with the population before the
	// measures; Steady the window over which its steady CPU is measured.
	Settle, Steady time.Duration
	// Defaults runs Core at its default intervals (the benchmark);
	// otherwise at the tests' short ones (the smoke test).
	Defaults bool
}

// Goals of issue 32 (which tightened issue 13's P5): reported, never
// asserted.
const (
	// goalAgeP50 and goalAgeP99: a running allocation's last observation
	// at most one observe period old at p50, one and a half at p99.
	goalAgeP50 = 10 * time.Second
	goalAgeP99 = 15 * time.Second
	// goalScanP99: an idle worker pass's reads (the work probe and the
	// observable page).
	goalScanP99 = 10 * time.Millisecond
	// goalCreateRate and goalCreateP99: CreateSession at 1,000 nodes and
	// 32 clients.
	goalCreateRate = 250.0 // per second
	goalCreateP99  = time.Second
	// goalCoreRSSBytes: 250 MB, in bytes (the stricter reading of "MB").
	goalCoreRSSBytes = 250_000_000
	// goalSteadyCores: Core's CPU with a steady population.
	goalSteadyCores = 0.25
)

// spec is the simulated deployment. max_active is the contract's maximum,
// so that placement is bounded by it only far above the population.
var spec = &adminv1.Specification{CpuMillis: 250, MemoryBytes: 256 << 20, DiskBytes: 1 << 30, MaxActive: 1024, MaxRetained: 4}

// run builds the whole scene and measures it.
func run(t testing.TB, cfg config) report {
	t.Helper()
	start := time.Now()
	ctx := context.Background()
	// Core serves the Runtime gateway over TLS from the installation CA,
	// as installed, although no Runtime connects here.
	gateway := stack.FreeAddr(t)
	c := stack.StartCoreWith(t, storetest.NewDatabase(t), stack.CoreStateDir(t), true,
		stack.CoreOptions{Defaults: cfg.Defaults, RuntimeListen: gateway, PublicURL: "https://" + gateway})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("berth-core log:\n%s", c.Logs())
		}
	})
	cc, actx := c.AdminClient(t)
	inst := stack.InstallationID(t, actx, cc)
	stack.CommitDockerDeployment(t, actx, cc, spec)
	pool := openPool(t, c.DSN)
	var gen int64
	if err := pool.QueryRow(ctx, `SELECT max(generation) FROM deployment_generations`).Scan(&gen); err != nil {
		t.Fatalf("committed generation: %v", err)
	}

	t0 := time.Now()
	s := startSim(t, c, actx, cc, inst, cfg.Nodes, spec)
	t.Logf("%d node agents enrolled and serving in %v", cfg.Nodes, time.Since(t0).Round(time.Millisecond))
	t0 = time.Now()
	pop := seed(t, ctx, pool, s, cfg.Allocations, gen)
	t.Logf("%d allocations seeded in %v", cfg.Allocations, time.Since(t0).Round(time.Millisecond))
	t0 = time.Now()
	s.enableAll(t, actx, cc, c)
	t.Logf("%d nodes enabled, connected and ready in %v", cfg.Nodes, time.Since(t0).Round(time.Millisecond))

	pid := c.Cmd.Process.Pid
	rssConnected, _ := benchstat.ProcStatus(pid, "VmRSS")
	time.Sleep(cfg.Settle)
	cpu0, _ := procCPUSeconds(pid)
	pg0 := processCPU("postgres")
	time.Sleep(cfg.Steady)
	cpu1, _ := procCPUSeconds(pid)
	pg1 := processCPU("postgres")
	steadyCores := (cpu1 - cpu0) / cfg.Steady.Seconds()
	steadyPG := cpuSince(pg0, pg1) / cfg.Steady.Seconds()

	st := c.Store(t)
	var rows []row
	rows = append(rows, measureScan(t, ctx, st, s)...)

	cpu0, _ = procCPUSeconds(pid)
	pg0 = processCPU("postgres")
	projects := createProjects(t, actx, adminv1.NewProjectServiceClient(cc), cfg.Projects)
	createRows, created, wall := measureCreate(t, actx, adminv1.NewSessionServiceClient(cc), cfg, projects)
	cpu1, _ = procCPUSeconds(pid)
	pg1 = processCPU("postgres")
	createCores := (cpu1 - cpu0) / wall.Seconds()
	createPG := cpuSince(pg0, pg1) / wall.Seconds()
	rows = append(rows, createRows...)

	// Every created Session's Create reaches its node (the lifecycle
	// workers, woken by the commit): the smoke test checks it.
	t0 = time.Now()
	deadline := time.Now().Add(time.Minute + time.Duration(created)*10*time.Millisecond)
	for s.creates() < created && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if got := s.creates(); got != created {
		t.Errorf("%d of %d created Sessions reached their node's adapter", got, created)
	}
	rows = append(rows, value("Creates at the nodes, after the last CreateSession", time.Since(t0).Seconds(), "s", "", nil))

	rows = append(rows, measureReads(t, actx, adminv1.NewSessionServiceClient(cc), pop, cfg.Reads)...)

	rows = append(rows, measureObservationAge(t, ctx, pool))

	rss, _ := benchstat.ProcStatus(pid, "VmRSS")
	hwm, _ := benchstat.ProcStatus(pid, "VmHWM")
	threads, _ := benchstat.ProcStatus(pid, "Threads")
	rows = append(rows,
		value("Core RSS, every node just connected", float64(rssConnected)/1024, "MiB", "< 250 MB", ptr(rssConnected*1024 < goalCoreRSSBytes)),
		value("Core RSS at the end", float64(rss)/1024, "MiB", "< 250 MB", ptr(rss*1024 < goalCoreRSSBytes)),
		value("Core peak RSS (VmHWM)", float64(hwm)/1024, "MiB", "< 250 MB", ptr(hwm*1024 < goalCoreRSSBytes)),
		value("Core CPU, steady (population only)", steadyCores, "cores", fmt.Sprintf("≤ %.2f cores", goalSteadyCores), ptr(steadyCores <= goalSteadyCores)),
		value("Core CPU, during CreateSession", createCores, "cores", "", nil),
	)
	// PostgreSQL's CPU is read only where its processes are this host's
	// (the test services'); a remote database has no row.
	if len(pg1) > 0 {
		rows = append(rows,
			value("PostgreSQL CPU, steady (its processes on this host)", steadyPG, "cores", "", nil),
			value("PostgreSQL CPU, during CreateSession", createPG, "cores", "", nil),
		)
	}
	rows = append(rows,
		value("Core threads", float64(threads), "threads", "", nil),
	)
	core, atDefaults := stack.Settings(c)
	if cfg.Defaults && !atDefaults {
		t.Fatalf("the benchmark measures Berth at its defaults, but it runs %s", core)
	}
	settings := fmt.Sprintf("%s; simulated node agents at the agent's default health interval (%v)", core, nodeagent.DefaultHealthInterval)
	return report{
		Time: start.UTC(), Machine: machine(), Nodes: cfg.Nodes, Seeded: cfg.Allocations, Creates: created,
		Clients: cfg.Clients, Projects: cfg.Projects, Core: settings, Elapsed: time.Since(start).Round(time.Second).String(), Measures: rows,
		NotSimulated: notSimulated,
	}
}

// measureScan times, for every node, the reads a lifecycle worker's pass
// starts with (the same store methods and sqlc queries), against the live
// database while Core runs: the work probe (store.ProbeNodeWork) and the
// first observable page, which are all an idle node's pass reads, and for
// reference the first pending and allocation-work pages, which a pass
// reads when the probe finds their rows. "idle pass" is the probe and the
// observable page together, the goal's row.
func measureScan(t testing.TB, ctx context.Context, st *storetest.Store, s *sim) []row {
	t.Helper()
	var probe, pending, allocs, observable, pass []time.Duration
	for _, nd := range s.nodes {
		t0 := time.Now()
		if _, err := st.ProbeNodeWork(ctx, nd.ID); err != nil {
			t.Fatal(err)
		}
		t1 := time.Now()
		if _, err := st.ListObservableForNode(ctx, store.ObservableScan{
			NodeID: nd.ID, Limit: store.NodePageSize, ObserveAfter: 6 * time.Second, KeepaliveAfter: 5 * time.Minute,
		}); err != nil {
			t.Fatal(err)
		}
		t2 := time.Now()
		if _, err := st.ListPendingForNode(ctx, nd.ID, uuid.Nil, store.NodePageSize); err != nil {
			t.Fatal(err)
		}
		t3 := time.Now()
		if _, err := st.ListAllocationWorkForNode(ctx, nd.ID, uuid.Nil, store.NodePageSize); err != nil {
			t.Fatal(err)
		}
		t4 := time.Now()
		probe, observable = append(probe, t1.Sub(t0)), append(observable, t2.Sub(t1))
		pending, allocs = append(pending, t3.Sub(t2)), append(allocs, t4.Sub(t3))
		pass = append(pass, t2.Sub(t0))
	}
	return []row{
		latency("page scan: work probe (ProbeNodeWork)", probe, 0),
		latency("page scan: observable (ListObservableForNode)", observable, 0),
		latency("page scan: pending (ListPendingForNode), when probed", pending, 0),
		latency("page scan: allocation work (ListAllocationWorkForNode), when probed", allocs, 0),
		latency("page scan: an idle pass's reads (probe, observable page)", pass, goalScanP99),
	}
}

// measureCreate runs cfg.Creates CreateSession calls from cfg.Clients
// concurrent clients through the admin API, each placing a new Session.
// createProjects makes n projects without limits in a new tenant and
// returns their names; n of 0 or 1 is the default project ("").
func createProjects(t testing.TB, ctx context.Context, api adminv1.ProjectServiceClient, n int) []string {
	t.Helper()
	if n <= 1 {
		return []string{""}
	}
	ten, err := api.CreateTenant(ctx, &adminv1.CreateTenantRequest{RequestId: uuid.NewString(), Tenant: &adminv1.Tenant{DisplayName: "scale"}})
	if err != nil {
		t.Fatalf("CreateTenant: %v", err)
	}
	names := make([]string, n)
	for i := range names {
		p, err := api.CreateProject(ctx, &adminv1.CreateProjectRequest{Parent: ten.GetTenant().GetName(), RequestId: uuid.NewString(),
			Project: &adminv1.Project{DisplayName: fmt.Sprintf("p%d", i)}})
		if err != nil {
			t.Fatalf("CreateProject: %v", err)
		}
		names[i] = p.GetProject().GetName()
	}
	return names
}

func measureCreate(t testing.TB, ctx context.Context, api adminv1.SessionServiceClient, cfg config, projects []string) ([]row, int, time.Duration) {
	t.Helper()
	var (
		mu   sync.Mutex
		lat  []time.Duration
		next atomic.Int64
	)
	start := time.Now()
	eg, ectx := errgroup.WithContext(ctx)
	for range cfg.Clients {
		eg.Go(func() error {
			for i := next.Add(1); i <= int64(cfg.Creates); i = next.Add(1) {
				t0 := time.Now()
				_, err := api.CreateSession(ectx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString(),
					Session: &adminv1.Session{Project: projects[int(i)%len(projects)]}})
				d := time.Since(t0)
				if err != nil {
					return fmt.Errorf("CreateSession: %w", err)
				}
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		t.Fatal(err)
	}
	wall := time.Since(start)
	rate := float64(len(lat)) / wall.Seconds()
	return []row{
		latency("CreateSession latency", lat, goalCreateP99),
		value("CreateSession throughput", rate, "/s", fmt.Sprintf("≥ %.0f/s", goalCreateRate), ptr(rate >= goalCreateRate)),
	}, len(lat), wall
}

// measureReads samples GetSession of random seeded Sessions, the first
// page of ListSessions and pages further in (following page tokens), each
// n times, one call at a time.
func measureReads(t testing.TB, ctx context.Context, api adminv1.SessionServiceClient, pop seeded, n int) []row {
	t.Helper()
	var get, first, deeper []time.Duration
	for range n {
		id := pop.sessions[rand.IntN(len(pop.sessions))]
		t0 := time.Now()
		if _, err := api.GetSession(ctx, &adminv1.GetSessionRequest{Name: "sessions/" + id.String()}); err != nil {
			t.Fatalf("GetSession: %v", err)
		}
		get = append(get, time.Since(t0))
	}
	token := ""
	for range n {
		t0 := time.Now()
		resp, err := api.ListSessions(ctx, &adminv1.ListSessionsRequest{PageSize: 100, PageToken: token})
		if err != nil {
			t.Fatalf("ListSessions: %v", err)
		}
		if token == "" {
			first = append(first, time.Since(t0))
		} else {
			deeper = append(deeper, time.Since(t0))
		}
		token = resp.GetNextPageToken()
	}
	return []row{
		latency("admin GetSession", get, 0),
		latency("admin ListSessions (100), first page", first, 0),
		latency("admin ListSessions (100), next pages", deeper, 0),
	}
}

// measureObservationAge reads, from Core's database, how old the last
// observation of every running allocation is right now (observation_time:
// its row's observed_at or its page's newest mark, migration 0029): the
// lifecycle workers' observation scans bound it by the observe period
// (10 s at Core's defaults) while they keep up.
func measureObservationAge(t testing.TB, ctx context.Context, pool *pgxpool.Pool) row {
	t.Helper()
	var p50, p99 float64
	var n int
	if err := pool.QueryRow(ctx, `
		SELECT coalesce(percentile_disc(0.5) WITHIN GROUP (ORDER BY age), 0),
		       coalesce(percentile_disc(0.99) WITHIN GROUP (ORDER BY age), 0), count(*)
		FROM (SELECT extract(epoch FROM now() - observation_time(observed_at, node_id, id)) * 1000 AS age
		      FROM allocations WHERE state = 'running' AND observed_at IS NOT NULL) a`).Scan(&p50, &p99, &n); err != nil {
		t.Fatalf("observation age: %v", err)
	}
	ok := p50 <= float64(goalAgeP50.Milliseconds()) && p99 <= float64(goalAgeP99.Milliseconds())
	return row{Measure: "age of the last observation (running)", P50MS: p50, P99MS: p99, Tail: benchstat.Tail(n), Samples: n,
		Goal: fmt.Sprintf("p50 ≤ %s (the observe period), p99 ≤ %s", goalAgeP50, goalAgeP99), MeetsGoal: &ok}
}

// BenchmarkScale is `make bench-scale`: BERTH_SCALE_NODES simulated node
// agents (default 1000), BERTH_SCALE_ALLOCATIONS seeded allocations
// (default 100000), BERTH_SCALE_CREATES CreateSession calls (default
// 5000) from BERTH_SCALE_CLIENTS clients (default 32), against a
// berth-core at its default settings. It prints the table and writes it as
// JSON to BERTH_SCALE_JSON (default .run/scale.json in the repository).
// Run it once (-benchtime 1x): the samples are its own, not b.N.
func BenchmarkScale(b *testing.B) {
	cfg := config{
		Nodes:       benchstat.EnvInt(b, "BERTH_SCALE_NODES", 1000),
		Allocations: benchstat.EnvInt(b, "BERTH_SCALE_ALLOCATIONS", 100000),
		Creates:     benchstat.EnvInt(b, "BERTH_SCALE_CREATES", 5000),
		Clients:     benchstat.EnvInt(b, "BERTH_SCALE_CLIENTS", 32),
		Projects:    benchstat.EnvInt(b, "BERTH_SCALE_PROJECTS", 1),
		Reads:       benchstat.EnvInt(b, "BERTH_SCALE_READS", 200),
		Settle:      15 * time.Second,
		Steady:      20 * time.Second,
		Defaults:    true,
	}
	rep := run(b, cfg)
	printTable(os.Stdout, rep)
	benchstat.Save(b, "BERTH_SCALE_JSON", filepath.Join(stack.RepoRoot(), ".run", "scale.json"), rep)
}

// TestScaleSmoke runs the whole simulation small (5 nodes, 200 seeded
// allocations, 50 CreateSession calls) with Core at the tests' short
// intervals, so that the benchmark cannot rot. It asserts nothing about
// time; it checks that every created Session's Create reached its node.
func TestScaleSmoke(t *testing.T) {
	testenv.SkipShort(t, "PostgreSQL")
	rep := run(t, config{
		Nodes: 5, Allocations: 200, Creates: 50, Clients: 4, Reads: 10, Projects: 2,
		Settle: time.Second, Steady: time.Second,
	})
	var w strings.Builder
	printTable(&w, rep)
	t.Log(w.String())
	if err := benchstat.WriteJSON(filepath.Join(t.TempDir(), "scale.json"), rep); err != nil {
		t.Errorf("writeJSON: %v", err)
	}
	// Every goal of issue 32's table is a row with a verdict.
	goals := map[string]bool{}
	for _, r := range rep.Measures {
		if r.Goal != "" && r.MeetsGoal != nil {
			goals[r.Measure] = true
		}
	}
	for _, m := range []string{"age of the last observation (running)", "page scan: an idle pass's reads (probe, observable page)",
		"CreateSession latency", "CreateSession throughput", "Core RSS, every node just connected", "Core RSS at the end",
		"Core peak RSS (VmHWM)", "Core CPU, steady (population only)"} {
		if !goals[m] {
			t.Errorf("%q has no goal and verdict in the table", m)
		}
	}
}
