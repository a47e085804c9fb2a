package daemon

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"berth.dev/platform/nodetls"
	"berth.dev/platform/otelsetup"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providers"

	"berth.dev/core/admin"
	"berth.dev/core/audit"
	"berth.dev/core/auditadmin"
	"berth.dev/core/deployment"
	"berth.dev/core/deploymentadmin"
	"berth.dev/core/direct"
	"berth.dev/core/enrollment"
	"berth.dev/core/enrollmentgrpc"
	"berth.dev/core/events"
	"berth.dev/core/fileadmin"
	"berth.dev/core/files"
	"berth.dev/core/gateway"
	"berth.dev/core/installation"
	"berth.dev/core/installationadmin"
	"berth.dev/core/lifecycle"
	"berth.dev/core/nodeadmin"
	"berth.dev/core/nodes"
	"berth.dev/core/projectadmin"
	"berth.dev/core/projects"
	"berth.dev/core/reset"
	"berth.dev/core/secrets"
	"berth.dev/core/sessionadmin"
	"berth.dev/core/sessions"
	"berth.dev/core/store"
	"berth.dev/core/store/storeobs"
	"berth.dev/core/suspension"
	"berth.dev/core/turnadmin"
	"berth.dev/core/turns"
)

// ErrLeaseLost ends Core when another Core took over.
var ErrLeaseLost = fmt.Errorf("execution lease lost: %w", errdefs.ErrFenced)

// Run runs Core until ctx ends (nil), the lease is lost (ErrLeaseLost) or a
// server fails. ready, when not nil, is called once Core serves.
func Run(ctx context.Context, cfg Config, log *slog.Logger, ready func(Ready)) error {
	c := &core{cfg: cfg.withDefaults(), log: log}
	for _, step := range []func(context.Context) error{
		c.checkConfig,
		c.lockStateDir,
		c.setupMetrics,
		c.loadSecrets,
		c.openStore,
		c.claimInstallation,
		c.holdLease,
		c.setupEvents,
		c.loadCA,
		c.gatewayTLS,
		c.setupNodes,
		c.setupTurns,
		c.setupFiles,
		c.setupSessions,
		c.setupDirect,
		c.setupLifecycle,
		c.setupGateway,
		c.setupAdmin,
		c.setupEnrollment,
		c.observeCore,
	} {
		if err := step(ctx); err != nil {
			c.group.stop()
			return err
		}
	}
	err := c.group.run(ctx, func() {
		r := c.ready()
		log.Info("serving", "admin", r.AdminAddr, "public", r.PublicAddr,
			"runtime", r.RuntimeAddr, "metrics", r.MetricsAddr, "installation", r.InstallationID, "owner_epoch", r.OwnerEpoch)
		if ready != nil {
			ready(r)
		}
	})
	log.Info("stopped")
	return err
}

// core is berth-core while Run composes it: each step below fills in what
// the later ones use and registers what it opened, and what it runs, on
// group, Core's one shutdown path. Steps run in the order Run lists them,
// and stop in the reverse order.
type core struct {
	cfg   Config
	log   *slog.Logger
	group group

	masterKey   secrets.Key
	adminDigest []byte
	st          *store.Store
	// owned is st bound to this Core's owner epoch: every lifecycle write
	// (Session creation and deletion, the workers' claims, outcomes,
	// cleanup and release, Turn claims and sweeps, Runtime admission, node
	// presence) is its own transaction under that fence, so a Core whose
	// lease another took over stops writing before it notices the loss
	// itself.
	owned views
	inst  store.Installation
	epoch uint64
	// bus is Core's one way to signal a change (core/events): every
	// component publishes on it after its commit, none calls another back.
	bus *events.Bus

	ca                     *nodetls.CA
	coreClient, coreServer tls.Certificate
	// runtimeCreds is the Runtime gateway's transport (gatewayTLS), and
	// runtimeCA the CA Runtimes are given to trust it (empty: none).
	runtimeCreds credentials.TransportCredentials
	runtimeCA    []byte

	// registry is the provider registry, shared by the deployment service
	// and the direct Set.
	registry    *providers.Registry
	manager     *nodes.Manager
	direct      *direct.Set
	turns       *turns.Service
	files       *files.Service
	suspension  *suspension.Service
	sessions    *sessions.Service
	coordinator *lifecycle.Coordinator
	// audit is the audit trail's Writer (startAudit, in setupLifecycle):
	// the admin server's calls and the coordinator's owner failures.
	audit *audit.Writer
	// resets is the deployment reset logic (startReset, in setupLifecycle).
	resets *reset.Service
	// metrics is the metrics pipeline (nil: no --metrics-listen).
	metrics *otelsetup.Metrics

	adminLis, publicLis, runtimeLis, metricsLis net.Listener
}

