package microsandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox/errdefs"
)

// hostRoot is the folder, under the node's generation state directory,
// that holds one host directory per sandbox name.
const hostRoot = "microsandbox"

// environmentDirs are created in the environment directory before the
// Runtime starts (Docker's).
var environmentDirs = []string{"workspace", "staging", "initialization", "packages"}

// hostDirs are one sandbox's host directories, mounted into its microVM
// (presented as owned by the Runtime user): home at /home/runtime (the
// bootstrap file and the CA), environment at /environment and its
// workspace subdirectory at /workspace. They live on the host, so the
// workspace survives the microVM.
type hostDirs struct {
	root, home, environment, workspace string
}

// homePath is the guest directory of the bootstrap file: /home/runtime.
func homePath() string { return path.Dir(runtimebootstrap.Path) }

// dirsOf names name's host directories.
func (p *Provider) dirsOf(name string) (hostDirs, error) {
	state := p.opts.StateDirectory
	if !cleanAbs(state) || strings.ContainsAny(state, ":,") {
		return hostDirs{}, errdefs.Invalid("state_directory", "must be a clean absolute path without ':' or ','")
	}
	root := filepath.Join(state, hostRoot, name)
	env := filepath.Join(root, "environment")
	return hostDirs{root: root, home: filepath.Join(root, "home"), environment: env, workspace: filepath.Join(env, "workspace")}, nil
}

// prepareHost creates name's host directories, which must not exist
// (ErrExists: Create never reuses retained storage), and writes the
// bootstrap file (0600) and the CA (0644, empty when Core gives none)
// into home. On a failure it removes only what it created.
func (p *Provider) prepareHost(name string, bootstrap, coreCA []byte) (hostDirs, error) {
	dirs, err := p.dirsOf(name)
	if err != nil {
		return hostDirs{}, err
	}
	if err := os.MkdirAll(filepath.Dir(dirs.root), 0o700); err != nil {
		return hostDirs{}, fmt.Errorf("host directory: %w", errdefs.ErrFailedPrecondition)
	}
	switch err := os.Mkdir(dirs.root, 0o700); {
	case errors.Is(err, fs.ErrExist):
		return hostDirs{}, fmt.Errorf("host directory: %w", errdefs.ErrExists)
	case err != nil:
		return hostDirs{}, fmt.Errorf("host directory: %w", errdefs.ErrFailedPrecondition)
	}
	if err := writeHost(dirs, bootstrap, coreCA); err != nil {
		_ = os.RemoveAll(dirs.root)
		return hostDirs{}, fmt.Errorf("host directory: %w", errdefs.ErrFailedPrecondition)
	}
	return dirs, nil
}

func writeHost(dirs hostDirs, bootstrap, coreCA []byte) error {
	if err := os.Mkdir(dirs.home, 0o700); err != nil {
		return err
	}
	if err := os.Mkdir(dirs.environment, 0o755); err != nil {
		return err
	}
	for _, d := range environmentDirs {
		if err := os.Mkdir(filepath.Join(dirs.environment, d), 0o755); err != nil {
			return err
		}
	}
	if err := writeFile(filepath.Join(dirs.home, path.Base(runtimebootstrap.Path)), bootstrap, 0o600); err != nil {
		return err
	}
	return writeFile(filepath.Join(dirs.home, runtimebootstrap.CAFile), coreCA, 0o644)
}

// writeFile creates a new file with exactly mode (umask aside: Chmod) and
// syncs it.
func writeFile(name string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	cerr := f.Chmod(mode)
	serr := f.Sync()
	if err := f.Close(); err != nil {
		return err
	}
	return errors.Join(werr, cerr, serr)
}

// removeHost removes name's host directories and confirms they are gone.
func (p *Provider) removeHost(name string) error {
	dirs, err := p.dirsOf(name)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(dirs.root); err != nil {
		return fmt.Errorf("remove host directory: %w", errdefs.ErrComputeUnconfirmed)
	}
	if _, err := os.Lstat(dirs.root); !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("confirm host directory absence: %w", errdefs.ErrComputeUnconfirmed)
	}
	return nil
}
