package providers

// table is the only registration table: one explicit entry per provider
// kind, each built by its adapter package's Registration function.
//
// No adapter is registered yet: the Docker adapter (issue #3) adds the first
// entry here.
func table() []Registration {
	return []Registration{}
}

// Default returns the registry of the registration table.
func Default() (*Registry, error) {
	return NewRegistry(table()...)
}
