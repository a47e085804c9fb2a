package nodetls

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// serveGRPC runs a real gRPC server (the standard health service) with the
// node agent's credentials on loopback and returns its address.
func serveGRPC(t *testing.T, p pair) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(p.server)))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

func check(t *testing.T, addr string, creds credentials.TransportCredentials) error {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err == nil && resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("status %v", resp.GetStatus())
	}
	return err
}

func TestGRPC(t *testing.T) {
	p := newPair(t)
	addr := serveGRPC(t, p)

	// Core dials the node by its advertised address; the address is not the
	// identity, so "localhost" and the IP literal both work.
	if err := check(t, addr, credentials.NewTLS(p.client)); err != nil {
		t.Fatalf("mutual TLS: %v", err)
	}
	if err := check(t, strings.Replace(addr, "127.0.0.1", "localhost", 1), credentials.NewTLS(p.client)); err != nil {
		t.Fatalf("mutual TLS via localhost: %v", err)
	}

	// Core expecting another node at this address.
	wrongNode, err := ClientConfig(p.coreCert, p.ca.Certificate(), newID(t))
	if err != nil {
		t.Fatal(err)
	}
	err = check(t, addr, credentials.NewTLS(wrongNode))
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "expected node") {
		t.Fatalf("wrong node: %v", err)
	}

	// A client of another installation's Core.
	other := newPair(t)
	otherCore, err := ClientConfig(other.coreCert, other.ca.Certificate(), p.nodeID)
	if err != nil {
		t.Fatal(err)
	}
	if err := check(t, addr, credentials.NewTLS(otherCore)); status.Code(err) != codes.Unavailable {
		t.Fatalf("other installation: %v", err)
	}
	// A client that accepts the node but presents a node certificate.
	if err := check(t, addr, credentials.NewTLS(rogueClient(&other.nodeCert))); status.Code(err) != codes.Unavailable {
		t.Fatalf("node certificate as client: %v", err)
	}
	// Plaintext.
	if err := check(t, addr, insecure.NewCredentials()); status.Code(err) != codes.Unavailable {
		t.Fatalf("plaintext: %v", err)
	}
}
