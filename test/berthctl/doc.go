// Package berthctl holds the black-box tests of berthctl, the admin CLI:
// the binary built from this tree drives a real berth-core (with its
// Runtime gateway) and a real berth-nodeagent on the test engine, or an
// E2B deployment against the loopback E2B fixture, the way an operator
// would, and every check reads the admin API or the files berthctl wrote,
// never only berthctl's own report. No test lets the admin token, or a
// provider's key, reach argv or any output.
package berthctl