// checkConfig refuses an admin address off loopback.
func (c *core) checkConfig(context.Context) error {
	if d := c.cfg.CreateAbandonAfter; d < time.Second || d > 24*time.Hour {
		return errdefs.Invalid("create_abandon_after", "must be 1s to 24h")
	}
	if d := c.cfg.QuiesceTimeout; d < time.Second || d > 24*time.Hour {
		return errdefs.Invalid("quiesce_timeout", "must be 1s to 24h")
	}
	if d := c.cfg.RestoreAbandonAfter; d < time.Second || d > 24*time.Hour {
		return errdefs.Invalid("restore_abandon_after", "must be 1s to 24h")
	}
	if err := audit.CheckRetention(c.cfg.AuditRetention); err != nil {
		return errdefs.Invalid("audit_retention", "must be at least 24h")
	}
	if (c.cfg.RuntimeTLSCertFile == "") != (c.cfg.RuntimeTLSKeyFile == "") {
		return errdefs.Invalid("runtime_tls_cert", "give both --runtime-tls-cert and --runtime-tls-key, or neither")
	}
	if c.cfg.RuntimeInsecure && c.cfg.RuntimeTLSCertFile != "" {
		return errdefs.Invalid("runtime_insecure", "--runtime-insecure serves plaintext: drop it or the TLS certificate")
	}
	return checkLoopback(c.cfg.AdminListen)
}

// lockStateDir creates the state directory (0700) and takes its lock, so
// that two berth-core processes never share it; the lock is released last.
func (c *core) lockStateDir(context.Context) error {
	dir := c.cfg.StateDir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		return errdefs.Invalid("state_dir", "must be a directory with mode 0700")
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("state lock: %w", err)
	}
	c.group.onStop(func() { _ = lock.Close() })
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return fmt.Errorf("state directory is in use by another berth-core: %w", errdefs.ErrExists)
	}
	return nil
}

// loadSecrets loads (or creates) the master key and the admin token's
// digest.
func (c *core) loadSecrets(context.Context) error {
	key, err := secrets.LoadOrCreateKeyFile(c.cfg.MasterKeyFile)
	if err != nil {
		return err
	}
	c.masterKey = key
	path := filepath.Join(c.cfg.StateDir, "admin-token")
	digest, created, err := adminToken(path)
	if err != nil {
		return err
	}
	c.adminDigest = digest
	if created {
		c.log.Info("created the admin token; it is in the state directory's admin-token file", "file", path)
	}
	return nil
}

