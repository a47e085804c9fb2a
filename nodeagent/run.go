package nodeagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"berth.dev/sandbox"
	"berth.dev/sandbox/providers"
)

// MaxMessageBytes bounds one protocol message: a command result carries up
// to two streams of sandbox.MaxOutputLimit bytes, a request up to
// sandbox.MaxCommandStdin of stdin.
const MaxMessageBytes = 2*sandbox.MaxOutputLimit + 8<<20

// Serve runs the node agent with cfg until ctx ends: it opens the state
// directory, loads the enrolled identity, builds the adapter through the
// registration table for the configured generation, and serves the node
// protocol over mutual TLS on cfg.Listen. ready, when not nil, receives the
// bound address once the server accepts connections.
func Serve(ctx context.Context, cfg Config, log *slog.Logger, ready func(addr string)) error {
	state, err := OpenStateDir(cfg.StateDir)
	if err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	defer state.Close()
	id, err := state.LoadIdentity()
	if err != nil {
		return fmt.Errorf("identity: %w", err)
	}
	if id.InstallationID != cfg.Generation.InstallationID {
		return errors.New("identity: enrolled for another installation than the configured generation")
	}
	tlsCfg, _, err := id.ServerTLS()
	if err != nil {
		return fmt.Errorf("identity: %w", err)
	}

	registry, err := providers.Default()
	if err != nil {
		return fmt.Errorf("registration table: %w", err)
	}
	genDir := filepath.Join(cfg.StateDir, "generations", strconv.FormatUint(cfg.Generation.Number, 10))
	if err := os.MkdirAll(genDir, 0o700); err != nil {
		return fmt.Errorf("generation state directory: %w", err)
	}
	deployment := cfg.Generation.Deployment
	if len(deployment) == 0 {
		deployment = json.RawMessage(`{}`)
	}
	buildCtx, cancel := context.WithTimeout(ctx, time.Minute)
	built, err := registry.Build(buildCtx, cfg.Provider, providers.LocalRequest{
		Deployment:    sandbox.EncodedConfiguration{Public: deployment},
		Node:          cfg.Node,
		Specification: cfg.Generation.Specification.Specification(),
		Options: providers.LocalOptions{
			GenerationStateDirectory: genDir,
			InstallationID:           cfg.Generation.InstallationID,
			Generation:               cfg.Generation.Number,
		},
	})
	cancel()
	if err != nil {
		return fmt.Errorf("build %s adapter: %w", cfg.Provider, err)
	}
	defer built.Close()

	agent, err := NewAgent(built.Provider)
	if err != nil {
		return fmt.Errorf("adapter declaration: %w", err)
	}
	fence := NewFence(state, cfg.Generation.Number)
	srv := NewServer(agent, fence, Description{
		NodeID:              id.NodeID,
		ProviderKind:        cfg.Provider,
		Generation:          cfg.Generation.Number,
		BackendFingerprint:  built.BackendFingerprint,
		SpecificationDigest: built.SpecificationDigest,
	}, built.Probe, cfg.StateDir, cfg.Interval())

	if err := built.Probe(ctx); err != nil {
		log.Warn("adapter not ready", "diagnostic", sandbox.ProbeCode(err), "generation", cfg.Generation.Number)
	}

	lis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	gs := grpc.NewServer(append(srv.Options(),
		grpc.Creds(credentials.NewTLS(tlsCfg)),
		grpc.MaxRecvMsgSize(MaxMessageBytes), grpc.MaxSendMsgSize(MaxMessageBytes))...)
	srv.Register(gs)
	errc := make(chan error, 1)
	go func() { errc <- gs.Serve(lis) }()
	log.Info("serving the node protocol", "address", lis.Addr().String(), "node", id.NodeID,
		"provider", cfg.Provider, "generation", cfg.Generation.Number, "highest_owner_epoch", state.HighestEpoch())
	if ready != nil {
		ready(lis.Addr().String())
	}
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	srv.Shutdown()
	stopped := make(chan struct{})
	go func() { gs.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		gs.Stop()
	}
	log.Info("stopped")
	return nil
}
