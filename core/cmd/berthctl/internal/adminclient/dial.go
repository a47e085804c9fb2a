package adminclient

import (
	"context"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// MaxMessageBytes is the largest message berthctl sends or receives: the
// admin server's bound on a request (core/admin MaxRecvMsgBytes), which a
// Turn's stdin must fit in.
const MaxMessageBytes = 4 << 20

// CheckAddress refuses an admin address off loopback: Core serves the
// admin API in plaintext on loopback only, and the token must not cross a
// network unencrypted.
func CheckAddress(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return Errorf("address_invalid", "admin API address %q is not HOST:PORT", addr)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return Errorf("address_not_loopback", "the admin API is plaintext and listens on loopback only: reach a remote Core through a tunnel to a local port (ssh -L 7700:127.0.0.1:7700 HOST)")
	}
	return nil
}

// Dial returns a connection to the admin API at addr (which must be
// loopback) that sends token as "authorization: Bearer <token>" with every
// call. It does not connect before the first call.
func Dial(addr string, token Token) (*grpc.ClientConn, error) {
	if err := CheckAddress(addr); err != nil {
		return nil, err
	}
	return grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(bearer{token}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes)),
		grpc.WithUserAgent("berthctl"))
}

// bearer sends the admin token with each call.
type bearer struct{ token Token }

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token.secret}, nil
}

// RequireTransportSecurity is false: the connection is plaintext, which
// Dial allows only to a loopback address.
func (bearer) RequireTransportSecurity() bool { return false }
