//go:build !race

package stack

// RaceBuild reports whether this binary has the race detector; Main then
// builds the processes it starts with -race too.
const RaceBuild = false
