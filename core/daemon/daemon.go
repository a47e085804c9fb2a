// Package daemon is berth-core's process: it claims the installation and a
// new owner epoch, holds the execution lease (a second Core waits; losing
// the lease stops everything), loads or creates the installation CA (its
// key sealed under the master key), and serves the admin API (loopback),
// enrollment (mutual-TLS public listener) and the node connections.
//
// Rules: the admin token, master key and CA key never reach a log line or
// an error; every lifecycle decision reads the database clock.
package daemon

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	enrollmentv1 "berth.dev/proto/berth/enrollment/v1"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/nodetls"
	"berth.dev/sandbox/providers"

	"berth.dev/core/admin"
	"berth.dev/core/deployment"
	"berth.dev/core/deploymentadmin"
	"berth.dev/core/enrollment"
	"berth.dev/core/enrollmentgrpc"
	"berth.dev/core/gateway"
	"berth.dev/core/installation"
	"berth.dev/core/installationadmin"
	"berth.dev/core/lifecycle"
	"berth.dev/core/nodeadmin"
	"berth.dev/core/nodes"
	"berth.dev/core/secrets"
	"berth.dev/core/sessionadmin"
	"berth.dev/core/sessions"
	"berth.dev/core/store"
	"berth.dev/core/turnadmin"
	"berth.dev/core/turns"
)

// Config is berth-core's configuration.
type Config struct {
	DatabaseURL string
	// Migrate applies migrations at start-up; otherwise Core refuses a
	// schema it does not know.
	Migrate bool
	// PublicURL is the installation's public URL, used when the
	// installation is first claimed.
	PublicURL string
	// StateDir holds the admin token and, by default, the master key
	// (mode 0700).
	StateDir string
	// MasterKeyFile is the master key (default StateDir/master.key). Every
	// Core of an installation must hold the same key: the installation CA
	// key is sealed under it.
	MasterKeyFile string
	// AdminListen is the admin API's address; it must be loopback.
	AdminListen string
	// Listen is the public listener (enrollment) address.
	Listen string
	// RuntimeListen is the Runtime gateway's address (berth.runtime.v1,
	// plaintext gRPC: the installation's public URL, http://..., names it,
	// or a TLS-terminating proxy in front of it for https://...). Empty
	// serves no gateway.
	RuntimeListen string
	// RuntimeKeepalive is the gateway's keepalive interval
	// (gateway.DefaultKeepalive when 0).
	RuntimeKeepalive time.Duration
	// LeaseTTL is the execution lease's lifetime (renewed at a third).
	LeaseTTL time.Duration
	// NodeInterval is how often node connections are reconciled.
	NodeInterval time.Duration
	// LifecycleInterval is the wait between a node worker's passes
	// (lifecycle.DefaultInterval when 0).
	LifecycleInterval time.Duration
	// Version is the build version, reported by GetInstallation.
	Version string
}

// Defaults fills unset durations.
func (c *Config) defaults() {
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = 15 * time.Second
	}
	if c.NodeInterval <= 0 {
		c.NodeInterval = 5 * time.Second
	}
}

// DefaultTenant owns the Sessions the admin API creates: the admin API has
// no tenant field yet, so one fixed tenant id stands for the installation's
// operator.
var DefaultTenant = uuid.MustParse("00000000-0000-4000-8000-000000000001")

// ErrLeaseLost ends Core when another Core took over.
var ErrLeaseLost = fmt.Errorf("execution lease lost: %w", errdefs.ErrFenced)

// Ready describes a serving Core, for callers that started it.
type Ready struct {
	AdminAddr, PublicAddr, RuntimeAddr string
	InstallationID                     string
	OwnerEpoch                         uint64
}

