package admin

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/stats"

	"berth.dev/platform/errgrpc"
)

// DefaultUnaryTimeout bounds a unary call that arrives without a deadline.
const DefaultUnaryTimeout = 30 * time.Second

// adminPrefix is the method prefix of the berth.admin.v1 services, whose
// errors ToStatus converts.
const adminPrefix = "/berth.admin.v1."

// Service is one adapter of berth.admin.v1 (the template of
// core/README.md): Register registers its service, or services, on the
// admin server.
type Service interface {
	Register(s *grpc.Server)
}

// Options configure the admin server.
type Options struct {
	// TokenDigest is the SHA-256 of the admin token (TokenDigest). With
	// anything but a 32-byte digest every admin token is refused.
	TokenDigest []byte
	// Keys authenticates project keys (core/projects' KeyIndex); nil
	// refuses every project key.
	Keys KeyAuthenticator
	// Creds secures the transport. nil serves plaintext, which is fit only
	// for a loopback or Unix-socket listener: the bearer token crosses in
	// every call.
	Creds credentials.TransportCredentials
	// DefaultTimeout replaces DefaultUnaryTimeout when positive. A client
	// deadline is always honoured; streams get no default (a Turn's output
	// stream lasts as long as the Turn).
	DefaultTimeout time.Duration
	// Stats, when set, is the server's stats handler: berth-core's is
	// otelsetup.ServerHandler (a span per call, the rpc.server.* metrics;
	// no header, token or body is recorded). A call refused by the token
	// check never reaches it.
	Stats stats.Handler

	// Audit records every mutating berth.admin.v1 call and every project
	// key's call the tap refuses (core/audit's Writer); nil records
	// nothing. Every authenticated call gets a request id either way.
	Audit Auditor

	// Services are the berth.admin.v1 services served, each the thin
	// adapter of its resource (core/<resource>admin's *Server, which
	// registers itself). Nothing else of berth.admin.v1 is served.
	Services []Service
}

// NewServer returns the admin gRPC server: bearer-token authentication
// as soon as a call's headers arrive, before its body is read (the health
// service and reflection exempt), header blocks bounded by
// MaxHeaderListBytes and messages by MaxRecvMsgBytes, a malformed body
// refused as INVALID_ARGUMENT (decoder), then the deadline policy, then
// the error mapping of the berth.admin.v1 services, then the request id and
// the audit of mutating calls (opts.Audit); the standard health
// service (SERVING overall and for each registered service), server
// reflection and opts.Services. A method it does not serve is
// UNIMPLEMENTED, and only after authentication.
func NewServer(opts Options) *grpc.Server {
	auth := newAuthenticator(opts.TokenDigest, opts.Keys)
	audit := auditing{rec: opts.Audit}
	auth.audit = audit
	dec := newDecoder()
	timeout := opts.DefaultTimeout
	if timeout <= 0 {
		timeout = DefaultUnaryTimeout
	}
	sopts := []grpc.ServerOption{
		grpc.InTapHandle(auth.tap),
		grpc.MaxHeaderListSize(MaxHeaderListBytes),
		grpc.MaxRecvMsgSize(MaxRecvMsgBytes),
		grpc.ForceServerCodecV2(dec),
		grpc.ChainUnaryInterceptor(dec.UnaryServerInterceptor, deadlinePolicy(timeout), auth.unaryVerify, errgrpc.UnaryServerInterceptor(ToStatus, isAdminMethod), audit.unary),
		grpc.ChainStreamInterceptor(dec.StreamServerInterceptor, auth.streamVerify, errgrpc.StreamServerInterceptor(ToStatus, isAdminMethod), audit.stream),
		grpc.UnknownServiceHandler(func(any, grpc.ServerStream) error { return unimplemented() }),
	}
	if opts.Creds != nil {
		sopts = append(sopts, grpc.Creds(opts.Creds))
	}
	if opts.Stats != nil {
		sopts = append(sopts, grpc.StatsHandler(opts.Stats))
	}
	s := grpc.NewServer(sopts...)

	for _, svc := range opts.Services {
		svc.Register(s)
	}
	// Every service registered so far is an adapter's: health and
	// reflection come after.
	hs := health.NewServer()
	names := slices.Sorted(maps.Keys(s.GetServiceInfo()))
	for _, n := range names {
		hs.SetServingStatus(n, healthpb.HealthCheckResponse_SERVING)
	}
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(s, hs)
	reflection.Register(s)
	return s
}

// deadlinePolicy gives a unary call without a deadline the default one.
func deadlinePolicy(d time.Duration) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, d)
			defer cancel()
		}
		return handler(ctx, req)
	}
}

// isAdminMethod reports whether fullMethod is a berth.admin.v1 method,
// whose errors ToStatus converts (health and reflection keep theirs).
func isAdminMethod(fullMethod string) bool { return strings.HasPrefix(fullMethod, adminPrefix) }
