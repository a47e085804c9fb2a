package faultnet

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy forwards TCP connections from its own loopback address to a
// target.
type Proxy struct {
	lis      net.Listener
	target   string
	accepted atomic.Int64

	mu    sync.Mutex
	cut   bool
	hole  bool
	conns map[net.Conn]struct{}
}

// New listens on addr (a free loopback address) and forwards to target
// until the test ends.
func New(t testing.TB, addr, target string) *Proxy {
	t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{lis: lis, target: target, conns: map[net.Conn]struct{}{}}
	go p.serve()
	t.Cleanup(func() { _ = lis.Close(); p.Cut() })
	return p
}

// Addr is the proxy's listening address.
func (p *Proxy) Addr() string { return p.lis.Addr().String() }

// Accepted is how many connections the proxy has accepted: how often the
// peer dialled, observed on the path rather than reported by the dialler.
func (p *Proxy) Accepted() int64 { return p.accepted.Load() }

func (p *Proxy) serve() {
	for {
		in, err := p.lis.Accept()
		if err != nil {
			return
		}
		p.accepted.Add(1)
		go p.forward(in)
	}
}

// track records c as live unless the path is cut; false means c was closed.
func (p *Proxy) track(c ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		for _, x := range c {
			_ = x.Close()
		}
		return false
	}
	for _, x := range c {
		p.conns[x] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(c ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, x := range c {
		delete(p.conns, x)
	}
}

func (p *Proxy) holed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hole
}

func (p *Proxy) forward(in net.Conn) {
	if !p.track(in) {
		return
	}
	defer p.untrack(in)
	if p.holed() {
		// A new connection into the hole is held open and never answered.
		_, _ = io.Copy(io.Discard, in)
		_ = in.Close()
		return
	}
	out, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = in.Close()
		return
	}
	if !p.track(out) {
		_ = in.Close()
		return
	}
	defer p.untrack(out)
	var wg sync.WaitGroup
	wg.Add(2)
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 && !p.holed() {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		_ = dst.Close()
		_ = src.Close()
	}
	go pipe(out, in)
	go pipe(in, out)
	wg.Wait()
}

// Cut closes every live connection and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
}

// BlackHole keeps every connection open but drops every byte either way,
// and holds new connections open unanswered, until Restore: a partition
// that neither peer is told about.
func (p *Proxy) BlackHole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hole = true
}

// Restore lets connections through again. Connections black-holed
// meanwhile have lost bytes, so they are closed: their peers reconnect.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hole {
		for c := range p.conns {
			_ = c.Close()
		}
	}
	p.cut, p.hole = false, false
}
