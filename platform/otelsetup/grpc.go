package otelsetup

import (
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc/stats"
)

// The gRPC stats handlers of Berth's servers and clients (otelgrpc): a
// span per call, linked across processes by W3C trace-context in the
// call's metadata, and the rpc.server.call.duration and
// rpc.client.call.duration histograms by method and status code. They
// record into the global providers, so they cost next to nothing until
// Traces or StartMetrics installs one. No message body, header value or
// peer credential is recorded.

// ServerHandler is the stats handler of a server whose callers are
// authenticated and may continue their own trace: the node agent's
// server (Core, over mutual TLS) and Core's loopback admin API.
func ServerHandler() stats.Handler { return otelgrpc.NewServerHandler() }

// PublicServerHandler is the stats handler of a server whose callers may
// not choose the trace their calls join (the Runtime gateway, which code
// inside a sandbox can reach): each call starts a trace of its own, linked
// to the caller's context, so a caller can neither attach Core's spans to
// its trace nor force their sampling.
func PublicServerHandler() stats.Handler {
	return otelgrpc.NewServerHandler(otelgrpc.WithPublicEndpoint())
}

// ClientHandler is the stats handler of a client (Core's node-protocol
// connections): its call spans are the parents of the server's spans.
func ClientHandler() stats.Handler { return otelgrpc.NewClientHandler() }
