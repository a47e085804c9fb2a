package nodes

// Refusals are every refusal of the registry and the manager, for the
// external tests.
func Refusals() []error {
	return []error{
		errNodeRemoved, errNodeEnabled, errNodeHolds, ErrRetireUndrained, ErrBackendMismatch,
		errAbandonUnavailable, errAbandonNotBound, errAbandonNotMismatched, errAbandonUndrained,
	}
}
