package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
)

// group is Core's one shutdown path and the servers and workers it runs.
//
// Each setup step registers, in order, how to undo what it opened
// (onStop), and the servers (addServer) and workers (addWorker) it leaves
// to run; a server's or worker's stop takes its place in the same order.
// run starts every task under one errgroup; the first task to fail, or the
// end of run's context, calls stop, which undoes everything once, newest
// first. A step that fails calls stop itself: whatever the steps before it
// opened is closed the same way, never by hand.
type group struct {
	stops    []func()
	tasks    []func(context.Context, *errgroup.Group)
	stopOnce sync.Once
}

// onStop registers fn on the shutdown path.
func (g *group) onStop(fn func()) { g.stops = append(g.stops, fn) }

// addServer runs srv on lis. Its stop is halt (GracefulStop or Stop), and
// closes lis in case srv never served it; a Serve that starts after halt
// returns grpc.ErrServerStopped, which is no failure.
func (g *group) addServer(name string, srv *grpc.Server, lis net.Listener, halt func()) {
	g.tasks = append(g.tasks, func(_ context.Context, eg *errgroup.Group) {
		eg.Go(func() error {
			if err := srv.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				return fmt.Errorf("serve %s: %w", name, err)
			}
			return nil
		})
	})
	g.onStop(func() {
		halt()
		_ = lis.Close()
	})
}

// listen opens a TCP listener on addr and runs srv on it (addServer);
// what (the listener's name) names a failure to listen.
func (g *group) listen(what, addr, name string, srv *grpc.Server, halt func()) (net.Listener, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s listener: %w", what, err)
	}
	g.addServer(name, srv, lis, halt)
	return lis, nil
}

// listenHTTP opens a TCP listener on addr and runs srv on it: its stop
// lets requests in flight finish for httpStopTimeout, then closes
// what is left; a Serve that starts after the stop returns
// http.ErrServerClosed, which is no failure.
func (g *group) listenHTTP(what, addr string, srv *http.Server) (net.Listener, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s listener: %w", what, err)
	}
	g.tasks = append(g.tasks, func(_ context.Context, eg *errgroup.Group) {
		eg.Go(func() error {
			if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("serve %s: %w", what, err)
			}
			return nil
		})
	})
	g.onStop(func() {
		ctx, cancel := context.WithTimeout(context.Background(), httpStopTimeout)
		defer cancel()
		_ = srv.Shutdown(ctx)
		_ = srv.Close()
		_ = lis.Close()
	})
	return lis, nil
}

// addWorker runs fn on a context that only its stop cancels (it carries
// run's context's values); its stop waits for fn to return. fn returns nil
// when its context ends and an error only when Core must stop.
func (g *group) addWorker(fn func(context.Context) error) {
	var (
		cancel context.CancelFunc
		done   chan struct{}
	)
	g.tasks = append(g.tasks, func(ctx context.Context, eg *errgroup.Group) {
		wctx, c := context.WithCancel(context.WithoutCancel(ctx))
		cancel, done = c, make(chan struct{})
		eg.Go(func() error {
			defer close(done)
			return fn(wctx)
		})
	})
	g.onStop(func() {
		if cancel != nil { // nil: never started
			cancel()
			<-done
		}
	})
}

// run starts every task, calls started, and waits until the first task
// fails or ctx ends; then it stops everything and returns the first
// failure (nil when ctx ended).
func (g *group) run(ctx context.Context, started func()) error {
	eg, ectx := errgroup.WithContext(ctx)
	for _, start := range g.tasks {
		start(ctx, eg)
	}
	started()
	eg.Go(func() error {
		<-ectx.Done()
		g.stop()
		return nil
	})
	return eg.Wait()
}

// stop runs the registered stops once, newest first.
func (g *group) stop() {
	g.stopOnce.Do(func() {
		for i := len(g.stops) - 1; i >= 0; i-- {
			g.stops[i]()
		}
	})
}
