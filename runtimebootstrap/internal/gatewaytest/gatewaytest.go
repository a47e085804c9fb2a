package gatewaytest

import (
	"crypto/tls"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/durationpb"

	runtimev1 "berth.dev/proto/berth/runtime/v1"
)

// Wait bounds every wait of the helpers below.
const Wait = 30 * time.Second

// Serve serves gateway as the RuntimeGatewayService on a loopback port,
// without TLS, until the test ends, and returns the port's host:port.
func Serve(t testing.TB, gateway runtimev1.RuntimeGatewayServiceServer) string {
	t.Helper()
	return serve(t, gateway, nil)
}

func serve(t testing.TB, gateway runtimev1.RuntimeGatewayServiceServer, dials *atomic.Int64, opts ...grpc.ServerOption) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if dials != nil {
		lis = &countingListener{Listener: lis, n: dials}
	}
	srv := grpc.NewServer(opts...)
	runtimev1.RegisterRuntimeGatewayServiceServer(srv, gateway)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// countingListener counts the TCP connections it accepts.
type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// Stream is Core's side of one Connect stream.
type Stream = grpc.BidiStreamingServer[runtimev1.ConnectRequest, runtimev1.ConnectResponse]

// Core is a scriptable RuntimeGatewayService: each Connect becomes a Conn
// the test takes with Accept.
type Core struct {
	runtimev1.UnimplementedRuntimeGatewayServiceServer
	conns     chan *Conn
	transfers chan *Transfer
	dials     atomic.Int64
	onReceive atomic.Pointer[func(*runtimev1.ConnectRequest)]
}

// Start serves a new Core on loopback until the test ends and returns it
// with its URL (http://host:port).
func Start(t testing.TB) (*Core, string) {
	t.Helper()
	core := &Core{conns: make(chan *Conn, 16), transfers: make(chan *Transfer, 16)}
	return core, "http://" + serve(t, core, &core.dials)
}

// StartTLS is Start over TLS with cert: its URL is https://127.0.0.1:port.
func StartTLS(t testing.TB, cert tls.Certificate) (*Core, string) {
	t.Helper()
	core := &Core{conns: make(chan *Conn, 16), transfers: make(chan *Transfer, 16)}
	creds := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	return core, "https://" + serve(t, core, &core.dials, grpc.Creds(creds))
}

// Dials is the number of TCP connections the Core accepted.
func (c *Core) Dials() int64 { return c.dials.Load() }

// OnReceive makes every connection's reader call f with each message as it
// arrives, before the test can take it with Next: f sees the state of the
// world at the moment the Runtime's message reached Core.
func (c *Core) OnReceive(f func(*runtimev1.ConnectRequest)) { c.onReceive.Store(&f) }

// Connect implements RuntimeGatewayService.
func (c *Core) Connect(stream Stream) error {
	conn := &Conn{Stream: stream, recv: make(chan *runtimev1.ConnectRequest, 4096), end: make(chan error, 1)}
	go func() {
		defer close(conn.recv)
		for {
			m, err := stream.Recv()
			if err != nil {
				return
			}
			if f := c.onReceive.Load(); f != nil {
				(*f)(m)
			}
			conn.recv <- m
		}
	}()
	c.conns <- conn
	select {
	case err := <-conn.end:
		return err
	case <-stream.Context().Done():
		return stream.Context().Err()
	}
}

// Accept returns the next connection, failing the test after Wait.
func (c *Core) Accept(t testing.TB) *Conn {
	t.Helper()
	conn, ok := c.TryAccept(t, Wait)
	if !ok {
		t.Fatal("no connection")
	}
	return conn
}

// TryAccept returns the next connection within d, if one comes; the
// connection's helpers fail t.
func (c *Core) TryAccept(t testing.TB, d time.Duration) (*Conn, bool) {
	select {
	case conn := <-c.conns:
		conn.t = t
		return conn, true
	case <-time.After(d):
		return nil, false
	}
}

// Conn is one Connect stream seen from Core's side.
type Conn struct {
	t      testing.TB
	Stream Stream
	recv   chan *runtimev1.ConnectRequest // closed when the Runtime's side ends
	end    chan error                     // the handler returns what is sent here
}

// Next returns the Runtime's next message, failing the test when the
// stream ends or nothing comes within Wait.
func (c *Conn) Next() *runtimev1.ConnectRequest {
	c.t.Helper()
	select {
	case m, ok := <-c.recv:
		if !ok {
			c.t.Fatal("the runtime ended the stream")
		}
		return m
	case <-time.After(Wait):
		c.t.Fatal("no message from the runtime")
		return nil
	}
}

// Ended waits until the Runtime ends the stream and returns the messages
// it sent before; it fails the test when the stream is still open after
// Wait.
func (c *Conn) Ended() []*runtimev1.ConnectRequest {
	c.t.Helper()
	var before []*runtimev1.ConnectRequest
	deadline := time.After(Wait)
	for {
		select {
		case m, ok := <-c.recv:
			if !ok {
				return before
			}
			before = append(before, m)
		case <-deadline:
			c.t.Fatal("the runtime did not end the stream")
			return nil
		}
	}
}