// openStore migrates the database when asked, opens the store and refuses
// a schema Core does not know.
func (c *core) openStore(ctx context.Context) error {
	if c.cfg.Migrate {
		if err := store.Migrate(ctx, c.cfg.DatabaseURL); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
	}
	st, err := store.Open(ctx, c.cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	c.st = st
	c.group.onStop(st.Close)
	if err := store.CheckSchema(ctx, st.Pool()); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	return nil
}

// claimInstallation claims the installation (once per database) and a new
// owner epoch (once per start).
func (c *core) claimInstallation(ctx context.Context) error {
	inst, err := c.st.ClaimInstallation(ctx, uuid.New(), c.cfg.PublicURL)
	if err != nil {
		return fmt.Errorf("claim installation: %w", err)
	}
	epoch, err := c.st.NextOwnerEpoch(ctx)
	if err != nil {
		return fmt.Errorf("owner epoch: %w", err)
	}
	c.inst, c.epoch, c.owned = inst, epoch, newViews(c.st, epoch)
	return nil
}

// holdLease waits for the execution lease, then keeps renewing it: losing
// it fails the group, which stops everything. The lease is released at
// shutdown, after everything that ran under it has stopped.
func (c *core) holdLease(ctx context.Context) error {
	holder := uuid.New()
	lock := c.st.OwnerLock()
	if err := waitForLease(ctx, lock, holder, c.epoch, c.cfg.LeaseTTL, c.log); err != nil {
		lock.Close()
		return err
	}
	// The lock's connection ends last, after the lease's release: a
	// standby waiting on the lock then finds the lease free.
	c.group.onStop(lock.Close)
	c.group.onStop(func() {
		rctx, cancel := context.WithTimeout(context.Background(), leaseReleaseTimeout)
		defer cancel()
		_ = c.st.ReleaseLease(rctx, holder, c.epoch)
	})
	c.log.Info("holding the execution lease", "installation", c.inst.ID.String(), "owner_epoch", c.epoch)
	// Renewal starts now, not when the group runs: the steps after this
	// one must not eat into the lease's lifetime. Its loss fails the
	// group once it runs (every write before is fenced anyway).
	kctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	lost, done := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(done)
		lost <- keepLease(kctx, lock, holder, c.epoch, c.cfg.LeaseTTL, c.log)
	}()
	c.group.onStop(func() { cancel(); <-done }) // before the release above
	c.group.addWorker(func(ctx context.Context) error {
		select {
		case err := <-lost:
			return err
		case <-ctx.Done():
			return nil
		}
	})
	return nil
}

// setupEvents makes the bus and feeds it what the store's LISTEN hears
// from every Core process (node work, this Core's own writes included):
// one connection, listened again after a pause when it fails.
func (c *core) setupEvents(context.Context) error {
	c.bus = events.New()
	c.group.addWorker(func(ctx context.Context) error {
		c.bus.Feed(ctx, c.st.ListenEvents, listenRetry, c.log)
		return nil
	})
	return nil
}

// loadCA opens (or creates) the installation CA and issues Core's own
// client and server certificates.
func (c *core) loadCA(ctx context.Context) error {
	id := c.inst.ID.String()
	ca, err := loadOrCreateCA(ctx, c.st, c.masterKey, id)
	if err != nil {
		return err
	}
	c.ca = ca
	if c.coreClient, err = ca.IssueCore(id, time.Now(), certificateValidity); err != nil {
		return fmt.Errorf("core client certificate: %w", err)
	}
	if c.coreServer, err = ca.IssueCoreServer(id, time.Now(), certificateValidity); err != nil {
		return fmt.Errorf("core server certificate: %w", err)
	}
	return nil
}

// gatewayTLS decides the Runtime gateway's transport from the
// installation's stored public URL, which every bootstrap file names:
// plaintext only with RuntimeInsecure; otherwise TLS, which an https URL
// needs, with the operator's certificate or one issued from the
// installation CA for the URL's host (then its CA goes to every Runtime,
// beside its bootstrap file).
func (c *core) gatewayTLS(context.Context) error {
	if c.cfg.RuntimeListen == "" {
		return nil
	}
	if c.cfg.RuntimeInsecure {
		c.runtimeCreds = insecure.NewCredentials()
		c.log.Warn("the Runtime gateway serves plaintext (--runtime-insecure): device credentials cross the network in clear")
		return nil
	}
	u, err := url.Parse(c.inst.PublicURL)
	if err != nil || u.Scheme != "https" || u.Hostname() == "" {
		return errdefs.Invalid("public_url",
			"the Runtime gateway serves TLS, so the installation's public URL must be https://HOST[:PORT]; serve plaintext with --runtime-insecure")
	}
	var cert tls.Certificate
	if c.cfg.RuntimeTLSCertFile != "" {
		if cert, err = tls.LoadX509KeyPair(c.cfg.RuntimeTLSCertFile, c.cfg.RuntimeTLSKeyFile); err != nil {
			return errdefs.Invalid("runtime_tls_cert", "cannot load the certificate and key (PEM files)")
		}
	} else {
		if cert, err = c.ca.IssueRuntimeGateway(c.inst.ID.String(), u.Hostname(), time.Now(), certificateValidity); err != nil {
			return fmt.Errorf("runtime gateway certificate: %w", err)
		}
		c.runtimeCA = c.ca.CertificatePEM()
	}
	c.runtimeCreds = credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	return nil
}

