package nodeagent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"berth.dev/platform/nodewire"
	"berth.dev/platform/otelsetup"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providers"
)

// Serve runs the node agent with cfg until ctx ends (nil) or the server
// fails. It is built from named steps, in order: openState (the state
// directory and its lock), loadIdentity (the enrolled identity and its
// mutual TLS), checkProvider (the configured kind's registration),
// setupMetrics (the metrics endpoint on cfg.MetricsListen, when set),
// setupServer (the node protocol on cfg.Listen, serving no generation
// until Core publishes them) and observeServer (the node's gauges). Each
// registers what it opened on one
// shutdown path; the server runs under an errgroup, and the end of ctx,
// the server's failure or a failed step closes everything once, in
// reverse order. ready, when not nil, receives the bound address once the
// server accepts connections.
func Serve(ctx context.Context, cfg Config, log *slog.Logger, ready func(addr string)) error {
	p := &process{cfg: cfg, log: log}
	for _, step := range []func(context.Context) error{
		p.openState,
		p.loadIdentity,
		p.checkProvider,
		p.setupMetrics,
		p.setupServer,
		p.observeServer,
	} {
		if err := step(ctx); err != nil {
			p.stop()
			return err
		}
	}
	return p.run(ctx, ready)
}

// process is the node agent while Serve composes it: each step fills in
// what the later ones use and registers how to undo what it opened.
type process struct {
	cfg Config
	log *slog.Logger

	// stops are the shutdown path, run once, newest first, by stop.
	stops    []func()
	stopOnce sync.Once

	state    *StateDir
	id       Identity
	tls      *tls.Config
	registry *providers.Registry
	reg      providers.Registration
	meter    *CapacityMeter
	server   *Server
	gens     *Generations
	gs       *grpc.Server
	lis      net.Listener

	// metrics and metricsSrv serve cfg.MetricsListen on metricsLis (nil:
	// no metrics).
	metrics    *otelsetup.Metrics
	metricsSrv *http.Server
	metricsLis net.Listener
}

func (p *process) onStop(fn func()) { p.stops = append(p.stops, fn) }

// stop undoes every step once, newest first.
func (p *process) stop() {
	p.stopOnce.Do(func() {
		for i := len(p.stops) - 1; i >= 0; i-- {
			p.stops[i]()
		}
	})
}

// openState opens the private state directory, which holds the identity,
// the highest owner epoch seen and the generations' state.
func (p *process) openState(context.Context) error {
	state, err := OpenStateDir(p.cfg.StateDir)
	if err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	p.state = state
	p.onStop(func() { _ = state.Close() })
	return nil
}

// loadIdentity loads the enrolled identity and builds the server's mutual
// TLS from it.
func (p *process) loadIdentity(context.Context) error {
	id, err := p.state.LoadIdentity()
	if err != nil {
		return fmt.Errorf("identity: %w", err)
	}
	tlsCfg, _, err := id.ServerTLS()
	if err != nil {
		return fmt.Errorf("identity: %w", err)
	}
	p.id, p.tls = id, tlsCfg
	return nil
}

// checkProvider looks the configured provider kind up in the registration
// table: a node provider whose declaration Hello reports. Nothing is
// built yet; each published generation is.
func (p *process) checkProvider(context.Context) error {
	registry, err := providers.Default()
	if err != nil {
		return fmt.Errorf("registration table: %w", err)
	}
	reg, err := registry.Lookup(p.cfg.Provider)
	if err != nil {
		return fmt.Errorf("provider: %w", err)
	}
	if reg.Mode != providers.ModeNodes {
		return errdefs.Invalid("config.provider", "not a node provider")
	}
	p.registry, p.reg = registry, reg
	return nil
}

// build is the node agent's Builder: generation g's adapter through the
// registration table, with g's own state directory, for the enrolled
// installation.
func (p *process) build(ctx context.Context, g nodewire.Generation, dir string) (providers.Built, error) {
	return p.registry.Build(ctx, p.cfg.Provider, providers.LocalRequest{
		Deployment:    sandbox.EncodedConfiguration{Public: g.Public},
		Node:          p.cfg.Node,
		Specification: g.Specification,
		Options: providers.LocalOptions{
			GenerationStateDirectory: dir,
			InstallationID:           p.id.InstallationID,
			Generation:               g.Number,
		},
	})
}

