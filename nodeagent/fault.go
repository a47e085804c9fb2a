package nodeagent

import "os"

// FaultStallHealthEnv names the one fault-injection hook of berth-nodeagent,
// for black-box tests of Core (test/nodeproto): when the environment
// variable is "1", every Connect stream sends its first health report and
// then no other while the stream itself stays open (Core's keepalive pings
// are still answered), as a node whose health loop hangs would. Core must
// then stop counting the node present when that report turns 45 seconds
// old, although its connection lives. It is off by default, any other
// value leaves it off, and a node agent started with it logs a warning.
// It is never set by an operator's configuration file.
const FaultStallHealthEnv = "BERTH_NODEAGENT_FAULT_STALL_HEALTH"

// faultStallHealth reports whether FaultStallHealthEnv turns the hook on.
func faultStallHealth() bool { return os.Getenv(FaultStallHealthEnv) == "1" }
