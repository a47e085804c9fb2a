package sandbox

// MaxObservationBatch bounds one ObserveBatch call.
const MaxObservationBatch = 64

// Observation is an ownership-checked, read-only reading of an allocation's
// compute usage.
type Observation struct {
	Reference Reference
	// CPUUsageNanos is cumulative CPU time consumed.
	CPUUsageNanos uint64
	// MemoryBytes is current memory usage; MemoryLimitBytes the enforced limit.
	MemoryBytes      uint64
	MemoryLimitBytes uint64
	// PIDs is the current number of processes.
	PIDs uint64
}

// ObservationResult is one target's outcome in a batch, in input order.
type ObservationResult struct {
	Observation Observation
	Err         error
}
