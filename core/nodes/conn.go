package nodes

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"

	"berth.dev/platform/nodewire"
	"berth.dev/platform/otelsetup"
	pb "berth.dev/proto/berth/sandboxnode/v1"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providercontract"
)

// Dial returns a client connection to the node agent at addr that
// authenticates with Core's client certificate and verifies the node's
// (tlsCfg from nodetls.ClientConfig). No I/O happens until the first call.
// Each call is a client span (otelsetup.ClientHandler) whose W3C
// trace-context travels in the call's metadata, so the node agent's
// server span, and the adapter's work under it, join the caller's trace
// (a lifecycle operation's).
func Dial(addr string, tlsCfg *tls.Config) (*grpc.ClientConn, error) {
	cc, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(credentials.NewTLS(tlsCfg)),
		grpc.WithStatsHandler(otelsetup.ClientHandler()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(nodewire.MaxMessageBytes), grpc.MaxCallSendMsgSize(nodewire.MaxMessageBytes)),
		// No read buffer of grpc's own: the TLS connection below already
		// reads whole records into its buffer, and grpc's 32 KiB one per
		// connection is 32 MiB of Core's memory at 1,000 nodes (issue 32).
		grpc.WithReadBufferSize(0),
		// A stopped or cut-off node is noticed by its silence, not at the
		// end of the presence window (nodewire.KeepaliveTime).
		grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time: nodewire.KeepaliveTime, Timeout: nodewire.KeepaliveTimeout, PermitWithoutStream: true,
		}))
	if err != nil {
		return nil, errdefs.Invalid("node.address", "cannot dial")
	}
	return cc, nil
}

// Hello performs the version handshake and returns the node's description
// and validated declaration.
func Hello(ctx context.Context, client pb.NodeServiceClient) (*pb.HelloResponse, providercontract.Operations, error) {
	ctx = metadata.NewOutgoingContext(ctx, metadata.Pairs(pb.MetadataProtocolVersion, pb.ProtocolVersion))
	resp, err := client.Hello(ctx, &pb.HelloRequest{ProtocolVersion: pb.ProtocolVersion})
	if err != nil {
		return nil, nil, nodewire.FromError("Hello", err)
	}
	if resp.GetProtocolVersion() != pb.ProtocolVersion {
		return nil, nil, fmt.Errorf("hello: %w", errdefs.ErrProtocolMismatch)
	}
	ops, err := nodewire.OperationsFromWire(resp.GetOperations())
	if err != nil {
		return nil, nil, fmt.Errorf("hello: node declaration: %w", err)
	}
	return resp, ops, nil
}

// Connection is an open Connect stream: Core's current connection to a
// node, with the health reports it carries.
type Connection struct {
	Session

	cancel context.CancelFunc
	done   chan struct{}
	// closer, when set, is closed when the stream ends (OpenClosing).
	closer io.Closer

	mu     sync.Mutex
	last   *pb.ConnectResponse
	lastAt time.Time
	err    error
}

// Open opens a new connection (a fresh connection id) under ownerEpoch
// and waits for the node's first health report, bounded by ctx. The
// stream lives until Close or until it fails; a later Open supersedes it
// on the node. The connection serves no generation until
// ServeGenerations.
func Open(ctx context.Context, client pb.NodeServiceClient, ownerEpoch uint64) (*Connection, error) {
	return OpenClosing(ctx, client, ownerEpoch, nil)
}

// OpenClosing is Open on a client whose transport (closer, the node's
// ClientConn) the connection owns: it is closed when the stream ends, or
// when the open fails, by the stream's own goroutine, so a node's
// connection costs no goroutine waiting to close it.
func OpenClosing(ctx context.Context, client pb.NodeServiceClient, ownerEpoch uint64, closer io.Closer) (*Connection, error) {
	c := &Connection{
		Session: Session{Client: client, ConnectionID: uuid.NewString(), OwnerEpoch: ownerEpoch},
		done:    make(chan struct{}),
		closer:  closer,
	}
	streamCtx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	stream, err := client.Connect(c.outgoing(streamCtx, 0), &pb.ConnectRequest{})
	if err != nil {
		cancel()
		if closer != nil {
			_ = closer.Close()
		}
		return nil, nodewire.FromError("Connect", err)
	}
	first := make(chan error, 1)
	go c.pump(stream, first)
	select {
	case err := <-first:
		if err != nil {
			cancel()
			return nil, err
		}
		return c, nil
	case <-ctx.Done():
		cancel()
		return nil, fmt.Errorf("connect: no health report: %w", errdefs.ErrObservationUnavailable)
	}
}

func (c *Connection) pump(stream grpc.ServerStreamingClient[pb.ConnectResponse], first chan<- error) {
	defer close(c.done)
	defer func() {
		if c.closer != nil {
			_ = c.closer.Close()
		}
	}()
	sent := false
	for {
		report, err := stream.Recv()
		c.mu.Lock()
		if err != nil {
			c.err = nodewire.FromError("Connect", err)
			if errors.Is(err, context.Canceled) {
				c.err = errdefs.ErrFenced
			}
			c.mu.Unlock()
			if !sent {
				first <- c.err
			}
			return
		}
		c.last, c.lastAt = report, time.Now()
		c.mu.Unlock()
		if !sent {
			first <- nil
			sent = true
		}
	}
}

// Last returns the latest health report and when it arrived.
func (c *Connection) Last() (*pb.ConnectResponse, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last, c.lastAt
}

// Err returns why the stream ended, or nil while it is open.
func (c *Connection) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Done is closed when the stream has ended.
func (c *Connection) Done() <-chan struct{} { return c.done }

// Close ends the stream.
func (c *Connection) Close() {
	c.cancel()
	<-c.done
}

// ServeGenerations publishes the exact set of generations the node must
// serve on s and returns the node's status of each one it serves after
// the call. It changes no compute, so a failure is only a failed call:
// publishing again is safe.
func (s *Session) ServeGenerations(ctx context.Context, gens []nodewire.Generation) ([]*pb.GenerationStatus, error) {
	req := &pb.ServeGenerationsRequest{}
	for _, g := range gens {
		m, err := nodewire.GenerationToWire(g)
		if err != nil {
			return nil, err
		}
		req.Generations = append(req.Generations, m)
	}
	resp, err := s.Client.ServeGenerations(s.outgoing(ctx, 0), req)
	if err != nil {
		return nil, nodewire.FromError("ServeGenerations", err)
	}
	return resp.GetGenerations(), nil
}
