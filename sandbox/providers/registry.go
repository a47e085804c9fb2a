package providers

import (
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/e2b"
	"berth.dev/sandbox/microsandbox"
)

// table is the only registration table: one explicit entry per provider
// kind, each built by its adapter package's Registration function. Adding a
// provider means adding its adapter package and one line here.
func table() []Registration {
	return []Registration{
		docker.Registration(),
		e2b.Registration(),
		microsandbox.Registration(),
	}
}

// Default returns the registry of the registration table.
func Default() (*Registry, error) {
	return NewRegistry(table()...)
}
