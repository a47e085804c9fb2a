package chaos

import (
	"io"
	"net"
	"sync"
	"testing"
)

// tcpProxy forwards TCP connections from its own loopback address to a
// target; the test cuts every live connection and refuses new ones (Cut),
// then lets them through again (Restore).
type tcpProxy struct {
	lis    net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]struct{}
}

// newProxy listens on addr (a free loopback address) and forwards to
// target until the test ends.
func newProxy(t testing.TB, addr, target string) *tcpProxy {
	t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{lis: lis, target: target, conns: map[net.Conn]struct{}{}}
	go p.serve()
	t.Cleanup(func() { _ = lis.Close(); p.Cut() })
	return p
}

// Addr is the proxy's listening address.
func (p *tcpProxy) Addr() string { return p.lis.Addr().String() }

func (p *tcpProxy) serve() {
	for {
		in, err := p.lis.Accept()
		if err != nil {
			return
		}
		go p.forward(in)
	}
}

func (p *tcpProxy) forward(in net.Conn) {
	p.mu.Lock()
	cut := p.cut
	p.mu.Unlock()
	if cut {
		_ = in.Close()
		return
	}
	out, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = in.Close()
		return
	}
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		_ = in.Close()
		_ = out.Close()
		return
	}
	p.conns[in], p.conns[out] = struct{}{}, struct{}{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		_ = dst.Close()
		_ = src.Close()
	}
	go pipe(out, in)
	go pipe(in, out)
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, in)
	delete(p.conns, out)
	p.mu.Unlock()
}

// Cut closes every live connection and refuses new ones until Restore.
func (p *tcpProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
}

// Restore lets new connections through again.
func (p *tcpProxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}
