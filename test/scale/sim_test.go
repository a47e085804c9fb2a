package scale

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	"berth.dev/platform/nodewire"
	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/providers"

	"berth.dev/nodeagent"

	"berth.dev/test/internal/memprovider"
	"berth.dev/test/internal/stack"
)

// simKind is the provider kind the simulated nodes announce in Hello: the
// committed deployment's (Docker), so that Core binds and places on them.
// Behind it is memprovider, not the Docker adapter (doc.go).
const simKind = "docker"

// simCapacity is what every simulated node reports: a large host, so that
// the deployment's max_active, not the capacity, bounds placement.
var simCapacity = nodeagent.Capacity{CPUMillis: 1 << 30, MemoryBytes: 1 << 50, DiskFreeBytes: 1 << 52}

// simNode is one simulated node agent: its own state directory, enrolled
// identity and loopback listener, the node agent's own gRPC server
// (nodeagent.NewGRPCServer, the same server berth-nodeagent runs) over an
// in-memory adapter.
type simNode struct {
	ID       uuid.UUID
	Provider *memprovider.Provider
	state    *nodeagent.StateDir
	server   *nodeagent.Server
	gs       *grpc.Server
}

// sim is the simulator: n node agents in this process.
type sim struct {
	nodes []*simNode
	byID  map[uuid.UUID]*simNode
}

// startSim enrolls n node agents through Core's public enrollment API (a
// fresh token from the admin API each), serves each on its own loopback
// port and stops them when the test ends. The nodes are enrolled, not yet
// enabled.
func startSim(t testing.TB, c *stack.Core, ctx context.Context, cc *grpc.ClientConn, installationID string, n int, spec *adminv1.Specification) *sim {
	t.Helper()
	root, err := os.MkdirTemp("", "berth-scale")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	nodesAPI := adminv1.NewNodeServiceClient(cc)

	s := &sim{nodes: make([]*simNode, n), byID: map[uuid.UUID]*simNode{}}
	var mu sync.Mutex
	t.Cleanup(func() {
		for _, nd := range s.nodes {
			if nd != nil {
				nd.server.Shutdown()
				nd.gs.Stop()
				_ = nd.state.Close()
			}
		}
	})
	eg, ectx := errgroup.WithContext(ctx)
	eg.SetLimit(8)
	for i := range n {
		eg.Go(func() error {
			tok, err := nodesAPI.CreateEnrollmentToken(ectx, &adminv1.CreateEnrollmentTokenRequest{RequestId: uuid.NewString()})
			if err != nil {
				return fmt.Errorf("CreateEnrollmentToken: %w", err)
			}
			state, err := nodeagent.OpenStateDir(filepath.Join(root, fmt.Sprintf("n%04d", i)))
			if err != nil {
				return err
			}
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				_ = state.Close()
				return err
			}
			id, err := nodeagent.Enroll(ectx, state, c.PublicAddr(), tok.GetTokenText(), lis.Addr().String())
			if err != nil {
				_ = state.Close()
				lis.Close()
				return fmt.Errorf("enroll: %w", err)
			}
			tlsCfg, _, err := id.ServerTLS()
			if err != nil {
				_ = state.Close()
				lis.Close()
				return err
			}
			// Every generation Core publishes is served by the node's one
			// in-memory adapter.
			prov := memprovider.New()
			build := func(_ context.Context, g nodewire.Generation, _ string) (providers.Built, error) {
				return providers.Built{
					Provider: prov, Probe: func(context.Context) error { return nil },
					BackendFingerprint:  "memory:" + id.NodeID,
					SpecificationDigest: g.DeploymentDigest,
				}, nil
			}
			gens := nodeagent.NewGenerations(simKind, filepath.Join(state.Path(), "generations"), build, nil, nil)
			server, err := nodeagent.NewServer(gens, nodeagent.NewFence(state, nil), nodeagent.Description{
				NodeID: id.NodeID, ProviderKind: simKind, Operations: prov.ProviderOperations(),
			}, func() nodeagent.Capacity { return simCapacity }, nodeagent.DefaultHealthInterval)
			if err != nil {
				_ = state.Close()
				lis.Close()
				return err
			}
			gs := nodeagent.NewGRPCServer(server, tlsCfg)
			go func() { _ = gs.Serve(lis) }()
			nd := &simNode{ID: uuid.MustParse(id.NodeID), Provider: prov, state: state, server: server, gs: gs}
			mu.Lock()
			s.nodes[i] = nd
			s.byID[nd.ID] = nd
			mu.Unlock()
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		t.Fatalf("start simulated nodes: %v", err)
	}
	return s
}

// enableAll enables every simulated node through the admin API and waits,
// reading Core's database, until Core recorded each connected and ready.
func (s *sim) enableAll(t testing.TB, ctx context.Context, cc *grpc.ClientConn, c *stack.Core) {
	t.Helper()
	api := adminv1.NewNodeServiceClient(cc)
	eg, ectx := errgroup.WithContext(ctx)
	eg.SetLimit(8)
	for _, nd := range s.nodes {
		eg.Go(func() error {
			_, err := api.EnableNode(ectx, &adminv1.EnableNodeRequest{Name: "nodes/" + nd.ID.String()})
			return err
		})
	}
	if err := eg.Wait(); err != nil {
		t.Fatalf("EnableNode: %v", err)
	}
	pool := openPool(t, c.DSN)
	deadline := time.Now().Add(2*time.Minute + time.Duration(len(s.nodes))*100*time.Millisecond)
	for {
		var ready int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM node_presence WHERE connected AND ready`).Scan(&ready); err != nil {
			t.Fatal(err)
		}
		if ready == len(s.nodes) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d nodes connected and ready", ready, len(s.nodes))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// creates is how many Creates the simulated nodes' adapters performed.
func (s *sim) creates() int {
	total := 0
	for _, nd := range s.nodes {
		total += nd.Provider.Creates()
	}
	return total
}
