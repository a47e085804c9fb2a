package nodeagent

import (
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"berth.dev/platform/nodewire"
	"berth.dev/sandbox/errdefs"
)

func TestStateDirIsPrivateLockedAndKeepsTheEpoch(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s, err := OpenStateDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Fatalf("mode %v", fi.Mode().Perm())
	}
	if _, err := OpenStateDir(dir); !errdefs.IsExists(err) {
		t.Fatalf("second agent on the same state dir: %v", err)
	}
	if err := s.AcceptEpoch(5); err != nil {
		t.Fatal(err)
	}
	if err := s.AcceptEpoch(5); err != nil {
		t.Fatalf("equal epoch: %v", err)
	}
	if err := s.AcceptEpoch(4); !errdefs.IsFenced(err) {
		t.Fatalf("lower epoch: %v", err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, epochFile)); fi.Mode().Perm() != 0o600 {
		t.Fatalf("epoch file mode %v", fi.Mode().Perm())
	}
	s.Close()

	s2, err := OpenStateDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if s2.HighestEpoch() != 5 {
		t.Fatalf("epoch after restart = %d", s2.HighestEpoch())
	}
	if err := s2.AcceptEpoch(3); !errdefs.IsFenced(err) {
		t.Fatalf("lower epoch after restart: %v", err)
	}
}

func TestStateDirRejectsOpenModesAndRelativePaths(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenStateDir(dir); !errdefs.IsInvalid(err) {
		t.Fatalf("0755 dir: %v", err)
	}
	if _, err := OpenStateDir("relative/state"); !errdefs.IsInvalid(err) {
		t.Fatalf("relative: %v", err)
	}
	corrupt := filepath.Join(t.TempDir(), "corrupt")
	if err := os.Mkdir(corrupt, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(corrupt, epochFile), []byte("nope"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenStateDir(corrupt); !errdefs.IsInvalid(err) {
		t.Fatalf("corrupt epoch: %v", err)
	}
}

func TestFence(t *testing.T) {
	s, err := OpenStateDir(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f := NewFence(s, nil)
	if err := f.Check("c1", 1); !errdefs.IsFenced(err) {
		t.Fatalf("call before any connection: %v", err)
	}
	if err := f.Connect("", 2); !errdefs.IsInvalid(err) {
		t.Fatalf("connect without a connection id: %v", err)
	}
	if err := f.Connect("c1", 2); err != nil {
		t.Fatal(err)
	}
	if err := f.Check("c1", 2); err != nil {
		t.Fatalf("current connection: %v", err)
	}
	for name, c := range map[string]struct {
		conn  string
		epoch uint64
	}{
		"other connection": {"c2", 2},
		"lower epoch":      {"c1", 1},
		"higher epoch":     {"c1", 3},
	} {
		if err := f.Check(c.conn, c.epoch); !errdefs.IsFenced(err) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// A reconnect supersedes the old connection.
	if err := f.Connect("c2", 2); err != nil {
		t.Fatal(err)
	}
	if err := f.Check("c1", 2); !errdefs.IsFenced(err) {
		t.Fatalf("superseded connection admitted: %v", err)
	}
	// A new owner (higher epoch) fences the old owner even on reconnect.
	if err := f.Connect("c3", 3); err != nil {
		t.Fatal(err)
	}
	if err := f.Connect("c4", 2); !errdefs.IsFenced(err) {
		t.Fatalf("old owner reconnected: %v", err)
	}
	if err := f.Check("c3", 3); err != nil {
		t.Fatalf("new owner: %v", err)
	}
	f.Disconnect("c3")
	if err := f.Check("c3", 3); !errdefs.IsFenced(err) {
		t.Fatalf("call after disconnect: %v", err)
	}
}

// TestUnwritableStateRefusesCoreForNow: an owner epoch the agent cannot
// persist (its state directory read-only, full, or the file's place
// taken) refuses Core's Connect as unavailable for now (UNAVAILABLE, which
// Core retries), never as an unknown compute outcome, and keeps the old
// epoch.
func TestUnwritableStateRefusesCoreForNow(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s, err := OpenStateDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.AcceptEpoch(2); err != nil {
		t.Fatal(err)
	}
	// A directory where the epoch file goes: the rename over it fails,
	// also for root, which read-only modes do not stop.
	if err := os.Remove(filepath.Join(dir, epochFile)); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, epochFile), 0o700); err != nil {
		t.Fatal(err)
	}
	f := NewFence(s, nil)
	err = f.Connect("conn-1", 3)
	if !errdefs.IsObservationUnavailable(err) || errdefs.IsComputeUnconfirmed(err) {
		t.Fatalf("Connect with an unwritable state directory: %v, want unavailable for now", err)
	}
	if got := status.Code(nodewire.ToStatus(err)); got != codes.Unavailable {
		t.Errorf("on the wire: %v, want Unavailable", got)
	}
	if s.HighestEpoch() != 2 {
		t.Errorf("epoch after the failed persist = %d, want 2", s.HighestEpoch())
	}
	if err := f.Check("conn-1", 3); !errdefs.IsFenced(err) {
		t.Errorf("a call on the refused connection: %v, want fenced", err)
	}
}
