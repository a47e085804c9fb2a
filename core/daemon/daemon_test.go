package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
)

// testConfig is a Core on a fresh database with loopback listeners.
func testConfig(t *testing.T) Config {
	t.Helper()
	return Config{
		DatabaseURL: storetest.NewDatabase(t), Migrate: true, PublicURL: "https://core.berth.test",
		StateDir:    filepath.Join(t.TempDir(), "state"),
		AdminListen: "127.0.0.1:0", Listen: "127.0.0.1:0", RuntimeListen: "127.0.0.1:0",
		LeaseTTL: 900 * time.Millisecond,
	}
}

// started is a Run in the background.
type started struct {
	ready Ready
	done  chan error
}

func start(t *testing.T, ctx context.Context, cfg Config) *started {
	t.Helper()
	return startLogging(t, ctx, cfg, io.Discard)
}

// startLogging is start with Core's log (JSON, debug and up) written to w.
func startLogging(t *testing.T, ctx context.Context, cfg Config, w io.Writer) *started {
	t.Helper()
	s := &started{done: make(chan error, 1)}
	readyc := make(chan Ready, 1)
	go func() {
		s.done <- Run(ctx, cfg, slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})), func(r Ready) { readyc <- r })
	}()
	select {
	case s.ready = <-readyc:
	case err := <-s.done:
		t.Fatalf("Run ended before serving: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("Core did not serve within 2 minutes")
	}
	return s
}

func (s *started) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-s.done:
		return err
	case <-time.After(time.Minute):
		t.Fatal("Run did not return within a minute")
		return nil
	}
}

// stopped checks that everything Run opened is closed: no listener
// accepts, the state directory's lock is free and the lease is released
// (or held by someone else).
func stopped(t *testing.T, cfg Config, addrs ...string) {
	t.Helper()
	for _, a := range addrs {
		if c, err := net.DialTimeout("tcp", a, time.Second); err == nil {
			c.Close()
			t.Errorf("%s still accepts connections", a)
		}
	}
	lock, err := os.OpenFile(filepath.Join(cfg.StateDir, "lock"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Errorf("the state directory is still locked: %v", err)
	}
}

func openStore(t *testing.T, dsn string) *store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

// TestRunStopsWhenTheContextEnds: the end of the context stops every
// server and worker, releases the lease and the state directory, and is
// no error.
func TestRunStopsWhenTheContextEnds(t *testing.T) {
	cfg := testConfig(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	s := start(t, ctx, cfg)
	if s.ready.RuntimeAddr == "" || s.ready.OwnerEpoch == 0 {
		t.Fatalf("ready: %+v", s.ready)
	}
	cancel()
	if err := s.wait(t); err != nil {
		t.Fatalf("Run after the context ended: %v", err)
	}
	stopped(t, cfg, s.ready.AdminAddr, s.ready.PublicAddr, s.ready.RuntimeAddr)
	lease, err := openStore(t, cfg.DatabaseURL).Reader().GetLease(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if lease.OwnerEpoch != s.ready.OwnerEpoch || !lease.Expired {
		t.Errorf("lease after stopping: epoch %d (Core's %d), expired %v; want Core's, released", lease.OwnerEpoch, s.ready.OwnerEpoch, lease.Expired)
	}
}

// TestRunStopsWhenTheLeaseIsLost: when another Core takes the execution
// lease over, Run stops everything and returns ErrLeaseLost.
func TestRunStopsWhenTheLeaseIsLost(t *testing.T) {
	cfg := testConfig(t)
	s := start(t, t.Context(), cfg)
	st := openStore(t, cfg.DatabaseURL)
	epoch, err := st.NextOwnerEpoch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// As if Core had paused past its lease: the lease lapses and a newer
	// Core takes it. Core's renewals may revive a lapsed lease until then.
	other := uuid.New()
	for deadline := time.Now().Add(30 * time.Second); ; {
		lease, err := st.Reader().GetLease(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if err := st.ReleaseLease(t.Context(), lease.Holder, lease.OwnerEpoch); err != nil {
			t.Fatal(err)
		}
		ok, err := st.AcquireLease(t.Context(), other, epoch, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("could not take the lease over")
		}
	}
	if err := s.wait(t); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Run after losing the lease: %v, want ErrLeaseLost", err)
	}
	stopped(t, cfg, s.ready.AdminAddr, s.ready.PublicAddr, s.ready.RuntimeAddr)
	if lease, err := st.Reader().GetLease(t.Context()); err != nil || lease.Holder != other || lease.Expired {
		t.Errorf("the new holder's lease after the old Core stopped: %+v %v", lease, err)
	}
}

// TestRunClosesWhatASetupStepOpened: when a step fails (here the admin
// listener, after the Runtime gateway's listener was opened), Run returns
// its error and closes everything the earlier steps opened.
func TestRunClosesWhatASetupStepOpened(t *testing.T) {
	cfg := testConfig(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cfg.AdminListen = taken.Addr().String()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeListen = free.Addr().String()
	free.Close()

	err = Run(t.Context(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), func(Ready) { t.Error("Core served") })
	if err == nil || !strings.Contains(err.Error(), "admin listener") {
		t.Fatalf("Run: %v, want the admin listener's error", err)
	}
	stopped(t, cfg)
	again, err := net.Listen("tcp", cfg.RuntimeListen)
	if err != nil {
		t.Fatalf("the Runtime gateway's listener was left open: %v", err)
	}
	again.Close()
	lease, err := openStore(t, cfg.DatabaseURL).Reader().GetLease(t.Context())
	if err != nil || !lease.Expired {
		t.Errorf("the lease was not released: %+v %v", lease, err)
	}
}