// Run runs Core until ctx ends or the lease is lost.
func Run(ctx context.Context, cfg Config, log *slog.Logger, ready func(Ready)) error {
	cfg.defaults()
	if err := checkLoopback(cfg.AdminListen); err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	if fi, err := os.Stat(cfg.StateDir); err != nil || fi.Mode().Perm() != 0o700 {
		return errdefs.Invalid("state_dir", "must be a directory with mode 0700")
	}
	lock, err := os.OpenFile(filepath.Join(cfg.StateDir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("state lock: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return fmt.Errorf("state directory is in use by another berth-core: %w", errdefs.ErrExists)
	}
	if cfg.MasterKeyFile == "" {
		cfg.MasterKeyFile = filepath.Join(cfg.StateDir, "master.key")
	}
	masterKey, err := secrets.LoadOrCreateKeyFile(cfg.MasterKeyFile)
	if err != nil {
		return err
	}
	adminDigest, created, err := adminToken(filepath.Join(cfg.StateDir, "admin-token"))
	if err != nil {
		return err
	}
	if created {
		log.Info("created the admin token; it is in the state directory's admin-token file", "file", filepath.Join(cfg.StateDir, "admin-token"))
	}

	if cfg.Migrate {
		if err := store.Migrate(ctx, cfg.DatabaseURL); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
	}
	st, err := store.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer st.Close()
	if err := store.CheckSchema(ctx, st.Pool()); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	inst, err := st.ClaimInstallation(ctx, uuid.New(), cfg.PublicURL)
	if err != nil {
		return fmt.Errorf("claim installation: %w", err)
	}
	epoch, err := st.NextOwnerEpoch(ctx)
	if err != nil {
		return fmt.Errorf("owner epoch: %w", err)
	}
	holder := uuid.New()
	if err := waitForLease(ctx, st, holder, epoch, cfg.LeaseTTL, log); err != nil {
		return err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = st.ReleaseLease(rctx, holder, epoch)
	}()
	log.Info("holding the execution lease", "installation", inst.ID.String(), "owner_epoch", epoch)

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go keepLease(ctx, cancel, st, holder, epoch, cfg.LeaseTTL, log)

	ca, err := loadOrCreateCA(ctx, st, masterKey, inst.ID.String())
	if err != nil {
		return err
	}
	coreClient, err := ca.IssueCore(inst.ID.String(), time.Now(), 30*24*time.Hour)
	if err != nil {
		return fmt.Errorf("core client certificate: %w", err)
	}
	coreServer, err := ca.IssueCoreServer(inst.ID.String(), time.Now(), 30*24*time.Hour)
	if err != nil {
		return fmt.Errorf("core server certificate: %w", err)
	}

	// Public listener: enrollment (later the Runtime gateway).
	publicTLS, err := nodetls.EnrollmentServerConfig(coreServer, ca.Certificate())
	if err != nil {
		return fmt.Errorf("public TLS: %w", err)
	}
	public := grpc.NewServer(grpc.Creds(credentials.NewTLS(publicTLS)))
	enrollmentv1.RegisterEnrollmentServiceServer(public,
		enrollmentgrpc.NewServer(enrollment.NewService(st, ca, time.Now, uuid.New)))
	publicLis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("public listener: %w", err)
	}

	// Every lifecycle write (Session creation and deletion, the workers'
	// claims, outcomes, cleanup and release, Turn claims and sweeps,
	// Runtime admission, node presence) goes through the owner-bound
	// store and is fenced by this Core's owner epoch in its own
	// transaction, so a Core whose lease another took over stops writing
	// before it notices the loss itself.
	owned := st.AsOwner(epoch)
	manager := nodes.NewManager(owned, coreClient, ca.Certificate(), log, cfg.NodeInterval)
	pages, err := admin.NewPageTokens(masterKey.Derive("admin-page-tokens"))
	if err != nil {
		return fmt.Errorf("page tokens: %w", err)
	}
	nodeSvc, err := nodeadmin.NewService(st, ca.Fingerprint(), pages, time.Now)
	if err != nil {
		return fmt.Errorf("node service: %w", err)
	}
	registry, err := providers.Default()
	if err != nil {
		return fmt.Errorf("provider registry: %w", err)
	}
	deploySvc, err := deployment.NewService(st, registry, masterKey, inst.ID)
	if err != nil {
		return fmt.Errorf("deployment service: %w", err)
	}
	sessionSvc := sessions.New(owned, masterKey, inst.ID, uuid.New)
	coordinator := lifecycle.NewCoordinator(lifecycle.Config{
		Store: owned, Key: masterKey, Installation: inst, Log: log, Interval: cfg.LifecycleInterval, NewID: uuid.New,
		Provider: func(id uuid.UUID) (sandbox.SandboxProvider, error) { return manager.Provider(id) },
	})
	turnSvc := turns.New(owned, masterKey, inst.ID, uuid.New, turns.NewHub())
	sessionAdmin, err := sessionadmin.NewService(sessionSvc, st, DefaultTenant, pages)
	if err != nil {
		return fmt.Errorf("session service: %w", err)
	}
	adminSrv := admin.NewServer(admin.Options{
		TokenDigest:  adminDigest,
		Installation: installationadmin.NewServer(installation.New(st, epoch, strings.TrimPrefix(ca.Fingerprint(), "sha256:"), cfg.Version)),
		Nodes:        nodeadmin.NewServer(nodeSvc, liveness(manager)),
		Deployment:   deploymentadmin.NewServer(deploySvc),
		Sessions:     sessionadmin.NewSessionServer(sessionAdmin),
		Allocations:  sessionadmin.NewAllocationServer(sessionAdmin),
		Turns:        turnadmin.New(turnSvc, pages),
	})
	adminLis, err := net.Listen("tcp", cfg.AdminListen)
	if err != nil {
		publicLis.Close()
		return fmt.Errorf("admin listener: %w", err)
	}

	// The Runtime gateway: plaintext gRPC with keepalive enforcement
	// loose enough for idle Runtimes.
	runtimeSrv := grpc.NewServer(grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
		MinTime: 10 * time.Second, PermitWithoutStream: true,
	}))
	gateway.New(gateway.Config{
		Store: owned, Turns: turnSvc, NewID: uuid.New, Keepalive: cfg.RuntimeKeepalive,
		Log: log.With("component", "gateway"),
	}).Register(runtimeSrv)
	var runtimeLis net.Listener
	if cfg.RuntimeListen != "" {
		runtimeLis, err = net.Listen("tcp", cfg.RuntimeListen)
		if err != nil {
			publicLis.Close()
			adminLis.Close()
			return fmt.Errorf("runtime listener: %w", err)
		}
	}

	errc := make(chan error, 3)
	go func() { errc <- public.Serve(publicLis) }()
	go func() { errc <- adminSrv.Serve(adminLis) }()
	runtimeAddr := ""
	if runtimeLis != nil {
		runtimeAddr = runtimeLis.Addr().String()
		go func() { errc <- runtimeSrv.Serve(runtimeLis) }()
	}
	go turnSvc.Sweep(ctx, log.With("component", "turns"))
	managerDone := make(chan struct{})
	go func() { manager.Run(ctx); close(managerDone) }()
	// One lifecycle worker per enabled node, kept while Core runs.
	go func() {
		t := time.NewTicker(cfg.NodeInterval)
		defer t.Stop()
		for {
			coordinator.Ensure(ctx, manager.Enabled()...)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	log.Info("serving", "admin", adminLis.Addr().String(), "public", publicLis.Addr().String(),
		"runtime", runtimeAddr, "installation", inst.ID.String(), "owner_epoch", epoch)
	if ready != nil {
		ready(Ready{AdminAddr: adminLis.Addr().String(), PublicAddr: publicLis.Addr().String(), RuntimeAddr: runtimeAddr, InstallationID: inst.ID.String(), OwnerEpoch: epoch})
	}

	var runErr error
	select {
	case <-ctx.Done():
		if cause := context.Cause(ctx); errors.Is(cause, ErrLeaseLost) {
			runErr = cause
		}
	case err := <-errc:
		runErr = fmt.Errorf("serve: %w", err)
	}
	cancel(nil)
	public.GracefulStop()
	adminSrv.GracefulStop()
	// Runtime streams never end by themselves: stop them hard. Their
	// Turns become unconfirmed only if they were running.
	runtimeSrv.Stop()
	coordinator.Close()
	<-managerDone
	log.Info("stopped")
	return runErr
}

// liveness reads the node connections for the admin API.
func liveness(m *nodes.Manager) nodeadmin.Liveness {
	return func(id uuid.UUID) (nodeadmin.LiveState, bool) {
		p := m.Presence(id)
		if p.Hello == nil && !p.Connected {
			return nodeadmin.LiveState{}, false
		}
		l := nodeadmin.LiveState{Connected: p.Present(time.Now()), LastReport: p.LastReport}
		r := p.Report.GetReadiness()
		if r == nil {
			r = p.Hello.GetReadiness()
		}
		if r != nil {
			l.Generation, l.Ready, l.DiagnosticCode = r.GetGeneration(), r.GetReady(), r.GetDiagnosticCode()
			l.CheckTime = r.GetCheckedAt().AsTime()
		}
		c := p.Report.GetCapacity()
		if c == nil {
			c = p.Hello.GetCapacity()
		}
		l.CPUMillis, l.MemoryBytes, l.DiskFreeBytes = c.GetCpuMillis(), c.GetMemoryBytes(), c.GetDiskFreeBytes()
		return l, true
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

// waitForLease takes the execution lease, waiting while another Core holds it.
func waitForLease(ctx context.Context, st *store.Store, holder uuid.UUID, epoch uint64, ttl time.Duration, log *slog.Logger) error {
	logged := false
	for {
		ok, err := st.AcquireLease(ctx, holder, epoch, ttl)
		if err != nil {
			return fmt.Errorf("execution lease: %w", err)
		}
		if ok {
			return nil
		}
		if !logged {
			log.Info("another berth-core holds the execution lease; waiting")
			logged = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(ttl / 3):
		}
	}
}

// keepLease renews the lease every third of its lifetime; when a renewal
// is refused, or keeps failing until the lease would have expired, it
// cancels Core with ErrLeaseLost.
func keepLease(ctx context.Context, cancel context.CancelCauseFunc, st *store.Store, holder uuid.UUID, epoch uint64, ttl time.Duration, log *slog.Logger) {
	ticker := time.NewTicker(ttl / 3)
	defer ticker.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		rctx, rcancel := context.WithTimeout(ctx, ttl/3)
		ok, err := st.AcquireLease(rctx, holder, epoch, ttl)
		rcancel()
		switch {
		case err == nil && ok:
			last = time.Now()
		case err == nil || errdefs.IsFenced(err) || time.Since(last) > ttl:
			log.Error("lost the execution lease; stopping")
			cancel(ErrLeaseLost)
			return
		default:
			log.Warn("renewing the execution lease failed; retrying", "error", err.Error())
		}
	}
}

// loadOrCreateCA loads the installation CA, opening its key with the master
// key, or creates and stores it on first start.
func loadOrCreateCA(ctx context.Context, st *store.Store, key secrets.Key, installationID string) (*nodetls.CA, error) {
	ad := []byte("berth-installation-ca:" + installationID)
	stored, err := st.LoadCA(ctx)
	if errdefs.IsNotFound(err) {
		ca, err := nodetls.NewCA(installationID, time.Now())
		if err != nil {
			return nil, fmt.Errorf("new CA: %w", err)
		}
		certPEM, keyPEM, err := nodetls.MarshalCA(ca)
		if err != nil {
			return nil, fmt.Errorf("marshal CA: %w", err)
		}
		nonce, ct, err := key.Seal(keyPEM, ad)
		if err != nil {
			return nil, err
		}
		if _, err := st.SaveCA(ctx, store.CA{CertificatePEM: string(certPEM), KeyCiphertext: ct, KeyNonce: nonce}); err != nil {
			if !errdefs.IsExists(err) {
				return nil, fmt.Errorf("save CA: %w", err)
			}
			return loadOrCreateCA(ctx, st, key, installationID)
		}
		return ca, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load CA: %w", err)
	}
	keyPEM, err := key.Open(stored.KeyNonce, stored.KeyCiphertext, ad)
	if err != nil {
		return nil, fmt.Errorf("installation CA key: %w", err)
	}
	ca, err := nodetls.ParseCA([]byte(stored.CertificatePEM), keyPEM)
	if err != nil {
		return nil, fmt.Errorf("installation CA: %w", err)
	}
	if ca.InstallationID() != installationID {
		return nil, errdefs.Invalid("installation_ca", "belongs to another installation")
	}
	return ca, nil
}
