// Package gatewaytest serves a test's fake of Core's Runtime gateway on
// loopback, so that the client's and the daemon's tests start it the same
// way.
package gatewaytest

import (
	"net"
	"testing"

	"google.golang.org/grpc"

	runtimev1 "berth.dev/proto/berth/runtime/v1"
)

// Serve serves gateway as the RuntimeGatewayService on a loopback port,
// without TLS, until the test ends, and returns the port's host:port.
func Serve(t testing.TB, gateway runtimev1.RuntimeGatewayServiceServer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	runtimev1.RegisterRuntimeGatewayServiceServer(srv, gateway)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}