// setupServer builds the node protocol's server (calls admitted through
// the owner-epoch fence and routed to the served generations) and binds
// cfg.Listen. Its stop ends the Connect streams, lets calls in flight
// finish for up to gracefulStopTimeout, stops hard, then closes every
// generation's adapter.
func (p *process) setupServer(context.Context) error {
	p.meter = p.newMeter()
	gens := NewGenerations(p.cfg.Provider, filepath.Join(p.cfg.StateDir, "generations"), p.build,
		func(b providers.Built) { p.meter.SetDataRoot(b.DataRoot) }, p.log)
	server, err := NewServer(gens, NewFence(p.state, p.log), Description{
		NodeID:       p.id.NodeID,
		ProviderKind: p.cfg.Provider,
		Operations:   p.reg.Operations,
	}, p.meter.Measure, p.cfg.Interval())
	if err != nil {
		return fmt.Errorf("adapter declaration: %w", err)
	}
	if faultStallHealth() {
		server.stallHealth = true
		p.log.Warn("fault injection on: each Connect stream sends one health report and then none", "env", FaultStallHealthEnv)
	}
	p.server, p.gens = server, gens
	lis, err := net.Listen("tcp", p.cfg.Listen)
	if err != nil {
		gens.Close()
		return fmt.Errorf("listen: %w", err)
	}
	p.lis = lis
	p.gs = NewGRPCServer(p.server, p.tls)
	p.onStop(func() {
		p.server.Shutdown()
		stopped := make(chan struct{})
		go func() { p.gs.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(gracefulStopTimeout):
			p.gs.Stop()
		}
		_ = lis.Close() // in case it was never served
		gens.Close()
	})
	return nil
}

// newMeter is the node's capacity meter: the configured reserve and
// overcommit, disk measured on the state directory until the first
// generation's adapter names the engine's data root (SetDataRoot).
func (p *process) newMeter() *CapacityMeter {
	m := NewCapacityMeter(p.cfg.Capacity.Policy(), "", p.cfg.StateDir, p.log)
	c := m.Measure()
	p.log.Info("capacity", "cpu_millis", c.CPUMillis, "memory_bytes", c.MemoryBytes, "disk_free_bytes", c.DiskFreeBytes)
	return m
}

// run serves under one errgroup until ctx ends or the server fails, then
// stops everything.
func (p *process) run(ctx context.Context, ready func(addr string)) error {
	eg, ectx := errgroup.WithContext(ctx)
	eg.Go(func() error {
		// A Serve that starts after the stop returns ErrServerStopped.
		if err := p.gs.Serve(p.lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("serve: %w", err)
		}
		return nil
	})
	var metricsAddr string
	if p.metricsSrv != nil {
		metricsAddr = p.metricsLis.Addr().String()
		eg.Go(func() error {
			if err := p.metricsSrv.Serve(p.metricsLis); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("serve metrics: %w", err)
			}
			return nil
		})
	}
	addr := p.lis.Addr().String()
	p.log.Info("serving the node protocol", "address", addr, "node", p.id.NodeID,
		"provider", p.cfg.Provider, "highest_owner_epoch", p.state.HighestEpoch(), "metrics", metricsAddr)
	if ready != nil {
		ready(addr)
	}
	eg.Go(func() error {
		<-ectx.Done()
		p.stop()
		return nil
	})
	err := eg.Wait()
	p.log.Info("stopped")
	return err
}

// NewGRPCServer returns the gRPC server of the node protocol for s, with
// the node's mutual TLS (tlsCfg, Identity.ServerTLS), the protocol's
// message bounds and keepalive enforcement, and s registered on it: what
// Serve listens with. It is exported so that the scale simulator
// (berth.dev/test/scale) serves many nodes from one process with exactly
// the server berth-nodeagent runs, over an in-memory adapter instead of
// one built through the registration table.
func NewGRPCServer(s *Server, tlsCfg *tls.Config) *grpc.Server {
	gs := grpc.NewServer(append(s.Options(),
		grpc.Creds(credentials.NewTLS(tlsCfg)),
		// Spans continue Core's trace (its calls carry W3C trace-context),
		// and the calls are counted by method and code.
		grpc.StatsHandler(otelsetup.ServerHandler()),
		grpc.MaxRecvMsgSize(nodewire.MaxMessageBytes), grpc.MaxSendMsgSize(nodewire.MaxMessageBytes),
		grpc.MaxHeaderListSize(nodewire.MaxHeaderListBytes),
		// Core pings every nodewire.KeepaliveTime to notice a stopped node.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: nodewire.KeepaliveMinTime, PermitWithoutStream: true}))...)
	s.Register(gs)
	return gs
}