// setupNodes runs the node manager: one connection per enabled node.
func (c *core) setupNodes(context.Context) error {
	c.manager = nodes.NewManager(c.owned.readOwner(), c.coreClient, c.ca.Certificate(), c.log, c.cfg.NodeInterval, c.bus)
	c.group.addWorker(func(ctx context.Context) error {
		c.manager.Run(ctx)
		return nil
	})
	return nil
}

// setupTurns makes the Turn service (the gateway and the admin API share
// it) and runs its sweep.
func (c *core) setupTurns(context.Context) error {
	c.turns = turns.New(c.owned.all(), c.masterKey, c.inst.ID, uuid.New, c.bus)
	// The one writer of compute-phase state; its announcement of a
	// transition (events.Phase) wakes the gateway's connection of the
	// Session.
	c.suspension = suspension.New(c.owned.owner, c.bus)
	log := c.log.With("component", "turns")
	c.group.addWorker(func(ctx context.Context) error {
		c.turns.Sweep(ctx, log)
		return nil
	})
	return nil
}

// setupSessions makes the Session service (the admin API serves it; the
// lifecycle's owner failures close its admission).
func (c *core) setupSessions(context.Context) error {
	c.sessions = sessions.New(c.owned.readOwner(), c.masterKey, c.inst.ID, uuid.New, c.suspension, c.bus)
	return nil
}

// setupDirect runs the direct Set: one adapter per direct generation the
// lane serves, probed and recorded ready (core/direct). It is set up
// before the lifecycle, so it stops after the coordinator drained the
// direct lane's worker: no adapter closes under a call of the worker.
func (c *core) setupDirect(context.Context) error {
	c.registry = c.cfg.Providers
	if c.registry == nil {
		var err error
		if c.registry, err = providers.Default(); err != nil {
			return fmt.Errorf("provider registry: %w", err)
		}
	}
	// Fork decides fork_unsupported from the same declarations.
	c.sessions.SetProviders(c.registry)
	if p := c.cfg.ProcessPaths.State; p != "" {
		if err := os.MkdirAll(p, 0o700); err != nil {
			return fmt.Errorf("provider state directory: %w", err)
		}
	}
	set := direct.New(direct.Config{
		Store: c.owned.readOwner(), Registry: c.registry, Key: c.masterKey, InstallationID: c.inst.ID,
		Paths: c.cfg.ProcessPaths, RuntimeGateway: c.cfg.RuntimeListen != "", Events: c.bus, Log: c.log.With("component", "direct"),
	})
	c.direct = set
	c.group.onStop(func() { _ = set.Close() })
	c.group.addWorker(func(ctx context.Context) error {
		set.Run(ctx)
		return nil
	})
	return nil
}

// setupLifecycle runs one serial lifecycle worker per node the manager
// serves (enabled or retired, connected or not), kept in step with it
// every NodeInterval: a retired node's deletions complete without enabling
// it again.
func (c *core) setupLifecycle(context.Context) error {
	c.audit = c.startAudit()
	coordinator := lifecycle.NewCoordinator(lifecycle.Config{
		Store: c.owned.readOwner(), Suspension: c.suspension, Key: c.masterKey, Installation: c.inst, Log: c.log, Interval: c.cfg.LifecycleInterval, NewID: uuid.New,
		ObservePeriod: DefaultObservePeriod, KeepaliveInterval: DefaultComputeKeepalive,
		CreateAbandonAfter: c.cfg.CreateAbandonAfter,
		QuiesceTimeout:     c.cfg.QuiesceTimeout, RestoreAbandonAfter: c.cfg.RestoreAbandonAfter,
		Provider: func(id uuid.UUID) (sandbox.SandboxProvider, error) {
			if id == lifecycle.DirectLane {
				return c.direct.Provider(), nil
			}
			return c.manager.Provider(id)
		},
		Serves:    c.direct.Serves,
		RuntimeCA: c.runtimeCA,
		// A drain past its bound (a retirement's, a replacement's, a
		// removed node's, or at shutdown) is an owner failure: admission
		// closes until Core restarts.
		Admission: c.sessions,
		// ... and is recorded in the audit trail as Core's decision.
		OwnerFailures: c.audit,
	})
	c.coordinator = coordinator
	c.group.onStop(func() { _ = coordinator.Close() }) // a late worker is an owner failure
	if err := c.startReset(); err != nil {
		return err
	}
	// Subscribed now, before anything runs: no event is lost to the
	// start of the worker that routes it.
	routed := c.bus.Subscribe(events.Any(events.NodeWork), events.Any(events.DirectWork), events.Any(events.NodeServing),
		events.Any(events.Generation))
	c.group.addWorker(func(ctx context.Context) error {
		defer routed.Close()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-routed.Ready():
			}
			for _, e := range routed.Take() {
				c.route(e)
			}
		}
	})
	c.group.addWorker(func(ctx context.Context) error {
		t := time.NewTicker(c.cfg.NodeInterval)
		defer t.Stop()
		for {
			// The direct lane's worker always runs: with nothing direct its
			// pass is three indexed empty reads.
			coordinator.Sync(ctx, append(c.manager.Nodes(), lifecycle.DirectLane)...)
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
		}
	})
	return nil
}

