package nodeagent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"berth.dev/sandbox/atomicfile"
	"berth.dev/sandbox/errdefs"
)

// State directory layout.
const (
	lockFile  = "lock"
	epochFile = "owner-epoch"
	// IdentityFile holds the node's enrolled identity (mode 0600).
	IdentityFile = "identity.json"
)

// StateDir is the node agent's private state directory (mode 0700), held
// with an exclusive lock for the life of the process so that two agents
// never share one.
type StateDir struct {
	path string
	lock *os.File

	mu    sync.Mutex
	epoch uint64
}

// OpenStateDir creates or opens dir, checks that it is private (0700,
// owned by the current user), takes its lock and reads the highest owner
// epoch seen.
func OpenStateDir(dir string) (*StateDir, error) {
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
		return nil, errdefs.Invalid("state_dir", "must be a clean absolute path")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create state directory: %w", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("stat state directory: %w", err)
	}
	if fi.Mode().Perm() != 0o700 {
		return nil, errdefs.Invalid("state_dir", "must have mode 0700")
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return nil, errdefs.Invalid("state_dir", "must be owned by the agent's user")
	}
	lock, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open state lock: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("state directory is in use by another node agent: %w", errdefs.ErrExists)
	}
	s := &StateDir{path: dir, lock: lock}
	if err := s.readEpoch(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Path returns the directory.
func (s *StateDir) Path() string { return s.path }

// Close releases the lock.
func (s *StateDir) Close() error {
	if s.lock == nil {
		return nil
	}
	err := s.lock.Close()
	s.lock = nil
	return err
}

func (s *StateDir) readEpoch() error {
	data, err := os.ReadFile(filepath.Join(s.path, epochFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read owner epoch: %w", err)
	}
	e, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return fmt.Errorf("owner epoch file is corrupt: %w", errdefs.ErrInvalid)
	}
	s.epoch = e
	return nil
}

// HighestEpoch returns the highest owner epoch ever accepted.
func (s *StateDir) HighestEpoch() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epoch
}

// AcceptEpoch accepts an owner epoch no lower than the highest seen,
// persisting it durably (write, fsync, rename, fsync the directory) before
// returning when it is higher. A lower epoch is ErrFenced; one it cannot
// persist (the directory read-only or full) is ErrObservationUnavailable
// (the node cannot serve the new owner now) and leaves the highest epoch
// as it was.
func (s *StateDir) AcceptEpoch(e uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case e < s.epoch:
		return fmt.Errorf("owner epoch %d is below %d: %w", e, s.epoch, errdefs.ErrFenced)
	case e == s.epoch:
		return nil
	}
	if err := atomicfile.Write(filepath.Join(s.path, epochFile), []byte(strconv.FormatUint(e, 10)+"\n"), 0o600); err != nil {
		// The node cannot take the new owner now; Core retries, and
		// succeeds once the directory is writable. Nothing of any sandbox
		// was touched, so it is no unknown outcome: the node protocol's
		// class for "not now" (its codes are fixed; it has no
		// failed_precondition).
		return fmt.Errorf("persist owner epoch: %w: %w", errdefs.ErrObservationUnavailable, err)
	}
	s.epoch = e
	return nil
}
