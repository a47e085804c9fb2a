package daemon

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
)

// recorder records the order of stops.
type recorder struct {
	mu    sync.Mutex
	names []string
}

func (r *recorder) add(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.names = append(r.names, name)
}

func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.names)
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return lis
}

// TestGroupStopsOnceInReverseOrder: the first failing worker stops every
// server and worker once, newest first, and is run's error.
func TestGroupStopsOnceInReverseOrder(t *testing.T) {
	var g group
	var r recorder
	g.onStop(func() { r.add("store") })
	g.addWorker(func(ctx context.Context) error {
		<-ctx.Done()
		r.add("worker")
		return nil
	})
	fail := make(chan struct{})
	boom := errors.New("boom")
	g.addWorker(func(ctx context.Context) error {
		select {
		case <-fail:
			return boom
		case <-ctx.Done():
			return nil
		}
	})
	lis := listen(t)
	srv := grpc.NewServer()
	g.addServer("test server", srv, lis, func() { r.add("server"); srv.GracefulStop() })

	served := false
	errc := make(chan error, 1)
	go func() { errc <- g.run(context.Background(), func() { served = true }) }()
	close(fail)
	select {
	case err := <-errc:
		if !errors.Is(err, boom) {
			t.Fatalf("run: %v, want the failing worker's error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after a worker failed")
	}
	if !served {
		t.Error("started was not called")
	}
	if want := []string{"server", "worker", "store"}; !slices.Equal(r.got(), want) {
		t.Errorf("stops ran %q, want %q", r.got(), want)
	}
	g.stop()
	if n := len(r.got()); n != 3 {
		t.Errorf("a second stop ran the stops again (%d)", n)
	}
	if c, err := net.Dial("tcp", lis.Addr().String()); err == nil {
		c.Close()
		t.Error("the server's listener still accepts")
	}
}

// TestGroupStopsWhenTheContextEnds: the end of run's context stops
// everything and is no error, even when a server's Serve starts after its
// stop.
func TestGroupStopsWhenTheContextEnds(t *testing.T) {
	var g group
	var r recorder
	g.addWorker(func(ctx context.Context) error {
		<-ctx.Done()
		r.add("worker")
		return nil
	})
	srv := grpc.NewServer()
	srv.Stop() // Serve will return grpc.ErrServerStopped
	g.addServer("stopped server", srv, listen(t), srv.Stop)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.run(ctx, func() {}); err != nil {
		t.Fatalf("run after the context ended: %v", err)
	}
	if want := []string{"worker"}; !slices.Equal(r.got(), want) {
		t.Errorf("stops ran %q, want %q", r.got(), want)
	}
}

// TestGroupStopBeforeRun: a failed setup stops what was registered;
// workers that never started are skipped and listeners never served are
// closed.
func TestGroupStopBeforeRun(t *testing.T) {
	var g group
	var r recorder
	g.onStop(func() { r.add("lock") })
	g.addWorker(func(context.Context) error { t.Error("worker ran"); return nil })
	lis := listen(t)
	g.addServer("server", grpc.NewServer(), lis, func() { r.add("server") })
	g.stop()
	if want := []string{"server", "lock"}; !slices.Equal(r.got(), want) {
		t.Errorf("stops ran %q, want %q", r.got(), want)
	}
	if c, err := net.Dial("tcp", lis.Addr().String()); err == nil {
		c.Close()
		t.Error("a listener never served was left open")
	}
}