// route acts on an event for the node manager and the lifecycle workers.
// Committed work wakes its node's worker at once (events.NodeWork, also
// for writes another Core made; the scan every LifecycleInterval is the
// safety net). A node's worker starts, or passes again, as soon as Core's
// connection to it is established (events.NodeServing: at start, after
// enabling, after a reconnect). A committed generation is given to the
// nodes at once (events.Generation).
func (c *core) route(e events.Event) {
	switch e.Kind {
	case events.DirectWork:
		c.coordinator.Wake(lifecycle.DirectLane)
	case events.NodeWork:
		c.coordinator.Wake(e.ID)
		if !c.manager.Serves(e.ID) {
			c.manager.Wake() // a node Core does not serve yet (just enabled)
		}
	case events.NodeServing:
		c.coordinator.Ensure(context.Background(), e.ID)
		c.coordinator.Wake(e.ID)
	case events.Generation:
		c.manager.Publish()
	}
}

// setupGateway serves the Runtime gateway on RuntimeListen, when set:
// gRPC over the transport gatewayTLS chose, with keepalive enforcement loose enough for idle
// Runtimes, headers and messages bounded (defaults.go). Its streams never end by themselves, so it stops hard; their
// setupFiles makes the file operation service (the admin API admits and
// pumps operations, the gateway claims and attaches them) and runs its
// sweep of orphaned operations.
func (c *core) setupFiles(context.Context) error {
	log := c.log.With("component", "files")
	c.files = files.New(c.owned.readOwner(), c.bus, uuid.New, files.Limits{}, log)
	c.group.addWorker(c.files.Run)
	return nil
}

// Turns become unconfirmed only if they were running.
func (c *core) setupGateway(context.Context) error {
	if c.cfg.RuntimeListen == "" {
		return nil
	}
	srv := grpc.NewServer(append(gateway.ServerOptions(), grpc.Creds(c.runtimeCreds), grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
		MinTime: runtimePingMinTime, PermitWithoutStream: true,
	}), grpc.MaxHeaderListSize(runtimeMaxHeaderListBytes), grpc.MaxRecvMsgSize(runtimeMaxRecvMsgBytes),
		// Code in a sandbox can reach the gateway: a call starts its own
		// trace, linked to whatever context it brought.
		grpc.StatsHandler(otelsetup.PublicServerHandler()))...)
	gateway.New(gateway.Config{
		Store: c.owned.readRuntime(), Turns: c.turns, Suspension: c.suspension, Files: c.files, Events: c.bus, NewID: uuid.New, Keepalive: c.cfg.RuntimeKeepalive,
		Log: c.log.With("component", "gateway"),
	}).Register(srv)
	var err error
	c.runtimeLis, err = c.group.listen("runtime", c.cfg.RuntimeListen, "runtime gateway", srv, srv.Stop)
	return err
}

