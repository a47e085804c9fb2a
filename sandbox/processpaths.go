package sandbox

import (
	"path/filepath"

	"berth.dev/sandbox/errdefs"
)

// ProcessPaths are the fixed distribution roots of the process that
// constructs direct adapters (Core): Root, under which the distribution
// installs each adapter's helpers (E2B: <Root>/e2b/<helper>), and State,
// under which each adapter keeps its private state and receipts. They are
// distribution properties, not deployment settings or user-selectable
// helper paths: the caller derives them once (Core from its executable's
// location and its state directory) and passes the same value to every
// direct construction; no adapter and no construction reads them from
// environment variables. Adapters resolve their own relative locations
// below them.
type ProcessPaths struct {
	Root  string
	State string
}

// Validate requires both roots absolute and clean (filepath.Clean leaves
// them unchanged) and neither the filesystem root, so a missing or
// relative root fails before any helper runs. The error is invalid input
// naming paths.root or paths.state; it never quotes the path.
func (p ProcessPaths) Validate() error {
	if !canonicalRoot(p.Root) {
		return errdefs.Invalid("paths.root", "must be a canonical absolute path")
	}
	if !canonicalRoot(p.State) {
		return errdefs.Invalid("paths.state", "must be a canonical absolute path")
	}
	return nil
}

func canonicalRoot(p string) bool {
	return p != "" && p != "/" && filepath.IsAbs(p) && filepath.Clean(p) == p
}