// Send sends m to the Runtime.
func (c *Conn) Send(m *runtimev1.ConnectResponse) {
	c.t.Helper()
	if err := c.Stream.Send(m); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

// End ends the stream with err (nil: a clean end).
func (c *Conn) End(err error) { c.end <- err }

// Welcome takes the hello, sends welcome and, with prepared, takes the
// Prepared message that follows.
func (c *Conn) Welcome(prepared bool) *runtimev1.Hello {
	c.t.Helper()
	hello := c.Next().GetHello()
	if hello == nil {
		c.t.Fatal("first message is not hello")
	}
	c.Send(&runtimev1.ConnectResponse{Message: &runtimev1.ConnectResponse_Welcome{Welcome: &runtimev1.Welcome{
		ConnectionId: "conn-1", ConnectionGeneration: 1, KeepaliveInterval: durationpb.New(time.Second),
	}}})
	if prepared {
		if c.Next().GetPrepared() == nil {
			c.t.Fatal("message after welcome is not prepared")
		}
	}
	return hello
}

// Keepalive sends a keepalive and fails the test unless the next message
// is its ack.
func (c *Conn) Keepalive(seq int64) {
	c.t.Helper()
	c.Send(&runtimev1.ConnectResponse{Message: &runtimev1.ConnectResponse_Keepalive{Keepalive: &runtimev1.Keepalive{Sequence: seq}}})
	if got := c.Next(); got.GetKeepaliveAck() == nil || got.GetKeepaliveAck().GetSequence() != seq {
		c.t.Fatalf("keepalive %d answered with %v", seq, got)
	}
}

// Quiesce sends a quiesce with token.
func (c *Conn) Quiesce(token string) {
	c.t.Helper()
	c.Send(&runtimev1.ConnectResponse{Message: &runtimev1.ConnectResponse_Quiesce{Quiesce: &runtimev1.Quiesce{SuspensionToken: token}}})
}

// QuiesceReply returns the next message, which must answer a quiesce:
// exactly one of ack and rejected is set.
func (c *Conn) QuiesceReply() (ack *runtimev1.QuiesceAck, rejected *runtimev1.QuiesceRejected) {
	c.t.Helper()
	m := c.Next()
	ack, rejected = m.GetQuiesceAck(), m.GetQuiesceRejected()
	if ack == nil && rejected == nil {
		c.t.Fatalf("got %v, want a quiesce answer", m)
	}
	return ack, rejected
}

// OpenTransfer sends an open_transfer.
func (c *Conn) OpenTransfer(ot *runtimev1.OpenTransfer) {
	c.t.Helper()
	c.Send(&runtimev1.ConnectResponse{Message: &runtimev1.ConnectResponse_OpenTransfer{OpenTransfer: ot}})
}

// TransferStream is Core's side of one Transfer stream.
type TransferStream = grpc.BidiStreamingServer[runtimev1.TransferRequest, runtimev1.TransferResponse]

// Transfer is one Transfer stream seen from Core's side; the test reads
// the Runtime's messages with Next and Ended and ends it with End.
type Transfer struct {
	t      testing.TB
	Stream TransferStream
	recv   chan *runtimev1.TransferRequest // closed when the Runtime's side ends
	end    chan error
}

// Transfer implements RuntimeGatewayService: each stream becomes a
// Transfer the test takes with AcceptTransfer.
func (c *Core) Transfer(stream TransferStream) error {
	tr := &Transfer{Stream: stream, recv: make(chan *runtimev1.TransferRequest, 4096), end: make(chan error, 1)}
	go func() {
		defer close(tr.recv)
		for {
			m, err := stream.Recv()
			if err != nil {
				return
			}
			tr.recv <- m
		}
	}()
	c.transfers <- tr
	select {
	case err := <-tr.end:
		return err
	case <-stream.Context().Done():
		return stream.Context().Err()
	}
}

// AcceptTransfer returns the next Transfer stream, failing the test after
// Wait.
func (c *Core) AcceptTransfer(t testing.TB) *Transfer {
	t.Helper()
	tr, ok := c.TryAcceptTransfer(t, Wait)
	if !ok {
		t.Fatal("no transfer stream")
	}
	return tr
}

// TryAcceptTransfer returns the next Transfer stream within d, if one
// comes.
func (c *Core) TryAcceptTransfer(t testing.TB, d time.Duration) (*Transfer, bool) {
	select {
	case tr := <-c.transfers:
		tr.t = t
		return tr, true
	case <-time.After(d):
		return nil, false
	}
}

// Next returns the Runtime's next message on the stream, failing the test
// when the stream ends or nothing comes within Wait.
func (tr *Transfer) Next() *runtimev1.TransferRequest {
	tr.t.Helper()
	select {
	case m, ok := <-tr.recv:
		if !ok {
			tr.t.Fatal("the runtime ended the transfer stream")
		}
		return m
	case <-time.After(Wait):
		tr.t.Fatal("no message from the runtime on the transfer stream")
		return nil
	}
}

// Ended waits until the Runtime ends its side of the stream and returns
// the messages it sent before; it fails the test after Wait.
func (tr *Transfer) Ended() []*runtimev1.TransferRequest {
	tr.t.Helper()
	var before []*runtimev1.TransferRequest
	deadline := time.After(Wait)
	for {
		select {
		case m, ok := <-tr.recv:
			if !ok {
				return before
			}
			before = append(before, m)
		case <-deadline:
			tr.t.Fatal("the runtime did not end the transfer stream")
			return nil
		}
	}
}

// Send sends m to the Runtime.
func (tr *Transfer) Send(m *runtimev1.TransferResponse) {
	tr.t.Helper()
	if err := tr.Stream.Send(m); err != nil {
		tr.t.Fatalf("transfer send: %v", err)
	}
}

// Accept takes the hello, sends accepted and returns the hello.
func (tr *Transfer) Accept() *runtimev1.TransferHello {
	tr.t.Helper()
	hello := tr.Next().GetHello()
	if hello == nil {
		tr.t.Fatal("first transfer message is not hello")
	}
	tr.Send(&runtimev1.TransferResponse{Message: &runtimev1.TransferResponse_Accepted{Accepted: &runtimev1.TransferAccepted{}}})
	return hello
}

// End ends the stream with err (nil: a clean end).
func (tr *Transfer) End(err error) { tr.end <- err }