// setupAdmin serves the admin API (every berth.admin.v1 service) on the
// loopback AdminListen.
func (c *core) setupAdmin(ctx context.Context) error {
	pages, err := admin.NewPageTokens(c.masterKey.Derive("admin-page-tokens"))
	if err != nil {
		return fmt.Errorf("page tokens: %w", err)
	}
	tokens, err := enrollment.NewTokens(c.owned.readAdmin(), c.ca.Fingerprint(), time.Now)
	if err != nil {
		return fmt.Errorf("enrollment tokens: %w", err)
	}
	// A retirement restarts its nodes' lifecycle workers through the drain
	// gate, RetireNode's and a replacement's with another provider kind
	// alike; a drain past its bound refuses it and closes admission (the
	// coordinator's owner failure). An operator's abandon of a node that
	// came back on another backend is a lifecycle write under this Core's
	// owner epoch; the Turns it settles or asks to cancel hear it on the
	// bus.
	nodeRegistry, err := nodes.NewRegistry(c.owned.readOwner(), nodes.RegistryOptions{
		Gate: c.coordinator.Gate(nodes.ErrRetireUndrained), Abandons: c.owned.readOwner(), Log: c.log, Events: c.bus,
	})
	if err != nil {
		return fmt.Errorf("node registry: %w", err)
	}
	nodeSrv, err := nodeadmin.New(tokens, nodeRegistry, pages, liveness(c.manager, c.owned.reader))
	if err != nil {
		return fmt.Errorf("node service: %w", err)
	}
	deploySvc, err := deployment.NewService(c.owned.readAdminOwner(), c.registry, c.masterKey, c.inst.ID, deployment.Options{
		Nodes: nodeServing(c.manager, c.owned.reader), Gate: c.coordinator.Gate(deployment.ErrReplaceUndrained), Events: c.bus,
		Direct: c.direct,
	})
	if err != nil {
		return fmt.Errorf("deployment service: %w", err)
	}
	sessionSrv, err := sessionadmin.New(c.sessions, pages)
	if err != nil {
		return fmt.Errorf("session service: %w", err)
	}
	projectSvc, err := projects.NewService(c.owned.readAdmin(), uuid.New)
	if err != nil {
		return fmt.Errorf("project service: %w", err)
	}
	// The key index holds every live key before the admin listener opens,
	// so the first call already authenticates; it reloads on every
	// keys_changed (any Core's creation or revocation, through the feed)
	// and every projects.IndexReload, and on this Core before
	// CreateProjectKey returns a new key's token.
	keys := projects.NewKeyIndex(c.owned.reader, time.Now)
	if err := keys.Load(ctx); err != nil {
		return err
	}
	keySvc, err := projects.NewKeys(c.owned.readAdmin())
	if err != nil {
		return fmt.Errorf("project keys: %w", err)
	}
	keySvc.LoadsInto(keys)
	projectSrv, err := projectadmin.New(projectSvc, keySvc, pages)
	if err != nil {
		return fmt.Errorf("project service: %w", err)
	}
	c.group.addWorker(func(ctx context.Context) error {
		keys.Run(ctx, c.bus, c.log)
		return nil
	})
	srv := admin.NewServer(admin.Options{
		TokenDigest: c.adminDigest,
		Keys:        keys,
		Audit:       c.audit,
		Stats:       otelsetup.ServerHandler(),
		Services: []admin.Service{
			installationadmin.New(installation.New(c.owned.reader, c.epoch, strings.TrimPrefix(c.ca.Fingerprint(), "sha256:"), c.cfg.Version)),
			nodeSrv,
			deploymentadmin.New(deploySvc, c.resets),
			sessionSrv,
			turnadmin.New(c.turns, pages),
			fileadmin.New(c.files),
			projectSrv,
			auditadmin.New(audit.NewTrail(c.owned.reader), pages),
		},
	})
	c.adminLis, err = c.group.listen("admin", c.cfg.AdminListen, "admin API", srv, srv.GracefulStop)
	return err
}

// setupEnrollment serves node enrollment on the public listener (TLS with
// Core's server certificate), headers and messages bounded (defaults.go).
func (c *core) setupEnrollment(context.Context) error {
	publicTLS, err := nodetls.EnrollmentServerConfig(c.coreServer, c.ca.Certificate())
	if err != nil {
		return fmt.Errorf("public TLS: %w", err)
	}
	enroll := enrollmentgrpc.New(enrollment.NewService(c.owned.readAdmin(), c.ca, time.Now, uuid.New))
	srv := grpc.NewServer(append(enroll.ServerOptions(), grpc.Creds(credentials.NewTLS(publicTLS)),
		grpc.MaxHeaderListSize(publicMaxHeaderListBytes), grpc.MaxRecvMsgSize(publicMaxRecvMsgBytes))...)
	enroll.Register(srv)
	c.publicLis, err = c.group.listen("public", c.cfg.Listen, "enrollment", srv, srv.GracefulStop)
	return err
}

// ready describes the composed Core.
func (c *core) ready() Ready {
	r := Ready{
		AdminAddr: c.adminLis.Addr().String(), PublicAddr: c.publicLis.Addr().String(),
		InstallationID: c.inst.ID.String(), OwnerEpoch: c.epoch,
	}
	if c.runtimeLis != nil {
		r.RuntimeAddr = c.runtimeLis.Addr().String()
	}
	if c.metricsLis != nil {
		r.MetricsAddr = c.metricsLis.Addr().String()
	}
	return r
}

// liveness reads the node connections for the admin API, with each
// node's presence as the database decides it (store.NodePresence.Present,
// the one predicate placement applies).
func liveness(m *nodes.Manager, st *storeobs.Reader) nodeadmin.Liveness {
	return func(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]nodeadmin.LiveState, error) {
		recorded, err := st.NodePresences(ctx, ids)
		if err != nil {
			return nil, err
		}
		out := make(map[uuid.UUID]nodeadmin.LiveState, len(ids))
		for _, id := range ids {
			p := m.Presence(id)
			if p.Hello == nil && !p.Connected {
				continue
			}
			rec, ok := recorded[id]
			l := nodeadmin.LiveState{Connected: ok && rec.Present, LastReport: p.LastReport}
			if ok {
				l.LastReport = rec.ReportedAt
			}
			// The readiness for the committed generation, as Core recorded it
			// (not ready with the mismatch's code when the node does not serve
			// it as committed).
			if r := p.Readiness; r != nil {
				l.Generation, l.Ready, l.DiagnosticCode = r.GetGeneration(), r.GetReady(), r.GetDiagnosticCode()
				l.CheckTime = r.GetCheckedAt().AsTime()
			}
			c := p.Report.GetCapacity()
			if c == nil {
				c = p.Hello.GetCapacity()
			}
			l.CPUMillis, l.MemoryBytes, l.DiskFreeBytes = c.GetCpuMillis(), c.GetMemoryBytes(), c.GetDiskFreeBytes()
			l.CreationReceiptsHeld = int64(p.Report.GetCreationReceiptsHeld())
			out[id] = l
		}
		return out, nil
	}
}

// nodeServing reads what each node serves for GetDeployment, with its
// presence as the database decides it.
func nodeServing(m *nodes.Manager, st *storeobs.Reader) func(context.Context) ([]deployment.NodeServing, error) {
	return func(ctx context.Context) ([]deployment.NodeServing, error) {
		ids := m.Nodes()
		slices.SortFunc(ids, func(a, b uuid.UUID) int { return strings.Compare(a.String(), b.String()) })
		recorded, err := st.NodePresences(ctx, ids)
		if err != nil {
			return nil, err
		}
		out := make([]deployment.NodeServing, 0, len(ids))
		for _, id := range ids {
			p := m.Presence(id)
			ns := deployment.NodeServing{NodeID: id, Connected: recorded[id].Present}
			for _, st := range p.Generations {
				ns.Generations = append(ns.Generations, deployment.ServedGeneration{
					Generation: st.GetGeneration(), Ready: st.GetReadiness().GetReady(), DiagnosticCode: st.GetReadiness().GetDiagnosticCode(),
				})
			}
			out = append(out, ns)
		}
		return out, nil
	}
}

func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return errdefs.Invalid("admin_listen", "must be host:port")
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return errdefs.Invalid("admin_listen", "the admin API serves plaintext and must listen on loopback")
	}
	return nil
}

// adminToken reads the admin token file, creating it (0600) on first start.
func adminToken(path string) (digest []byte, created bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		token, d, err := admin.NewAdminToken()
		if err != nil {
			return nil, false, err
		}
		if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
			return nil, false, fmt.Errorf("write admin token: %w", err)
		}
		return d, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read admin token: %w", err)
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(string(data))))
	return sum[:], false, nil
}
